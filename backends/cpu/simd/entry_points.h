// The entry points (x86/x86.h, arm/arm.h) that every SIMD kernel file defines alike, written
// once: each instantiates a family of the file's anonymous namespace under the name
// <entry>__<EDGELM_SIMD_ISA>, e.g. f32_matmul__avx2. Textual header: include it at the end of the
// file, after the anonymous namespace, inside namespace edgelm::cpu, with EDGELM_SIMD_ISA defined
// as the suffix (avx2, avx512, neon) and these switches for the entries the file has:
//   EDGELM_SIMD_F16X4       f16x4_matmul (float_matmul<F16x4Weights>)
//   EDGELM_SIMD_ATTENTION   f32_attention, f16_attention (attention<F32Cache / F16Cache> of
//                           simd/attention.h)
//   EDGELM_SIMD_CONVERSIONS f16_to_f32, f16_from_f32, q8_0_to_f32, q4_0_to_f32
//                           (simd/elementwise.h)
//   EDGELM_SIMD_X86_QUANT   the quantized matmuls of simd/quant_matmul.h (the x86 *_quant.cpp
//                           files; float matmuls and element-wise entries then left out)
//   EDGELM_SIMD_BLOCK_QUANT the sub-block matmuls of simd/block_matmul.h (q4_1, q5_0, q5_1, q4_k,
//                           q5_k, q6_k: <type>_matmul and <type>_matmul_xq) and quantize_x_k,
//                           over the file's byte and panel contracts, named BlockQuants and
//                           BlockPanel, with x rounded by
//                           the file's quantize_plain (Q8_0 rounding per 32-block, element order)
//                           or, for the K-quants, as Q8_K
// EDGELM_SIMD_QUANT_ONLY leaves the float matmuls and element-wise entries out of a file that has
// quantized entries alone (neon_dotprod.cpp). Every other file has f32_matmul, f16_matmul and
// bf16_matmul (its float_matmul over simd/float_weights.h) and elementwise_kernels
// (set_elementwise_kernels).

#define EDGELM_SIMD_NAME_(entry, isa) entry##__##isa
#define EDGELM_SIMD_NAME(entry, isa) EDGELM_SIMD_NAME_(entry, isa)
#define EDGELM_SIMD_ENTRY(entry) EDGELM_SIMD_NAME(entry, EDGELM_SIMD_ISA)

