// GPT-2's byte ↔ character table, the spelling of byte-level BPE vocabularies ("Ġ" for a space):
// the ByteLevel pre-tokenizer, the BPE model and the ByteLevel decoder translate through it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace edgelm::tokenizer {

// Printable Latin-1 bytes stand for themselves; the other 68 bytes take code points from 256 up,
// in byte order. Byte-level vocabularies spell every token with these characters.
struct ByteLevelTable {
  std::array<uint32_t, 256> byte_to_code{};
  std::array<int16_t, 256 + 68> code_to_byte{};  // -1: the code point stands for no byte

  ByteLevelTable();
};

// The table, built once.
const ByteLevelTable& byte_level_table();

// The bytes a byte-level token stands for; nullopt when a character is outside the table (the
// token is then not byte-level, e.g. an added token with non-Latin text).
std::optional<std::string> byte_level_to_bytes(std::string_view token);

}  // namespace edgelm::tokenizer
