// AVX2 quantized matmul kernels (this file is compiled with -mavx2 -mfma -mf16c, as avx2.cpp):
// the integer policy and weight formats of simd/quant_matmul.h, whose drivers do the rest. The
// integer dot products go through maddubs (unsigned x signed bytes into 16-bit pairs) and madd.
// Results differ from the portable kernels only by quantizing the activations to 8 bits per
// 32-block (see kQuantizedActivations in tests/parity/cases.cpp) and float rounding.
//
// Nothing here calls an inline or template function from a shared header (see x86.h).
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/x86/x86.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

#include "backends/cpu/simd/bands.h"
#include "backends/cpu/simd/quant_matmul.h"
#include "backends/cpu/simd/vec_avx2.h"
#include "backends/cpu/simd/x_block_scale.h"

int32_t hmax_i32(__m256i v) {
  __m128i s = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_max_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_max_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The integer policy of simd/quant_matmul.h: 256-bit accumulators, eight blocks a step.
struct Avx2Int : Int256 {
  // Weight rows are read once per token, straight from DRAM; the hardware prefetcher alone left
  // the multiply waiting on memory (single-thread Q4_0 GEMV went from ~16 to ~20 GB/s with 2 KiB
  // ahead).
  static constexpr int kPrefetchBytes = 2048;
  // About 128 KiB of weights per chunk, which stay in L2 while every band of x passes.
  static constexpr size_t kChunkBytes = size_t{128} << 10;

  static BlockQuant quantize_block(const float* src, int8_t* at_low, int8_t* at_high, bool biased) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    // packs_epi32/packs_epi16 interleave the 128-bit halves; this puts the 4-byte groups back.
    const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 v[4];
    __m256i max_bits = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(src + 8 * j);
      // The largest |x| bit pattern: the same order as the values, with NaN above infinity.
      max_bits = _mm256_max_epi32(max_bits, _mm256_and_si256(_mm256_castps_si256(v[j]), abs_mask));
    }
    const XBlockScale block_scale = x_block_scale(std::bit_cast<float>(hmax_i32(max_bits)));
    __m256i q[4] = {};
    if (block_scale.finite) {
      const __m256 inverse = _mm256_set1_ps(block_scale.inverse);
      for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], inverse));
    }
    const __m256i total =
        _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m256i bytes = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
        unshuffle);
    // |q| ≤ 127: q + 128 is q with its top bit flipped.
    if (biased) bytes = _mm256_xor_si256(bytes, _mm256_set1_epi8(static_cast<char>(0x80)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at_low), _mm256_castsi256_si128(bytes));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at_high), _mm256_extracti128_si256(bytes, 1));
    return {block_scale.scale, hsum_i32(total)};
  }
};

