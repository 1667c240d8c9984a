// The quantized matmuls with the Armv8.2 dot-product extension (SDOT), row-major and for the
// Q4_0x8/Q8_0x8 layouts, compiled with
// -march=armv8.2-a+dotprod; the "neon_dotprod" table is only offered when the CPU reports it
// (HWCAP_ASIMDDP). Everything else in that table comes from neon.cpp.
//
// Nothing here calls an inline or template function from a shared header (see arm.h).
#include <arm_neon.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/arm/arm.h"
#include "backends/cpu/arm/neon_quant_matmul.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

struct DotprodDot {
  // Four lanes that sum to Σ w·x over the block at x: each SDOT adds four byte products into each
  // 32-bit lane, so two of them cover the 32 elements without any 16-bit intermediate.
  static int32x4_t block(int8x16_t w_low, int8x16_t w_high, const int8_t* x) {
    const int32x4_t low = vdotq_s32(vdupq_n_s32(0), w_low, vld1q_s8(x));
    return vdotq_s32(low, w_high, vld1q_s8(x + 16));
  }
};

// ---------------------------------------------------------------------------------------------
// Q4_0x8 and Q8_0x8 (core/quant.h): a block of eight weight rows in one record, the rows' 4-byte
// chunks side by side. One 16-byte load holds the same chunk of four rows, and SDOT by lane
// (vdotq_laneq_s32) multiplies each row's four bytes by the same four bytes of x, so the four
// rows' sums stay in the four lanes of one vector: no horizontal reduction, and the block's eight
// sums are scaled by two multiply-adds against the rows' scales. The scheme of the x86 kernels for
// these layouts, with SDOT for VNNI.

// Sums for rows 0-3 and 4-7 of one block against MR rows of quantized x (`x[i]` the block's 32
// values of row i as two vectors, elements 0-15 and 16-31).
template <int MR>
struct X8Sums {
  int32x4_t rows_low[MR];   // rows 0-3
  int32x4_t rows_high[MR];  // rows 4-7
};

// Chunk kChunk (four consecutive elements, kChunk < 8) of a block: `w_low` and `w_high` the signed
// bytes of rows 0-3 and 4-7, multiplied by the same four elements of each row of x.
template <int kChunk, int MR>
void x8_chunk(X8Sums<MR>& sums, int8x16_t w_low, int8x16_t w_high, const int8x16_t (&x)[MR][2]) {
  for (int i = 0; i < MR; ++i) {
    const int8x16_t xv = x[i][kChunk / 4];
    sums.rows_low[i] = vdotq_laneq_s32(sums.rows_low[i], w_low, xv, kChunk % 4);
    sums.rows_high[i] = vdotq_laneq_s32(sums.rows_high[i], w_high, xv, kChunk % 4);
  }
}

// Q4_0x8: chunk c < 4 holds bytes 4c..4c+3 of every row, whose low nibbles are elements 4c..4c+3
// and high nibbles elements 16+4c..16+4c+3 (chunks c and c + 4 of the 32 values). With one row of
// x (decode) the nibbles enter SDOT as they are, 0..15, and -8·Σx is added to the sums
// (kOffset, QuantizedX::offset): two adds per record instead of sixteen subtractions, which more
// rows of x share.
struct Q4_0x8Block {
  using Record = BlockQ4_0x8;
  static constexpr int64_t kSegmentBlocks = kQ4_0x8SegmentBlocks;
  template <int MR>
  static constexpr bool kOffset = MR == 1;
  template <int MR>
  static void sums(const Record& r, const int8x16_t (&x)[MR][2], X8Sums<MR>& out) {
    const uint8x16_t mask = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    auto low = [&](uint8x16_t v) {
      const int8x16_t values = vreinterpretq_s8_u8(vandq_u8(v, mask));
      return kOffset<MR> ? values : vsubq_s8(values, eight);
    };
    auto high = [&](uint8x16_t v) {
      const int8x16_t values = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
      return kOffset<MR> ? values : vsubq_s8(values, eight);
    };
    const uint8x16_t c0a = vld1q_u8(r.qs), c0b = vld1q_u8(r.qs + 16);
    const uint8x16_t c1a = vld1q_u8(r.qs + 32), c1b = vld1q_u8(r.qs + 48);
    const uint8x16_t c2a = vld1q_u8(r.qs + 64), c2b = vld1q_u8(r.qs + 80);
    const uint8x16_t c3a = vld1q_u8(r.qs + 96), c3b = vld1q_u8(r.qs + 112);
    x8_chunk<0>(out, low(c0a), low(c0b), x);
    x8_chunk<1>(out, low(c1a), low(c1b), x);
    x8_chunk<2>(out, low(c2a), low(c2b), x);
    x8_chunk<3>(out, low(c3a), low(c3b), x);
    x8_chunk<4>(out, high(c0a), high(c0b), x);
    x8_chunk<5>(out, high(c1a), high(c1b), x);
    x8_chunk<6>(out, high(c2a), high(c2b), x);
    x8_chunk<7>(out, high(c3a), high(c3b), x);
  }
};

