// AVX-512 kernels (F, BW, VL, DQ and VNNI, plus FMA and F16C; the table is only offered when the
// CPU reports all of them): the float matmuls and decode attention in 16-lane ZMM vectors, and the
// element-wise and prefill-attention families of simd/ instantiated over Vec512; the quantized
// matmuls (VNNI) are in avx512_quant.cpp. Semantics are those of backends/cpu/portable/; results
// differ from it only by float rounding.
//
// Nothing here calls an inline or template function from a shared header (see x86.h).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "backends/cpu/kernels.h"
#include "backends/cpu/rope_table.h"
#include "backends/cpu/x86/avx512_intrinsics.h"
#include "backends/cpu/x86/x86.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

#include "backends/cpu/simd/vec_avx2.h"
#include "backends/cpu/simd/vec_avx512.h"
using Vec = Vec512;
#include "backends/cpu/simd/bands.h"
#include "backends/cpu/simd/elementwise.h"
#include "backends/cpu/simd/float_weights.h"

// Weights per chunk of the float GEMM: about 128 KiB, which stay in L2 while every band of x
// passes.
constexpr size_t kChunkBytes = size_t{128} << 10;

// ---------------------------------------------------------------------------------------------
// Float-weight matmul (F32, F16, BF16): register tiles of MR rows of x by NR rows of w
// (float_tile, simd/float_weights.h).

// Decode reads one weight row against one row of x with float_row_dot (simd/float_weights.h) in
// 256-bit steps and without software prefetch: on Zen 4 the 512-bit F16 conversion made this
// memory-bound loop slower (F16, one thread: 18-21 GB/s with 512-bit steps, 22-23 GB/s with 256-bit
// ones).

// Groups of four interleaved weight rows (F16x4), rows [n_begin, n_end), against one row of x
// (decode): y[n_begin .. n_end). Each group's chunks are read front to back, and each 16 elements
// of x are loaded once for all four rows. Row by row, x is read again for every row, and once it no
// longer fits in L1 beside the weights streaming through (K = 8192: 32 KiB of floats) those reads
// compete with the weight stream: F16 ffn_down (2048 x 8192), one thread, 12 GB/s row by row,
// ~18 GB/s interleaved (a standalone loop on the Zen 4 VM; K = 2048: 21-23 against 22-24). The
// same held for the whole 8192-wide x beside a group's 64 KiB, so up to kBatch groups take one K
// segment (core/quant.h) after the other: a group's segment is 16 KiB and its slice of x 8 KiB,
// which stay in L1 together (micro_bench, ffn_down, one thread: 20.8-21.5 -> 28.0-28.7 GB/s, as
// fast as ffn_up). The batch's accumulators wait on the stack between segments, so the sums are the
// same, in the same order, as reading each group whole.
//
// As in the quantized decode kernels (x8_row_tiles), decode reads two ranges of groups side by
// side as two streams, a chunk of each in turn (float_groups_pairs, KernelTable::decode_pairs: the
// CPU backend picks the pairs; matmul[] itself reads one range as one stream). In the model on
// the Zen 5 VM, alternating with the one-stream kernel token by token: one thread 14-18 % less
// time per F16 token, two threads 7-18 % (fast bandwidth phase; not measured in the slow one).

// acc[2r], acc[2r + 1] += row r of the chunk of 16 columns at `chunk` times x0, x1.
template <class Weights>
[[gnu::always_inline]] inline void chunk_dot4(__m256 x0, __m256 x1,
                                              const typename Weights::Element* chunk,
                                              __m256 (&acc)[8]) {
  for (int r = 0; r < 4; ++r) {
    acc[2 * r] = _mm256_fmadd_ps(x0, Weights::template load<Vec256>(chunk + 16 * r), acc[2 * r]);
    acc[2 * r + 1] =
        _mm256_fmadd_ps(x1, Weights::template load<Vec256>(chunk + 16 * r + 8), acc[2 * r + 1]);
  }
}

