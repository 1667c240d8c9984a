#include "models/tokenizer/pre_tokenizer.h"

#include <utility>

#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/utf8.h"

namespace edgelm::tokenizer {

void PreTokenizer::add_step(const PreStepSpec& spec, const std::string& where) {
  using Type = PreStepSpec::Type;
  Step step;
  step.on_byte_level_text = after_byte_level_;
  switch (spec.type) {
    case Type::Split:
      step.regex.emplace(spec.pattern, where);
      break;
    case Type::ByteLevel:
      if (spec.flag) step.regex.emplace(kGpt2Pattern, "[tokenizer] GPT-2 regex");
      step.add_prefix_space = spec.add_prefix_space;
      after_byte_level_ = true;
      break;
    case Type::Digits:
      // `tokenizers` splits on Rust's char::is_numeric: general categories Nd, Nl and No, \p{N}.
      step.regex.emplace(spec.flag ? "\\p{N}" : "\\p{N}+", "[tokenizer] Digits");
      break;
    case Type::Punctuation:
      // ASCII punctuation (with $+<=>^`|~, which are \p{S}) and Unicode's \p{P}.
      step.regex.emplace(spec.flag ? "[\\p{P}!-/:-@\\[-`{-~]+" : "[\\p{P}!-/:-@\\[-`{-~]",
                         "[tokenizer] Punctuation");
      break;
  }
  steps_.push_back(std::move(step));
}

void spell_byte_level(std::string_view text, std::string& spelled, std::vector<uint32_t>& byte_of) {
  const ByteLevelTable& table = byte_level_table();
  spelled.clear();
  byte_of.assign(text.size() * 2 + 1, 0);  // each byte spells as one or two UTF-8 bytes
  for (size_t i = 0; i < text.size(); ++i) {
    byte_of[spelled.size()] = static_cast<uint32_t>(i);
    utf8::append(spelled, table.byte_to_code[static_cast<unsigned char>(text[i])]);
  }
  byte_of[spelled.size()] = static_cast<uint32_t>(text.size());
}

}  // namespace edgelm::tokenizer
