// AVX-512 quantized matmul kernels (this file is compiled with the AVX-512 flags, as avx512.cpp):
// the integer policy and weight formats of simd/quant_matmul.h, whose drivers do the rest. The
// integer dot products are VNNI's vpdpbusd (unsigned x signed bytes summed into 32-bit lanes).
// Results differ from the portable kernels only by quantizing the activations to 8 bits per
// 32-block (see kQuantizedActivations in tests/parity/cases.cpp) and float rounding.
//
// Nothing here calls an inline or template function from a shared header (see x86.h).

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "backends/cpu/x86/avx512_intrinsics.h"
#include "backends/cpu/x86/x86.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

#include "backends/cpu/simd/bands.h"
#include "backends/cpu/simd/quant_matmul.h"
#include "backends/cpu/simd/vec_avx2.h"
#include "backends/cpu/simd/vec_avx512.h"
#include "backends/cpu/simd/x_block_scale.h"

int32_t hsum_i32(__m512i v) {
  return hsum_i32(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}

// The integer policy of simd/quant_matmul.h: the row-major kernels keep 256-bit float accumulators
// (eight blocks a step, as AVX2); the block sums come from ZMM vpdpbusd.
struct Avx512Int : Int256 {
  // How far ahead of the blocks being multiplied the weights are prefetched (prefill and the
  // row-major kernels): weight rows are read once per token, straight from DRAM; the hardware
  // prefetcher alone left the multiply waiting on memory (single-thread Q4_0 GEMV went from ~16 to
  // ~20 GB/s with 2 KiB ahead).
  static constexpr int kPrefetchBytes = 2048;
  // About 128 KiB of weights per chunk, which stay in L2 while every band of x passes.
  static constexpr size_t kChunkBytes = size_t{128} << 10;

  static BlockQuant quantize_block(const float* src, int8_t* at_low, int8_t* at_high, bool biased) {
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512 v0 = _mm512_loadu_ps(src);
    const __m512 v1 = _mm512_loadu_ps(src + 16);
    // The largest |x| bit pattern: the same order as the values, with NaN above infinity.
    const float max_abs = std::bit_cast<float>(_mm512_reduce_max_epi32(
        _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(v0), abs_mask),
                         _mm512_and_si512(_mm512_castps_si512(v1), abs_mask))));
    const XBlockScale block_scale = x_block_scale(max_abs);
    __m512i q0 = _mm512_setzero_si512();
    __m512i q1 = _mm512_setzero_si512();
    if (block_scale.finite) {
      const __m512 inverse = _mm512_set1_ps(block_scale.inverse);
      q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inverse));
      q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inverse));
    }
    // |q| ≤ 127: truncation is exact; q + 128 is q with its top bit flipped.
    const __m128i bias = _mm_set1_epi8(biased ? static_cast<char>(0x80) : 0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at_low),
                     _mm_xor_si128(_mm512_cvtepi32_epi8(q0), bias));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at_high),
                     _mm_xor_si128(_mm512_cvtepi32_epi8(q1), bias));
    return {block_scale.scale, hsum_i32(_mm512_add_epi32(q0, q1))};
  }
};

// ---------------------------------------------------------------------------------------------
// Row-major weights (Q8_0, Q4_0): eight blocks a step, their sums reduced into one YMM vector.

struct Q4_0Format {
  using Block = BlockQ4_0;
  static constexpr int kGroup = 4;
  static constexpr bool kBiasedX = false;  // x signed: the nibbles are vpdpbusd's unsigned side
  static constexpr bool kOffset = true;    // nibbles are 0..15; subtract 8·Σx afterwards

  // Scales of eight consecutive blocks: they sit every 9 words, so two 64-byte loads and one
  // word permutation across both gather them.
  static __m256 scales(const Block* w) {
    const auto* bytes = reinterpret_cast<const char*>(w);
    const __m512i words = _mm512_setr_epi32(0 | 9 << 16, 18 | 27 << 16, 36 | 45 << 16,
                                            54 | 63 << 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i picked =
        _mm512_permutex2var_epi16(_mm512_loadu_si512(bytes), words, _mm512_loadu_si512(bytes + 64));
    return _mm256_cvtph_ps(_mm512_castsi512_si128(picked));
  }

  // Σ nibble·x for four blocks: 128-bit lane k holds block k's four partial sums. x points at the
  // group's 128 bytes (group order).
  static __m512i dot4(__m512i low, __m512i high, const int8_t* x) {
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), low, _mm512_loadu_si512(x));
    return _mm512_dpbusd_epi32(sums, high, _mm512_loadu_si512(x + 64));
  }

  // sums[i] = Σ nibble·x over each of the blocks w[0..8) for the x rows x_rows[i] (pointing at the
  // first of those blocks). vpdpbusd takes the nibbles as the unsigned operand and x as the signed.
  template <int MR>
  static void dot(const Block* w, const int8_t* const* x_rows, __m256i* sums) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512i quads[2][MR];
    for (int q = 0; q < 2; ++q) {
      const Block* quad = w + 4 * q;
      __m512i packed =
          _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[0].qs)));
      packed = _mm512_inserti32x4(packed,
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[1].qs)), 1);
      packed = _mm512_inserti32x4(packed,
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[2].qs)), 2);
      packed = _mm512_inserti32x4(packed,
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[3].qs)), 3);
      const __m512i low = _mm512_and_si512(packed, low4);
      const __m512i high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
      for (int i = 0; i < MR; ++i) quads[q][i] = dot4(low, high, x_rows[i] + 4 * q * kBlock);
    }
    // Lane k of quads[0] is block k, of quads[1] block k + 4. After the two adds each 128-bit
    // lane k holds [b_k, b_k+4, b_k, b_k+4]; the permutation gathers [b0 .. b7].
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int i = 0; i < MR; ++i) {
      const __m512i pairs = _mm512_add_epi32(_mm512_unpacklo_epi32(quads[0][i], quads[1][i]),
                                             _mm512_unpackhi_epi32(quads[0][i], quads[1][i]));
      const __m512i totals = _mm512_add_epi32(pairs, _mm512_shuffle_epi32(pairs, _MM_PERM_BADC));
      sums[i] = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, totals));
    }
  }

  // Σ nibble·x for one block; x_low holds x elements 0..15, x_high elements 16..31.
  static int32_t dot1(const Block& w, const int8_t* x_low, const int8_t* x_high) {
    const __m128i low4 = _mm_set1_epi8(0x0f);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.qs));
    __m128i sums = _mm_dpbusd_epi32(_mm_setzero_si128(), _mm_and_si128(packed, low4),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(x_low)));
    sums = _mm_dpbusd_epi32(sums, _mm_and_si128(_mm_srli_epi16(packed, 4), low4),
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x_high)));
    return hsum_i32(sums);
  }
};