// Rows [a_begin, a_begin + rows) beside rows [b_begin, b_begin + rows) (b_begin < 0: the first
// range alone), one batch of groups of each at a time.
template <class Weights>
void float_groups_pairs(const float* x, const typename Weights::Element* w, int64_t N, int64_t K,
                        float* y, int64_t a_begin, int64_t b_begin, int64_t rows) {
  static_assert(Weights::kGroupRows == 4 && kF16x4Chunk == 16);
  constexpr int64_t kBatch = 16;  // pairs of groups
  const int64_t a_end = a_begin + rows;
  const bool paired = b_begin >= 0;
  __m256 batch[kBatch][2][8];
  for (int64_t n0 = a_begin; n0 < a_end; n0 += 4 * kBatch) {
    const int64_t n1 = min_of(n0 + 4 * kBatch, a_end);
    for (int64_t first = 0; first < K; first += Weights::kSegment) {
      const int64_t end = min_of(first + Weights::kSegment, K);
      for (int64_t a = n0; a < n1; a += 4) {
        const int64_t b = a + (b_begin - a_begin);
        __m256(&saved)[2][8] = batch[(a - n0) / 4];
        __m256 acc_a[8], acc_b[8];
        for (int u = 0; u < 8; ++u) {
          acc_a[u] = first == 0 ? _mm256_setzero_ps() : saved[0][u];
          acc_b[u] = first == 0 ? _mm256_setzero_ps() : saved[1][u];
        }
        const typename Weights::Element* a_group = Weights::row(w, a, N, K, first);
        if (paired) {
          const typename Weights::Element* b_group = Weights::row(w, b, N, K, first);
          for (int64_t k = first; k < end; k += 16) {
            const __m256 x0 = _mm256_loadu_ps(x + k);
            const __m256 x1 = _mm256_loadu_ps(x + k + 8);
            chunk_dot4<Weights>(x0, x1, a_group + 4 * (k - first), acc_a);
            chunk_dot4<Weights>(x0, x1, b_group + 4 * (k - first), acc_b);
          }
        } else {
          for (int64_t k = first; k < end; k += 16) {
            chunk_dot4<Weights>(_mm256_loadu_ps(x + k), _mm256_loadu_ps(x + k + 8),
                                a_group + 4 * (k - first), acc_a);
          }
        }
        for (int u = 0; u < 8; ++u) {
          saved[0][u] = acc_a[u];
          saved[1][u] = acc_b[u];
        }
      }
    }
    for (int64_t a = n0; a < n1; a += 4) {
      const int64_t b = a + (b_begin - a_begin);
      const __m256(&sums)[2][8] = batch[(a - n0) / 4];
      for (int r = 0; r < 4; ++r) {
        y[a + r] = Vec256::sum(_mm256_add_ps(sums[0][2 * r], sums[0][2 * r + 1]));
        if (paired) y[b + r] = Vec256::sum(_mm256_add_ps(sums[1][2 * r], sums[1][2 * r + 1]));
      }
    }
  }
}

// One band of MR rows of x against weight rows [n_begin, n_end), four weight rows per tile: with
// MR = 4 that is 16 accumulators, four weight vectors and an x vector of the 32 ZMM registers.
// A single row of x (decode) takes the weight rows one at a time instead: four rows read side by
// side are four interleaved DRAM streams, which measured ~15 % slower than one sequential stream
// (F16, one thread: 5.9 -> 6.9 tok/s on the 1B model). Software prefetch, which helps the
// quantized kernels, halved this one's bandwidth, so there is none.
template <class Weights, int MR>
void float_band(const float* x, const typename Weights::Element* w, float* y, int64_t N, int64_t K,
                int64_t m0, int64_t n_begin, int64_t n_end) {
  if constexpr (MR == 1 && Weights::kGroupRows == 4) {
    float_groups_pairs<Weights>(x + m0 * K, w, N, K, y + m0 * N, n_begin, -1, n_end - n_begin);
    return;
  } else if constexpr (MR == 1) {
    for (int64_t n = n_begin; n < n_end; ++n)
      y[m0 * N + n] = float_row_dot<Vec256, Weights, 0>(x + m0 * K, w + n * K, K);
    return;
  }
  constexpr int NR = 4;
  float_tiles<Vec512, Weights, MR, NR>(x, w, y, N, K, m0, n_begin, n_end);
}