#if !defined(EDGELM_SIMD_X86_QUANT) && !defined(EDGELM_SIMD_QUANT_ONLY)
void EDGELM_SIMD_ENTRY(f32_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                   int64_t K, int64_t n_begin, int64_t n_end) {
  float_matmul<F32Weights>(x, w, y, M, N, K, n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(f16_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                   int64_t K, int64_t n_begin, int64_t n_end) {
  float_matmul<F16Weights>(x, w, y, M, N, K, n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(bf16_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end) {
  float_matmul<BF16Weights>(x, w, y, M, N, K, n_begin, n_end);
}

#if defined(EDGELM_SIMD_F16X4)
void EDGELM_SIMD_ENTRY(f16x4_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                     int64_t K, int64_t n_begin, int64_t n_end) {
  float_matmul<F16x4Weights>(x, w, y, M, N, K, n_begin, n_end);
}
#endif

void EDGELM_SIMD_ENTRY(elementwise_kernels)(KernelTable& table) {
  set_elementwise_kernels(table);
}
#endif

#if defined(EDGELM_SIMD_ATTENTION)
void EDGELM_SIMD_ENTRY(f32_attention)(const AttentionArgs& args, int64_t group_begin,
                                      int64_t group_end) {
  attention<F32Cache>(args, group_begin, group_end);
}

void EDGELM_SIMD_ENTRY(f16_attention)(const AttentionArgs& args, int64_t group_begin,
                                      int64_t group_end) {
  attention<F16Cache>(args, group_begin, group_end);
}
#endif

#if defined(EDGELM_SIMD_CONVERSIONS)
void EDGELM_SIMD_ENTRY(f16_to_f32)(const void* src, float* dst, int64_t n) {
  f16_to_f32(src, dst, n);
}

void EDGELM_SIMD_ENTRY(f16_from_f32)(const float* src, void* dst, int64_t n) {
  f16_from_f32(src, dst, n);
}

void EDGELM_SIMD_ENTRY(q8_0_to_f32)(const void* src, float* dst, int64_t n) {
  q8_0_to_f32(src, dst, n);
}

void EDGELM_SIMD_ENTRY(q4_0_to_f32)(const void* src, float* dst, int64_t n) {
  q4_0_to_f32(src, dst, n);
}
#endif

#if defined(EDGELM_SIMD_X86_QUANT)
// The x86 quantized matmuls of simd/quant_matmul.h over the file's integer policy and weight
// kinds, which it names QuantInt (the policy), Q8_0Format, Q4_0Format (row-major blocks, each with
// kGroup and kBiasedX: how it wants x quantized) and Q4_0x8Tile, Q8_0x8Tile (the interleaved
// layouts). The interleaved layouts take x plain (group 1, not biased).
void EDGELM_SIMD_ENTRY(q8_0_matmul_xq)(const void* xq, const void* w, float* y, int64_t M,
                                       int64_t N, int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<QuantInt, Q8_0Format>(quantized_view(xq, M, K, Q8_0Format::kGroup), w, y, M, N, K,
                                     n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(q4_0_matmul_xq)(const void* xq, const void* w, float* y, int64_t M,
                                       int64_t N, int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<QuantInt, Q4_0Format>(quantized_view(xq, M, K, Q4_0Format::kGroup), w, y, M, N, K,
                                     n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(q4_0x8_matmul_xq)(const void* xq, const void* w, float* y, int64_t M,
                                         int64_t N, int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<QuantInt, Q4_0x8Tile>(quantized_view(xq, M, K, 1), w, y, M, N, K, n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(q8_0x8_matmul_xq)(const void* xq, const void* w, float* y, int64_t M,
                                         int64_t N, int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<QuantInt, Q8_0x8Tile>(quantized_view(xq, M, K, 1), w, y, M, N, K, n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(q4_0x8_decode_pairs)(const void* xq, const void* w, float* y, int64_t N,
                                            int64_t K, int64_t a_begin, int64_t b_begin,
                                            int64_t rows) {
  x8_decode_pairs<QuantInt, Q4_0x8Tile>(quantized_view(xq, 1, K, 1), w, y, N, a_begin, b_begin,
                                        rows);
}

void EDGELM_SIMD_ENTRY(q8_0x8_decode_pairs)(const void* xq, const void* w, float* y, int64_t N,
                                            int64_t K, int64_t a_begin, int64_t b_begin,
                                            int64_t rows) {
  x8_decode_pairs<QuantInt, Q8_0x8Tile>(quantized_view(xq, 1, K, 1), w, y, N, a_begin, b_begin,
                                        rows);
}

// The one-step forms quantize all of x into per-thread scratch first.
void EDGELM_SIMD_ENTRY(q8_0_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<QuantInt, Q8_0Format>(
      quantize_x<QuantInt>(x, M, K, Q8_0Format::kGroup, Q8_0Format::kBiasedX), w, y, M, N, K,
      n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(q4_0_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<QuantInt, Q4_0Format>(
      quantize_x<QuantInt>(x, M, K, Q4_0Format::kGroup, Q4_0Format::kBiasedX), w, y, M, N, K,
      n_begin, n_end);
}

void EDGELM_SIMD_ENTRY(q4_0x8_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                      int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<QuantInt, Q4_0x8Tile>(quantize_x<QuantInt>(x, M, K, 1, false), w, y, M, N, K, n_begin,
                                  n_end);
}

void EDGELM_SIMD_ENTRY(q8_0x8_matmul)(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                      int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<QuantInt, Q8_0x8Tile>(quantize_x<QuantInt>(x, M, K, 1, false), w, y, M, N, K, n_begin,
                                  n_end);
}
#endif

#if defined(EDGELM_SIMD_BLOCK_QUANT)
void EDGELM_SIMD_ENTRY(quantize_x_k)(const float* x, void* xq, int64_t M, int64_t K,
                                     int64_t m_begin, int64_t m_end) {
  block_matmul::quantize_rows_k<BlockQuants::kSumScale>(x, xq, M, K, m_begin, m_end);
}

// <type>_matmul_xq multiplies from x as the table's quantize_x entry for the type wrote it;
// <type>_matmul quantizes all of x into per-thread scratch first.
#define EDGELM_SIMD_BLOCK_ENTRIES(type, Format, quantize)                                          \
  void EDGELM_SIMD_ENTRY(type##_matmul_xq)(const void* xq, const void* w, float* y, int64_t M,     \
                                           int64_t N, int64_t K, int64_t n_begin, int64_t n_end) { \
    block_matmul::matmul<BlockQuants, BlockPanel, block_matmul::Format<BlockQuants>>(              \
        block_matmul::view(xq, M, K), w, y, M, N, K, n_begin, n_end);                              \
  }                                                                                                \
  void EDGELM_SIMD_ENTRY(type##_matmul)(const float* x, const void* w, float* y, int64_t M,        \
                                        int64_t N, int64_t K, int64_t n_begin, int64_t n_end) {    \
    void* xq = scratch(Scratch::kActivations, quantized_x_bytes(M, K));                            \
    quantize(x, xq, M, K, 0, M);                                                                   \
    EDGELM_SIMD_ENTRY(type##_matmul_xq)(xq, w, y, M, N, K, n_begin, n_end);                        \
  }
EDGELM_SIMD_BLOCK_ENTRIES(q4_1, Q4_1Format, quantize_plain)
EDGELM_SIMD_BLOCK_ENTRIES(q5_0, Q5_0Format, quantize_plain)
EDGELM_SIMD_BLOCK_ENTRIES(q5_1, Q5_1Format, quantize_plain)
EDGELM_SIMD_BLOCK_ENTRIES(q4_k, Q4_KFormat, EDGELM_SIMD_ENTRY(quantize_x_k))
EDGELM_SIMD_BLOCK_ENTRIES(q5_k, Q5_KFormat, EDGELM_SIMD_ENTRY(quantize_x_k))
EDGELM_SIMD_BLOCK_ENTRIES(q6_k, Q6_KFormat, EDGELM_SIMD_ENTRY(quantize_x_k))
#undef EDGELM_SIMD_BLOCK_ENTRIES
#endif

#undef EDGELM_SIMD_ENTRY
#undef EDGELM_SIMD_NAME
#undef EDGELM_SIMD_NAME_
