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
#include <utility>

#include "backends/cpu/arm/arm.h"
#include "backends/cpu/arm/neon_quant_matmul.h"
#include "backends/cpu/attention_view.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/rope_table.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

using arm::Scratch;
using arm::scratch;

#include "backends/cpu/simd/vec_neon.h"
using Vec = Vec128;
#include "backends/cpu/simd/elementwise.h"

float bf16_to_float(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

// ---------------------------------------------------------------------------------------------
// Float-weight matmul (F32, F16, BF16): register tiles of MR rows of x by NR rows of w, each
// accumulator a vector of partial sums along K, reduced once at the end of the row.

struct F32Weights {
  using Element = float;
  static float32x4_t load4(const float* p) { return vld1q_f32(p); }
  static float at(const float* p) { return *p; }
};

struct F16Weights {
  using Element = uint16_t;
  static float32x4_t load4(const uint16_t* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
  }
  static float at(const uint16_t* p) { return half_to_float(*p); }
};

struct BF16Weights {
  using Element = uint16_t;
  // A bfloat16 is the high half of a float32.
  static float32x4_t load4(const uint16_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
  }
  static float at(const uint16_t* p) { return bf16_to_float(*p); }
};

// y[m0 + i, n0 + j] for i < MR, j < NR. x: [M, K]; w: [N, K]; y: [M, N].
template <class Weights, int MR, int NR>
void float_tile(const float* x, const typename Weights::Element* w, float* y, int64_t N, int64_t K,
                int64_t m0, int64_t n0) {
  float32x4_t acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  const float* x_rows[MR];
  const typename Weights::Element* w_rows[NR];
  for (int i = 0; i < MR; ++i) x_rows[i] = x + (m0 + i) * K;
  for (int j = 0; j < NR; ++j) w_rows[j] = w + (n0 + j) * K;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    float32x4_t wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = Weights::load4(w_rows[j] + k);
    for (int i = 0; i < MR; ++i) {
      const float32x4_t xv = vld1q_f32(x_rows[i] + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfmaq_f32(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float sum = vaddvq_f32(acc[i][j]);
      for (int64_t t = k; t < K; ++t) sum += x_rows[i][t] * Weights::at(w_rows[j] + t);
      y[(m0 + i) * N + n0 + j] = sum;
    }
  }
}

// One band of MR rows of x against weight rows [n_begin, n_end). At least eight independent FMA
// chains hide the FMA latency (4 cycles on two pipes on Cortex-A7x): eight weight rows per tile
// when decoding (MR = 1), four otherwise; MR·NR accumulators, NR weight vectors and one x vector
// fit the 32 vector registers.
template <class Weights, int MR>
void float_band(const float* x, const typename Weights::Element* w, float* y, int64_t N, int64_t K,
                int64_t m0, int64_t n_begin, int64_t n_end) {
  constexpr int NR = MR == 1 ? 8 : 4;
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR) float_tile<Weights, MR, NR>(x, w, y, N, K, m0, n);
  for (; n < n_end; ++n) float_tile<Weights, MR, 1>(x, w, y, N, K, m0, n);
}

template <class Weights>
void float_matmul(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* weights = static_cast<const typename Weights::Element*>(w);
  const int64_t chunk = weight_chunk_rows(static_cast<size_t>(K) * sizeof(*weights));
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
// Attention

// y[d] += Σ_{s<n} w[s] · rows[s·stride + d] for d < dim. The sums stay in registers across the
// rows (y is read and written once per call), in two sets for even and odd s, so sixteen FMA
// chains hide the FMA latency.
void weighted_sum(float* y, const float* w, const float* rows, int64_t stride, int64_t n,
                  int64_t dim) {
  auto columns = [&]<int V>(int64_t d) {
    float32x4_t even[V];
    float32x4_t odd[V];
    for (int j = 0; j < V; ++j) {
      even[j] = vld1q_f32(y + d + 4 * j);
      odd[j] = vdupq_n_f32(0.0f);
    }
    int64_t s = 0;
    for (; s + 2 <= n; s += 2) {
      const float* r0 = rows + s * stride + d;
      const float* r1 = r0 + stride;
      for (int j = 0; j < V; ++j) {
        even[j] = vfmaq_n_f32(even[j], vld1q_f32(r0 + 4 * j), w[s]);
        odd[j] = vfmaq_n_f32(odd[j], vld1q_f32(r1 + 4 * j), w[s + 1]);
      }
    }
    if (s < n) {
      for (int j = 0; j < V; ++j)
        even[j] = vfmaq_n_f32(even[j], vld1q_f32(rows + s * stride + d + 4 * j), w[s]);
    }
    for (int j = 0; j < V; ++j) vst1q_f32(y + d + 4 * j, vaddq_f32(even[j], odd[j]));
  };
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) columns.template operator()<8>(d);
  for (; d + 4 <= dim; d += 4) columns.template operator()<1>(d);
  for (; d < dim; ++d) {
    float sum = y[d];
    for (int64_t s = 0; s < n; ++s) sum += w[s] * rows[s * stride + d];
    y[d] = sum;
  }
}

struct F32Cache {
  using Element = float;
  static float32x4_t load4(const float* p) { return vld1q_f32(p); }
  static float value(const float* p) { return *p; }
  // A row of the cache as floats: the row itself.
  static const float* row(const void* cache, int64_t offset, int64_t /*n*/, float* /*buffer*/) {
    return static_cast<const float*>(cache) + offset;
  }
};

struct F16Cache {
  using Element = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return F16Weights::load4(p); }
  static float value(const uint16_t* p) { return half_to_float(*p); }
  // A row of the cache as floats, converted into `buffer` (the attention kernel passes the row of
  // its float panel, so the conversion is the only copy).
  static const float* row(const void* cache, int64_t offset, int64_t n, float* buffer) {
    const uint16_t* half = static_cast<const uint16_t*>(cache) + offset;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(buffer + i, F16Weights::load4(half + i));
    for (; i < n; ++i) buffer[i] = half_to_float(half[i]);
    return buffer;
  }
};