// Q8_0x8: chunk c < 8 holds elements 4c..4c+3 of every row, as signed bytes.
struct Q8_0x8Block {
  using Record = BlockQ8_0x8;
  static constexpr int64_t kSegmentBlocks = kQ8_0x8SegmentBlocks;
  template <int MR>
  static constexpr bool kOffset = false;
  template <int MR>
  static void sums(const Record& r, const int8x16_t (&x)[MR][2], X8Sums<MR>& out) {
    const int8_t* q = r.qs;
    x8_chunk<0>(out, vld1q_s8(q), vld1q_s8(q + 16), x);
    x8_chunk<1>(out, vld1q_s8(q + 32), vld1q_s8(q + 48), x);
    x8_chunk<2>(out, vld1q_s8(q + 64), vld1q_s8(q + 80), x);
    x8_chunk<3>(out, vld1q_s8(q + 96), vld1q_s8(q + 112), x);
    x8_chunk<4>(out, vld1q_s8(q + 128), vld1q_s8(q + 144), x);
    x8_chunk<5>(out, vld1q_s8(q + 160), vld1q_s8(q + 176), x);
    x8_chunk<6>(out, vld1q_s8(q + 192), vld1q_s8(q + 208), x);
    x8_chunk<7>(out, vld1q_s8(q + 224), vld1q_s8(q + 240), x);
  }
};

// Blocks [first, end) of one K segment (core/quant.h).
struct X8Segment {
  int64_t first;
  int64_t end;
};

// y[m0 + i, n0 .. n0 + 8) for i < MR: one group of eight weight rows (`group`: its records of
// `segment`) against MR rows of quantized x. A segment after the first adds to the sums already in
// y: the same additions in the same order as over the whole row. Block sums are below
// 32·128·127 < 2^24 in magnitude, so their conversion to float is exact.
template <class Block, int MR>
void x8_tile(const QuantizedX& xq, const typename Block::Record* group, X8Segment segment, float* y,
             int64_t N, int64_t K, int64_t m0, int64_t n0) {
  float32x4_t acc_low[MR], acc_high[MR];
  for (int i = 0; i < MR; ++i) {
    if (segment.first == 0) {
      acc_low[i] = acc_high[i] = vdupq_n_f32(0.0f);
    } else {
      acc_low[i] = vld1q_f32(y + (m0 + i) * N + n0);
      acc_high[i] = vld1q_f32(y + (m0 + i) * N + n0 + 4);
    }
  }
  for (int64_t b = segment.first; b < segment.end; ++b, ++group) {
    const typename Block::Record& record = *group;
    int8x16_t x[MR][2];
    for (int i = 0; i < MR; ++i) {
      const int8_t* block = xq.qs + (m0 + i) * K + b * kBlock;
      x[i][0] = vld1q_s8(block);
      x[i][1] = vld1q_s8(block + 16);
    }
    X8Sums<MR> sums;
    for (int i = 0; i < MR; ++i) sums.rows_low[i] = sums.rows_high[i] = vdupq_n_s32(0);
    Block::sums(record, x, sums);
    if constexpr (Block::template kOffset<MR>) {
      for (int i = 0; i < MR; ++i) {
        const int32x4_t offset = vld1q_dup_s32(xq.offset + (m0 + i) * xq.blocks + b);
        sums.rows_low[i] = vaddq_s32(sums.rows_low[i], offset);
        sums.rows_high[i] = vaddq_s32(sums.rows_high[i], offset);
      }
    }
    const float16x8_t scales = vreinterpretq_f16_u16(vld1q_u16(record.d));
    const float32x4_t d_low = vcvt_f32_f16(vget_low_f16(scales));
    const float32x4_t d_high = vcvt_f32_f16(vget_high_f16(scales));
    for (int i = 0; i < MR; ++i) {
      const float x_scale = xq.scale[(m0 + i) * xq.blocks + b];
      acc_low[i] =
          vfmaq_f32(acc_low[i], vcvtq_f32_s32(sums.rows_low[i]), vmulq_n_f32(d_low, x_scale));
      acc_high[i] =
          vfmaq_f32(acc_high[i], vcvtq_f32_s32(sums.rows_high[i]), vmulq_n_f32(d_high, x_scale));
    }
  }
  for (int i = 0; i < MR; ++i) {
    vst1q_f32(y + (m0 + i) * N + n0, acc_low[i]);
    vst1q_f32(y + (m0 + i) * N + n0 + 4, acc_high[i]);
  }
}

