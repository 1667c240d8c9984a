// AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c; the table is only
// offered when the CPU reports all three): the float matmuls, the attention helpers, and the
// element-wise and attention families of simd/ instantiated over Vec256; the quantized matmuls are
// in avx2_quant.cpp. Semantics are those of backends/cpu/portable/; results differ from it only by
// float rounding.
//
// Nothing here calls an inline or template function from a shared header (see x86.h).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "backends/cpu/kernels.h"
#include "backends/cpu/rope_table.h"
#include "backends/cpu/x86/x86.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

#include "backends/cpu/simd/vec_avx2.h"
using Vec = Vec256;
#include "backends/cpu/simd/bands.h"
#include "backends/cpu/simd/elementwise.h"
#include "backends/cpu/simd/float_weights.h"

// Weights per chunk of the float GEMM: about 128 KiB, which stay in L2 while every band of x
// passes.
constexpr size_t kChunkBytes = size_t{128} << 10;

// ---------------------------------------------------------------------------------------------
// Float-weight matmul (F32, F16, BF16): register tiles of MR rows of x by NR rows of w, each
// accumulator a vector of partial sums along K, reduced once at the end of the row.

// y[m0 + i, n0 + j] for i < MR, j < NR over elements [k_begin, k_end) of K. x: [M, K]; w: [N, K]
// in the Weights' layout; y: [M, N]. kSliced: the MR x NR vector accumulators start from `partial`
// unless k_begin is 0, and are left in it unless k_end is K; otherwise [k_begin, k_end) is all of
// K and `partial` is unused (short K, as attention's head_dim, pays no test for slices). At the end
// of K they are summed into y, with the elements past the last multiple of 8. k_begin is a
// multiple of 8.
template <class Weights, int MR, int NR, bool kSliced>
void sliced_float_tile(const float* x, const typename Weights::Element* w, float* y, int64_t N,
                       int64_t K, int64_t m0, int64_t n0, int64_t k_begin, int64_t k_end,
                       __m256* partial) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j)
      acc[i][j] = kSliced && k_begin > 0 ? partial[i * NR + j] : _mm256_setzero_ps();
  }
  const float* x_rows[MR];
  const typename Weights::Element* w_rows[NR];
  for (int i = 0; i < MR; ++i) x_rows[i] = x + (m0 + i) * K;
  // Row-major weights only (one segment): F16x4 takes group_tile.
  for (int j = 0; j < NR; ++j) w_rows[j] = Weights::row(w, n0 + j, N, K, 0);
  int64_t k = k_begin;
  for (; k + 8 <= k_end; k += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j)
      wv[j] = Weights::template load<Vec256>(w_rows[j] + Weights::offset(k));
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x_rows[i] + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (kSliced && k_end < K) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) partial[i * NR + j] = acc[i][j];
    return;
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float sum = Vec256::sum(acc[i][j]);
      for (int64_t t = k; t < K; ++t)
        sum += x_rows[i][t] * Weights::at(w_rows[j] + Weights::offset(t));
      y[(m0 + i) * N + n0 + j] = sum;
    }
  }
}

// How far ahead the float GEMV prefetches its weight row. F16 decode on Zen 3 (1B, one thread):
// none 5.9-6.2 tok/s, 512 B 6.6-6.9, 768-1024 B 6.4-7.1, 1536 B 6.2, 2 KiB and more below none;
// the quantized kernels' 2 KiB is too far for a stream that is consumed this fast.
constexpr int kFloatPrefetchBytes = 1024;

// Elements of K per slice in the float GEMM (a multiple of 8): a band of four rows of x is then
// 4 x 1024 floats, 16 KiB, which stays in L1 across the tiles of a weight chunk. Unsliced, the
// band is 32 KiB at K = 2048 (128 KiB at 8192), all of L1 or more, and x came from L2 along with
// the weights. Zen 4 running this table, micro_bench M = 64, one thread: F16 72-75 -> 83-93
// GFLOP/s (slices of 256: 80-87, 512: 75-92); F32 63-76 -> 74-81.
constexpr int64_t kFloatKBlock = 1024;
static_assert(kF16x4SegmentElements % kFloatKBlock == 0, "a K slice lies in one F16x4 segment");

