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
// Every file has f32_matmul, f16_matmul and bf16_matmul (its float_matmul over
// simd/float_weights.h) and elementwise_kernels (set_elementwise_kernels).

#define EDGELM_SIMD_NAME_(entry, isa) entry##__##isa
#define EDGELM_SIMD_NAME(entry, isa) EDGELM_SIMD_NAME_(entry, isa)
#define EDGELM_SIMD_ENTRY(entry) EDGELM_SIMD_NAME(entry, EDGELM_SIMD_ISA)

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

#undef EDGELM_SIMD_ENTRY
#undef EDGELM_SIMD_NAME
#undef EDGELM_SIMD_NAME_
