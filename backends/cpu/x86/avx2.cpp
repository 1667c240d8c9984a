// AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c; the table is only
// offered when the CPU reports all three). Semantics are those of backends/cpu/portable/; results
// differ from it only by float rounding, and for Q8_0/Q4_0 matmul by quantizing the activations to
// 8 bits per 32-block (see kQuantizedActivations in tests/parity/cases.cpp).
//
// Nothing here calls an inline or template function from a shared header (see x86.h).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "backends/cpu/rope_table.h"
#include "backends/cpu/x86/x86.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

using x86::Scratch;
using x86::scratch;

#include "backends/cpu/simd/vec_avx2.h"
using Vec = Vec256;
#include "backends/cpu/simd/elementwise.h"
#include "backends/cpu/x_block_scale.inc"

int64_t min_of(int64_t a, int64_t b) {
  return a < b ? a : b;
}

int32_t hsum_i32(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
  return _mm_cvtsi128_si32(v);
}

int32_t hmax_i32(__m256i v) {
  __m128i s = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_max_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_max_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

int32_t hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// How far ahead of the blocks being multiplied the weights are prefetched. Weight rows are read
// once per token, straight from DRAM; the hardware prefetcher alone left the multiply waiting on
// memory (single-thread Q4_0 GEMV went from ~16 to ~20 GB/s with 2 KiB ahead).
constexpr int kPrefetchBytes = 2048;

// ---------------------------------------------------------------------------------------------
// Float-weight matmul (F32, F16, BF16): register tiles of MR rows of x by NR rows of w, each
// accumulator a vector of partial sums along K, reduced once at the end of the row.

// The layouts place the elements: rows one after the other, or in F16x4's groups of four
// interleaved rows (core/quant.h), stored in K segments of kSegment columns. row(w, n, N, K, first)
// is where row n's part of the segment starting at column `first` begins, and offset(j) where its
// element first + j sits from there: in F16x4, row n starts in its group's first chunk of the
// segment, 16 elements after the row before it, and element j is in chunk j / 16, whose rows are
// four chunks apart.
struct RowMajor {
  static constexpr int kGroupRows = 1;
  static constexpr int64_t kSegment = int64_t{1} << 62;  // one segment
  template <class Element>
  static const Element* row(const Element* w, int64_t n, int64_t, int64_t K, int64_t first) {
    return w + n * K + first;
  }
  static int64_t offset(int64_t j) { return j; }
};

struct FourRowsInterleaved {
  static constexpr int kGroupRows = kF16x4Rows;
  static constexpr int64_t kSegment = kF16x4SegmentElements;
  // The segment's groups come after N·first elements of the earlier segments, each group taking
  // four rows of the segment's width (as f16x4_segment_index, which this file must not call:
  // x86.h).
  template <class Element>
  static const Element* row(const Element* w, int64_t n, int64_t N, int64_t K, int64_t first) {
    const int64_t width = min_of(kSegment, K - first);
    return w + N * first + (n / kF16x4Rows) * kF16x4Rows * width + (n % kF16x4Rows) * kF16x4Chunk;
  }
  static int64_t offset(int64_t j) { return kF16x4Rows * (j - j % kF16x4Chunk) + j % kF16x4Chunk; }
};

struct F32Weights : RowMajor {
  using Element = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float at(const float* p) { return *p; }
};

struct F16Weights : RowMajor {
  using Element = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float at(const uint16_t* p) { return Vec256::half_to_float(*p); }
};

struct BF16Weights : RowMajor {
  using Element = uint16_t;
  static __m256 load8(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float at(const uint16_t* p) { return bf16_to_float(*p); }
};

struct F16x4Weights : FourRowsInterleaved {
  using Element = uint16_t;
  static __m256 load8(const uint16_t* p) { return F16Weights::load8(p); }
  static float at(const uint16_t* p) { return F16Weights::at(p); }
};

// y[m0 + i, n0 + j] for i < MR, j < NR over elements [k_begin, k_end) of K. x: [M, K]; w: [N, K]
// in the Weights' layout; y: [M, N]. kSliced: the MR x NR vector accumulators start from `partial`
// unless k_begin is 0, and are left in it unless k_end is K; otherwise [k_begin, k_end) is all of
// K and `partial` is unused (short K, as attention's head_dim, pays no test for slices). At the end
// of K they are summed into y, with the elements past the last multiple of 8. k_begin is a
// multiple of 8.
template <class Weights, int MR, int NR, bool kSliced>
void float_tile(const float* x, const typename Weights::Element* w, float* y, int64_t N, int64_t K,
                int64_t m0, int64_t n0, int64_t k_begin, int64_t k_end, __m256* partial) {
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
    for (int j = 0; j < NR; ++j) wv[j] = Weights::load8(w_rows[j] + Weights::offset(k));
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

// One weight row against one row of x (decode): the row is read front to back as one sequential
// stream, 32 elements a step into four independent accumulators (which hide the FMA latency).
template <class Weights>
float float_row_dot(const float* x, const typename Weights::Element* w, int64_t K) {
  constexpr int kStepBytes = 32 * sizeof(typename Weights::Element);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const char* ahead = reinterpret_cast<const char*>(w + k) + kFloatPrefetchBytes;
    for (int line = 0; line < kStepBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    for (int u = 0; u < 4; ++u) {
      acc[u] =
          _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8 * u), Weights::load8(w + k + 8 * u), acc[u]);
    }
  }
  for (; k + 8 <= K; k += 8)
    acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), Weights::load8(w + k), acc[0]);
  float sum =
      Vec256::sum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; k < K; ++k) sum += x[k] * Weights::at(w + k);
  return sum;
}

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
            acc[2 * r] = _mm256_fmadd_ps(x0, Weights::load8(chunk + 16 * r), acc[2 * r]);
            acc[2 * r + 1] =
                _mm256_fmadd_ps(x1, Weights::load8(chunk + 16 * r + 8), acc[2 * r + 1]);
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
// rows, over elements [k_begin, k_end) of K, with kSliced and `partial` as in float_tile. The
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
        const __m256 wv = Weights::load8(chunk + 16 * r + 8 * half);
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
      y[m0 * N + n] = float_row_dot<Weights>(x + m0 * K, w + n * K, K);
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
      float_tile<Weights, MR, NR, kSliced>(x, w, y, N, K, m0, n, k, k_end, tile_partial);
    for (; n < n_end; ++n, tile_partial += MR)
      float_tile<Weights, MR, 1, kSliced>(x, w, y, N, K, m0, n, k, k_end, tile_partial);
  };
  if (K <= kFloatKBlock) {
    slice.template operator()<false>(0, K);
    return;
  }
  for (int64_t k = 0; k < K; k += kFloatKBlock)
    slice.template operator()<true>(k, min_of(k + kFloatKBlock, K));
}

