// Quantized-weight matmul (Q8_0, Q4_0) for AArch64, shared by neon.cpp and neon_dotprod.cpp, which
// differ only in the integer dot product of one 32-element block (their `Dot` policy). The rows of
// x are quantized to 8 bits per 32-block (scale max|x|/127, as GGML's Q8_0) once per matmul (by the
// CPU backend through QuantizedMatmul, or at the start of a MatmulFn call); every block product is
// then an integer dot product scaled by d_w·d_x. Blocks are taken four at a
// time, so the four integer sums are reduced into one vector and scaled with one multiply-add
// against the four block scales.
//
// Included by those two files only. Everything here is in an unnamed namespace on purpose: each
// file gets its own copy, compiled with its own flags, so no SDOT-using copy of a function can be
// shared with the baseline file by the linker (see arm.h).
#pragma once

#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "backends/cpu/arm/arm.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {  // NOLINT(cert-dcl59-cpp): one internal copy per including ISA file, see above

constexpr int kBlock = 32;

#include "backends/cpu/simd/x_block_scale.h"

#include "backends/cpu/simd/bands.h"

// Weight rows per chunk (weight_chunk_rows<kChunkBytes>): about 64 KiB of weights, which stay in
// the L2 of even the small cores of phones (Cortex-A55: 64-256 KiB) while every band of x passes
// over them.
constexpr size_t kChunkBytes = size_t{64} << 10;

// Rows of x quantized for one matmul: a view of a buffer laid out [M·K values][M·blocks scales]
// [M·blocks offsets] (kernels.h's quantized_x_bytes).
struct QuantizedX {
  const int8_t* qs;       // [M, K] values in -127..127 (never -128: see Dot::block)
  const float* scale;     // [M, K / 32] d_x per block
  const int32_t* offset;  // [M, K / 32] -8·Σ qs per block: Q4_0's offset of 8, for the block sums
  int64_t blocks;         // K / 32
};

QuantizedX quantized_view(const void* buffer, int64_t M, int64_t K) {
  // M·K is a multiple of 32, so the scales after the values stay aligned.
  const auto* base = static_cast<const char*>(buffer);
  const auto* scale = reinterpret_cast<const float*>(base + M * K);
  return {reinterpret_cast<const int8_t*>(base), scale,
          reinterpret_cast<const int32_t*>(scale + M * (K / kBlock)), K / kBlock};
}

// Rows [m_begin, m_end) of x into the buffer of an M x K quantized x.
void quantize_rows(const float* x, void* buffer, int64_t M, int64_t K, int64_t m_begin,
                   int64_t m_end) {
  const int64_t blocks = K / kBlock;
  auto* qs = static_cast<int8_t*>(buffer);
  auto* scale = reinterpret_cast<float*>(qs + M * K);
  auto* offset = reinterpret_cast<int32_t*>(scale + M * blocks);
  for (int64_t m = m_begin; m < m_end; ++m) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* src = x + m * K + b * kBlock;
      float32x4_t v[8];
      for (int j = 0; j < 8; ++j) v[j] = vld1q_f32(src + 4 * j);
      float32x4_t max_vector = vabsq_f32(v[0]);
      for (int j = 1; j < 8; ++j) max_vector = vmaxq_f32(max_vector, vabsq_f32(v[j]));
      // FMAX and FMAXV return NaN when an operand is NaN, so a NaN in the block reaches max_abs.
      const XBlockScale block_scale = x_block_scale(vmaxvq_f32(max_vector));
      // Round to nearest even, as the x86 kernels do; |v|·127/max ≤ 127, so the saturating
      // narrowings never clip.
      int16x8_t halves[4] = {};
      if (block_scale.finite) {
        for (int j = 0; j < 4; ++j) {
          halves[j] = vcombine_s16(
              vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * j], block_scale.inverse))),
              vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * j + 1], block_scale.inverse))));
        }
      }
      int8_t* dst = qs + m * K + b * kBlock;
      vst1q_s8(dst, vcombine_s8(vqmovn_s16(halves[0]), vqmovn_s16(halves[1])));
      vst1q_s8(dst + 16, vcombine_s8(vqmovn_s16(halves[2]), vqmovn_s16(halves[3])));
      scale[m * blocks + b] = block_scale.scale;
      const int16x8_t sum =
          vaddq_s16(vaddq_s16(halves[0], halves[1]), vaddq_s16(halves[2], halves[3]));
      offset[m * blocks + b] = -8 * vaddlvq_s16(sum);
    }
  }
}

// All of x quantized into per-thread scratch, for a MatmulFn call.
QuantizedX quantize_x(const float* x, int64_t M, int64_t K) {
  void* buffer = scratch(Scratch::kActivations,
                         static_cast<size_t>(M * K) + static_cast<size_t>(M * (K / kBlock)) * 8);
  quantize_rows(x, buffer, M, K, 0, M);
  return quantized_view(buffer, M, K);
}

// Weight block formats: the 32 values of one block as two vectors of signed bytes, elements 0..15
// and 16..31, the order in which x is stored. kOffset<MR>: against MR rows of x, load<true> gives
// Q4_0's values plus 8, and each block's sum takes QuantizedX::offset.
struct Q8_0Format {
  using Block = BlockQ8_0;
  template <int MR>
  static constexpr bool kOffset = false;
  template <bool kBiased>
  static void load(const Block& w, int8x16_t& low, int8x16_t& high) {
    low = vld1q_s8(w.qs);
    high = vld1q_s8(w.qs + 16);
  }
};

