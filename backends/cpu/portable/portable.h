// Reference CPU kernels: plain scalar loops, accumulation in double, no tiling. They define what
// every op computes; faster kernels are tested against them.
#pragma once

#include <cstdint>

#include "core/backend.h"

namespace edgelm::cpu {

void f32_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
void f16_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
void bf16_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q8_0_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q4_0_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q4_1_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q5_0_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q5_1_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q4_k_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q5_k_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q6_k_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
// Q4_0x8 weights (core/quant.h); n_begin and n_end are multiples of 8.
void q4_0x8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end);
// Q4_Kx8 and Q6_Kx8 weights (core/quant.h); n_begin and n_end are multiples of 8.
void q4_kx8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end);
void q6_kx8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end);
// F16x4 weights (core/quant.h); n_begin and n_end are multiples of 4.
void f16x4_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end);
// Q8_0x8 weights (core/quant.h); n_begin and n_end are multiples of 8.
void q8_0x8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end);

void f32_to_f32__portable(const void* src, float* dst, int64_t n);
void f16_to_f32__portable(const void* src, float* dst, int64_t n);
void bf16_to_f32__portable(const void* src, float* dst, int64_t n);
void q8_0_to_f32__portable(const void* src, float* dst, int64_t n);
void q4_0_to_f32__portable(const void* src, float* dst, int64_t n);
void q4_1_to_f32__portable(const void* src, float* dst, int64_t n);
void q5_0_to_f32__portable(const void* src, float* dst, int64_t n);
void q5_1_to_f32__portable(const void* src, float* dst, int64_t n);
void f32_from_f32__portable(const float* src, void* dst, int64_t n);
void f16_from_f32__portable(const float* src, void* dst, int64_t n);
void bf16_from_f32__portable(const float* src, void* dst, int64_t n);
void q8_0_from_f32__portable(const float* src, void* dst, int64_t n);
void q4_0_from_f32__portable(const float* src, void* dst, int64_t n);
void q4_1_from_f32__portable(const float* src, void* dst, int64_t n);
void q5_0_from_f32__portable(const float* src, void* dst, int64_t n);
void q5_1_from_f32__portable(const float* src, void* dst, int64_t n);

void f32_rms_norm__portable(const float* x, const float* weight, float* y, int64_t dim, float eps);
void f32_rope__portable(const float* x, float* out, int64_t n_heads, int64_t head_dim,
                        int32_t position, const float* inv_freq);
void f32_softmax__portable(const float* x, float* y, int64_t n);
void f32_silu_mul__portable(const float* gate, const float* up, float* out, int64_t n);
void f32_add__portable(const float* a, const float* b, float* out, int64_t n);

void f32_attention__portable(const AttentionArgs& args, int64_t group_begin, int64_t group_end);
void f16_attention__portable(const AttentionArgs& args, int64_t group_begin, int64_t group_end);

}  // namespace edgelm::cpu

namespace edgelm::cpu {

// In-place compaction of kv heads [group_begin, group_end): for each such head g and j < n_keep,
// row (j, g) = row (keep[g * n_keep + j], g). cache: [capacity, n_kv_heads] rows of row_bytes.
// keep rows are strictly increasing, so a source row is never overwritten before it is read.
void kv_compact__portable(void* cache, int64_t n_kv_heads, size_t row_bytes, const int32_t* keep,
                          int64_t n_keep, int64_t group_begin, int64_t group_end);

}  // namespace edgelm::cpu