struct Q8_0Format {
  using Block = BlockQ8_0;
  static constexpr int kGroup = 1;
  static constexpr bool kOffset = false;
  // Signed weights by signed activations through vpdpbusd (unsigned × signed): x is stored as
  // x + 128 (unsigned), so each 4-byte group sums Σ(x + 128)·w = Σx·w + 128·Σw; the accumulation
  // starts from −128·Σw, computed once per weight vector and shared by all rows of x. That costs
  // one vpdpbusd per weight vector instead of a sign fix-up per weight vector and row of x.
  static constexpr bool kBiasedX = true;

  static __m256 scales(const Block* w) {
    const __m128i halves = _mm_setr_epi16(
        static_cast<int16_t>(w[0].d), static_cast<int16_t>(w[1].d), static_cast<int16_t>(w[2].d),
        static_cast<int16_t>(w[3].d), static_cast<int16_t>(w[4].d), static_cast<int16_t>(w[5].d),
        static_cast<int16_t>(w[6].d), static_cast<int16_t>(w[7].d));
    return _mm256_cvtph_ps(halves);
  }

  // sums[i] = Σ w·x over each of the blocks w[0..8); two blocks per ZMM (256-bit halves).
  template <int MR>
  static void dot(const Block* w, const int8_t* const* x_rows, __m256i* sums) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));  // 128 as an unsigned byte
    __m512i pairs[4][MR];
    for (int p = 0; p < 4; ++p) {
      const __m512i packed = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[2 * p].qs))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[2 * p + 1].qs)), 1);
      const __m512i start = _mm512_sub_epi32(
          _mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, packed));
      for (int i = 0; i < MR; ++i) {
        pairs[p][i] =
            _mm512_dpbusd_epi32(start, _mm512_loadu_si512(x_rows[i] + 2 * p * kBlock), packed);
      }
    }
    // Sum each 128-bit lane of the four pair vectors into one vector whose lane k holds
    // [P0k, P1k, P2k, P3k]; block 2p is lanes 0 + 1 of P_p, block 2p+1 lanes 2 + 3.
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int i = 0; i < MR; ++i) {
      const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(pairs[0][i], pairs[1][i]),
                                         _mm512_unpackhi_epi32(pairs[0][i], pairs[1][i]));
      const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(pairs[2][i], pairs[3][i]),
                                         _mm512_unpackhi_epi32(pairs[2][i], pairs[3][i]));
      const __m512i lanes =
          _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
      const __m512i blocks =
          _mm512_add_epi32(lanes, _mm512_shuffle_i32x4(lanes, lanes, _MM_PERM_CDAB));
      sums[i] = _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, blocks));
    }
  }

  static int32_t dot1(const Block& w, const int8_t* x_low, const int8_t* /*x_high*/) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs));
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x_low));
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i correction = _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, wv);
    return hsum_i32(
        _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), xv, wv), correction));
  }
};

// ---------------------------------------------------------------------------------------------
// Q4_0x8 and Q8_0x8 matmul (weights repacked at load, core/quant.h). As in the AVX2 kernels, one
// output row sits in one 32-bit lane, so a block's row sums need no horizontal reduction; here
// two groups of eight rows share a ZMM (group g in the low 256 bits, g + 1 in the high), and each
// vpdpbusd multiplies a 4-byte chunk of all sixteen rows by a 4-byte group of x broadcast to every
// lane, summing straight into 32 bits. vpdpbusd wants one operand unsigned, so the weights become
// unsigned values w + offset (Q4_0's nibbles already are; Q8_0 bytes get their top bit flipped)
// and offset·Σx, known per block of x from quantize_x, is subtracted from each block sum.

