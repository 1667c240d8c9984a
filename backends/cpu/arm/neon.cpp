// AArch64 Advanced SIMD (NEON) kernels. NEON and the F16<->F32 conversions used here are part of
// every AArch64 CPU, so this file is compiled without extra flags and its table is always offered.
// Semantics are those of backends/cpu/portable/; results differ from it only by float rounding,
// and for Q8_0/Q4_0 matmul by quantizing the activations to 8 bits per 32-block (see
// kQuantizedActivations in tests/parity/cases.cpp).
//
// Being baseline code, this file may use the Tensor API and the standard library freely; only
// neon_dotprod.cpp has to keep to itself (see arm.h).
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "backends/cpu/arm/arm.h"
#include "backends/cpu/arm/neon_quant_matmul.h"
#include "backends/cpu/attention_view.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/rope_table.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

#include "backends/cpu/simd/vec_neon.h"
using Vec = Vec128;
#include "backends/cpu/simd/elementwise.h"

#include "backends/cpu/simd/float_weights.h"

// ---------------------------------------------------------------------------------------------
// Float-weight matmul (F32, F16, BF16): register tiles of MR rows of x by NR rows of w
// (float_tile, simd/float_weights.h).

// One band of MR rows of x against weight rows [n_begin, n_end). At least eight independent FMA
// chains hide the FMA latency (4 cycles on two pipes on Cortex-A7x): eight weight rows per tile
// when decoding (MR = 1), four otherwise; MR·NR accumulators, NR weight vectors and one x vector
// fit the 32 vector registers.
template <class Weights, int MR>
void float_band(const float* x, const typename Weights::Element* w, float* y, int64_t N, int64_t K,
                int64_t m0, int64_t n_begin, int64_t n_end) {
  constexpr int NR = MR == 1 ? 8 : 4;
  float_tiles<Vec128, Weights, MR, NR>(x, w, y, N, K, m0, n_begin, n_end);
}

template <class Weights>
void float_matmul(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* weights = static_cast<const typename Weights::Element*>(w);
  const int64_t chunk = weight_chunk_rows<kChunkBytes>(static_cast<size_t>(K) * sizeof(*weights));
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      float_band<Weights, MR>(x, weights, y, N, K, m, chunk_begin, chunk_end);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Quantized matmul without the dot-product extension: one 32-element block as signed 8x8→16-bit
// products (SMULL/SMLAL), widened pairwise into 32-bit lanes (SADDLP/SADALP).

struct NeonDot {
  // Four lanes that sum to Σ w·x over the block at x. |w| ≤ 128 and |x| ≤ 127, so a product is at
  // most 16256 in magnitude and two of them per 16-bit lane stay below 2^15.
  static int32x4_t block(int8x16_t w_low, int8x16_t w_high, const int8_t* x) {
    const int8x16_t x_low = vld1q_s8(x);
    const int8x16_t x_high = vld1q_s8(x + 16);
    int16x8_t products_low = vmull_s8(vget_low_s8(w_low), vget_low_s8(x_low));
    products_low = vmlal_high_s8(products_low, w_low, x_low);
    int16x8_t products_high = vmull_s8(vget_low_s8(w_high), vget_low_s8(x_high));
    products_high = vmlal_high_s8(products_high, w_high, x_high);
    return vpadalq_s16(vpaddlq_s16(products_low), products_high);
  }
};

// ---------------------------------------------------------------------------------------------
// Attention: the families of simd/attention.h (the panel kernel and decode) and
// simd/prefill_attention.h (prefill as outer products) over the cache rows of simd/cache_rows.h.

#include "backends/cpu/simd/cache_rows.h"

// The vector operations of simd/prefill_attention.h, for head_dim a multiple of 16: the score
// tile is 5 slots x 16 rows and the output tile 4 rows x 16 columns (20 and 16 accumulators of the
// 32 Q registers; GCC keeps each slot's K element in a register of its own for FMLA by element,
// so a 6-slot tile spills). Not yet measured on a device; estimated against the panel kernel
// (scripts/cycle_estimate, 64 queries, F16 cache, one thread, 1B and 3B shapes, 128-2048 slots):
// 1.45-1.51x fewer instructions, 1.43-1.52x fewer cycles in LLVM's Cortex-A53 and A55 models and
// 1.59-1.66x in its A57 model (which it uses for the A76 and X1); the same method predicted the
// AVX2 build's measured gain on Zen 5 within 4 % (docs/android.md).
struct PrefillVector : Vec128 {
  static constexpr int kScoreSlots = 5;
  static constexpr int kScoreVectors = 4;
  static constexpr int kValueRows = 4;
  static constexpr int kValueVectors = 4;
};

#include "backends/cpu/simd/prefill_attention.h"

// After prefill_attention.h, which its attention() dispatches to.
#include "backends/cpu/simd/attention.h"

// The sub-block matmul family (simd/block_matmul.h) without the dot-product extension.
struct NeonDot16 {
  // Four lanes summing the 16 products of w and x: |w| ≤ 63 and |x| ≤ 127, so two products per
  // 16-bit lane stay below 2^15.
  static int32x4_t dot16(int8x16_t w, int8x16_t x) {
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x));
  }
  // acc + per lane the four products of its bytes: the sixteen products (at most 63·127) in 16
  // bits, added in pairs (below 2^15), then pairwise into the lanes.
  static int32x4_t dot4(int32x4_t acc, int8x16_t w, int8x16_t x) {
    const int16x8_t low = vmull_s8(vget_low_s8(w), vget_low_s8(x));
    const int16x8_t high = vmull_high_s8(w, x);
    return vpadalq_s16(acc, vpaddq_s16(low, high));
  }
};
using BlockQuants = Quants128x2<NeonDot16>;
using BlockPanel = Panel128x2<NeonDot16>;

void quantize_plain(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                    int64_t m_end) {
  quantize_rows(x, xq, M, K, m_begin, m_end);
}

#include "backends/cpu/simd/block_matmul.h"

}  // namespace

void q8_0_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end) {
  quant_matmul<Q8_0Format, NeonDot>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end) {
  quant_matmul<Q4_0Format, NeonDot>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void quantize_x__neon(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                      int64_t m_end) {
  quantize_rows(x, xq, M, K, m_begin, m_end);
}

void q8_0_matmul_xq__neon(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end) {
  quant_matmul<Q8_0Format, NeonDot>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul_xq__neon(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end) {
  quant_matmul<Q4_0Format, NeonDot>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

#define EDGELM_SIMD_ISA neon
#define EDGELM_SIMD_ATTENTION
#define EDGELM_SIMD_CONVERSIONS
#define EDGELM_SIMD_BLOCK_QUANT
#include "backends/cpu/simd/entry_points.h"

}  // namespace edgelm::cpu