struct Q4_0Format {
  using Block = BlockQ4_0;
  // Element i is the low nibble of qs[i], element i + 16 the high one. With one row of x (decode)
  // the offset of 8 is taken off the block's sum (-8·Σx, one add) instead of off every value (two
  // subtractions); with more rows the subtractions are shared by all of them and cost less.
  template <int MR>
  static constexpr bool kOffset = MR == 1;
  template <bool kBiased>
  static void load(const Block& w, int8x16_t& low, int8x16_t& high) {
    const uint8x16_t packed = vld1q_u8(w.qs);
    low = vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f)));
    high = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));
    if constexpr (!kBiased) {
      low = vsubq_s8(low, vdupq_n_s8(8));
      high = vsubq_s8(high, vdupq_n_s8(8));
    }
  }
};

float half_to_float(uint16_t bits) {
  return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(bits))), 0);
}

// Scales of four consecutive blocks as floats.
template <class Block>
float32x4_t block_scales4(const Block* w) {
  uint16x4_t bits = vdup_n_u16(w[0].d);
  bits = vset_lane_u16(w[1].d, bits, 1);
  bits = vset_lane_u16(w[2].d, bits, 2);
  bits = vset_lane_u16(w[3].d, bits, 3);
  return vcvt_f32_f16(vreinterpret_f16_u16(bits));
}

// y[m0 + i, n] for i < MR: one weight row against MR quantized rows of x. Each weight block is
// decoded once for the MR rows.
template <class Format, class Dot, int MR>
void quant_tile(const QuantizedX& xq, const typename Format::Block* w_row, float* y, int64_t N,
                int64_t K, int64_t m0, int64_t n) {
  constexpr bool kOffset = Format::template kOffset<MR>;
  const int64_t blocks = xq.blocks;
  const int8_t* x_rows[MR];
  const float* x_scales[MR];
  const int32_t* x_offsets[MR];
  float32x4_t acc[MR];
  for (int i = 0; i < MR; ++i) {
    x_rows[i] = xq.qs + (m0 + i) * K;
    x_scales[i] = xq.scale + (m0 + i) * blocks;
    x_offsets[i] = xq.offset + (m0 + i) * blocks;
    acc[i] = vdupq_n_f32(0.0f);
  }
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) {
    int32x4_t partial[MR][4];  // per row and block: four lanes that sum to the block's dot product
    for (int j = 0; j < 4; ++j) {
      int8x16_t low, high;
      Format::template load<kOffset>(w_row[b + j], low, high);
      for (int i = 0; i < MR; ++i)
        partial[i][j] = Dot::block(low, high, x_rows[i] + (b + j) * kBlock);
    }
    const float32x4_t w_scale = block_scales4(w_row + b);
    for (int i = 0; i < MR; ++i) {
      // Two pairwise additions leave [Σ block b, Σ b+1, Σ b+2, Σ b+3]. The sums are below
      // 32·128·127 < 2^24 in magnitude, so their conversion to float is exact.
      int32x4_t sums = vpaddq_s32(vpaddq_s32(partial[i][0], partial[i][1]),
                                  vpaddq_s32(partial[i][2], partial[i][3]));
      if constexpr (kOffset) sums = vaddq_s32(sums, vld1q_s32(x_offsets[i] + b));
      acc[i] =
          vfmaq_f32(acc[i], vcvtq_f32_s32(sums), vmulq_f32(w_scale, vld1q_f32(x_scales[i] + b)));
    }
  }
  float tail[MR] = {};
  for (; b < blocks; ++b) {
    int8x16_t low, high;
    Format::template load<kOffset>(w_row[b], low, high);
    const float w_scale = half_to_float(w_row[b].d);
    for (int i = 0; i < MR; ++i) {
      int32_t sum = vaddvq_s32(Dot::block(low, high, x_rows[i] + b * kBlock));
      if constexpr (kOffset) sum += x_offsets[i][b];
      tail[i] += w_scale * x_scales[i][b] * static_cast<float>(sum);
    }
  }
  for (int i = 0; i < MR; ++i) y[(m0 + i) * N + n] = vaddvq_f32(acc[i]) + tail[i];
}

template <class Format, class Dot, int MR>
void quant_band(const QuantizedX& xq, const typename Format::Block* w, float* y, int64_t N,
                int64_t K, int64_t m0, int64_t n_begin, int64_t n_end) {
  for (int64_t n = n_begin; n < n_end; ++n)
    quant_tile<Format, Dot, MR>(xq, w + n * xq.blocks, y, N, K, m0, n);
}

template <class Format, class Dot>
void quant_matmul(const QuantizedX& xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const typename Format::Block*>(w);
  const int64_t chunk =
      weight_chunk_rows<kChunkBytes>(static_cast<size_t>(xq.blocks) * sizeof(*blocks));
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      quant_band<Format, Dot, MR>(xq, blocks, y, N, K, m, chunk_begin, chunk_end);
    });
  }
}

}  // namespace
}  // namespace edgelm::cpu
