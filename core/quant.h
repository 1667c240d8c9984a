// GGML-compatible quantized block formats. A row of n elements is n/32 consecutive blocks, so GGUF
// tensors of these types map into tensors without conversion.
#pragma once

#include <cstdint>

namespace edgelm {

inline constexpr int kQ8_0BlockSize = 32;
inline constexpr int kQ4_0BlockSize = 32;

// Q8_0: value[i] = qs[i] * d.
struct BlockQ8_0 {
  uint16_t d;  // scale, IEEE half
  int8_t qs[kQ8_0BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes (GGML layout)");

// Q4_0: element i (0..15) is the low nibble of qs[i], element i + 16 the high nibble;
// value = (nibble - 8) * d.
struct BlockQ4_0 {
  uint16_t d;  // scale, IEEE half
  uint8_t qs[kQ4_0BlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes (GGML layout)");

// Reference quantizers. n must be a multiple of 32. They reproduce GGML's reference rounding:
// Q8_0 scales by max|x|/127 and rounds half away from zero; Q4_0 scales by (signed value of
// largest magnitude)/-8 so that value maps to nibble 0, and rounds half up.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);

}  // namespace edgelm
