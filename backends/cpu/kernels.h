// The CPU kernel table: one function pointer per op (per dtype where the dtype changes the kernel).
// It is filled once per instruction set; the CPU backend dispatches through it, and the parity
// tests and micro-benchmarks enumerate the same table, so it is the only list to edit when a
// kernel is added.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"

namespace edgelm::cpu {

// y[m, n] = sum_k x[m, k] * w[n, k] for m in [0, M) and n in [n_begin, n_end).
// x: [M, K] F32; w: [N, K] rows of the table's dtype; y: [M, N] F32.
using MatmulFn = void (*)(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end);
// One row of n elements to or from F32 (dequantize / quantize / convert).
using RowToF32Fn = void (*)(const void* src, float* dst, int64_t n);
using RowFromF32Fn = void (*)(const float* src, void* dst, int64_t n);
// One row of `dim` elements.
using RmsNormFn = void (*)(const float* x, const float* weight, float* y, int64_t dim, float eps);
// One token: x and out [n_heads, head_dim]; inv_freq [head_dim / 2].
using RopeFn = void (*)(const float* x, float* out, int64_t n_heads, int64_t head_dim,
                        int32_t position, const float* inv_freq);
using SoftmaxFn = void (*)(const float* x, float* y, int64_t n);
using SiluMulFn = void (*)(const float* gate, const float* up, float* out, int64_t n);
using AddFn = void (*)(const float* a, const float* b, float* out, int64_t n);
// Quantized-weight kernels round the rows of x to 8 bits per 32-block (scale max|x|/127, as GGML's
// Q8_0) before multiplying. A table can hand that step out separately (QuantizedMatmul), so the CPU
// backend quantizes x once per matmul, shared by every thread and row range, instead of once per
// range: quantize_x writes rows [m_begin, m_end) of x into `xq`, a buffer of
// quantized_x_bytes(M, K) bytes laid out as the kernel reads it, and matmul multiplies from it.
using QuantizeXFn = void (*)(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                             int64_t m_end);
using QuantizedXMatmulFn = void (*)(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end);
struct QuantizedMatmul {
  QuantizeXFn quantize_x = nullptr;
  QuantizedXMatmulFn matmul = nullptr;
};

// Bytes of a quantized x: M·K values, then per block a float scale and a 32-bit sum. Every ISA's
// layout fits in it.
constexpr size_t quantized_x_bytes(int64_t M, int64_t K) {
  return static_cast<size_t>(M * K) + static_cast<size_t>(M * (K / 32)) * 8;
}

// Decode (one row of x): y[n] for the rows n of [a_begin, a_begin + rows) and of [b_begin,
// b_begin + rows), the two ranges read side by side as two streams (b_begin < 0: the first range
// alone). a_begin, b_begin and rows are multiples of the layout's row group and the ranges do not
// overlap. x is the row of floats, or, for a dtype with a quantized_matmul entry, the row as its
// quantize_x wrote it. Each y[n] is the same float, bit for bit, as matmul[] gives.
using DecodePairsFn = void (*)(const void* x, const void* w, float* y, int64_t N, int64_t K,
                               int64_t a_begin, int64_t b_begin, int64_t rows);

// Attention for kv heads [group_begin, group_end) (all queries and all query heads of those
// groups, and their rows of args.mass). Semantics as Backend::attention.
using AttentionFn = void (*)(const AttentionArgs& args, int64_t group_begin, int64_t group_end);

struct KernelTable {
  const char* isa = "";
  std::array<MatmulFn, kDTypeCount> matmul{};  // by weight dtype
  // By weight dtype, where set: the same product as matmul[] in two steps (see QuantizedMatmul).
  std::array<QuantizedMatmul, kDTypeCount> quantized_matmul{};
  std::array<RowToF32Fn, kDTypeCount> row_to_f32{};      // by source dtype
  std::array<RowFromF32Fn, kDTypeCount> row_from_f32{};  // by destination dtype
  std::array<AttentionFn, kDTypeCount> attention{};      // by K/V dtype
  RmsNormFn rms_norm = nullptr;
  RopeFn rope = nullptr;
  SoftmaxFn softmax = nullptr;
  SiluMulFn silu_mul = nullptr;
  AddFn add = nullptr;
  // By weight dtype, the layout this table multiplies such matrices fastest in: the dtype itself,
  // or a load-time layout (Q4_0 -> Q4_0x8, Q8_0 -> Q8_0x8, F16 -> F16x4) where the table's kernel
  // for it was measured faster (the CPU backend then asks the loader to repack), or for Q4_1,
  // Q5_0 and Q5_1, which have portable kernels only, the table's Q8_0 layout (the loader converts
  // them). Every table can multiply every layout; the portable kernels are the oracle for the
  // fast ones.
  std::array<DType, kDTypeCount> matmul_layout = stored_layouts();
  // By weight dtype, where set: decode reads weight rows as two streams (DecodePairsFn). The CPU
  // backend then pairs each row of a weight's first half with one of its second half and splits
  // the pairs over the threads: each thread reads two runs through memory at least
  // decode_pair_min_bytes apart, since two streams only read faster than one when they are far
  // apart (docs/performance.md), and a thread that finishes early can take a few pairs from the
  // end of another's share.
  std::array<DecodePairsFn, kDTypeCount> decode_pairs{};
  // By weight dtype, where set: the same kernels with software prefetch of each stream a few KiB
  // ahead (bit-identical results). Whether that helps depends on the core rather than on the
  // instruction set (AVX-512 Q4_0x8: 17-20 % faster decode on an Intel Xeon, up to a quarter
  // slower streams on AMD Zen 4 and 5; docs/performance.md), so the CPU backend chooses:
  // decode_prefetch_wanted().
  std::array<DecodePairsFn, kDTypeCount> decode_pairs_prefetch{};
  int64_t decode_pair_min_bytes = 0;