// out[(h·G + j)·out_stride] = q[(h·G + j)·dim ..] · rows[h·dim ..] for h < H, j < G (H·G <= 8):
// one slot's rows of H adjacent kv heads against G queries each, each 4 elements of a row
// converted once, the H·G sums reduced four at a time by pairwise adds.
template <class Cache, int H, int G>
void dot_slot(const float* q, const typename Cache::Element* rows, int64_t dim, float* out,
              int64_t out_stride) {
  static_assert(H * G <= 8);
  float32x4_t acc[8];
  for (float32x4_t& a : acc) a = vdupq_n_f32(0.0f);
  int64_t d = 0;
  for (; d + 4 <= dim; d += 4) {
    for (int h = 0; h < H; ++h) {
      const float32x4_t k = Cache::load4(rows + h * dim + d);
      for (int j = 0; j < G; ++j)
        acc[h * G + j] = vfmaq_f32(acc[h * G + j], vld1q_f32(q + (h * G + j) * dim + d), k);
    }
  }
  // Lane i of each: the sum of acc[4·half + i].
  float sums[8];
  vst1q_f32(sums, vpaddq_f32(vpaddq_f32(acc[0], acc[1]), vpaddq_f32(acc[2], acc[3])));
  vst1q_f32(sums + 4, vpaddq_f32(vpaddq_f32(acc[4], acc[5]), vpaddq_f32(acc[6], acc[7])));
  for (; d < dim; ++d) {
    for (int h = 0; h < H; ++h) {
      const float k = Cache::value(rows + h * dim + d);
      for (int j = 0; j < G; ++j) sums[h * G + j] += q[(h * G + j) * dim + d] * k;
    }
  }
  for (int i = 0; i < H * G; ++i) out[i * out_stride] = sums[i];
}