// Weight rows [n_begin, n_end) (whole groups of eight) against all M rows of x, a weight chunk at a
// time as quant_matmul does.
template <class Block>
void x8_matmul(const QuantizedX& xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
               int64_t n_begin, int64_t n_end) {
  const auto* records = static_cast<const typename Block::Record*>(w);
  // A record holds one block of eight rows, so a row takes sizeof(Record) / 8 bytes per block.
  const int64_t rows = weight_chunk_rows<kChunkBytes>(static_cast<size_t>(xq.blocks) *
                                                      sizeof(typename Block::Record) / 8);
  // Decode (one row of x) has one band: it takes the whole range at once, so that each K segment
  // is one run through memory.
  const int64_t chunk = M == 1 ? n_end - n_begin : (rows + 7) / 8 * 8;
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      for (int64_t first = 0; first < xq.blocks; first += Block::kSegmentBlocks) {
        const X8Segment segment{first, min_of(first + Block::kSegmentBlocks, xq.blocks)};
        const auto* segment_records = records + (N / 8) * first;  // group after group
        for (int64_t n = chunk_begin; n < chunk_end; n += 8) {
          x8_tile<Block, MR>(xq, segment_records + (n / 8) * (segment.end - segment.first), segment,
                             y, N, K, m, n);
        }
      }
    });
  }
}

// The sub-block matmul family (simd/block_matmul.h) on SDOT.
#include "backends/cpu/simd/vec_neon.h"
struct SdotDot16 {
  static int32x4_t dot16(int8x16_t w, int8x16_t x) { return vdotq_s32(vdupq_n_s32(0), w, x); }
  static int32x4_t dot4(int32x4_t acc, int8x16_t w, int8x16_t x) { return vdotq_s32(acc, w, x); }
};
using BlockQuants = Quants128x2<SdotDot16>;
using BlockPanel = Panel128x2<SdotDot16>;

void quantize_plain(const float* x, void* xq, int64_t M, int64_t K, int64_t m_begin,
                    int64_t m_end) {
  quantize_rows(x, xq, M, K, m_begin, m_end);
}

#include "backends/cpu/simd/block_matmul.h"

}  // namespace

void q4_0x8_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                 int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<Q4_0x8Block>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void q8_0x8_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                 int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<Q8_0x8Block>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void q4_0x8_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<Q4_0x8Block>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

void q8_0x8_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                    int64_t K, int64_t n_begin, int64_t n_end) {
  x8_matmul<Q8_0x8Block>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

void q8_0_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                               int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q8_0Format, DotprodDot>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                               int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q4_0Format, DotprodDot>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void q8_0_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                  int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q8_0Format, DotprodDot>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                  int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q4_0Format, DotprodDot>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

#define EDGELM_SIMD_ISA neon_dotprod
#define EDGELM_SIMD_QUANT_ONLY
#define EDGELM_SIMD_BLOCK_QUANT
#include "backends/cpu/simd/entry_points.h"

}  // namespace edgelm::cpu
