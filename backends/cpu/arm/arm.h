// AArch64 CPU kernels: neon.cpp (Advanced SIMD, part of every AArch64 CPU, so compiled without
// extra flags) and neon_dotprod.cpp (the quantized matmul again with the SDOT instruction,
// compiled with -march=armv8.2-a+dotprod). kernel_table.cpp fills the "neon" table from neon.cpp
// and the portable kernels, and offers "neon_dotprod" (the same table with the SDOT matmuls) only
// when the CPU reports the dot-product extension.
//
// neon_dotprod.cpp calls no inline or template function from a shared header: the linker keeps
// one copy of such a function for the whole program, and a copy compiled with +dotprod could be
// the one a baseline caller ends up running on a CPU without SDOT. What it needs beyond its own
// code (the per-thread scratch) comes through the out-of-line scratch() of scratch.h, defined in
// kernel_table.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "backends/cpu/scratch.h"
#include "core/backend.h"

namespace edgelm::cpu {

#if defined(EDGELM_HAVE_ARM_KERNELS)

void f32_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end);
void f16_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end);
void bf16_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end);
void q8_0_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end);
void q4_0_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end);
// Two-step quantized matmul (kernels.h, QuantizedMatmul): x quantized once into a buffer of
// quantized_x_bytes(M, K) bytes, then multiplied from there. The SDOT matmuls read the same
// buffer.
void quantize_x__neon(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                      int64_t m_end);
void q8_0_matmul_xq__neon(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
void q4_0_matmul_xq__neon(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
// The element-wise entries of the table (simd/elementwise.h, set_elementwise_kernels).
void elementwise_kernels__neon(KernelTable& table);
void f32_attention__neon(const AttentionArgs& args, int64_t group_begin, int64_t group_end);
void f16_attention__neon(const AttentionArgs& args, int64_t group_begin, int64_t group_end);
void f16_to_f32__neon(const void* src, float* dst, int64_t n);
void f16_from_f32__neon(const float* src, void* dst, int64_t n);
void q8_0_to_f32__neon(const void* src, float* dst, int64_t n);
void q4_0_to_f32__neon(const void* src, float* dst, int64_t n);

void q8_0_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                               int64_t K, int64_t n_begin, int64_t n_end);
void q4_0_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                               int64_t K, int64_t n_begin, int64_t n_end);
void q8_0_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                  int64_t K, int64_t n_begin, int64_t n_end);
void q4_0_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                  int64_t K, int64_t n_begin, int64_t n_end);
void q4_0x8_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                 int64_t K, int64_t n_begin, int64_t n_end);
void q8_0x8_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                 int64_t K, int64_t n_begin, int64_t n_end);
void q4_0x8_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end);
void q8_0x8_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end);

EDGELM_DECLARE_BLOCK_MATMULS(neon)
EDGELM_DECLARE_BLOCK_MATMULS(neon_dotprod)

#endif  // EDGELM_HAVE_ARM_KERNELS

}  // namespace edgelm::cpu
