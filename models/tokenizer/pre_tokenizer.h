// The pre-tokenizer of byte-level BPE: a list of steps, each splitting every piece the step before
// it made, so that merges never cross a piece boundary. Built from a tokenizer.json's
// pre_tokenizer or from the structure a GGUF tokenizer.ggml.pre names (pre_tokenizer_names.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/tokenizer/regex.h"

namespace edgelm::tokenizer {

// GPT-2's regex: ByteLevel's split with use_regex.
inline constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// One step of a pre-tokenizer, named as in tokenizer.json. Each step splits every piece the step
// before it made (Isolated: matches and the stretches between them are pieces).
struct PreStepSpec {
  enum class Type {
    Split,        // pattern: the regex
    ByteLevel,    // flag: use_regex (GPT-2's regex); later steps see the byte-level spelling
    Digits,       // flag: individual_digits (each \p{N} alone; otherwise runs of them)
    Punctuation,  // flag: Contiguous (runs; otherwise each character alone)
  };
  Type type;
  const char* pattern = nullptr;
  bool flag = false;
  bool add_prefix_space = false;  // ByteLevel: a space before each piece not starting with one
};

class PreTokenizer {
 public:
  // Appends the step `spec` describes. After a ByteLevel step every later step runs on the
  // byte-level spelling. `where` names the step in a regex error (edgelm::Error "<where>: bad
  // regex ...").
  void add_step(const PreStepSpec& spec, const std::string& where);
  // True once a ByteLevel step has been added.
  bool has_byte_level() const { return after_byte_level_; }

  // Calls emit(piece) for every non-empty piece of `text` (valid UTF-8), in order.
  template <class Emit>
  void split(std::string_view text, Emit&& emit) const {
    split_from(0, text, emit);
  }

 private:
  struct Step {
    std::optional<Regex> regex;
    bool add_prefix_space = false;
    // A step after ByteLevel: its regex sees GPT-2's one character per byte ("Â½" for the bytes
    // of "½"), so it can cut inside a character, as it does in `tokenizers`.
    bool on_byte_level_text = false;
  };

  template <class Emit>
  void split_from(size_t step, std::string_view text, Emit& emit) const;

  std::vector<Step> steps_;
  bool after_byte_level_ = false;
};

// Spells the bytes of `text` as GPT-2's characters into `spelled`; byte_of[k] is the byte offset
// of spelled offset k (for k at a character start, and spelled.size()).
void spell_byte_level(std::string_view text, std::string& spelled, std::vector<uint32_t>& byte_of);

template <class Emit>
void PreTokenizer::split_from(size_t step, std::string_view text, Emit& emit) const {
  if (step == steps_.size()) {
    if (!text.empty()) emit(text);
    return;
  }
  const Step& pre = steps_[step];
  std::string prefixed;  // rare (GPT-2's add_prefix_space), so a copy is fine
  if (pre.add_prefix_space && !text.empty() && text[0] != ' ') {
    prefixed = str_cat(" ", text);
    text = prefixed;
  }
  if (!pre.regex) {
    split_from(step + 1, text, emit);
  } else if (!pre.on_byte_level_text) {
    pre.regex->split(text, [&](size_t begin, size_t end) {
      split_from(step + 1, text.substr(begin, end - begin), emit);
    });
  } else {
    // Split the spelling and cut the bytes at the same places: every character stands for one
    // byte.
    std::string spelled;
    std::vector<uint32_t> byte_of;
    spell_byte_level(text, spelled, byte_of);
    pre.regex->split(spelled, [&](size_t begin, size_t end) {
      split_from(step + 1, text.substr(byte_of[begin], byte_of[end] - byte_of[begin]), emit);
    });
  }
}

}  // namespace edgelm::tokenizer