// Four bytes of quantized x as one 32-bit word, to broadcast to every lane.
int32_t x4(const int8_t* x) {
  int32_t bytes;
  std::memcpy(&bytes, x, sizeof(bytes));
  return bytes;
}

// Decode: one row of x against groups of eight weight rows, in YMM vectors, one group's eight
// sums per vector. Two ranges of groups are read side by side as two streams, a block record of
// each in turn (x8_decode_pairs, KernelTable::decode_pairs; the CPU backend picks the pairs): on
// the Zen 5 VM one core streams ~40 GB/s from two places at once and ~33 from one, and in the model
// (1B, alternating with the one-stream kernel token by token) this took 14-19 % off a one-thread
// Q4_0 token and 9-13 % off Q8_0; with two threads (each thread's share in two ranges) Q4_0 4 % in
// the slow bandwidth phase and 13 % in the fast one, Q8_0 1.5-3 % (docs/performance.md). The two
// streams must be far apart (x86.h: kMinPairDistanceBytes): streams a few groups apart, as in
// ranges of 32 per thread, or a row group apart as in x8_pair_tile, measured slower than one stream
// (13-14 against 18 GB/s on one thread).
//
// Software prefetch depends on the core, not on the instruction set, so there are two forms
// (kPrefetch of x8_decode_pairs, 3 KiB ahead; KernelTable::decode_pairs_prefetch). On AMD's cores
// the hardware prefetchers keep up by themselves: prefetching 2 KiB ahead cost one thread 10-15 %
// of its decode speed on the Zen 4 VM (1B Q4_0 37.5 against 41-42.5 tok/s, Q8_0 20.3-21.2
// against 23.4-23.7), and 1-4 KiB ahead slowed a Zen 5 core's Q4_0 stream to 27-34 from 35-38 GB/s.
// On an Intel Xeon VM (2026-11-26) one core streamed Q4_0x8 at 13-14 GB/s without it, against 15-16
// GB/s for a load loop, and 16-18 GB/s with each record prefetched 3 KiB ahead; the 1B Q4_0 model
// decoded 17-20 % faster (docs/performance.md). Q8_0x8 records are 1.9 times as long for the same
// work and streamed at the load loop's rate without it.

// acc + the eight rows' products with block b of x_row (quantized row m of x), scaled. Always
// inlined: as a call per 144-byte record, the pair loop took 1.75 times as long as one stream.
template <class Format>
[[gnu::always_inline]] inline __m256 x8_row_step(const QuantizedX& xq,
                                                 const typename Format::Record& record,
                                                 const int8_t* x_row, int64_t m, int64_t b,
                                                 __m256 acc) {
  __m256i w[8];
  Format::unpack(record, w);
  const int8_t* x = x_row + b * kBlock;
  __m256i even = _mm256_setzero_si256();
  __m256i odd = _mm256_setzero_si256();
  for (int j = 0; j < 8; j += 2) {
    even = _mm256_dpbusd_epi32(even, w[j], _mm256_set1_epi32(x4(x + Format::x_byte(j))));
    odd = _mm256_dpbusd_epi32(odd, w[j + 1], _mm256_set1_epi32(x4(x + Format::x_byte(j + 1))));
  }
  const int64_t at = m * xq.blocks + b;
  const __m256i sums = _mm256_sub_epi32(_mm256_add_epi32(even, odd),
                                        _mm256_set1_epi32(xq.sum8[at] * Format::kSum8Multiple));
  const __m256 w_scale =
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record.d)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums),
                         _mm256_mul_ps(w_scale, _mm256_set1_ps(xq.scale[at])), acc);
}

// y[m0 + i, n0 .. n0 + 16) for i < MR: groups `first` and `second` (rows n0..n0+7 and
// n0+8..n0+15) against MR rows of quantized x (prefill). Without `store_second`, `second` is a copy
// of `first` and only the first eight results are stored (a range's odd last group).
template <class Format, int MR>
void x8_pair_tile(const QuantizedX& xq, const typename Format::Record* first,
                  const typename Format::Record* second, bool store_second, X8Segment segment,
                  float* y, int64_t N, int64_t K, int64_t m0, int64_t n0) {
  using Record = typename Format::Record;
  __m512 acc[MR];
  for (int i = 0; i < MR; ++i) {
    const float* out = y + (m0 + i) * N + n0;
    if (segment.first == 0) {
      acc[i] = _mm512_setzero_ps();
    } else if (store_second) {
      acc[i] = _mm512_loadu_ps(out);
    } else {
      acc[i] = _mm512_castps256_ps512(_mm256_loadu_ps(out));
    }
  }
  const int8_t* x_rows[MR];
  for (int i = 0; i < MR; ++i) x_rows[i] = xq.qs + (m0 + i) * K;
  for (int64_t b = segment.first; b < segment.end; ++b, ++first, ++second) {
    for (const Record* record : {first, second}) {
      const char* ahead = reinterpret_cast<const char*>(record) + Avx512Int::kPrefetchBytes;
      for (size_t line = 0; line < sizeof(Record); line += 64)
        _mm_prefetch(ahead + line, _MM_HINT_T0);
    }
    __m512i w[8];
    Format::unpack(*first, *second, w);
    const __m512 w_scale = _mm512_cvtph_ps(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(first->d))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(second->d)), 1));
    for (int i = 0; i < MR; ++i) {
      const int8_t* x = x_rows[i] + b * kBlock;
      // Two dependency chains of four vpdpbusd each.
      __m512i even = _mm512_setzero_si512();
      __m512i odd = _mm512_setzero_si512();
      for (int j = 0; j < 8; j += 2) {
        even = _mm512_dpbusd_epi32(even, w[j], _mm512_set1_epi32(x4(x + Format::x_byte(j))));
        odd = _mm512_dpbusd_epi32(odd, w[j + 1], _mm512_set1_epi32(x4(x + Format::x_byte(j + 1))));
      }
      const int64_t at = (m0 + i) * xq.blocks + b;
      const __m512i sums = _mm512_sub_epi32(_mm512_add_epi32(even, odd),
                                            _mm512_set1_epi32(xq.sum8[at] * Format::kSum8Multiple));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums),
                               _mm512_mul_ps(w_scale, _mm512_set1_ps(xq.scale[at])), acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* out = y + (m0 + i) * N + n0;
    if (store_second) {
      _mm512_storeu_ps(out, acc[i]);
    } else {
      _mm256_storeu_ps(out, _mm512_castps512_ps256(acc[i]));
    }
  }
}

