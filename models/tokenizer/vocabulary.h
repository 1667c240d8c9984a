// The vocabulary: each id's stored text and flags, and stored text → id. Filled by the loaders;
// the pipeline, the decoder and the public accessors read it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/tokenizer/hash_tables.h"

namespace edgelm::tokenizer {

// What an id is, beyond its text (bits of Vocabulary::flags).
enum TokenFlag : uint8_t {
  kSpecial = 1,        // skipped by decode(skip_special)
  kMatchedInText = 2,  // an added token: found in text before the model runs
  kByte = 4,           // SentencePiece <0xNN>
};

struct Vocabulary {
  // id → the token as stored ("Ġthe", "▁the", "<|eot_id|>"); ids no token has keep empty text.
  std::vector<std::string> texts;
  std::vector<uint8_t> flags;  // id → TokenFlag bits
  StringIdMap ids;             // stored text → id (added tokens win over the model's)

  // One more than the largest id.
  int64_t size() const { return static_cast<int64_t>(texts.size()); }
  // Throws edgelm::Error "[tokenizer] <what>: id N is outside the vocabulary [0, size)".
  void check_id(int32_t id, const char* what) const {
    if (id < 0 || id >= size()) {
      EDGELM_FAIL("[tokenizer] ", what, ": id ", id, " is outside the vocabulary [0, ", size(),
                  ")");
    }
  }
};

}  // namespace edgelm::tokenizer
