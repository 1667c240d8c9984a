#include "models/tokenizer/decoder.h"

#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/sentencepiece.h"

namespace edgelm::tokenizer {

void Decoder::build(Kind kind, const Vocabulary& vocab, bool strip_fragment_space) {
  kind_ = kind;
  strip_fragment_space_ = strip_fragment_space;
  arena_.clear();
  offsets_.assign(1, 0);
  for (size_t id = 0; id < vocab.texts.size(); ++id) {
    const std::string& text = vocab.texts[id];
    if (kind == Kind::ByteLevel) {
      // A token's characters map back to bytes; a token with a character outside the table (an
      // added token such as "<|résumé|>" in another script) is its own UTF-8, as in `tokenizers`.
      if (auto bytes = byte_level_to_bytes(text)) {
        arena_ += *bytes;
      } else {
        arena_ += text;
      }
    } else if (vocab.flags[id] & kByte) {
      arena_ += static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16));
    } else if (vocab.flags[id] & (kSpecial | kMatchedInText)) {
      arena_ += text;
    } else {
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
          arena_ += ' ';
          i += kSpaceSymbol.size();
        } else {
          arena_ += text[i++];
        }
      }
    }
    offsets_.push_back(static_cast<uint32_t>(arena_.size()));
  }
}

void Decoder::append(const Vocabulary& vocab, int32_t id, bool skip_special,
                     bool& at_fragment_start, std::string& out) const {
  vocab.check_id(id, "decode");
  const uint8_t flag = vocab.flags[static_cast<size_t>(id)];
  if (kind_ == Kind::SentencePiece) {
    if (flag & kMatchedInText) {
      at_fragment_start = true;
      if (!(skip_special && (flag & kSpecial))) out += bytes(id);
      return;
    }
    if (skip_special && (flag & kSpecial)) return;
    std::string_view piece = bytes(id);
    if (at_fragment_start && strip_fragment_space_ && !(flag & kByte) && !piece.empty() &&
        piece[0] == ' ') {
      piece.remove_prefix(1);
    }
    at_fragment_start = false;
    out += piece;
    return;
  }
  if (skip_special && (flag & kSpecial)) return;
  out += bytes(id);
}

}  // namespace edgelm::tokenizer