// The interleaved kernels of simd/quant_matmul.h over a Format's unpack and x_byte (below): decode
// steps of one group in YMM vectors (x8_row_step), prefill tiles of two groups in ZMM vectors
// (x8_pair_tile, the last tile of a range may be one group), decode without software prefetch
// unless asked for (decode_pairs_prefetch).
template <class Format, class Record_, int64_t kSegmentBlocks_>
struct X8Vnni {
  using Record = Record_;
  static constexpr int64_t kSegmentBlocks = kSegmentBlocks_;
  static constexpr int64_t kTileRows = 16;
  static constexpr bool kStreamPrefetch = false;
  static constexpr int kDecodePrefetchBytes = 3072;
  template <int MR>
  static void tile(const QuantizedX& xq, const Record* group, int64_t length, X8Segment segment,
                   float* y, int64_t N, int64_t K, int64_t m0, int64_t n0, int64_t rows) {
    const bool two = rows == 16;
    x8_pair_tile<Format, MR>(xq, group, two ? group + length : group, two, segment, y, N, K, m0,
                             n0);
  }
  [[gnu::always_inline]] static __m256 row_step(const QuantizedX& xq, const Record& record,
                                                const int8_t* x_row, int64_t m, int64_t b,
                                                __m256 acc) {
    return x8_row_step<Format>(xq, record, x_row, m, b, acc);
  }
};

// The eight weight vectors of one block, for two groups (ZMM) or one (YMM), and which bytes of the
// block of x each one multiplies.
struct Q4_0x8Vnni : X8Vnni<Q4_0x8Vnni, BlockQ4_0x8, kQ4_0x8SegmentBlocks> {
  static constexpr int32_t kSum8Multiple = 1;  // offset 8: subtract sum8 (8·Σx) itself

  // Vector j < 4: chunk j's low nibbles (elements 4j..4j+3 of each row); j ≥ 4: chunk j - 4's
  // high nibbles (elements 16 + 4(j - 4) ..).
  static void unpack(const Record& first, const Record& second, __m512i* w) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m512i packed = _mm512_inserti64x4(
          _mm512_castsi256_si512(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first.qs + 32 * c))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(second.qs + 32 * c)), 1);
      w[c] = _mm512_and_si512(packed, low4);
      w[4 + c] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
    }
  }
  static void unpack(const Record& record, __m256i* w) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m256i packed =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record.qs + 32 * c));
      w[c] = _mm256_and_si256(packed, low4);
      w[4 + c] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
    }
  }
  static constexpr int x_byte(int j) { return j < 4 ? 4 * j : 16 + 4 * (j - 4); }
};

struct Q8_0x8Vnni : X8Vnni<Q8_0x8Vnni, BlockQ8_0x8, kQ8_0x8SegmentBlocks> {
  static constexpr int32_t kSum8Multiple = 16;  // offset 128: subtract 16·sum8 (128·Σx)

  // Vector j: chunk j (elements 4j..4j+3 of each row), as unsigned bytes w + 128.
  static void unpack(const Record& first, const Record& second, __m512i* w) {
    const __m512i top = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 8; ++c) {
      const __m512i packed = _mm512_inserti64x4(
          _mm512_castsi256_si512(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first.qs + 32 * c))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(second.qs + 32 * c)), 1);
      w[c] = _mm512_xor_si512(packed, top);
    }
  }
  static void unpack(const Record& record, __m256i* w) {
    const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int c = 0; c < 8; ++c) {
      w[c] = _mm256_xor_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record.qs + 32 * c)), top);
    }
  }
  static constexpr int x_byte(int j) { return 4 * j; }
};

// The byte contract of simd/block_matmul.h: VNNI's vpdpbusd on YMM registers.
struct VnniDot {
  static __m256i dot(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
  }
};
using BlockQuants = Quants256<VnniDot>;
using BlockPanel = Panel512;

