// UTF-8 encoding and decoding of single code points, shared by the tokenizer and NFC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace edgelm::utf8 {

// Appends the UTF-8 bytes of `code` (<= U+10FFFF) to `out`.
inline void append(std::string& out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// Decodes the character at p, which must be valid UTF-8 (the caller has checked it); returns its
// length in bytes.
inline size_t decode_valid(const unsigned char* p, uint32_t& code) {
  if (p[0] < 0x80) {
    code = p[0];
    return 1;
  }
  if (p[0] < 0xE0) {
    code = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    return 2;
  }
  if (p[0] < 0xF0) {
    code = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    return 3;
  }
  code = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  return 4;
}

}  // namespace edgelm::utf8