// Runs band.template operator()<MR>(m0) over the rows of x: bands of kRows rows (4, or 3 for
// tiles that hold four weight rows), then one band of the rows left, so each tile is instantiated
// for MR = 4, 3, 2 and 1 only. With bands of three, one row left over (M = 64: 21 x 3 + 1) would
// run as a GEMV, which reads the weights at a third of the tile's rate; the last four rows are
// taken as two bands of two instead.
template <int kRows = 4, class Band>
void for_each_band(int64_t M, Band&& band) {
  static_assert(kRows == 3 || kRows == 4);
  const int64_t full = kRows == 3 && M % 3 == 1 && M >= 4 ? M - 4 : M;
  int64_t m = 0;
  for (; m + kRows <= full; m += kRows) band.template operator()<kRows>(m);
  if (full != M) {
    band.template operator()<2>(m);
    band.template operator()<2>(m + 2);
    return;
  }
  switch (M - m) {
    case 3:
      band.template operator()<3>(m);
      break;
    case 2:
      band.template operator()<2>(m);
      break;
    case 1:
      band.template operator()<1>(m);
      break;
    default:
      break;
  }
}

// Weight rows per chunk: about 128 KiB of weights, which stay in L2 while every band of x passes.
int64_t weight_chunk_rows(size_t row_bytes) {
  const int64_t rows = static_cast<int64_t>((size_t{128} << 10) / (row_bytes ? row_bytes : 1));
  return rows < 4 ? 4 : rows;
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
  const int64_t rows = weight_chunk_rows(static_cast<size_t>(K) * sizeof(*weights));
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
// Quantized-weight matmul (Q8_0, Q4_0). The rows of x are quantized to 8 bits per 32-block (scale
// max|x|/127, as GGML's Q8_0) once per matmul (by the CPU backend through QuantizedMatmul, or at
// the start of a MatmulFn call), then every block product is an integer dot product scaled by
// d_w·d_x. Blocks are taken eight at a time so the eight integer sums are reduced into
// one vector and scaled with one multiply-add against the eight block scales.

constexpr int kBlock = 32;

// Rows of x quantized for one matmul: a view of a buffer laid out [M·K values][M·blocks scales]
// [M·blocks sums] (kernels.h, quantized_x_bytes).
struct QuantizedX {
  const int8_t* qs;     // [M, K] values, in the byte order the weight format reads (see below)
  const float* scale;   // [M, K / 32] d_x per block
  const int32_t* sum8;  // [M, K / 32] 8·Σ qs per block: Q4_0's offset of 8 folded out
  int64_t blocks;       // K / 32
  int64_t pair_blocks;  // blocks [0, pair_blocks) are stored in pair order
};

// Pair order (Q4_0): blocks 2j and 2j+1 occupy 64 bytes as [2j: 0..15][2j+1: 0..15][2j: 16..31]
// [2j+1: 16..31], matching one 256-bit load of both blocks' nibbles split into low nibbles
// (elements 0..15) and high nibbles (elements 16..31). An odd last block is stored in order.
QuantizedX quantized_view(const void* buffer, int64_t M, int64_t K, bool pair_order) {
  const int64_t blocks = K / kBlock;
  // M·K is a multiple of 32, so the scales after the values stay aligned.
  const auto* base = static_cast<const char*>(buffer);
  const auto* scale = reinterpret_cast<const float*>(base + M * K);
  return {reinterpret_cast<const int8_t*>(base), scale,
          reinterpret_cast<const int32_t*>(scale + M * blocks), blocks,
          pair_order ? blocks & ~int64_t{1} : 0};
}

// Rows [m_begin, m_end) of x into the buffer of an M x K quantized x.
void quantize_rows(const float* x, void* buffer, int64_t M, int64_t K, int64_t m_begin,
                   int64_t m_end, bool pair_order) {
  const QuantizedX view = quantized_view(buffer, M, K, pair_order);
  auto* qs = const_cast<int8_t*>(view.qs);
  auto* scale = const_cast<float*>(view.scale);
  auto* sum8 = const_cast<int32_t*>(view.sum8);
  const int64_t blocks = view.blocks;
  const int64_t pair_blocks = view.pair_blocks;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  // packs_epi32/packs_epi16 interleave the 128-bit halves; this puts the 4-byte groups back.
  const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t m = m_begin; m < m_end; ++m) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* src = x + m * K + b * kBlock;
      __m256 v[4];
      __m256i max_bits = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {
        v[j] = _mm256_loadu_ps(src + 8 * j);
        // The largest |x| bit pattern: the same order as the values, with NaN above infinity.
        max_bits =
            _mm256_max_epi32(max_bits, _mm256_and_si256(_mm256_castps_si256(v[j]), abs_mask));
      }
      const XBlockScale block_scale = x_block_scale(std::bit_cast<float>(hmax_i32(max_bits)));
      __m256i q[4] = {};
      if (block_scale.finite) {
        const __m256 inverse = _mm256_set1_ps(block_scale.inverse);
        for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inverse));
      }
      const __m256i total =
          _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
          unshuffle);
      int8_t* row = qs + m * K;
      if (b < pair_blocks) {
        int8_t* pair = row + (b & ~int64_t{1}) * kBlock + (b & 1) * 16;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(pair), _mm256_castsi256_si128(bytes));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(pair + 32), _mm256_extracti128_si256(bytes, 1));
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + b * kBlock), bytes);
      }
      scale[m * blocks + b] = block_scale.scale;
      sum8[m * blocks + b] = 8 * hsum_i32(total);
    }
  }
}