// x for the sub-block family: Q8_0 rounding, element order.
void quantize_plain(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                    int64_t m_end) {
  quantize_rows<Avx512Int>(x, xq, M, K, m_begin, m_end, /*group=*/1, /*biased=*/false);
}

#include "backends/cpu/simd/block_matmul.h"

// ---------------------------------------------------------------------------------------------
// Q4_Kx8 and Q6_Kx8 (Q4_K and Q6_K repacked at load, core/quant.h). Decode multiplies a record of
// eight rows at a time as Q4_0x8 does, one row per 32-bit lane of a YMM vector: each 4-byte chunk
// of the eight rows' quants goes through vpdpbusd against four bytes of x broadcast to every lane,
// so one load of x serves eight rows, and the eight rows' sub-block scales are unpacked together,
// in vectors, instead of once per row with scalar code; no horizontal reduction. A record's
// sub-block sums are weighted by their integer scales in 32-bit lanes and converted to float once
// per record, as the stored-layout kernels of simd/block_matmul.h do per row. x is rounded as Q8_K
// (block_matmul::quantize_rows_k); the drivers are Q4_0x8's (x8_decode_pairs), over a QuantizedX
// whose `blocks` counts super-blocks (kx8_view). Prefill (3 rows of x and more) runs the stored
// type's panels, packed from the records (Kx8Panels).

// f(std::integral_constant<int, i>) for i = 0 .. N - 1, unrolled: the record steps below index
// accumulators and pick shuffle masks by these, which GCC 12 left as run-time indices into stack
// arrays (and masks built at run time) in loops too long for it to unroll: Q6_Kx8 then took
// twice as long as the stored layout. The lambdas are marked always_inline too: left to itself,
// GCC made a function of Q6_Kx8's half step and called it per record.
template <int... I, class F>
[[gnu::always_inline]] inline void unrolled_over(std::integer_sequence<int, I...>, F& f) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
[[gnu::always_inline]] inline void unrolled(F&& f) {
  unrolled_over(std::make_integer_sequence<int, N>{}, f);
}

// Byte k of each 32-bit lane of v, zero-extended (vpshufb picks bytes within 128-bit lanes: byte
// 4i + k for the i-th 32-bit lane of each).
[[gnu::always_inline]] inline __m256i lane_byte(__m256i v, int k) {
  const auto pick = [k](int i) { return static_cast<int32_t>(0x80808000u | (4 * i + k)); };
  return _mm256_shuffle_epi8(
      v, _mm256_setr_epi32(pick(0), pick(1), pick(2), pick(3), pick(0), pick(1), pick(2), pick(3)));
}

// Row m of a quantized x (Q8_K rounding, quantized_x_bytes(M, K)) as the Q4_Kx8/Q6_Kx8 decode
// steps read it: `blocks` counts super-blocks, and the step and sums of super-block b are those
// of its first 32-block, 8b.
QuantizedX kx8_view(const void* xq, int64_t M, int64_t K, int64_t m) {
  const QuantizedX all = quantized_view(xq, M, K, 1);
  const int64_t blocks = K / kBlock;
  return {
      all.qs + m * K, all.scale + m * blocks, all.sum8 + m * blocks, K / kKQuantBlockSize, 0, 1};
}

struct Kx8Vnni {
  static constexpr bool kStreamPrefetch = false;
  static constexpr int kDecodePrefetchBytes = 3072;
  static constexpr int64_t kSegmentBlocks = kKx8SegmentBlocks;
};

// Prefill panels (block_matmul::PanelLayout) written straight from a record: a record's 4-byte
// chunks of eight rows are already a panel's chunks of a row group (bytes 4c..4c+3 of each row,
// row r at 4r), so a group's quants are copied (Q4_K's nibbles split, Q6_K's bits joined) without
// the transpose the stored layout needs, and each row's scales and offsets are the stored type's
// (Format::scales on the row's block fields), the same floats as from the stored rows.
template <class Format>
struct Kx8Panels {
  using Layout = block_matmul::PanelLayout<BlockPanel, Format>;
  static constexpr int kUnits = Format::kElements / Layout::kUnit;  // per super-block
  // Chunk `chunk` of unit `unit` of row group `group` (eight rows, 32 bytes) in a super-block's
  // unit records.
  static void store(uint8_t* block_records, int unit, int chunk, int group, __m256i q) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(block_records + unit * Layout::kRecordBytes +
                                                   chunk * Layout::kChunkBytes + group * 32),
                        q);
  }
  // Row `r` of group `group`: its scale and offset per unit.
  static void scales(uint8_t* block_records, int group, int r,
                     const typename Format::Block& block) {
    float scale[kUnits], offset[kUnits];
    Format::scales(block, scale, offset);
    for (int u = 0; u < kUnits; ++u) {
      auto* at = reinterpret_cast<float*>(block_records + u * Layout::kRecordBytes +
                                          Layout::kChunks * Layout::kChunkBytes);
      at[group * 8 + r] = scale[u];
      at[BlockPanel::kRows + group * 8 + r] = offset[u];
    }
  }
};

