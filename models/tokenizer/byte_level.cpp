#include "models/tokenizer/byte_level.h"

#include "models/tokenizer/utf8.h"

namespace edgelm::tokenizer {

ByteLevelTable::ByteLevelTable() {
  code_to_byte.fill(-1);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    byte_to_code[b] = printable ? b : next++;
    code_to_byte[byte_to_code[b]] = static_cast<int16_t>(b);
  }
}

const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable table;
  return table;
}

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  const ByteLevelTable& table = byte_level_table();
  std::string bytes;
  bytes.reserve(token.size());
  const auto* p = reinterpret_cast<const unsigned char*>(token.data());
  for (size_t i = 0; i < token.size();) {
    uint32_t code;
    const utf8::Sequence sequence = utf8::classify(p + i, token.size() - i);
    if (sequence.status != utf8::Status::Valid) return std::nullopt;
    i += utf8::decode(p + i, token.size() - i, code);
    if (code >= table.code_to_byte.size() || table.code_to_byte[code] < 0) return std::nullopt;
    bytes += static_cast<char>(table.code_to_byte[code]);
  }
  return bytes;
}

}  // namespace edgelm::tokenizer