// All of x quantized into per-thread scratch, for a MatmulFn call.
QuantizedX quantize_x(const float* x, int64_t M, int64_t K, bool pair_order) {
  void* buffer = scratch(Scratch::kActivations,
                         static_cast<size_t>(M * K) + static_cast<size_t>(M * (K / kBlock)) * 8);
  quantize_rows(x, buffer, M, K, 0, M, pair_order);
  return quantized_view(buffer, M, K, pair_order);
}

// Scales of eight consecutive blocks as floats. One gather of the 32-bit words starting at each
// block (the scale is their low half) replaces eight scalar loads and inserts.
template <class Block>
__m256 block_scales8(const Block* w) {
  const __m256i offsets = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i words = _mm256_i32gather_epi32(
      reinterpret_cast<const int*>(w),
      _mm256_mullo_epi32(offsets, _mm256_set1_epi32(static_cast<int>(sizeof(Block)))), 1);
  // Keep the low 16 bits of each word, packed into the low 128 bits in block order.
  const __m256i halves = _mm256_packus_epi32(_mm256_and_si256(words, _mm256_set1_epi32(0xffff)),
                                             _mm256_setzero_si256());
  return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(halves, 0x08)));
}

struct Q4_0Format {
  using Block = BlockQ4_0;
  static constexpr bool kPairOrder = true;
  static constexpr bool kOffset = true;  // nibbles are 0..15; subtract 8·Σx afterwards

  // sums[i] = Σ nibble·x over each of the blocks w[0..8) for the x rows x_rows[i] (pointing at the
  // first of those blocks, in pair order). maddubs multiplies the unsigned nibbles by the signed x
  // bytes; pair sums reach at most 2·15·127, so the 16-bit lanes never saturate.
  template <int MR>
  static void dot8(const Block* w, const int8_t* const* x_rows, __m256i* sums) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i quad[2][MR];  // [blocks 0..3 | 4..7]: lanes [b0, b2 | b1, b3] partly summed
    for (int half = 0; half < 2; ++half) {
      __m256i pair_sums[2][MR];  // lanes 0..3: even block, 4..7: odd block
      for (int p = 0; p < 2; ++p) {
        const int first = 4 * half + 2 * p;
        const __m256i packed = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[first].qs))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[first + 1].qs)), 1);
        const __m256i low = _mm256_and_si256(packed, low4);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
        for (int i = 0; i < MR; ++i) {
          const auto* xp = reinterpret_cast<const __m256i*>(x_rows[i] + first * kBlock);
          const __m256i products =
              _mm256_add_epi16(_mm256_maddubs_epi16(low, _mm256_loadu_si256(xp)),
                               _mm256_maddubs_epi16(high, _mm256_loadu_si256(xp + 1)));
          pair_sums[p][i] = _mm256_madd_epi16(products, ones);
        }
      }
      for (int i = 0; i < MR; ++i)
        quad[half][i] = _mm256_hadd_epi32(pair_sums[0][i], pair_sums[1][i]);
    }
    // hadd leaves [b0, b2, b4, b6 | b1, b3, b5, b7]; the permutation restores block order.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int i = 0; i < MR; ++i)
      sums[i] = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(quad[0][i], quad[1][i]), order);
  }

  // Σ nibble·x for one block; x_low holds x elements 0..15, x_high elements 16..31.
  static int32_t dot1(const Block& w, const int8_t* x_low, const int8_t* x_high) {
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
    const __m128i products =
        _mm_add_epi16(_mm_maddubs_epi16(_mm_and_si128(packed, low4),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x_low))),
                      _mm_maddubs_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x_high))));
    return hsum_i32(_mm_madd_epi16(products, _mm_set1_epi16(1)));
  }
};

struct Q8_0Format {
  using Block = BlockQ8_0;
  static constexpr bool kPairOrder = false;
  static constexpr bool kOffset = false;

  // Signed by signed through maddubs: |w| as the unsigned operand, x with w's sign moved onto it.
  // Pair sums reach at most 2·128·127 < 2^15, so the 16-bit lanes never saturate.
  static __m256i dot_block(__m256i w_abs, __m256i w, const int8_t* x) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xv, w)),
                             _mm256_set1_epi16(1));
  }

  template <int MR>
  static void dot8(const Block* w, const int8_t* const* x_rows, __m256i* sums) {
    __m256i halves[2][MR];  // blocks 0..3 and 4..7, each lanes [b0..b3 | b0..b3] partly summed
    for (int half = 0; half < 2; ++half) {
      __m256i pairs[2][MR];
      for (int p = 0; p < 2; ++p) {
        const int first = 4 * half + 2 * p;
        const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[first].qs));
        const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[first + 1].qs));
        const __m256i w0_abs = _mm256_abs_epi8(w0);
        const __m256i w1_abs = _mm256_abs_epi8(w1);
        for (int i = 0; i < MR; ++i) {
          const int8_t* xp = x_rows[i] + first * kBlock;
          pairs[p][i] =
              _mm256_hadd_epi32(dot_block(w0_abs, w0, xp), dot_block(w1_abs, w1, xp + kBlock));
        }
      }
      for (int i = 0; i < MR; ++i) halves[half][i] = _mm256_hadd_epi32(pairs[0][i], pairs[1][i]);
    }
    for (int i = 0; i < MR; ++i) {
      sums[i] = _mm256_add_epi32(_mm256_permute2x128_si256(halves[0][i], halves[1][i], 0x20),
                                 _mm256_permute2x128_si256(halves[0][i], halves[1][i], 0x31));
    }
  }

  static int32_t dot1(const Block& w, const int8_t* x_low, const int8_t* /*x_high*/) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs));
    return hsum_i32(dot_block(_mm256_abs_epi8(wv), wv, x_low));
  }
};