// Q6_K's quants of elements 4c.. of quarters 0..3 of a half, from one step of a Q6_Kx8 record
// (ql chunks `low` and `high`, qh chunk `top`), unsigned 0..63.
[[gnu::always_inline]] inline void q6_k_quarters(__m256i low, __m256i high, __m256i top,
                                                 __m256i* q) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  q[0] = _mm256_or_si256(_mm256_and_si256(low, low4),
                         _mm256_and_si256(_mm256_slli_epi16(top, 4), bits45));
  q[1] = _mm256_or_si256(_mm256_and_si256(high, low4),
                         _mm256_and_si256(_mm256_slli_epi16(top, 2), bits45));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low, 4), low4),
                         _mm256_and_si256(top, bits45));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(high, 4), low4),
                         _mm256_and_si256(_mm256_srli_epi16(top, 2), bits45));
}

// Q4_K: sub-blocks 2p and 2p + 1 are the low and high nibbles of qs[32p ...]; value =
// d·scale[s]·q - dmin·min[s]. x's sums per 32-block (kSumScale·Σ x_q, quantize_rows_k) weight the
// mins.
struct Q4_Kx8Vnni : Kx8Vnni {
  using Record = BlockQ4_Kx8;
  [[gnu::always_inline]] static __m256 row_step(const QuantizedX& xq, const Record& w,
                                                const int8_t* x_row, int64_t m, int64_t b,
                                                __m256 acc) {
    const int8_t* x = x_row + b * kKQuantBlockSize;
    const int64_t at = (m * xq.blocks + b) * (kKQuantBlockSize / kBlock);
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i low6 = _mm256_set1_epi8(0x3f);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    // The packed scales (core/quant.h, KScales), eight rows at a time: lane r of scales[0] holds
    // row r's scales of sub-blocks 0..3 as bytes, scales[1] those of 4..7; mins alike.
    const auto* words = reinterpret_cast<const __m256i*>(w.scales);
    const __m256i word0 = _mm256_loadu_si256(words);
    const __m256i word1 = _mm256_loadu_si256(words + 1);
    const __m256i word2 = _mm256_loadu_si256(words + 2);
    const __m256i scales[2] = {
        _mm256_and_si256(word0, low6),
        _mm256_or_si256(_mm256_and_si256(word2, low4),
                        _mm256_and_si256(_mm256_srli_epi16(word0, 2), bits45))};
    const __m256i mins[2] = {
        _mm256_and_si256(word1, low6),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(word2, 4), low4),
                        _mm256_and_si256(_mm256_srli_epi16(word1, 2), bits45))};
    __m256i sums = _mm256_setzero_si256();
    unrolled<4>([&](auto p) __attribute__((always_inline)) {
      __m256i even = _mm256_setzero_si256();
      __m256i odd = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i packed =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 256 * p + 32 * c));
        even = _mm256_dpbusd_epi32(even, _mm256_and_si256(packed, low4),
                                   _mm256_set1_epi32(x4(x + 64 * p + 4 * c)));
        odd = _mm256_dpbusd_epi32(odd, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4),
                                  _mm256_set1_epi32(x4(x + 64 * p + 32 + 4 * c)));
      }
      constexpr int s = 2 * p;
      sums = _mm256_add_epi32(sums, _mm256_mullo_epi32(even, lane_byte(scales[s / 4], s % 4)));
      sums = _mm256_add_epi32(sums,
                              _mm256_mullo_epi32(odd, lane_byte(scales[(s + 1) / 4], (s + 1) % 4)));
    });
    // Σ_s min[s]·kSumScale·Σ x_q: at most 8·63·8·4064, exact as a float.
    __m256i min_sums = _mm256_setzero_si256();
    unrolled<8>([&](auto s) __attribute__((always_inline)) {
      min_sums = _mm256_add_epi32(min_sums, _mm256_mullo_epi32(lane_byte(mins[s / 4], s % 4),
                                                               _mm256_set1_epi32(xq.sum8[at + s])));
    });
    const float step = xq.scale[at];  // the super-block's one step
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.d)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.dmin)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(d, _mm256_set1_ps(step)), acc);
    return _mm256_fmadd_ps(
        _mm256_cvtepi32_ps(min_sums),
        _mm256_mul_ps(dmin, _mm256_set1_ps(-step / static_cast<float>(BlockQuants::kSumScale))),
        acc);
  }
  // The record as row group `group` of a panel's unit records for its super-block (sub-block s is
  // unit s).
  static void pack_panel(const Record& w, uint8_t* block_records, int group) {
    using Panels = Kx8Panels<block_matmul::Q4_KFormat<BlockQuants>>;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {
      for (int c = 0; c < 8; ++c) {
        const __m256i packed =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 256 * p + 32 * c));
        Panels::store(block_records, 2 * p, c, group, _mm256_and_si256(packed, low4));
        Panels::store(block_records, 2 * p + 1, c, group,
                      _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4));
      }
    }
    for (int r = 0; r < 8; ++r) {
      BlockQ4_K row;
      row.d = w.d[r];
      row.dmin = w.dmin[r];
      for (int word = 0; word < 3; ++word)
        std::memcpy(row.scales + 4 * word, w.scales + 32 * word + 4 * r, 4);
      Panels::scales(block_records, group, r, row);
    }
  }
};