  static constexpr std::array<DType, kDTypeCount> stored_layouts() {
    std::array<DType, kDTypeCount> layouts{};
    for (int i = 0; i < kDTypeCount; ++i) layouts[static_cast<size_t>(i)] = static_cast<DType>(i);
    return layouts;
  }
};

// The entry points of the sub-block matmul family (simd/block_matmul.h) for one instruction set:
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K multiplied as stored, in one step (MatmulFn) or from x
// quantized once (QuantizedXMatmulFn), and quantize_x_k (Q8_K rounding, for the K-quants).
#define EDGELM_DECLARE_BLOCK_MATMULS(isa)                                                   \
  void quantize_x_k__##isa(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin, \
                           int64_t m_end);                                                  \
  EDGELM_DECLARE_BLOCK_MATMUL(q4_1, isa)                                                    \
  EDGELM_DECLARE_BLOCK_MATMUL(q5_0, isa)                                                    \
  EDGELM_DECLARE_BLOCK_MATMUL(q5_1, isa)                                                    \
  EDGELM_DECLARE_BLOCK_MATMUL(q4_k, isa)                                                    \
  EDGELM_DECLARE_BLOCK_MATMUL(q5_k, isa)                                                    \
  EDGELM_DECLARE_BLOCK_MATMUL(q6_k, isa)
#define EDGELM_DECLARE_BLOCK_MATMUL(type, isa)                                                \
  void type##_matmul__##isa(const float* x, const void* w, float* y, int64_t M, int64_t N,    \
                            int64_t K, int64_t n_begin, int64_t n_end);                       \
  void type##_matmul_xq__##isa(const void* xq, const void* w, float* y, int64_t M, int64_t N, \
                               int64_t K, int64_t n_begin, int64_t n_end);

// Fills a table's entries for the sub-block family of instruction set `isa`, whose plain
// quantizer (Q8_0 rounding per 32-block, element order) is `quantize_plain`.
#define EDGELM_SET_BLOCK_MATMULS(table, isa, quantize_plain)                              \
  do {                                                                                    \
    (table).matmul[static_cast<size_t>(DType::Q4_1)] = q4_1_matmul__##isa;                \
    (table).matmul[static_cast<size_t>(DType::Q5_0)] = q5_0_matmul__##isa;                \
    (table).matmul[static_cast<size_t>(DType::Q5_1)] = q5_1_matmul__##isa;                \
    (table).matmul[static_cast<size_t>(DType::Q4_K)] = q4_k_matmul__##isa;                \
    (table).matmul[static_cast<size_t>(DType::Q5_K)] = q5_k_matmul__##isa;                \
    (table).matmul[static_cast<size_t>(DType::Q6_K)] = q6_k_matmul__##isa;                \
    (table).quantized_matmul[static_cast<size_t>(DType::Q4_1)] = {quantize_plain,         \
                                                                  q4_1_matmul_xq__##isa}; \
    (table).quantized_matmul[static_cast<size_t>(DType::Q5_0)] = {quantize_plain,         \
                                                                  q5_0_matmul_xq__##isa}; \
    (table).quantized_matmul[static_cast<size_t>(DType::Q5_1)] = {quantize_plain,         \
                                                                  q5_1_matmul_xq__##isa}; \
    (table).quantized_matmul[static_cast<size_t>(DType::Q4_K)] = {quantize_x_k__##isa,    \
                                                                  q4_k_matmul_xq__##isa}; \
    (table).quantized_matmul[static_cast<size_t>(DType::Q5_K)] = {quantize_x_k__##isa,    \
                                                                  q5_k_matmul_xq__##isa}; \
    (table).quantized_matmul[static_cast<size_t>(DType::Q6_K)] = {quantize_x_k__##isa,    \
                                                                  q6_k_matmul_xq__##isa}; \
  } while (false)

// The reference kernels (backends/cpu/portable/), always available.
const KernelTable& portable_kernels();

// Every table compiled into this binary whose instruction set this CPU has, portable first.
std::vector<const KernelTable*> available_kernel_tables();

// The table to use: the one named by `isa` (--backend cpu:<isa>) if not empty, else the best
// available. Throws edgelm::Error when the named ISA is unknown, not built, or not supported by
// this CPU, and when the environment still sets EDGELM_CPU_ISA (no longer read: refused, not
// ignored).
const KernelTable& select_kernels(const std::string& isa = "");

// Whether decode should use the decode_pairs_prefetch kernels: the environment variable
// EDGELM_CPU_PREFETCH (on|off) if set, else true on Intel CPUs, whose cores measured faster with
// them, and false elsewhere. Throws edgelm::Error for another value of the variable.
bool decode_prefetch_wanted();

}  // namespace edgelm::cpu