// y[m0 + i, n] for i < MR: one weight row against MR quantized rows of x.
template <class Format, int MR>
void quant_tile(const QuantizedX& xq, const typename Format::Block* w_row, float* y, int64_t N,
                int64_t K, int64_t m0, int64_t n) {
  const int64_t blocks = xq.blocks;
  const int8_t* x_rows[MR];
  for (int i = 0; i < MR; ++i) x_rows[i] = xq.qs + (m0 + i) * K;
  __m256 acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const int8_t* x_at[MR];
    for (int i = 0; i < MR; ++i) x_at[i] = x_rows[i] + b * kBlock;
    __m256i sums[MR];
    const char* ahead = reinterpret_cast<const char*>(w_row + b) + kPrefetchBytes;
    for (size_t line = 0; line < 8 * sizeof(*w_row); line += 64)
      _mm_prefetch(ahead + line, _MM_HINT_T0);
    Format::template dot8<MR>(w_row + b, x_at, sums);
    const __m256 w_scale = block_scales8(w_row + b);
    for (int i = 0; i < MR; ++i) {
      const int64_t at = (m0 + i) * blocks + b;
      if constexpr (Format::kOffset) {
        sums[i] = _mm256_sub_epi32(
            sums[i], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq.sum8 + at)));
      }
      const __m256 scale = _mm256_mul_ps(w_scale, _mm256_loadu_ps(xq.scale + at));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i]), scale, acc[i]);
    }
  }
  float tail[MR] = {};
  for (; b < blocks; ++b) {
    const float w_scale = Vec256::half_to_float(w_row[b].d);
    for (int i = 0; i < MR; ++i) {
      const int8_t* x_low = x_rows[i] + b * kBlock;
      const int8_t* x_high = x_low + 16;
      if (b < xq.pair_blocks) {
        x_low = x_rows[i] + (b & ~int64_t{1}) * kBlock + (b & 1) * 16;
        x_high = x_low + 32;
      }
      const int64_t at = (m0 + i) * blocks + b;
      int32_t sum = Format::dot1(w_row[b], x_low, x_high);
      if constexpr (Format::kOffset) sum -= xq.sum8[at];
      tail[i] += w_scale * xq.scale[at] * static_cast<float>(sum);
    }
  }
  for (int i = 0; i < MR; ++i) y[(m0 + i) * N + n] = Vec256::sum(acc[i]) + tail[i];
}

template <class Format, int MR>
void quant_band(const QuantizedX& xq, const typename Format::Block* w, float* y, int64_t N,
                int64_t K, int64_t m0, int64_t n_begin, int64_t n_end) {
  for (int64_t n = n_begin; n < n_end; ++n)
    quant_tile<Format, MR>(xq, w + n * xq.blocks, y, N, K, m0, n);
}

template <class Format>
void quant_matmul(const QuantizedX& xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const typename Format::Block*>(w);
  const int64_t chunk = weight_chunk_rows(static_cast<size_t>(xq.blocks) * sizeof(*blocks));
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      quant_band<Format, MR>(xq, blocks, y, N, K, m, chunk_begin, chunk_end);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Q4_0x8 matmul (Q4_0 repacked at load, core/quant.h): each 144-byte record holds one block of
// eight weight rows, laid out so that one 32-bit lane carries one row. A block's four chunk
// vectors, split into low and high nibbles, are multiplied by x's 4-byte groups broadcast to all
// lanes; the eight rows' block sums then land in the eight lanes of one vector and are scaled with
// one multiply-add against the eight row scales. No horizontal reduction anywhere, which is what
// makes decode memory-bound here where the row-by-row Q4_0 kernel was compute-bound on AVX2.

// Sums per lane of a block's nibble·x products stay in 16 bits: each maddubs lane adds two
// products of at most 15·127, and eight of them add up to 30480 < 2^15.
struct Q4_0x8Block {
  __m256i low[4];   // chunk c: elements 4c..4c+3 of each row, one row per lane
  __m256i high[4];  // chunk c: elements 16+4c..16+4c+3

  explicit Q4_0x8Block(const BlockQ4_0x8& record) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m256i packed =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record.qs + 32 * c));
      low[c] = _mm256_and_si256(packed, low4);
      high[c] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
    }
  }

  // Σ nibble·x over the block for each of the eight rows; x: one block of quantized x, in order.
  __m256i dot(const int8_t* x) const {
    __m256i sum_low = _mm256_setzero_si256();
    __m256i sum_high = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      int32_t x_low;
      int32_t x_high;
      std::memcpy(&x_low, x + 4 * c, sizeof(x_low));
      std::memcpy(&x_high, x + 16 + 4 * c, sizeof(x_high));
      sum_low = _mm256_add_epi16(sum_low, _mm256_maddubs_epi16(low[c], _mm256_set1_epi32(x_low)));
      sum_high =
          _mm256_add_epi16(sum_high, _mm256_maddubs_epi16(high[c], _mm256_set1_epi32(x_high)));
    }
    return _mm256_madd_epi16(_mm256_add_epi16(sum_low, sum_high), _mm256_set1_epi16(1));
  }
};

// Blocks [first, end) of one K segment (core/quant.h). The tiles below take one group's records
// of a segment; a segment after the first adds to the sums already in y, which is the same
// additions in the same order as over the whole row.
struct X8Segment {
  int64_t first;
  int64_t end;
};

// Accumulators of a tile of MR rows of y: zero for a row's first segment, else y's sums so far.
template <int MR>
void x8_start(__m256 (&acc)[MR], X8Segment segment, const float* y, int64_t N, int64_t m0,
              int64_t n0) {
  for (int i = 0; i < MR; ++i) {
    acc[i] = segment.first == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + (m0 + i) * N + n0);
  }
}