// Q6_K: quarter k of half h (elements 128h + 32k ..) is the low (k < 2) or high nibbles of
// ql[64h + 32·(k % 2) ...] and bits 2k, 2k + 1 of qh[32h ...]; q is biased by 32 and each 16
// elements j have their own signed scale: value = d·scales[j]·(q - 32). The bias comes off as
// 32·Σ_j scales[j]·Σ_j x_q, from x's sums per 16 (quantize_rows_k with kHalfSums).
struct Q6_Kx8Vnni : Kx8Vnni {
  using Record = BlockQ6_Kx8;
  [[gnu::always_inline]] static __m256 row_step(const QuantizedX& xq, const Record& w,
                                                const int8_t* x_row, int64_t m, int64_t b,
                                                __m256 acc) {
    const int8_t* x = x_row + b * kKQuantBlockSize;
    const int64_t at = (m * xq.blocks + b) * (kKQuantBlockSize / kBlock);
    __m256i sums = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      // Sums of the half's eight 16-element sub-blocks: 2k + (first or second 16 of quarter k).
      __m256i part[8];
      for (__m256i& v : part) v = _mm256_setzero_si256();
      unrolled<8>([&](auto c) __attribute__((always_inline)) {
        const auto* step = reinterpret_cast<const __m256i*>(w.q + kQ6_Kx8StepBytes * (8 * h + c));
        const __m256i low = _mm256_loadu_si256(step);
        const __m256i high = _mm256_loadu_si256(step + 1);
        const __m256i top = _mm256_loadu_si256(step + 2);
        __m256i q[4];
        q6_k_quarters(low, high, top, q);
        unrolled<4>([&](auto k) __attribute__((always_inline)) {
          __m256i& into = part[2 * k + c / 4];
          into =
              _mm256_dpbusd_epi32(into, q[k], _mm256_set1_epi32(x4(x + 128 * h + 32 * k + 4 * c)));
        });
      });
      unrolled<8>([&](auto i) __attribute__((always_inline)) {
        const __m256i scale = _mm256_cvtepi8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.scales + 8 * (8 * h + i))));
        sums = _mm256_add_epi32(sums, _mm256_mullo_epi32(part[i], scale));
      });
    }
    // Σ_j scales[j]·Σ_j x_q, two sub-blocks of 16 (one 32-block of x) per vpmaddwd.
    __m256i bias = _mm256_setzero_si256();
    for (int block = 0; block < 8; ++block) {
      const __m128i pairs = _mm_unpacklo_epi8(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.scales + 16 * block)),
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.scales + 16 * block + 8)));
      bias = _mm256_add_epi32(bias, _mm256_madd_epi16(_mm256_cvtepi8_epi16(pairs),
                                                      _mm256_set1_epi32(xq.sum8[at + block])));
    }
    sums = _mm256_sub_epi32(sums, _mm256_slli_epi32(bias, 5));
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.d)));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(d, _mm256_set1_ps(xq.scale[at])),
                           acc);
  }
  // The record as row group `group` of a panel's unit records for its super-block (16 units of
  // 16 elements: elements 128h + 32k + 4c.. are chunk c % 4 of unit 8h + 2k + c / 4).
  static void pack_panel(const Record& w, uint8_t* block_records, int group) {
    using Panels = Kx8Panels<block_matmul::Q6_KFormat<BlockQuants>>;
    for (int h = 0; h < 2; ++h) {
      for (int c = 0; c < 8; ++c) {
        const auto* step = reinterpret_cast<const __m256i*>(w.q + kQ6_Kx8StepBytes * (8 * h + c));
        __m256i q[4];
        q6_k_quarters(_mm256_loadu_si256(step), _mm256_loadu_si256(step + 1),
                      _mm256_loadu_si256(step + 2), q);
        for (int k = 0; k < 4; ++k)
          Panels::store(block_records, 8 * h + 2 * k + c / 4, c % 4, group, q[k]);
      }
    }
    for (int r = 0; r < 8; ++r) {
      BlockQ6_K row;
      row.d = w.d[r];
      for (int j = 0; j < 16; ++j) row.scales[j] = w.scales[8 * j + r];
      Panels::scales(block_records, group, r, row);
    }
  }
};

