// The decoder: ids back to bytes. ByteLevel (byte-level BPE) maps each token's characters back to
// the bytes they spell; SentencePiece turns "▁" into spaces, <0xNN> tokens into their byte, and
// drops the space the encoder put in front of each fragment.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer/vocabulary.h"

namespace edgelm::tokenizer {

class Decoder {
 public:
  enum class Kind { ByteLevel, SentencePiece };

  // Computes every id's bytes from `vocab`, whose flags must be final. strip_fragment_space: the
  // encoder put a "▁" in front of each fragment (SentencePiece's add_space_prefix).
  void build(Kind kind, const Vocabulary& vocab, bool strip_fragment_space);

  // Appends the bytes `id` contributes to decoded text, which may be part of a character.
  // skip_special leaves out special tokens. at_fragment_start carries the SentencePiece rule
  // across calls: true at the start and after an added token. Throws edgelm::Error for an id
  // outside the vocabulary.
  void append(const Vocabulary& vocab, int32_t id, bool skip_special, bool& at_fragment_start,
              std::string& out) const;

 private:
  std::string_view bytes(int32_t id) const {
    const size_t index = static_cast<size_t>(id);
    return std::string_view(arena_).substr(offsets_[index], offsets_[index + 1] - offsets_[index]);
  }

  Kind kind_ = Kind::ByteLevel;
  bool strip_fragment_space_ = false;
  std::string arena_;              // every id's bytes, one after another
  std::vector<uint32_t> offsets_;  // id → start in arena_; size vocabulary + 1
};

}  // namespace edgelm::tokenizer