// acc + the eight rows' products with block b of x_row (quantized row m of x), scaled: one step
// of the decode kernel (x8_row_tiles). Always inlined: as
// calls, the AVX-512 kernels' pair loop took 1.75 times as long as one stream.
[[gnu::always_inline]] inline __m256 q4_0x8_row_step(const QuantizedX& xq,
                                                     const BlockQ4_0x8& record, const int8_t* x_row,
                                                     int64_t m, int64_t b, __m256 acc) {
  const char* ahead = reinterpret_cast<const char*>(&record) + kPrefetchBytes;
  for (size_t line = 0; line < sizeof(BlockQ4_0x8); line += 64)
    _mm_prefetch(ahead + line, _MM_HINT_T0);
  const Q4_0x8Block block(record);
  const __m256 w_scale =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record.d)));
  const int64_t at = m * xq.blocks + b;
  const __m256i sums =
      _mm256_sub_epi32(block.dot(x_row + b * kBlock), _mm256_set1_epi32(xq.sum8[at]));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums),
                         _mm256_mul_ps(w_scale, _mm256_set1_ps(xq.scale[at])), acc);
}

[[gnu::always_inline]] inline __m256 q8_0x8_row_step(const QuantizedX& xq,
                                                     const BlockQ8_0x8& record, const int8_t* x_row,
                                                     int64_t m, int64_t b, __m256 acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  const char* ahead = reinterpret_cast<const char*>(&record) + kPrefetchBytes;
  for (size_t line = 0; line < sizeof(BlockQ8_0x8); line += 64)
    _mm_prefetch(ahead + line, _MM_HINT_T0);
  __m256i sums = _mm256_setzero_si256();
  for (int c = 0; c < kBlock / 4; ++c) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record.qs + 32 * c));
    int32_t group4;
    std::memcpy(&group4, x_row + b * kBlock + 4 * c, sizeof(group4));
    const __m256i x = _mm256_sign_epi8(_mm256_set1_epi32(group4), w);
    sums = _mm256_add_epi32(sums,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), x), ones));
  }
  const __m256 w_scale =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record.d)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums),
                         _mm256_mul_ps(w_scale, _mm256_set1_ps(xq.scale[m * xq.blocks + b])), acc);
}

// y[m0 + i, 8g .. 8g + 8) for i < MR: one group of eight weight rows (its records of `segment`)
// against MR rows of x.
template <int MR>
void q4_0x8_tile(const QuantizedX& xq, const BlockQ4_0x8* group, X8Segment segment, float* y,
                 int64_t N, int64_t K, int64_t m0, int64_t n0) {
  __m256 acc[MR];
  x8_start(acc, segment, y, N, m0, n0);
  for (int64_t b = segment.first; b < segment.end; ++b, ++group) {
    const char* ahead = reinterpret_cast<const char*>(group) + kPrefetchBytes;
    for (size_t line = 0; line < sizeof(BlockQ4_0x8); line += 64)
      _mm_prefetch(ahead + line, _MM_HINT_T0);
    const Q4_0x8Block block(*group);
    const __m256 w_scale =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group->d)));
    for (int i = 0; i < MR; ++i) {
      const int64_t at = (m0 + i) * xq.blocks + b;
      const __m256i sums = _mm256_sub_epi32(block.dot(xq.qs + (m0 + i) * K + b * kBlock),
                                            _mm256_set1_epi32(xq.sum8[at]));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums),
                               _mm256_mul_ps(w_scale, _mm256_set1_ps(xq.scale[at])), acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) _mm256_storeu_ps(y + (m0 + i) * N + n0, acc[i]);
}

// Q8_0x8 (Q8_0 repacked at load, core/quant.h): the same one-row-per-lane scheme over a block's
// eight 4-byte chunks. Signed by signed goes through maddubs as in Q8_0Format::dot_block (|w| as
// the unsigned operand, x with w's sign): a lane's pair sums reach 2·128·127, so each maddubs is
// widened by its own madd before the chunks add up. Chunk-major over the rows of x, so a chunk's
// |w| is computed once for all MR rows and only the MR block sums stay live.
template <int MR>
void q8_0x8_tile(const QuantizedX& xq, const BlockQ8_0x8* group, X8Segment segment, float* y,
                 int64_t N, int64_t K, int64_t m0, int64_t n0) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR];
  x8_start(acc, segment, y, N, m0, n0);
  for (int64_t b = segment.first; b < segment.end; ++b, ++group) {
    const BlockQ8_0x8& record = *group;
    const char* ahead = reinterpret_cast<const char*>(&record) + kPrefetchBytes;
    for (size_t line = 0; line < sizeof(BlockQ8_0x8); line += 64)
      _mm_prefetch(ahead + line, _MM_HINT_T0);
    __m256i sums[MR];
    for (int i = 0; i < MR; ++i) sums[i] = _mm256_setzero_si256();
    for (int c = 0; c < kBlock / 4; ++c) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record.qs + 32 * c));
      const __m256i w_abs = _mm256_abs_epi8(w);
      for (int i = 0; i < MR; ++i) {
        int32_t group4;
        std::memcpy(&group4, xq.qs + (m0 + i) * K + b * kBlock + 4 * c, sizeof(group4));
        const __m256i x = _mm256_sign_epi8(_mm256_set1_epi32(group4), w);
        sums[i] =
            _mm256_add_epi32(sums[i], _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, x), ones));
      }
    }
    const __m256 w_scale =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record.d)));
    for (int i = 0; i < MR; ++i) {
      const __m256 scale =
          _mm256_mul_ps(w_scale, _mm256_set1_ps(xq.scale[(m0 + i) * xq.blocks + b]));
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i]), scale, acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) _mm256_storeu_ps(y + (m0 + i) * N + n0, acc[i]);
}

struct Q4_0x8Kernel {
  using Record = BlockQ4_0x8;
  static constexpr int64_t kSegmentBlocks = kQ4_0x8SegmentBlocks;
  template <int MR>
  static void tile(const QuantizedX& xq, const Record* group, X8Segment segment, float* y,
                   int64_t N, int64_t K, int64_t m0, int64_t n0) {
    q4_0x8_tile<MR>(xq, group, segment, y, N, K, m0, n0);
  }
  [[gnu::always_inline]] static __m256 row_step(const QuantizedX& xq, const Record& record,
                                                const int8_t* x_row, int64_t m, int64_t b,
                                                __m256 acc) {
    return q4_0x8_row_step(xq, record, x_row, m, b, acc);
  }
};