template <class Weights>
void float_matmul(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* weights = static_cast<const typename Weights::Element*>(w);
  constexpr int64_t kGroup = Weights::kGroupRows;
  // Decode (one row of x) has one band and nothing to reuse from cache: it takes the whole range,
  // so that float_groups_pairs streams each K segment over many groups.
  const int64_t chunk =
      M == 1 ? n_end - n_begin
             : (weight_chunk_rows<kChunkBytes>(static_cast<size_t>(K) * sizeof(*weights)) + kGroup -
                1) /
                   kGroup * kGroup;
  // Prefill: while the bands of x (four rows each) run over a chunk, each also prefetches its
  // part of the next chunk. The chunk's first band would otherwise read its weights from DRAM
  // with nothing else to do: with 64 rows of x that cost 6-7 % (F16, one thread, 1B shapes).
  const int64_t bands = (M + 3) / 4;
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    const int64_t next_rows = min_of(chunk, n_end - chunk_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      for (int64_t first = 0; M > 1 && next_rows > 0 && first < K; first += Weights::kSegment) {
        const int64_t width = min_of(Weights::kSegment, K - first);
        x86::prefetch_part(Weights::row(weights, chunk_end, N, K, first),
                           next_rows * width * static_cast<int64_t>(sizeof(*weights)), m / 4,
                           bands);
      }
      float_band<Weights, MR>(x, weights, y, N, K, m, chunk_begin, chunk_end);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Decode attention: one query over the cache, the thread's kv heads [group_begin, group_end).

#include "backends/cpu/simd/cache_rows.h"

// Lane i of the result is the sum of the lanes of v[i], for i < 16: 15 adds and 30 shuffles for
// sixteen sums, where sixteen horizontal sums take about 130 instructions.
__m512 reduce16(const __m512* v) {
  // Per 128-bit lane: pairs of vectors interleaved, then pairs of pairs, so that lane l of b[i]
  // holds lane l's sums of v[4i..4i+3]; then the lanes are added across in two rounds.
  __m512 a[8];
  for (int i = 0; i < 8; ++i) {
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m512 b[4];
  for (int i = 0; i < 4; ++i) {
    const __m512d x = _mm512_castps_pd(a[2 * i]);
    const __m512d y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  __m512 c[2];
  for (int i = 0; i < 2; ++i) {
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88),
                       _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
}

// Requests the `bytes` bytes at p into L2 (PREFETCHT1), one request per cache line.
void prefetch_l2(const void* p, int64_t bytes) {
  const auto* begin = static_cast<const char*>(p);
  for (int64_t line = 0; line < bytes; line += 64) _mm_prefetch(begin + line, _MM_HINT_T1);
}

// Slots ahead of the one being read whose rows are prefetched (as the AVX2 kernel's
// kDecodePrefetchSlots, simd/attention.h).
constexpr int64_t kAttentionPrefetchSlots = 16;

// The AVX2 decode kernel (simd/attention.h) reads the cache in the same order, slot by slot with
// every kv head of the thread, but per slot it reduces each dot product to a float and loads each
// output vector for every few slots. Here, with head_dim = 16·kChunks:
//   scores: for 16 slots at a time, each query head's dot products are left as vectors (one per
//   slot, kChunks FMAs each) and reduced together by reduce16;
//   mask by position, scale, softmax per row (the file's helpers);
//   outputs: per 8 slots and 16 elements, the 8 V rows' vectors are loaded once and added into
//   each query head's outputs with one load and store of the output vector.
// A kv head that does not see every slot of a block takes the block slot by slot, skipping the
// slots it does not see (whatever such a V row holds cannot reach the outputs).
// Against the AVX2 kernel on the Zen 5 VM (1B shape, F16 cache, one thread): micro_bench with the
// cache in cache (--hot), 128/512/2048 slots, 17.8/97/570 -> 9.1/37/147 us; from memory, 2048
// slots 631-641 -> 368-382, 512 115-119 -> 103, but 128 23-25 -> 27. In the model (1B Q4_0,
// generate --profile, alternating): ~70 slots 21.0-22.6 -> 19.5-19.9 us (two threads 12.9-13.1 ->
// 11.0-11.8), ~2000 slots 351-366 -> 343-348. From memory the V pass takes 1.4-2x its time
// from cache; the K pass is close to a standalone copy of it (performance.md).
template <class Cache, int kChunks>
void decode_attention(const AttentionView& a, int64_t group_begin, int64_t group_end) {
  using Element = typename Cache::Element;
  constexpr int64_t kDim = 16 * kChunks;
  constexpr float kMasked = -INFINITY;
  const int64_t group = a.n_heads / a.n_kv_heads;
  const int64_t n_slots = a.n_slots;
  const int64_t heads = group_end - group_begin;
  if (heads <= 0) return;
  const int64_t rows = heads * group;  // row h·group + j: query head j of kv head group_begin + h
  const int32_t position = a.q_pos[0];
  const int64_t slot_elements = a.n_kv_heads * kDim;
  const int64_t span_bytes = heads * kDim * static_cast<int64_t>(sizeof(Element));
  const Element* k = static_cast<const Element*>(a.k) + group_begin * kDim;
  const Element* v = static_cast<const Element*>(a.v) + group_begin * kDim;
  const float* q = a.q + group_begin * group * kDim;
  auto visible = [&](int64_t s, int64_t g) { return a.kv_pos[s * a.n_kv_heads + g] <= position; };

  // scores [rows, n_slots]; per row, 16 slots' unreduced dot products; outputs [rows, kDim] and
  // row maxima [rows].
  auto* scores = static_cast<float*>(
      scratch(Scratch::kScores, sizeof(float) * static_cast<size_t>(rows * n_slots)));
  auto* block = static_cast<__m512*>(
      scratch(Scratch::kActivations, sizeof(__m512) * static_cast<size_t>(rows * 16)));
  auto* out = static_cast<float*>(
      scratch(Scratch::kAccumulators, sizeof(float) * static_cast<size_t>(rows * kDim + rows)));
  float* row_max = out + rows * kDim;

  for (int64_t s = 0; s < min_of(n_slots, kAttentionPrefetchSlots); ++s)
    prefetch_l2(k + s * slot_elements, span_bytes);
  for (int64_t s0 = 0; s0 < n_slots; s0 += 16) {
    const int64_t count = min_of(16, n_slots - s0);
    for (int64_t t = 0; t < count; ++t) {
      const int64_t s = s0 + t;
      if (s + kAttentionPrefetchSlots < n_slots)
        prefetch_l2(k + (s + kAttentionPrefetchSlots) * slot_elements, span_bytes);
      const Element* slot_rows = k + s * slot_elements;
      for (int64_t h = 0; h < heads; ++h) {
        __m512 key[kChunks];
        for (int c = 0; c < kChunks; ++c) key[c] = Cache::load(slot_rows + h * kDim + 16 * c);
        for (int64_t j = 0; j < group; ++j) {
          const float* q_row = q + (h * group + j) * kDim;
          __m512 dot = _mm512_mul_ps(_mm512_loadu_ps(q_row), key[0]);
          for (int c = 1; c < kChunks; ++c)
            dot = _mm512_fmadd_ps(_mm512_loadu_ps(q_row + 16 * c), key[c], dot);
          block[(h * group + j) * 16 + t] = dot;
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      // Lane t of the reduction depends on dots[t] alone: a partial block's stale vectors past
      // `count` only reach lanes that are not stored.
      _mm512_mask_storeu_ps(scores + r * n_slots + s0, Vec512::tail_mask(count),
                            reduce16(block + r * 16));
    }
  }

  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = group_begin + h;
    bool sees_all = true;  // the usual case: the rows only need scaling
    for (int64_t s = 0; s < n_slots && sees_all; ++s) sees_all = visible(s, g);
    for (int64_t r = h * group; r < (h + 1) * group; ++r) {
      float* p = scores + r * n_slots;
      if (sees_all) {
        scale_in_place(p, a.scale, n_slots);
      } else {
        for (int64_t s = 0; s < n_slots; ++s) p[s] = visible(s, g) ? p[s] * a.scale : kMasked;
      }
      const float max_value = array_max(p, n_slots);
      row_max[r] = max_value;
      if (max_value == kMasked) {
        std::memset(p, 0, sizeof(float) * static_cast<size_t>(n_slots));
      } else {
        scale_in_place(p, 1.0f / exp_shifted(p, p, n_slots, max_value), n_slots);
      }
    }
  }

  std::memset(out, 0, sizeof(float) * static_cast<size_t>(rows * kDim));
  for (int64_t s = 0; s < min_of(n_slots, kAttentionPrefetchSlots); ++s)
    prefetch_l2(v + s * slot_elements, span_bytes);
  constexpr int64_t kStep = 8;  // slots per block
  for (int64_t s0 = 0; s0 < n_slots; s0 += kStep) {
    const int64_t count = min_of(kStep, n_slots - s0);
    for (int64_t s = s0 + kAttentionPrefetchSlots;
         s < min_of(s0 + kStep + kAttentionPrefetchSlots, n_slots); ++s)
      prefetch_l2(v + s * slot_elements, span_bytes);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = group_begin + h;
      const Element* value_rows = v + s0 * slot_elements + h * kDim;
      float* acc = out + h * group * kDim;
      const float* p = scores + h * group * n_slots + s0;
      bool all = count == kStep;
      for (int64_t t = 0; t < count && all; ++t) all = visible(s0 + t, g);
      if (all) {
        for (int c = 0; c < kChunks; ++c) {
          __m512 value[kStep];
          for (int t = 0; t < kStep; ++t)
            value[t] = Cache::load(value_rows + t * slot_elements + 16 * c);
          for (int64_t j = 0; j < group; ++j) {
            float* o = acc + j * kDim + 16 * c;
            const float* weights = p + j * n_slots;
            // Two chains of four, so the FMA latency does not serialize the eight slots.
            __m512 even = _mm512_loadu_ps(o);
            __m512 odd = _mm512_mul_ps(_mm512_set1_ps(weights[1]), value[1]);
            for (int t = 0; t < kStep; t += 2) {
              even = _mm512_fmadd_ps(_mm512_set1_ps(weights[t]), value[t], even);
              if (t > 0) odd = _mm512_fmadd_ps(_mm512_set1_ps(weights[t + 1]), value[t + 1], odd);
            }
            _mm512_storeu_ps(o, _mm512_add_ps(even, odd));
          }
        }
        continue;
      }
      for (int64_t t = 0; t < count; ++t) {
        if (!visible(s0 + t, g)) continue;
        for (int c = 0; c < kChunks; ++c) {
          const __m512 value = Cache::load(value_rows + t * slot_elements + 16 * c);
          for (int64_t j = 0; j < group; ++j) {
            float* o = acc + j * kDim + 16 * c;
            _mm512_storeu_ps(
                o, _mm512_fmadd_ps(_mm512_set1_ps(p[j * n_slots + t]), value, _mm512_loadu_ps(o)));
          }
        }
      }
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    float* out_row = a.out + (group_begin * group + r) * kDim;
    if (row_max[r] == kMasked) {  // the query head sees nothing: zeros, and no mass
      std::memset(out_row, 0, sizeof(float) * static_cast<size_t>(kDim));
    } else {
      std::memcpy(out_row, out + r * kDim, sizeof(float) * static_cast<size_t>(kDim));
    }
  }
  if (a.mass != nullptr) {
    for (int64_t g = group_begin; g < group_end; ++g) {
      float* mass = a.mass + g * n_slots;
      std::memset(mass, 0, sizeof(float) * static_cast<size_t>(n_slots));
      if (a.mass_first_query > 0) continue;  // the query is not one whose mass is exported
      for (int64_t r = (g - group_begin) * group; r < (g - group_begin + 1) * group; ++r) {
        if (row_max[r] == kMasked) continue;
        const float* p = scores + r * n_slots;
        int64_t s = 0;
        for (; s + 16 <= n_slots; s += 16) {
          _mm512_storeu_ps(mass + s,
                           _mm512_add_ps(_mm512_loadu_ps(mass + s), _mm512_loadu_ps(p + s)));
        }
        for (; s < n_slots; ++s) mass[s] += p[s];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Prefill attention: simd/prefill_attention.h, for head_dim a multiple of 64. The score tile is
// 6 slots x 64 rows and the output tile 4 rows x 64 columns (24 and 16 accumulators of the 32 ZMM
// registers).
struct PrefillVector : Vec512 {
  static constexpr int kScoreSlots = 6;
  static constexpr int kScoreVectors = 4;
  static constexpr int kValueRows = 4;
  static constexpr int kValueVectors = 4;
};

#include "backends/cpu/simd/prefill_attention.h"

// The AVX-512 kernels where they apply (decode: one query, head_dim 64 or 128; prefill: head_dim a
// multiple of 64), else the AVX2 kernels.
template <class Cache>
bool try_attention(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  const AttentionView a = attention_view(args);
  if (a.n_queries == 1) {
    if (a.head_dim == 64) {
      decode_attention<Cache, 4>(a, group_begin, group_end);
    } else if (a.head_dim == 128) {
      decode_attention<Cache, 8>(a, group_begin, group_end);
    } else {
      return false;
    }
    return true;
  }
  if (a.n_queries < 2 || !prefill_takes(a.head_dim)) return false;
  prefill_attention<Cache>(a, group_begin, group_end);
  return true;
}

}  // namespace

void f32_attention__avx512(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  if (!try_attention<F32Cache>(args, group_begin, group_end))
    f32_attention__avx2(args, group_begin, group_end);
}

void f16_attention__avx512(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  if (!try_attention<F16Cache>(args, group_begin, group_end))
    f16_attention__avx2(args, group_begin, group_end);
}

void f16x4_decode_pairs__avx512(const void* x, const void* w, float* y, int64_t N, int64_t K,
                                int64_t a_begin, int64_t b_begin, int64_t rows) {
  float_groups_pairs<F16x4Weights>(static_cast<const float*>(x),
                                   static_cast<const F16x4Weights::Element*>(w), N, K, y, a_begin,
                                   b_begin, rows);
}

#define EDGELM_SIMD_ISA avx512
#define EDGELM_SIMD_F16X4
#include "backends/cpu/simd/entry_points.h"

}  // namespace edgelm::cpu
