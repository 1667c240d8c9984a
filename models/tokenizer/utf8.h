// UTF-8 for the tokenizer and NFC: encoding and decoding single code points, and classifying byte
// sequences by Unicode's well-formed ranges, the basis of the repair rule for invalid input
// (append_utf8_repaired in models/tokenizer.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

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

enum class Status { Valid, Invalid, Incomplete };
struct Sequence {
  Status status;
  size_t length;  // Valid: the sequence; Invalid: the maximal subpart (>= 1); Incomplete: all of it
};

// Classifies the sequence starting at p[0] (n >= 1 bytes available) with the well-formed ranges
// of Unicode's table 3-7, so that overlong forms, surrogates and code points above U+10FFFF are
// invalid at the first byte that rules them out.
inline Sequence classify(const unsigned char* p, size_t n) {
  const unsigned lead = p[0];
  if (lead < 0x80) return {Status::Valid, 1};
  size_t need = 0;
  unsigned lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {Status::Invalid, 1};
  }
  for (size_t k = 1; k <= need; ++k) {
    if (k >= n) return {Status::Incomplete, k};
    if (p[k] < lo || p[k] > hi) return {Status::Invalid, k};
    lo = 0x80;
    hi = 0xBF;
  }
  return {Status::Valid, need + 1};
}

// Decodes one character at p (n >= 1 bytes available); returns its length. An invalid sequence
// gives U+FFFD and the length of its maximal subpart.
inline size_t decode(const unsigned char* p, size_t n, uint32_t& code) {
  const Sequence sequence = classify(p, n);
  if (sequence.status != Status::Valid) {
    code = 0xFFFD;
    return sequence.length;
  }
  return decode_valid(p, code);
}

// True when `text` is well-formed UTF-8 throughout.
bool is_valid(std::string_view text);

}  // namespace edgelm::utf8