struct Q8_0x8Kernel {
  using Record = BlockQ8_0x8;
  static constexpr int64_t kSegmentBlocks = kQ8_0x8SegmentBlocks;
  template <int MR>
  static void tile(const QuantizedX& xq, const Record* group, X8Segment segment, float* y,
                   int64_t N, int64_t K, int64_t m0, int64_t n0) {
    q8_0x8_tile<MR>(xq, group, segment, y, N, K, m0, n0);
  }
  [[gnu::always_inline]] static __m256 row_step(const QuantizedX& xq, const Record& record,
                                                const int8_t* x_row, int64_t m, int64_t b,
                                                __m256 acc) {
    return q8_0x8_row_step(xq, record, x_row, m, b, acc);
  }
};

// Decode: y[m, a .. a + 8) and, when `b_group` is set, y[m, b .. b + 8): group `a_group` (and
// `b_group`) over one K segment against row m of x, a block record of each in turn. x8_decode_pairs
// reads two ranges side by side as two streams this way (KernelTable::decode_pairs; the CPU
// backend picks the pairs): on the Zen 5 VM one core streams ~40 GB/s from
// two places at once and ~33 from one. With this table (EDGELM_CPU_ISA=avx2 there), alternating
// with the one-stream kernel token by token in the model (1B): Q4_0 5-6 % less time per token
// with one thread, 1.5-3.5 % with two; Q8_0 3-4.5 % with one, 0-3 % with two. The 2 KiB software
// prefetch stays for the machines this table serves: on the Zen 3 VM these kernels needed it. On
// Zen 5 the pairs read faster without it (tg64, runs alternated: Q4_0 one thread 49-50 -> 54-55
// tok/s), but there the AVX-512 table runs (docs/performance.md).
template <class Kernel>
void x8_row_tiles(const QuantizedX& xq, const typename Kernel::Record* a_group,
                  const typename Kernel::Record* b_group, X8Segment segment, float* y, int64_t N,
                  int64_t K, int64_t m, int64_t a, int64_t b) {
  const int8_t* x_row = xq.qs + m * K;
  __m256 acc_a = segment.first == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + m * N + a);
  if (b_group == nullptr) {
    for (int64_t block = segment.first; block < segment.end; ++block, ++a_group)
      acc_a = Kernel::row_step(xq, *a_group, x_row, m, block, acc_a);
    _mm256_storeu_ps(y + m * N + a, acc_a);
    return;
  }
  __m256 acc_b = segment.first == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + m * N + b);
  for (int64_t block = segment.first; block < segment.end; ++block, ++a_group, ++b_group) {
    acc_a = Kernel::row_step(xq, *a_group, x_row, m, block, acc_a);
    acc_b = Kernel::row_step(xq, *b_group, x_row, m, block, acc_b);
  }
  _mm256_storeu_ps(y + m * N + a, acc_a);
  _mm256_storeu_ps(y + m * N + b, acc_b);
}

// Row m of x against one K segment of rows [a_begin, a_begin + rows) beside rows [b_begin,
// b_begin + rows) (b_begin < 0: the first range alone); `records` are the segment's.
template <class Kernel>
void x8_segment_pairs(const QuantizedX& xq, const typename Kernel::Record* records,
                      X8Segment segment, float* y, int64_t N, int64_t K, int64_t m, int64_t a_begin,
                      int64_t b_begin, int64_t rows) {
  const int64_t length = segment.end - segment.first;
  for (int64_t i = 0; i < rows; i += 8) {
    const int64_t a = a_begin + i, b = b_begin + i;
    x8_row_tiles<Kernel>(xq, records + (a / 8) * length,
                         b_begin >= 0 ? records + (b / 8) * length : nullptr, segment, y, N, K, m,
                         a, b);
  }
}

// Decode (one row of x, KernelTable::decode_pairs): rows [a_begin, a_begin + rows) beside rows
// [b_begin, b_begin + rows), one K segment after the other.
template <class Kernel>
void x8_decode_pairs(const QuantizedX& xq, const void* w, float* y, int64_t N, int64_t K,
                     int64_t a_begin, int64_t b_begin, int64_t rows) {
  const auto* all = static_cast<const typename Kernel::Record*>(w);
  for (int64_t first = 0; first < xq.blocks; first += Kernel::kSegmentBlocks) {
    const X8Segment segment{first, min_of(first + Kernel::kSegmentBlocks, xq.blocks)};
    x8_segment_pairs<Kernel>(xq, all + (N / 8) * first, segment, y, N, K, 0, a_begin, b_begin,
                             rows);
  }
}

// Rows [n_begin, n_end) of the band, one K segment after the other (each a contiguous run of
// records over the band's groups).
template <class Kernel, int MR>
void x8_band(const QuantizedX& xq, const typename Kernel::Record* w, float* y, int64_t N, int64_t K,
             int64_t m0, int64_t n_begin, int64_t n_end) {
  for (int64_t first = 0; first < xq.blocks; first += Kernel::kSegmentBlocks) {
    const X8Segment segment{first, min_of(first + Kernel::kSegmentBlocks, xq.blocks)};
    const auto* records = w + (N / 8) * first;  // the segment's records, group after group
    const int64_t length = segment.end - segment.first;
    if constexpr (MR == 1) {
      // One stream, group after group (pairs: x8_decode_pairs).
      x8_segment_pairs<Kernel>(xq, records, segment, y, N, K, m0, n_begin, -1, n_end - n_begin);
      continue;
    }
    for (int64_t n = n_begin; n < n_end; n += 8) {
      Kernel::template tile<MR>(xq, records + (n / 8) * length, segment, y, N, K, m0, n);
    }
  }
}