// Groups of four interleaved weight rows (F16x4), rows [n_begin, n_end), against one row of x
// (decode): y[n_begin .. n_end). Each group's chunks are read front to back, and each 16 elements
// of x are loaded once for all four rows: row by row, x is read again for every row, and once it no
// longer fits in L1 beside the weights streaming through (K = 8192: 32 KiB of floats) those reads
// compete with the weight stream (see the AVX-512 kernel, which also explains the batches of groups
// taking one K segment after the other). No software prefetch, as in the AVX-512 kernel: on the
// Zen 4 VM running this table, prefetching 1 KiB ahead (float_row_dot's distance) held the 1B
// matrices to 13-23 GB/s on one thread, against 18-25 without.
template <class Weights>
void float_groups_dot4(const float* x, const typename Weights::Element* w, int64_t N, int64_t K,
                       float* y, int64_t n_begin, int64_t n_end) {
  static_assert(Weights::kGroupRows == 4 && kF16x4Chunk == 16);
  constexpr int64_t kBatch = 16;  // groups
  __m256 batch[kBatch][8];
  for (int64_t n0 = n_begin; n0 < n_end; n0 += 4 * kBatch) {
    const int64_t n1 = min_of(n0 + 4 * kBatch, n_end);
    for (int64_t first = 0; first < K; first += Weights::kSegment) {
      const int64_t end = min_of(first + Weights::kSegment, K);
      for (int64_t n = n0; n < n1; n += 4) {
        __m256 acc[8];
        for (int u = 0; u < 8; ++u)
          acc[u] = first == 0 ? _mm256_setzero_ps() : batch[(n - n0) / 4][u];
        const typename Weights::Element* group = Weights::row(w, n, N, K, first);
        for (int64_t k = first; k < end; k += 16) {
          const typename Weights::Element* chunk = group + 4 * (k - first);
          const __m256 x0 = _mm256_loadu_ps(x + k);
          const __m256 x1 = _mm256_loadu_ps(x + k + 8);
          for (int r = 0; r < 4; ++r) {
            acc[2 * r] =
                _mm256_fmadd_ps(x0, Weights::template load<Vec256>(chunk + 16 * r), acc[2 * r]);
            acc[2 * r + 1] = _mm256_fmadd_ps(x1, Weights::template load<Vec256>(chunk + 16 * r + 8),
                                             acc[2 * r + 1]);
          }
        }
        for (int u = 0; u < 8; ++u) batch[(n - n0) / 4][u] = acc[u];
      }
    }
    for (int64_t n = n0; n < n1; n += 4) {
      const __m256* acc = batch[(n - n0) / 4];
      for (int r = 0; r < 4; ++r) y[n + r] = Vec256::sum(_mm256_add_ps(acc[2 * r], acc[2 * r + 1]));
    }
  }
}

