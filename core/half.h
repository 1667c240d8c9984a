// Exact conversions between float and the 16-bit float formats (IEEE binary16 and bfloat16).
// Float -> 16-bit rounds to nearest, ties to even, handles subnormals, infinities and NaN (NaN
// payload bits that fit are kept, so every 16-bit pattern survives a round trip through float).
#pragma once

#include <bit>
#include <cstdint>

namespace edgelm {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise the mantissa
      int e = -14;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --e;
      }
      mantissa &= 0x3ffu;
      bits = sign | static_cast<uint32_t>(e + 127) << 23 | mantissa << 13;
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | mantissa << 13;
  } else {
    bits = sign | (exponent - 15 + 127) << 23 | mantissa << 13;
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN
    if (magnitude == 0x7f800000u) return sign | 0x7c00u;
    uint32_t payload = (magnitude & 0x7fffffu) >> 13;
    if (payload == 0) payload = 0x200u;  // keep it a NaN
    return static_cast<uint16_t>(sign | 0x7c00u | payload);
  }
  // 65520 is the midpoint between 65504 (largest half) and 65536; ties-to-even goes up to inf.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  const uint32_t exponent = magnitude >> 23;
  if (magnitude < 0x38800000u) {  // below 2^-14: half subnormal (or zero)
    // value / 2^-24 = full_mantissa * 2^(exponent - 126)
    const uint32_t full_mantissa = (magnitude & 0x7fffffu) | (exponent != 0 ? 0x800000u : 0u);
    const uint32_t shift = 126 - (exponent != 0 ? exponent : 1);
    if (shift > 24) return sign;
    uint32_t result = full_mantissa >> shift;
    const uint32_t remainder = full_mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (exponent - 127 + 15) << 10 | (magnitude & 0x7fffffu) >> 13;
  const uint32_t remainder = magnitude & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;  // may carry into
  return static_cast<uint16_t>(sign | result);                                   // the exponent
}

inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate, keep it a NaN
    uint32_t top = bits >> 16;
    if ((top & 0x7fu) == 0) top |= 0x40u;
    return static_cast<uint16_t>(top);
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace edgelm