// Weights in records of eight interleaved rows (Q4_0x8, Q8_0x8); n_begin and n_end are multiples
// of 8.
template <class Kernel>
void x8_matmul(const QuantizedX& xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
               int64_t n_begin, int64_t n_end) {
  using Record = typename Kernel::Record;
  const auto* records = static_cast<const Record*>(w);
  // Whole groups of eight rows per chunk, ~128 KiB of weights as for the other kernels, so that
  // the bands of x reuse a chunk from cache. Decode (one row of x) has one band: it takes the
  // whole range at once, so that each K segment is one run through memory.
  const int64_t rows = weight_chunk_rows(static_cast<size_t>(xq.blocks) * sizeof(Record) / 8);
  const int64_t chunk = M == 1 ? n_end - n_begin : (rows + 7) / 8 * 8;
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      x8_band<Kernel, MR>(xq, records, y, N, K, m, chunk_begin, chunk_end);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Attention

// y[d] += Σ_{s<n} w[s] · rows[s·stride + d] for d < dim. The sums stay in registers across the
// rows (y is read and written once per call), in two sets for even and odd s, so eight FMA chains
// hide the FMA latency.
void weighted_sum(float* y, const float* w, const float* rows, int64_t stride, int64_t n,
                  int64_t dim) {
  auto columns = [&]<int V>(int64_t d) {
    __m256 even[V];
    __m256 odd[V];
    for (int j = 0; j < V; ++j) {
      even[j] = _mm256_loadu_ps(y + d + 8 * j);
      odd[j] = _mm256_setzero_ps();
    }
    int64_t s = 0;
    for (; s + 2 <= n; s += 2) {
      const __m256 w0 = _mm256_broadcast_ss(w + s);
      const __m256 w1 = _mm256_broadcast_ss(w + s + 1);
      const float* r0 = rows + s * stride + d;
      const float* r1 = r0 + stride;
      for (int j = 0; j < V; ++j) {
        even[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(r0 + 8 * j), even[j]);
        odd[j] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(r1 + 8 * j), odd[j]);
      }
    }
    if (s < n) {
      const __m256 w0 = _mm256_broadcast_ss(w + s);
      for (int j = 0; j < V; ++j)
        even[j] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(rows + s * stride + d + 8 * j), even[j]);
    }
    for (int j = 0; j < V; ++j) _mm256_storeu_ps(y + d + 8 * j, _mm256_add_ps(even[j], odd[j]));
  };
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) columns.template operator()<4>(d);
  for (; d + 8 <= dim; d += 8) columns.template operator()<1>(d);
  for (; d < dim; ++d) {
    float sum = y[d];
    for (int64_t s = 0; s < n; ++s) sum += w[s] * rows[s * stride + d];
    y[d] = sum;
  }
}

struct F32Cache {
  using Element = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float value(const float* p) { return *p; }
  // A row of the cache as floats: the row itself.
  static const float* row(const void* cache, int64_t offset, int64_t /*n*/, float* /*buffer*/) {
    return static_cast<const float*>(cache) + offset;
  }
};

struct F16Cache {
  using Element = uint16_t;
  static __m256 load8(const uint16_t* p) { return F16Weights::load8(p); }
  static float value(const uint16_t* p) { return Vec256::half_to_float(*p); }
  // A row of the cache as floats, converted into `buffer` (the attention kernel passes the row of
  // its float panel, so the conversion is the only copy).
  static const float* row(const void* cache, int64_t offset, int64_t n, float* buffer) {
    const uint16_t* half = static_cast<const uint16_t*>(cache) + offset;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(buffer + i, F16Weights::load8(half + i));
    for (; i < n; ++i) buffer[i] = Vec256::half_to_float(half[i]);
    return buffer;
  }
};

// Lane i of the result is the sum of the lanes of a[i].
__m256 reduce8(const __m256* a) {
  // hadd pairs lanes within each 128-bit half: after two rounds, half h of u0 holds the sums of
  // half h of a[0..3], and of u1 those of a[4..7].
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// out[(h·G + j)·out_stride] = q[(h·G + j)·dim ..] · rows[h·dim ..] for h < H, j < G (H·G <= 8):
// one slot's rows of H adjacent kv heads against G queries each, each 8 elements of a row
// converted once, the H·G sums reduced together.
template <class Cache, int H, int G>
void dot_slot(const float* q, const typename Cache::Element* rows, int64_t dim, float* out,
              int64_t out_stride) {
  static_assert(H * G <= 8);
  __m256 acc[8];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 8 <= dim; d += 8) {
    for (int h = 0; h < H; ++h) {
      const __m256 k = Cache::load8(rows + h * dim + d);
      for (int j = 0; j < G; ++j)
        acc[h * G + j] =
            _mm256_fmadd_ps(_mm256_loadu_ps(q + (h * G + j) * dim + d), k, acc[h * G + j]);
    }
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, reduce8(acc));
  for (; d < dim; ++d) {
    for (int h = 0; h < H; ++h) {
      const float k = Cache::value(rows + h * dim + d);
      for (int j = 0; j < G; ++j) sums[h * G + j] += q[(h * G + j) * dim + d] * k;
    }
  }
  for (int i = 0; i < H * G; ++i) out[i * out_stride] = sums[i];
}