// y[m0 + i, n0 + r] for i < MR, r < 4: MR rows of x against one group of F16x4's four interleaved
// rows, over elements [k_begin, k_end) of K, with kSliced and `partial` as in
// sliced_float_tile. The
// elements lie in one K segment, which starts at column `first` and where the group's chunks begin
// at `group`. The group's chunks are read front to back; each 8 elements of x serve all four rows.
// MR = 3 at most: 12 accumulators, three x vectors and one weight vector fill the 16 YMM registers.
// k_begin and K are multiples of 16 (F16x4 holds whole chunks).
template <class Weights, int MR, bool kSliced>
void group_tile(const float* x, const typename Weights::Element* group, int64_t first, float* y,
                int64_t N, int64_t K, int64_t m0, int64_t n0, int64_t k_begin, int64_t k_end,
                __m256* partial) {
  static_assert(Weights::kGroupRows == 4 && kF16x4Chunk == 16 && MR <= 3);
  __m256 acc[MR][4];
  for (int i = 0; i < MR; ++i) {
    for (int r = 0; r < 4; ++r)
      acc[i][r] = kSliced && k_begin > 0 ? partial[i * 4 + r] : _mm256_setzero_ps();
  }
  const float* x_rows[MR];
  for (int i = 0; i < MR; ++i) x_rows[i] = x + (m0 + i) * K;
  for (int64_t k = k_begin; k < k_end; k += 16) {
    const typename Weights::Element* chunk = group + 4 * (k - first);
    for (int half = 0; half < 2; ++half) {
      __m256 xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_ps(x_rows[i] + k + 8 * half);
      for (int r = 0; r < 4; ++r) {
        const __m256 wv = Weights::template load<Vec256>(chunk + 16 * r + 8 * half);
        for (int i = 0; i < MR; ++i) acc[i][r] = _mm256_fmadd_ps(xv[i], wv, acc[i][r]);
      }
    }
  }
  if (kSliced && k_end < K) {
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < 4; ++r) partial[i * 4 + r] = acc[i][r];
    return;
  }
  for (int i = 0; i < MR; ++i)
    for (int r = 0; r < 4; ++r) y[(m0 + i) * N + n0 + r] = Vec256::sum(acc[i][r]);
}

// One band of MR rows of x against weight rows [n_begin, n_end), three weight rows per tile: the
// MR x 3 = 12 accumulators, three weight vectors and an x vector fill the 16 YMM registers, and 12
// independent FMA chains keep both FMA pipes busy through their 4-cycle latency where 8 did not
// (Zen 3, F16 prefill GEMM at M = 64: 48 -> 65 GFLOP/s; 3 x 4 spilled the converted weights and
// ran at 39); F16x4 takes one group of four rows per tile instead (group_tile, bands of three rows
// of x). K is taken kFloatKBlock elements at a time across all the tiles of the band, so the
// band's slice of x stays in L1 while the weight rows pass (see kFloatKBlock); `partial` holds the
// tiles' accumulators between slices.
//
// A single row of x (decode) takes the weight rows one at a time: several rows read side by side
// are as many interleaved DRAM streams, which measured slower than one sequential stream
// (AVX-512 kernels, F16: ~15 %).
template <class Weights, int MR>
void float_band(const float* x, const typename Weights::Element* w, float* y, int64_t N, int64_t K,
                int64_t m0, int64_t n_begin, int64_t n_end, __m256* partial) {
  if constexpr (MR == 1 && Weights::kGroupRows == 4) {
    float_groups_dot4<Weights>(x + m0 * K, w, N, K, y + m0 * N, n_begin, n_end);
    return;
  } else if constexpr (MR == 1) {
    for (int64_t n = n_begin; n < n_end; ++n)
      y[m0 * N + n] = float_row_dot<Vec256, Weights, kFloatPrefetchBytes>(x + m0 * K, w + n * K, K);
    return;
  }
  // Every tile of the band over elements [k, k_end) of K.
  auto slice = [&]<bool kSliced>(int64_t k, int64_t k_end) {
    if constexpr (Weights::kGroupRows == 4) {
      // Slices never cross a segment (kF16x4SegmentElements is a multiple of kFloatKBlock).
      const int64_t first = k - k % Weights::kSegment;
      for (int64_t n = n_begin; n < n_end; n += 4) {
        group_tile<Weights, MR, kSliced>(x, Weights::row(w, n, N, K, first), first, y, N, K, m0, n,
                                         k, k_end, partial + (n - n_begin) * MR);
      }
      return;
    }
    constexpr int NR = 3;
    __m256* tile_partial = partial;
    int64_t n = n_begin;
    for (; n + NR <= n_end; n += NR, tile_partial += MR * NR)
      sliced_float_tile<Weights, MR, NR, kSliced>(x, w, y, N, K, m0, n, k, k_end, tile_partial);
    for (; n < n_end; ++n, tile_partial += MR)
      sliced_float_tile<Weights, MR, 1, kSliced>(x, w, y, N, K, m0, n, k, k_end, tile_partial);
  };
  if (K <= kFloatKBlock) {
    slice.template operator()<false>(0, K);
    return;
  }
  for (int64_t k = 0; k < K; k += kFloatKBlock)
    slice.template operator()<true>(k, min_of(k + kFloatKBlock, K));
}

