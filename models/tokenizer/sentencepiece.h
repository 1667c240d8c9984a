// The SentencePiece BPE model of GGUF "llama" vocabularies (Llama 2, Mistral v0.1): spaces become
// "▁", and adjacent pieces merge while their concatenation is a piece, the highest score first.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "models/tokenizer/hash_tables.h"

namespace edgelm::tokenizer {

// U+2581 "▁", SentencePiece's spelling of a space.
inline constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";

// The model's data, filled by the GGUF loader, and the merge loop over it.
struct SentencePieceModel {
  StringIdMap piece_ids;      // piece text → id, for the pieces merges may produce
  std::vector<float> scores;  // id → score
  bool add_space_prefix =
      true;  // a "▁" in front of each fragment (tokenizer.ggml.add_space_prefix)
  int32_t unk_id = kNone;
  std::array<int32_t, 256> fallback_ids;  // <0xNN> tokens

  SentencePieceModel() { fallback_ids.fill(kNone); }

  // Appends the ids of `text`, one fragment between added tokens, to `out`; with prefix_space a
  // "▁" goes in front of it.
  void encode_fragment(std::string_view text, bool prefix_space, std::vector<int32_t>& out) const;
};

}  // namespace edgelm::tokenizer