// acc[j·dim + d] += Σ_{t<S} p[j·p_stride + t] · rows[t·stride + d] for j < group, d < dim: S
// consecutive slots' V rows of a kv head added into its group's outputs (in L1), each 8 elements
// of a row converted once and each output vector loaded and stored once per S slots.
template <class Cache, int S>
void add_weighted_rows(float* acc, const float* p, int64_t p_stride,
                       const typename Cache::Element* rows, int64_t stride, int64_t dim,
                       int64_t group) {
  int64_t d = 0;
  for (; d + 8 <= dim; d += 8) {
    __m256 v[S];
    for (int t = 0; t < S; ++t) v[t] = Cache::load8(rows + t * stride + d);
    for (int64_t j = 0; j < group; ++j) {
      float* out = acc + j * dim + d;
      __m256 sum = _mm256_loadu_ps(out);
      for (int t = 0; t < S; ++t)
        sum = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j * p_stride + t), v[t], sum);
      _mm256_storeu_ps(out, sum);
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

#include "backends/cpu/simd_attention.inc"

// The vector operations of simd_prefill_attention.inc: the score tile is 5 slots x 16 rows and the
// output tile 4 rows x 16 columns (10 and 8 accumulators of the 16 YMM registers). micro_bench (64
// queries, F16 cache, one thread, Zen 5 VM): 82-102 GFLOP/s, against 62-80 for the panel kernel;
// 6 x 16 or 3 x 32 score tiles and 2 x 32 output tiles measured within 5 % of these.
struct PrefillVector {
  using V = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kScoreSlots = 5;
  static constexpr int kScoreVectors = 2;
  static constexpr int kValueRows = 4;
  static constexpr int kValueVectors = 2;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V exp(V x) { return vec_exp(x); }
  static V visible(V score, int32_t slot_position, const int32_t* row_positions) {
    const __m256i hidden =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(slot_position),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_positions)));
    return _mm256_blendv_ps(score, _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(hidden));
  }
  static V seen_or_zero(V max_value, V value) {
    return _mm256_and_ps(_mm256_cmp_ps(max_value, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ), value);
  }
  static float sum(V v) { return Vec256::sum(v); }
};

#include "backends/cpu/simd_prefill_attention.inc"

// Prefill with whole 16-column output tiles in a row: the outer-product kernel; everything else
// the panel kernel (simd_attention.inc).
template <class Cache>
void attention(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  const AttentionView a = attention_view(args);
  if (a.n_queries > 1 && prefill_takes(a.head_dim)) {
    prefill_attention<Cache>(a, group_begin, group_end);
  } else {
    attention_groups<Cache>(args, group_begin, group_end);
  }
}

}  // namespace

void f32_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end) {
  float_matmul<F32Weights>(x, w, y, M, N, K, n_begin, n_end);
}

void f16_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                      int64_t n_begin, int64_t n_end) {
  float_matmul<F16Weights>(x, w, y, M, N, K, n_begin, n_end);
}

void bf16_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end) {
  float_matmul<BF16Weights>(x, w, y, M, N, K, n_begin, n_end);
}

void f16x4_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                        int64_t n_begin, int64_t n_end) {
  float_matmul<F16x4Weights>(x, w, y, M, N, K, n_begin, n_end);
}

// How each format wants x: Q4_0 in pair order, the others plain.
void quantize_x_pairs__avx2(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                            int64_t m_end) {
  quantize_rows(x, xq, M, K, m_begin, m_end, /*pair_order=*/true);
}

void quantize_x__avx2(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                      int64_t m_end) {
  quantize_rows(x, xq, M, K, m_begin, m_end, /*pair_order=*/false);
}

void q8_0_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end) {
  static_assert(!Q8_0Format::kPairOrder);
  quant_matmul<Q8_0Format>(quantized_view(xq, M, K, false), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end) {
  static_assert(Q4_0Format::kPairOrder);
  quant_matmul<Q4_0Format>(quantized_view(xq, M, K, true), w, y, M, N, K, n_begin, n_end);
}

void q4_0x8_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<Q4_0x8Kernel>(quantized_view(xq, M, K, false), w, y, M, N, K, n_begin, n_end);
}

void q8_0x8_matmul_xq__avx2(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<Q8_0x8Kernel>(quantized_view(xq, M, K, false), w, y, M, N, K, n_begin, n_end);
}

void q4_0x8_decode_pairs__avx2(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                               int64_t a_begin, int64_t b_begin, int64_t rows) {
  x8_decode_pairs<Q4_0x8Kernel>(quantized_view(xq, 1, K, false), w, y, N, K, a_begin, b_begin,
                                rows);
}

void q8_0x8_decode_pairs__avx2(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                               int64_t a_begin, int64_t b_begin, int64_t rows) {
  x8_decode_pairs<Q8_0x8Kernel>(quantized_view(xq, 1, K, false), w, y, N, K, a_begin, b_begin,
                                rows);
}

// The one-step forms quantize all of x into per-thread scratch first.
void q8_0_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end) {
  quant_matmul<Q8_0Format>(quantize_x(x, M, K, false), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                       int64_t n_begin, int64_t n_end) {
  quant_matmul<Q4_0Format>(quantize_x(x, M, K, true), w, y, M, N, K, n_begin, n_end);
}

void q4_0x8_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end) {
  x8_matmul<Q4_0x8Kernel>(quantize_x(x, M, K, false), w, y, M, N, K, n_begin, n_end);
}

void q8_0x8_matmul__avx2(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end) {
  x8_matmul<Q8_0x8Kernel>(quantize_x(x, M, K, false), w, y, M, N, K, n_begin, n_end);
}

void f32_rms_norm__avx2(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  rms_norm(x, weight, y, dim, eps);
}

void f32_rope__avx2(const float* x, float* out, int64_t n_heads, int64_t head_dim, int32_t position,
                    const float* inv_freq) {
  rope(x, out, n_heads, head_dim, position, inv_freq);
}

void f32_softmax__avx2(const float* x, float* y, int64_t n) {
  softmax(x, y, n);
}

void f32_silu_mul__avx2(const float* gate, const float* up, float* out, int64_t n) {
  silu_mul(gate, up, out, n);
}

void f32_add__avx2(const float* a, const float* b, float* out, int64_t n) {
  add(a, b, out, n);
}

void f32_attention__avx2(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  attention<F32Cache>(args, group_begin, group_end);
}

void f16_attention__avx2(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  attention<F16Cache>(args, group_begin, group_end);
}

void f16_to_f32__avx2(const void* src, float* dst, int64_t n) {
  f16_to_f32(src, dst, n);
}

void f16_from_f32__avx2(const float* src, void* dst, int64_t n) {
  f16_from_f32(src, dst, n);
}

void q8_0_to_f32__avx2(const void* src, float* dst, int64_t n) {
  q8_0_to_f32(src, dst, n);
}

void q4_0_to_f32__avx2(const void* src, float* dst, int64_t n) {
  q4_0_to_f32(src, dst, n);
}

}  // namespace edgelm::cpu
