// The GGML "K-quant" block formats found in GGUF Llama files (Q4_K, Q5_K, Q6_K), and
// dequantization of rows of any supported GGUF type to F32.
//
// All three group 256 elements into a super-block that stores one or two fp16 factors and small
// per-sub-block scales. Sources of the layout facts:
//  - field order and sizes: the block_q4_K / block_q5_K / block_q6_K definitions in ggml's
//    ggml-common.h, which GGUF files store unchanged (restated below with static_asserts);
//  - element order inside a block and the 6-bit scale packing: ggml's reference dequantizers, as
//    also implemented by ggml's Python package gguf-py (gguf/quants.py). Each rule is restated
//    in kquants.cpp next to the code that applies it.
#pragma once

#include <cstdint>

#include "models/gguf.h"

namespace edgelm {

inline constexpr int kKQuantBlockSize = 256;  // elements per super-block (QK_K in ggml)
inline constexpr int kKQuantScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K/Q5_K

// Q4_K: 8 sub-blocks of 32 elements; value = d * scale[s] * q - dmin * min[s], q in 0..15.
struct BlockQ4_K {
  uint16_t d;                         // fp16 factor of the sub-block scales
  uint16_t dmin;                      // fp16 factor of the sub-block mins
  uint8_t scales[kKQuantScaleBytes];  // 8 scales and 8 mins, 6 bits each, packed
  uint8_t qs[kKQuantBlockSize / 2];   // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes (GGML layout)");

// Q5_K: Q4_K with a fifth bit per element; q in 0..31.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKQuantScaleBytes];
  uint8_t qh[kKQuantBlockSize / 8];  // high (fifth) bits
  uint8_t qs[kKQuantBlockSize / 2];  // low 4 bits
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes (GGML layout)");

// Q6_K: 16 sub-blocks of 16 elements; value = d * scale[s] * (q - 32), q in 0..63.
struct BlockQ6_K {
  uint8_t ql[kKQuantBlockSize / 2];      // low 4 bits
  uint8_t qh[kKQuantBlockSize / 4];      // high 2 bits
  int8_t scales[kKQuantBlockSize / 16];  // signed 8-bit sub-block scales
  uint16_t d;                            // fp16 super-block factor, stored last
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes (GGML layout)");

// Dequantize n elements (n / 256 consecutive blocks) to out[0..n). `blocks` needs no particular
// alignment. Throw edgelm::Error when n is negative or not a multiple of 256.
void dequantize_row_q4_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q5_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q6_K(const void* blocks, float* out, int64_t n);

// Dequantize n elements of any supported type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q4_K, Q5_K, Q6_K) to F32. Throws edgelm::Error for I32 and unsupported types, or when n is not a
// multiple of the type's block size.
void dequantize_row_ggml(GgmlType type, const void* data, float* out, int64_t n);

}  // namespace edgelm
