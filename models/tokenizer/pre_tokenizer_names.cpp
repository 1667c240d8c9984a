#include "models/tokenizer/pre_tokenizer_names.h"

#include <algorithm>

namespace edgelm::tokenizer {
namespace {

// The regexes as the models' tokenizer.json files write them.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Llama 3's with single digits.
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Mistral's Tekken: words split where an upper-case run meets a lower-case one.
constexpr const char* kTekkenPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek LLM (and V2): a list of cased-letter ranges, ASCII and full-width punctuation, trailing
// spaces, CJK and Hangul runs. Written with \x{...} so that no editor can normalize them.
constexpr const char* kDeepSeekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-"
    "\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}"
    "\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}"
    "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-"
    "\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}"
    "\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-"
    "\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}"
    "-"
    "\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"
    "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-"
    "\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-"
    "\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}"
    "-"
    "\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
constexpr const char* kDeepSeekPunctuation =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
constexpr const char* kDeepSeekCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
// What llama.cpp applies to a vocabulary without a pre-tokenizer name: runs of punctuation (with
// the ASCII symbols that are not \p{P}), GPT-2's regex, digit runs, then groups of three digits.
constexpr const char* kDefaultPunctuation = "[\\p{P}\\$\\+<=>\\^~\\|]+";

}  // namespace

const std::vector<NamedPreTokenizer>& named_pre_tokenizers() {
  using T = PreStepSpec::Type;
  const PreStepSpec byte_level{T::ByteLevel, nullptr, false};
  const PreStepSpec byte_level_regex{T::ByteLevel, nullptr, true};
  const PreStepSpec digits{T::Digits, nullptr, true};
  static const std::vector<NamedPreTokenizer> table = {
      {{"default"},
       {{T::Split, kDefaultPunctuation},
        {T::Split, kGpt2Pattern},
        {T::Split, "\\p{N}+"},
        {T::Split, "[0-9][0-9][0-9]"},
        byte_level}},
      {{"llama-bpe", "llama3", "llama-v3"},
       {{T::Split, kLlama3Pattern}, byte_level},
       /*ignore_merges=*/true},
      {{"smaug-bpe"}, {{T::Split, kLlama3Pattern}, byte_level}},
      {{"gpt-2"}, {byte_level_regex}},
      {{"mpt", "olmo"}, {byte_level_regex}, false, /*nfc=*/true},
      {{"starcoder", "smollm", "refact", "exaone"}, {digits, byte_level_regex}},
      {{"command-r"}, {digits, byte_level_regex}, false, /*nfc=*/true},
      {{"qwen2", "deepseek-r1-qwen"}, {{T::Split, kQwen2Pattern}, byte_level}, false, /*nfc=*/true},
      {{"deepseek-llm"},
       {{T::Split, "[\\r\\n]"},
        {T::Split, kDeepSeekLetters},
        {T::Split, kDeepSeekPunctuation},
        {T::Split, "\\s+$"},
        {T::Split, kDeepSeekCjk},
        digits,
        byte_level}},
      {{"deepseek-coder"},
       {{T::Split, "[\\r\\n]"},
        {T::Split, "\\s?\\p{L}+"},
        {T::Split, "\\s?\\p{P}+"},
        {T::Split, kDeepSeekCjk},
        digits,
        byte_level}},
      // Falcon's Digits and Split come after ByteLevel, so they see the byte-level spelling.
      {{"falcon"},
       {{T::Punctuation, nullptr, true},
        byte_level_regex,
        {T::Digits, nullptr, false},
        {T::Split, "[0-9][0-9][0-9]"}}},
      {{"tekken"}, {{T::Split, kTekkenPattern}, byte_level}, /*ignore_merges=*/true},
  };
  return table;
}

const NamedPreTokenizer* find_named_pre_tokenizer(std::string_view name) {
  for (const NamedPreTokenizer& entry : named_pre_tokenizers()) {
    if (std::find(entry.names.begin(), entry.names.end(), name) != entry.names.end()) return &entry;
  }
  return nullptr;
}

std::string known_pre_tokenizer_names() {
  std::string known;
  for (const NamedPreTokenizer& entry : named_pre_tokenizers()) {
    for (std::string_view name : entry.names) known += str_cat(known.empty() ? "" : ", ", name);
  }
  return known;
}

}  // namespace edgelm::tokenizer