// Rows [n_begin, n_end) of y = x · Wᵀ over Q4_Kx8 or Q6_Kx8 weights (multiples of 8), x as
// quantized for them. Up to panel_min_rows rows of x: each row of x in turn over a chunk of row
// groups (which stays in L2 for the next row of x), as decode reads them. From there on: the
// stored type's panels, packed from the records (Kernel::pack_panel).
template <class Kernel, class Format>
void kx8_matmul(const void* xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                int64_t n_begin, int64_t n_end) {
  const int64_t blocks = K / kKQuantBlockSize;
  if (M < block_matmul::panel_min_rows<Format>()) {
    const size_t row_bytes = static_cast<size_t>(blocks) * sizeof(typename Format::Block);
    const int64_t chunk = (weight_chunk_rows<Avx512Int::kChunkBytes>(row_bytes) + 7) / 8 * 8;
    for (int64_t first = n_begin; first < n_end; first += chunk) {
      const int64_t rows = min_of(chunk, n_end - first);
      for (int64_t m = 0; m < M; ++m)
        x8_decode_pairs<Avx512Int, Kernel>(kx8_view(xq, M, K, m), w, y + m * N, N, first, -1, rows);
    }
    return;
  }
  using Layout = block_matmul::PanelLayout<BlockPanel, Format>;
  constexpr int kUnits = Format::kElements / Layout::kUnit;
  const auto* records = static_cast<const typename Kernel::Record*>(w);
  const size_t panel_bytes = static_cast<size_t>(blocks) * kUnits * Layout::kRecordBytes;
  // Weight rows [first, first + rows) into panels of BlockPanel::kRows rows at `out`; a last
  // panel's missing group repeats the one before it (its outputs are never stored).
  const auto pack = [&](int64_t first, int64_t rows, uint8_t* out) {
    for (int64_t at = 0; at < rows; at += BlockPanel::kRows) {
      uint8_t* panel = out + (at / BlockPanel::kRows) * panel_bytes;
      for (int group = 0; group < BlockPanel::kRows / 8; ++group) {
        const int64_t g = (first + min_of(at + 8 * group, rows - 8)) / 8;
        for (int64_t b = 0; b < blocks; ++b) {
          Kernel::pack_panel(records[x8_record_index(N / 8, blocks, kKx8SegmentBlocks, g, b)],
                             panel + b * kUnits * Layout::kRecordBytes, group);
        }
      }
    }
  };
  block_matmul::panel_matmul_packed<BlockQuants, BlockPanel, Format>(
      block_matmul::view(xq, M, K), pack, y, M, N, K, n_begin, n_end);
}

// The names simd/entry_points.h instantiates the quantized matmuls with.
using QuantInt = Avx512Int;
using Q4_0x8Tile = Q4_0x8Vnni;
using Q8_0x8Tile = Q8_0x8Vnni;

}  // namespace

// How each format wants x: Q4_0 in groups of four blocks, Q8_0 biased by 128, the interleaved
// layouts plain.
void quantize_x_q4_0__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                             int64_t m_end) {
  quantize_rows<Avx512Int>(x, xq, M, K, m_begin, m_end, Q4_0Format::kGroup, Q4_0Format::kBiasedX);
}

void quantize_x_q8_0__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                             int64_t m_end) {
  quantize_rows<Avx512Int>(x, xq, M, K, m_begin, m_end, Q8_0Format::kGroup, Q8_0Format::kBiasedX);
}

void quantize_x_x8__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                           int64_t m_end) {
  quantize_rows<Avx512Int>(x, xq, M, K, m_begin, m_end, /*group=*/1, /*biased=*/false);
}

void quantize_x_k16__avx512(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                            int64_t m_end) {
  block_matmul::quantize_rows_k<BlockQuants::kSumScale, /*kHalfSums=*/true>(x, xq, M, K, m_begin,
                                                                            m_end);
}

void q4_kx8_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                              int64_t K, int64_t n_begin, int64_t n_end) {
  kx8_matmul<Q4_Kx8Vnni, block_matmul::Q4_KFormat<BlockQuants>>(xq, w, y, M, N, K, n_begin, n_end);
}

void q6_kx8_matmul_xq__avx512(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                              int64_t K, int64_t n_begin, int64_t n_end) {
  kx8_matmul<Q6_Kx8Vnni, block_matmul::Q6_KFormat<BlockQuants>>(xq, w, y, M, N, K, n_begin, n_end);
}

void q4_kx8_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  void* xq = scratch(Scratch::kActivations, quantized_x_bytes(M, K));
  quantize_x_k__avx512(x, xq, M, K, 0, M);
  q4_kx8_matmul_xq__avx512(xq, w, y, M, N, K, n_begin, n_end);
}

void q6_kx8_matmul__avx512(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  void* xq = scratch(Scratch::kActivations, quantized_x_bytes(M, K));
  quantize_x_k16__avx512(x, xq, M, K, 0, M);
  q6_kx8_matmul_xq__avx512(xq, w, y, M, N, K, n_begin, n_end);
}

void q4_kx8_decode_pairs__avx512(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                                 int64_t a_begin, int64_t b_begin, int64_t rows) {
  x8_decode_pairs<Avx512Int, Q4_Kx8Vnni>(kx8_view(xq, 1, K, 0), w, y, N, a_begin, b_begin, rows);
}

void q6_kx8_decode_pairs__avx512(const void* xq, const void* w, float* y, int64_t N, int64_t K,
                                 int64_t a_begin, int64_t b_begin, int64_t rows) {
  x8_decode_pairs<Avx512Int, Q6_Kx8Vnni>(kx8_view(xq, 1, K, 0), w, y, N, a_begin, b_begin, rows);
}

void q4_0x8_decode_pairs_prefetch__avx512(const void* xq, const void* w, float* y, int64_t N,
                                          int64_t K, int64_t a_begin, int64_t b_begin,
                                          int64_t rows) {
  x8_decode_pairs<Avx512Int, Q4_0x8Vnni, true>(quantized_view(xq, 1, K, 1), w, y, N, a_begin,
                                               b_begin, rows);
}

#define EDGELM_SIMD_ISA avx512
#define EDGELM_SIMD_X86_QUANT
#define EDGELM_SIMD_BLOCK_QUANT
#include "backends/cpu/simd/entry_points.h"

}  // namespace edgelm::cpu