// ---------------------------------------------------------------------------------------------
// Row-major weights (Q8_0, Q4_0).

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
  static constexpr int kGroup = 2;  // one 256-bit load holds two blocks' nibbles
  static constexpr bool kBiasedX = false;
  static constexpr bool kOffset = true;  // nibbles are 0..15; subtract 8·Σx afterwards
  static __m256 scales(const Block* w) { return block_scales8(w); }

  // sums[i] = Σ nibble·x over each of the blocks w[0..8) for the x rows x_rows[i] (pointing at the
  // first of those blocks, in group order). maddubs multiplies the unsigned nibbles by the signed x
  // bytes; pair sums reach at most 2·15·127, so the 16-bit lanes never saturate.
  template <int MR>
  static void dot(const Block* w, const int8_t* const* x_rows, __m256i* sums) {
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
  static constexpr int kGroup = 1;
  static constexpr bool kBiasedX = false;  // x signed: maddubs takes |w| as its unsigned side
  static constexpr bool kOffset = false;
  static __m256 scales(const Block* w) { return block_scales8(w); }

  // Signed by signed through maddubs: |w| as the unsigned operand, x with w's sign moved onto it.
  // Pair sums reach at most 2·128·127 < 2^15, so the 16-bit lanes never saturate.
  static __m256i dot_block(__m256i w_abs, __m256i w, const int8_t* x) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xv, w)),
                             _mm256_set1_epi16(1));
  }

  template <int MR>
  static void dot(const Block* w, const int8_t* const* x_rows, __m256i* sums) {
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

// Accumulators of a tile of MR rows of y: zero for a row's first segment, else y's sums so far.
template <int MR>
void x8_start(__m256 (&acc)[MR], X8Segment segment, const float* y, int64_t N, int64_t m0,
              int64_t n0) {
  for (int i = 0; i < MR; ++i) {
    acc[i] = segment.first == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(y + (m0 + i) * N + n0);
  }
}

// acc + the eight rows' products with block b of x_row (quantized row m of x), scaled: one step
// of the decode kernel (x8_row_tiles, which prefetches). Always inlined: as calls, the AVX-512
// kernels' pair loop took 1.75 times as long as one stream.
[[gnu::always_inline]] inline __m256 q4_0x8_row_step(const QuantizedX& xq,
                                                     const BlockQ4_0x8& record, const int8_t* x_row,
                                                     int64_t m, int64_t b, __m256 acc) {
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
    const char* ahead = reinterpret_cast<const char*>(group) + Avx2Int::kPrefetchBytes;
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
    const char* ahead = reinterpret_cast<const char*>(&record) + Avx2Int::kPrefetchBytes;
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

// The interleaved kernels of simd/quant_matmul.h: prefill tiles of one group (eight rows); decode
// prefetches each record 2 KiB ahead in both its forms. On the Zen 3 VM these kernels needed it;
// on Zen 5 the pairs read faster without it (tg64, runs alternated: Q4_0 one thread 49-50 -> 54-55
// tok/s), but there the AVX-512 table runs (docs/performance.md). With this table
// (EDGELM_CPU_ISA=avx2 on the Zen 5 VM), the two-stream decode against one stream, token by token
// in the model (1B): Q4_0 5-6 % less time per token with one thread, 1.5-3.5 % with two; Q8_0 3-4.5
// % with one, 0-3 % with two.
template <class Record_, int kSegmentBlocks_>
struct X8Kernel {
  using Record = Record_;
  static constexpr int64_t kSegmentBlocks = kSegmentBlocks_;
  static constexpr int64_t kTileRows = 8;
  static constexpr bool kStreamPrefetch = true;
  static constexpr int kDecodePrefetchBytes = Avx2Int::kPrefetchBytes;
};

struct Q4_0x8Kernel : X8Kernel<BlockQ4_0x8, kQ4_0x8SegmentBlocks> {
  template <int MR>
  static void tile(const QuantizedX& xq, const Record* group, int64_t /*length*/, X8Segment segment,
                   float* y, int64_t N, int64_t K, int64_t m0, int64_t n0, int64_t /*rows: 8*/) {
    q4_0x8_tile<MR>(xq, group, segment, y, N, K, m0, n0);
  }
  [[gnu::always_inline]] static __m256 row_step(const QuantizedX& xq, const Record& record,
                                                const int8_t* x_row, int64_t m, int64_t b,
                                                __m256 acc) {
    return q4_0x8_row_step(xq, record, x_row, m, b, acc);
  }
};

struct Q8_0x8Kernel : X8Kernel<BlockQ8_0x8, kQ8_0x8SegmentBlocks> {
  template <int MR>
  static void tile(const QuantizedX& xq, const Record* group, int64_t /*length*/, X8Segment segment,
                   float* y, int64_t N, int64_t K, int64_t m0, int64_t n0, int64_t /*rows: 8*/) {
    q8_0x8_tile<MR>(xq, group, segment, y, N, K, m0, n0);
  }
  [[gnu::always_inline]] static __m256 row_step(const QuantizedX& xq, const Record& record,
                                                const int8_t* x_row, int64_t m, int64_t b,
                                                __m256 acc) {
    return q8_0x8_row_step(xq, record, x_row, m, b, acc);
  }
};

// The byte contract of simd/block_matmul.h: maddubs pairs, widened by madd.
struct Avx2Dot {
  static __m256i dot(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};
using BlockQuants = Quants256<Avx2Dot>;
using BlockPanel = Panel256;

// x for the sub-block family: Q8_0 rounding, element order.
void quantize_plain(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                    int64_t m_end) {
  quantize_rows<Avx2Int>(x, xq, M, K, m_begin, m_end, /*group=*/1, /*biased=*/false);
}

#include "backends/cpu/simd/block_matmul.h"

// The names simd/entry_points.h instantiates the quantized matmuls with.
using QuantInt = Avx2Int;
using Q4_0x8Tile = Q4_0x8Kernel;
using Q8_0x8Tile = Q8_0x8Kernel;

}  // namespace

// How each format wants x: Q4_0 in groups of two blocks, the others plain.
void quantize_x_pairs__avx2(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                            int64_t m_end) {
  quantize_rows<Avx2Int>(x, xq, M, K, m_begin, m_end, Q4_0Format::kGroup, Q4_0Format::kBiasedX);
}

void quantize_x__avx2(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                      int64_t m_end) {
  quantize_rows<Avx2Int>(x, xq, M, K, m_begin, m_end, /*group=*/1, /*biased=*/false);
}

#define EDGELM_SIMD_ISA avx2
#define EDGELM_SIMD_X86_QUANT
#define EDGELM_SIMD_BLOCK_QUANT
#include "backends/cpu/simd/entry_points.h"

}  // namespace edgelm::cpu
