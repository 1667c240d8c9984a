// x86 CPU kernels: two files per instruction set (avx2.cpp and avx2_quant.cpp: AVX2 + FMA + F16C;
// avx512.cpp and avx512_quant.cpp: AVX-512 F/BW/VL/DQ + VNNI), each compiled with its ISA's -m
// flags, instantiating the kernel families of backends/cpu/simd/ (docs/adding_a_kernel.md).
// kernel_table.cpp fills a KernelTable per ISA from these declarations and the portable kernels
// for entries left portable.
//
// The ISA files call no inline or template function from a shared header (the simd/ headers are
// included inside each file's anonymous namespace, so each has a private copy): the linker keeps
// one copy of such a function for the whole program, and a copy compiled with -mavx512f could be
// the one a portable caller ends up running on a CPU without AVX-512. What they need from the
// Tensor API and the heap comes through out-of-line helpers (scratch.h, and prefetch_part below),
// defined in kernel_table.cpp, which is compiled without ISA flags.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/attention_view.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/scratch.h"
#include "core/backend.h"

namespace edgelm::cpu {

#if defined(EDGELM_HAVE_X86_KERNELS)

// The CPU backend pairs the two halves of a weight for the decode kernels that read two streams
// (KernelTable::decode_pairs) only when the second starts at least this many bytes after the
// first (within a K segment, KernelTable::decode_pair_min_bytes); closer, it hands them single
// groups, read as one stream. Pairs close together read slower than
// one stream: on the Zen 5 VM, one thread, 1B ffn_up in ranges of 2D groups of eight Q4_0 rows
// (each group 9 KiB of a segment), halves D groups apart: D = 1: 17.5 GB/s, 4: 23, 8: 29,
// 16: 31-34, 32: 35-37, 64: 36-37, against ~33 from one stream and 38-40 with the whole matrix's
// halves paired. Few threads never come near it for Llama-3.2-1B (two threads: 144 KiB or more),
// many threads do.
inline constexpr int64_t kMinPairDistanceBytes = int64_t{128} << 10;

void f32_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end);
void f16_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end);
void bf16_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end);
void q8_0_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end);
void q4_0_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end);
// F16x4 weights; n_begin and n_end are multiples of 4.
void f16x4_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                        int64_t n_begin, int64_t n_end);
// Q4_0x8 weights; n_begin and n_end are multiples of 8.
void q4_0x8_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end);
// Q8_0x8 weights; n_begin and n_end are multiples of 8.
void q8_0x8_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end);
// Two-step quantized matmul (kernels.h, QuantizedMatmul): x quantized once into a buffer of
// quantized_x_bytes(M, K) bytes, as the format wants it, then multiplied from there.
void quantize_x_pairs__avx2(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                            int64_t m_end);  // Q4_0
void quantize_x__avx2(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                      int64_t m_end);  // Q8_0, Q4_0x8, Q8_0x8
void q8_0_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
void q4_0_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
void q4_0x8_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end);
void q8_0x8_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end);
// KernelTable::decode_pairs.
void q4_0x8_decode_pairs__avx2(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                               int64_t a_begin, int64_t b_begin, int64_t rows);
void q8_0x8_decode_pairs__avx2(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                               int64_t a_begin, int64_t b_begin, int64_t rows);
EDGELM_DECLARE_BLOCK_MATMULS(avx2)
// The element-wise entries of the table (simd/elementwise.h, set_elementwise_kernels).
void elementwise_kernels__avx2(KernelTable& table);
void f32_attention__avx2(const AttentionArgs& args, int64_t group_begin, int64_t group_end);
void f16_attention__avx2(const AttentionArgs& args, int64_t group_begin, int64_t group_end);
// Row conversions, also used by the AVX-512 table (every AVX-512 CPU here has AVX2 and F16C).
void f16_to_f32__avx2(const void* src, float* dst, int64_t n);
void f16_from_f32__avx2(const float* src, void* dst, int64_t n);
void q8_0_to_f32__avx2(const void* src, float* dst, int64_t n);
void q4_0_to_f32__avx2(const void* src, float* dst, int64_t n);

void f32_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                        int64_t n_begin, int64_t n_end);
void f16_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                        int64_t n_begin, int64_t n_end);
void bf16_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end);
void q8_0_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end);
void q4_0_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end);
// F16x4 weights; n_begin and n_end are multiples of 4.
void f16x4_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
// Q4_0x8 and Q8_0x8 weights; n_begin and n_end are multiples of 8.
void q4_0x8_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q8_0x8_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void quantize_x_q4_0__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                             int64_t m_end);
void quantize_x_q8_0__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                             int64_t m_end);
void quantize_x_x8__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                           int64_t m_end);  // Q4_0x8, Q8_0x8
void q8_0_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end);
void q4_0_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end);
void q4_0x8_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                              int64_t K, int64_t n_begin, int64_t n_end);
void q8_0x8_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                              int64_t K, int64_t n_begin, int64_t n_end);
void q4_0x8_decode_pairs__avx512(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                                 int64_t a_begin, int64_t b_begin, int64_t rows);
void q4_0x8_decode_pairs_prefetch__avx512(const void* xq, const void* w, float* y, int64_t N,
                                          int64_t K, int64_t a_begin, int64_t b_begin,
                                          int64_t rows);
void q8_0x8_decode_pairs__avx512(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                                 int64_t a_begin, int64_t b_begin, int64_t rows);
void f16x4_decode_pairs__avx512(const void* x, const void* w, float* y, int64_t N, int64_t K,
                                int64_t a_begin, int64_t b_begin, int64_t rows);
// Q4_Kx8 and Q6_Kx8 weights; n_begin and n_end are multiples of 8. x for Q4_Kx8 as quantize_x_k
// writes it, for Q6_Kx8 as quantize_x_k16 does (Q8_K rounding with sums per 16 values).
void quantize_x_k16__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                            int64_t m_end);
void q4_kx8_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q6_kx8_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end);
void q4_kx8_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                              int64_t K, int64_t n_begin, int64_t n_end);
void q6_kx8_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                              int64_t K, int64_t n_begin, int64_t n_end);
void q4_kx8_decode_pairs__avx512(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                                 int64_t a_begin, int64_t b_begin, int64_t rows);
void q6_kx8_decode_pairs__avx512(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                                 int64_t a_begin, int64_t b_begin, int64_t rows);
// The element-wise entries of the table (simd/elementwise.h, set_elementwise_kernels).
EDGELM_DECLARE_BLOCK_MATMULS(avx512)
void elementwise_kernels__avx512(KernelTable& table);
// Decode (one query, head_dim 64 or 128); otherwise the AVX2 kernels.
void f32_attention__avx512(const AttentionArgs& args, int64_t group_begin, int64_t group_end);
void f16_attention__avx512(const AttentionArgs& args, int64_t group_begin, int64_t group_end);

namespace x86 {

// Prefetches into L1 the cache lines of part `part` of `parts` equal parts of [begin, begin +
// bytes). The float prefill GEMMs spread the next weight chunk over the bands of x that multiply
// the current one, so the chunk's first band finds it in cache instead of waiting on DRAM.
void prefetch_part(const void* begin, int64_t bytes, int64_t part, int64_t parts);

}  // namespace x86

#endif  // EDGELM_HAVE_X86_KERNELS

}  // namespace edgelm::cpu
