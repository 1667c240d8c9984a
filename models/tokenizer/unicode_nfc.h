// Unicode Normalization Form C, for the tokenizers whose tokenizer.json normalizes text with NFC
// before splitting it (Qwen2, Command-R, GPT-NeoX and the models built on them).
#pragma once

#include <string>
#include <string_view>

namespace edgelm {

// `text` (valid UTF-8) in Normalization Form C: canonical decomposition, canonical ordering of
// combining marks, canonical composition (Unicode's UAX #15, Hangul included). The character data
// is Unicode 14.0 (models/tokenizer/unicode_nfc.inc, from scripts/make_unicode_nfc.py), the version
// of the PCRE2 tables the pre-tokenizer regexes use. Text whose code points are all below U+0300 is
// already in NFC and is returned as it is without further work.
std::string nfc_normalize(std::string_view text);

}  // namespace edgelm