// acc[j·dim + d] += Σ_{t<S} p[j·p_stride + t] · rows[t·stride + d] for j < group, d < dim: S
// consecutive slots' V rows of a kv head added into its group's outputs (in L1), each 4 elements
// of a row converted once and each output vector loaded and stored once per S slots.
template <class Cache, int S>
void add_weighted_rows(float* acc, const float* p, int64_t p_stride,
                       const typename Cache::Element* rows, int64_t stride, int64_t dim,
                       int64_t group) {
  int64_t d = 0;
  for (; d + 4 <= dim; d += 4) {
    float32x4_t v[S];
    for (int t = 0; t < S; ++t) v[t] = Cache::load4(rows + t * stride + d);
    for (int64_t j = 0; j < group; ++j) {
      float* out = acc + j * dim + d;
      float32x4_t sum = vld1q_f32(out);
      for (int t = 0; t < S; ++t) sum = vfmaq_n_f32(sum, v[t], p[j * p_stride + t]);
      vst1q_f32(out, sum);
    }
  }
  for (; d < dim; ++d) {
    for (int64_t j = 0; j < group; ++j) {
      float sum = acc[j * dim + d];
      for (int t = 0; t < S; ++t) sum += p[j * p_stride + t] * Cache::value(rows + t * stride + d);
      acc[j * dim + d] = sum;
    }
  }
}

#include "backends/cpu/simd/attention.h"

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

// Prefill with whole 16-column output tiles in a row: the outer-product kernel; everything else
// (decode, other head sizes) the panel kernel of simd/attention.h.
template <class Cache>
void attention(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  const AttentionView a = attention_view(args);
  if (a.n_queries > 1 && prefill_takes(a.head_dim)) {
    prefill_attention<Cache>(a, group_begin, group_end);
  } else {
    attention_groups<Cache>(args, group_begin, group_end);
  }
}

struct ScratchBuffers {
  static constexpr std::align_val_t kAlignment{64};
  void* data[static_cast<int>(Scratch::kCount)] = {};
  size_t capacity[static_cast<int>(Scratch::kCount)] = {};

  ScratchBuffers() = default;
  ScratchBuffers(const ScratchBuffers&) = delete;
  ScratchBuffers& operator=(const ScratchBuffers&) = delete;
  ~ScratchBuffers() {
    for (void* pointer : data) ::operator delete(pointer, kAlignment);
  }
};

}  // namespace

void* arm::scratch(Scratch slot, size_t bytes) {
  thread_local ScratchBuffers buffers;
  const auto index = static_cast<int>(slot);
  if (buffers.data[index] == nullptr || bytes > buffers.capacity[index]) {
    // Grow by at least half again, so a slowly rising size (attention over a growing cache)
    // reallocates O(log n) times; even 0 bytes get a real (64-byte) buffer.
    size_t capacity = buffers.capacity[index] + buffers.capacity[index] / 2;
    if (capacity < bytes) capacity = bytes;
    if (capacity == 0) capacity = 64;
    void* grown = ::operator new(capacity, ScratchBuffers::kAlignment);
    ::operator delete(buffers.data[index], ScratchBuffers::kAlignment);
    buffers.data[index] = grown;
    buffers.capacity[index] = capacity;
  }
  return buffers.data[index];
}

void f32_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end) {
  float_matmul<F32Weights>(x, w, y, M, N, K, n_begin, n_end);
}

void f16_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end) {
  float_matmul<F16Weights>(x, w, y, M, N, K, n_begin, n_end);
}

void bf16_matmul__neon(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end) {
  float_matmul<BF16Weights>(x, w, y, M, N, K, n_begin, n_end);
}

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

void elementwise_kernels__neon(KernelTable& table) {
  set_elementwise_kernels(table);
}

void f32_attention__neon(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  attention<F32Cache>(args, group_begin, group_end);
}

void f16_attention__neon(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  attention<F16Cache>(args, group_begin, group_end);
}

void f16_to_f32__neon(const void* src, float* dst, int64_t n) {
  f16_to_f32(src, dst, n);
}

void f16_from_f32__neon(const float* src, void* dst, int64_t n) {
  f16_from_f32(src, dst, n);
}

void q8_0_to_f32__neon(const void* src, float* dst, int64_t n) {
  q8_0_to_f32(src, dst, n);
}

void q4_0_to_f32__neon(const void* src, float* dst, int64_t n) {
  q4_0_to_f32(src, dst, n);
}

}  // namespace edgelm::cpu
