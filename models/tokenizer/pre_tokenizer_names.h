// The pre-tokenizers that GGUF files name (tokenizer.ggml.pre) instead of spelling out: for each
// name, the normalizer, pre-tokenizer steps and BPE setting of the Hugging Face tokenizer it stands
// for, with the regexes as the models' tokenizer.json files write them (docs/tokenizer.md names
// the source of each).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer/pre_tokenizer.h"

namespace edgelm::tokenizer {

// A `tokenizer.ggml.pre` value: the normalizer, pre-tokenizer and BPE setting of the Hugging Face
// tokenizer the name stands for.
struct NamedPreTokenizer {
  std::vector<std::string_view> names;
  std::vector<PreStepSpec> steps;
  bool ignore_merges = false;
  bool nfc = false;  // the tokenizer.json's normalizer is NFC
};

// Every known name's entry.
const std::vector<NamedPreTokenizer>& named_pre_tokenizers();
// The entry for `name`; nullptr when no entry has it.
const NamedPreTokenizer* find_named_pre_tokenizer(std::string_view name);
// All known names, comma-separated, for error messages.
std::string known_pre_tokenizer_names();

}  // namespace edgelm::tokenizer