// When K is sliced, the float GEMM's weight chunks hold at most this many rows, so the tiles'
// partial sums of one band fit a fixed buffer on the stack (4 x 32 bytes per row, 6 KiB).
constexpr int64_t kFloatChunkRowsMax = 48;

template <class Weights>
void float_matmul(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* weights = static_cast<const typename Weights::Element*>(w);
  // Whole 3-row tiles per chunk: a chunk of 32 rows left 2 rows to the 4 x 1 tile, which took
  // 18 % of F16 prefill time. With F16x4, whole groups of four rows too (decode takes a group at
  // a time): multiples of 12.
  constexpr int64_t kRows = Weights::kGroupRows == 4 ? 12 : 3;
  static_assert(kFloatChunkRowsMax % kRows == 0);
  const int64_t rows = weight_chunk_rows<kChunkBytes>(static_cast<size_t>(K) * sizeof(*weights));
  const int64_t whole = (rows + kRows - 1) / kRows * kRows;
  // Decode (one row of x) has one band and nothing to reuse from cache: it takes the whole range,
  // so that float_groups_dot4 streams each K segment over many groups.
  const int64_t chunk = M == 1             ? n_end - n_begin
                        : K > kFloatKBlock ? std::min(whole, kFloatChunkRowsMax)
                                           : whole;
  __m256 partial[kFloatChunkRowsMax * 4];
  constexpr int kBandRows = Weights::kGroupRows == 4 ? 3 : 4;
  const int64_t bands = (M + kBandRows - 1) / kBandRows;
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    const int64_t next_rows = min_of(chunk, n_end - chunk_end);
    for_each_band<kBandRows>(M, [&]<int MR>(int64_t m) {
      // The next chunk in parts, one per band, as in the AVX-512 file (Zen 5 VM, F16 prefill,
      // one thread: +3-6 %).
      for (int64_t first = 0; M > 1 && next_rows > 0 && first < K; first += Weights::kSegment) {
        const int64_t width = min_of(Weights::kSegment, K - first);
        x86::prefetch_part(Weights::row(weights, chunk_end, N, K, first),
                           next_rows * width * static_cast<int64_t>(sizeof(*weights)),
                           m / kBandRows, bands);
      }
      float_band<Weights, MR>(x, weights, y, N, K, m, chunk_begin, chunk_end, partial);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Attention: the families of simd/attention.h (the panel kernel and decode) and
// simd/prefill_attention.h (prefill as outer products) over the cache rows of simd/cache_rows.h.

#include "backends/cpu/simd/cache_rows.h"

// The vector operations of simd/prefill_attention.h: the score tile is 5 slots x 16 rows and the
// output tile 4 rows x 16 columns (10 and 8 accumulators of the 16 YMM registers). micro_bench (64
// queries, F16 cache, one thread, Zen 5 VM): 82-102 GFLOP/s, against 62-80 for the panel kernel;
// 6 x 16 or 3 x 32 score tiles and 2 x 32 output tiles measured within 5 % of these.
struct PrefillVector : Vec256 {
  static constexpr int kScoreSlots = 5;
  static constexpr int kScoreVectors = 2;
  static constexpr int kValueRows = 4;
  static constexpr int kValueVectors = 2;
};

#include "backends/cpu/simd/prefill_attention.h"

// After prefill_attention.h, which its attention() dispatches to.
#include "backends/cpu/simd/attention.h"

}  // namespace

#define EDGELM_SIMD_ISA avx2
#define EDGELM_SIMD_F16X4
#define EDGELM_SIMD_ATTENTION
#define EDGELM_SIMD_CONVERSIONS
#include "backends/cpu/simd/entry_points.h"

}  // namespace edgelm::cpu
