// The K-quant reference quantizers and dequantizers (core/quant.h).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"

namespace edgelm {
namespace {

// Blocks are copied out of the (possibly unaligned) input with memcpy, which also keeps these
// scalar reference loops free of aliasing questions.
template <class Block>
Block load_block(const void* blocks, int64_t index) {
  Block block;
  std::memcpy(&block, static_cast<const uint8_t*>(blocks) + index * sizeof(Block), sizeof(Block));
  return block;
}

void check_row_length(const char* type_name, int64_t n, int64_t block_size) {
  EDGELM_CHECK(n >= 0 && n % block_size == 0, "[quant] ", type_name, " row length ", n,
               " is not a multiple of ", block_size);
}

// Q4_K element order: the 128 quant bytes form four groups of 32; group g holds sub-blocks 2g (low
// nibbles) and 2g + 1 (high nibbles). So element i of a block is in sub-block s = i / 32 and is
// the low nibble of qs[32 * (s / 2) + i % 32] when s is even, its high nibble when s is odd.
// Q5_K: the low 4 bits are laid out exactly so; the fifth bit of element i (sub-block s = i / 32,
// l = i % 32) is bit s of qh[l]: the 32 qh bytes are shared by all eight sub-blocks, one bit plane
// each.
template <class Block, class Out>
void dequantize_q4_5_K(const void* blocks, Out* out, int64_t n, const char* name) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  check_row_length(name, n, kKQuantBlockSize);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const auto block = load_block<Block>(blocks, b);
    const Out d = f16_to_f32(block.d);
    const Out dmin = f16_to_f32(block.dmin);
    KScales sm;
    unpack_k_scales(block.scales, sm);
    Out* y = out + b * kKQuantBlockSize;
    for (int s = 0; s < 8; ++s) {
      // Factors are formed first, as ggml does, so results match it bit for bit.
      const Out scale = d * static_cast<Out>(sm.scale[s]);
      const Out min = dmin * static_cast<Out>(sm.min[s]);
      const uint8_t* q = block.qs + 32 * (s / 2);
      const int shift = (s % 2) * 4;
      for (int l = 0; l < 32; ++l) {
        int quant = (q[l] >> shift) & 0x0f;
        if constexpr (kFifthBit) quant |= ((block.qh[l] >> s) & 1) << 4;
        y[32 * s + l] = scale * static_cast<Out>(quant) - min;
      }
    }
  }
}

// Q6_K element order: a block is two halves of 128 elements; half h uses ql[64h .. 64h + 64) and
// qh[32h .. 32h + 32). Within a half, element j = 32 * k + l (quarter k in 0..3, l in 0..31) takes
//   low 4 bits:  ql[64h + 32 * (k % 2) + l], low nibble for k < 2, high nibble for k >= 2
//   high 2 bits: bits 2k and 2k + 1 of qh[32h + l]
// and the 6-bit q is stored with a bias of 32. Element i of the block uses scales[i / 16].
template <class Out>
void dequantize_q6_K(const void* blocks, Out* out, int64_t n) {
  check_row_length("q6_K", n, kKQuantBlockSize);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const auto block = load_block<BlockQ6_K>(blocks, b);
    const Out d = f16_to_f32(block.d);
    Out* y = out + b * kKQuantBlockSize;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = block.ql + 64 * h;
      const uint8_t* qh = block.qh + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const int low_shift = (k / 2) * 4;
        for (int l = 0; l < 32; ++l) {
          const int low = (ql[32 * (k % 2) + l] >> low_shift) & 0x0f;
          const int high = (qh[l] >> (2 * k)) & 3;
          const int i = 128 * h + 32 * k + l;
          // (d * scale) * q, the association ggml uses.
          y[i] = d * static_cast<Out>(block.scales[i / 16]) *
                 static_cast<Out>((low | (high << 4)) - 32);
        }
      }
    }
  }
}

// ---- Quantization ----
//
// The encoders redo GGML's reference K-quant quantizers (quantize_row_q4_K_ref, _q5_K_ref and
// _q6_K_ref in ggml-quants.c) one float operation at a time, in float and in GGML's order: the
// searches below compare sums of squares, so a single rounding done differently can pick another
// step and change a whole sub-block's bytes. CMakeLists.txt builds this file with
// -ffp-contract=off for the same reason (a fused multiply-add rounds once where GGML rounds twice).

// A block holding a NaN or an infinity is stored with NaN factors (d, and dmin), as core/quant.cpp
// stores the 32-value types, so it decodes to NaN.
constexpr uint16_t kHalfNaN = 0x7e00;
// GGML's threshold below which a Q6_K group's largest magnitude, or a block's largest scale,
// counts as zero.
constexpr float kGroupZero = 1e-15f;

bool all_finite(const float* block) {
  bool finite = true;
  for (int i = 0; i < kKQuantBlockSize; ++i) finite &= std::isfinite(block[i]);
  return finite;
}

// x rounded to the nearest integer, ties to even, the way GGML's K-quant code rounds: adding
// 1.5 * 2^23 leaves 2^22 + round(x) in the low 23 bits of the float sum (its unit in the last place
// is 1). Meaningful for |x| < 2^22; GGML uses the same bits outside that range, and so does this,
// so even values GGML does not expect there encode the same.
int round_half_even(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x + 12582912.0f);
  return static_cast<int>(bits & 0x7fffffu) - 0x400000;
}

constexpr int kSubBlock = 32;                             // Q4_K/Q5_K elements per scale and min
constexpr int kSubBlocks = kKQuantBlockSize / kSubBlock;  // 8
constexpr int kGroup = 16;                                // Q6_K elements per scale
constexpr int kGroups = kKQuantBlockSize / kGroup;        // 16

// The steps a Q4_K/Q5_K sub-block fit tries after its first guess: range / (top + first +
// increment * i) for i = 0..count.
struct StepSearch {
  float first;
  float increment;
  int count;
};

// value ~ scale * q - offset for the 32 values of one sub-block, q in 0..top, offset >= 0.
struct OffsetFit {
  float scale;
  float offset;
};

// Fits scale and offset to x[0..32) with weights w, writing the quants to q (GGML's
// make_qkx2_quants with squared error). The first guess maps [min(lowest, 0), highest] onto
// 0..top. Each step of `search` then rounds x on its own grid and solves the weighted least squares
// for scale and offset given those quants (an offset that comes out negative is dropped and the
// scale solved alone); each one with a smaller weighted squared error than the best so far
// replaces it.
OffsetFit fit_offset_scale(const float* x, const float* w, int top, StepSearch search, uint8_t* q) {
  float lowest = x[0];
  float highest = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kSubBlock; ++i) {
    if (x[i] < lowest) lowest = x[i];
    if (x[i] > highest) highest = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  float min = lowest > 0.0f ? 0.0f : lowest;  // the grid always reaches down to zero
  if (highest == min) {
    std::fill(q, q + kSubBlock, uint8_t{0});
    return {0.0f, -min};
  }
  const float top_f = static_cast<float>(top);
  float inverse = top_f / (highest - min);
  float scale = 1.0f / inverse;
  float best_error = 0.0f;
  for (int i = 0; i < kSubBlock; ++i) {
    q[i] = static_cast<uint8_t>(std::clamp(round_half_even(inverse * (x[i] - min)), 0, top));
    const float diff = scale * static_cast<float>(q[i]) + min - x[i];
    const float squared = diff * diff;
    best_error += w[i] * squared;
  }
  uint8_t candidate[kSubBlock];
  for (int step = 0; step <= search.count; ++step) {
    inverse =
        (search.first + search.increment * static_cast<float>(step) + top_f) / (highest - min);
    float sum_q = 0.0f, sum_q2 = 0.0f, sum_xq = 0.0f;
    for (int i = 0; i < kSubBlock; ++i) {
      const int level = std::clamp(round_half_even(inverse * (x[i] - min)), 0, top);
      candidate[i] = static_cast<uint8_t>(level);
      const float weighted = w[i] * static_cast<float>(level);
      sum_q += weighted;
      sum_q2 += weighted * static_cast<float>(level);
      sum_xq += weighted * x[i];
    }
    const float determinant = sum_w * sum_q2 - sum_q * sum_q;
    if (!(determinant > 0.0f)) continue;
    float this_scale = (sum_w * sum_xq - sum_x * sum_q) / determinant;
    float this_min = (sum_q2 * sum_x - sum_q * sum_xq) / determinant;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xq / sum_q2;
    }
    float error = 0.0f;
    for (int i = 0; i < kSubBlock; ++i) {
      const float diff = this_scale * static_cast<float>(candidate[i]) + this_min - x[i];
      const float squared = diff * diff;
      error += w[i] * squared;
    }
    if (error < best_error) {
      std::copy(candidate, candidate + kSubBlock, q);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  return {scale, -min};
}

// Q4_K and Q5_K: each sub-block's scale and offset are fitted with weights |x| + the sub-block's
// root mean square; the eight scales are then rounded to 6-bit multiples of d = largest / 63 (the
// offsets likewise of dmin), using the reciprocal of the unrounded d, and every value is
// requantized against its sub-block's rounded scale and offset. A sub-block whose rounded scale
// is zero keeps the quants of its fit (they all decode to -dmin * min).
template <class Block, int kTop>
void quantize_k_4_5(const float* x, Block* y, int64_t n, const char* name, StepSearch search) {
  check_row_length(name, n, kKQuantBlockSize);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* block = x + b * kKQuantBlockSize;
    Block& out = y[b];
    std::memset(&out, 0, sizeof(out));
    if (!all_finite(block)) {
      out.d = kHalfNaN;
      out.dmin = kHalfNaN;
      continue;
    }
    uint8_t q[kKQuantBlockSize];
    OffsetFit fit[kSubBlocks];
    float max_scale = 0.0f, max_offset = 0.0f;
    for (int s = 0; s < kSubBlocks; ++s) {
      const float* sub = block + kSubBlock * s;
      float sum_squares = 0.0f;
      for (int l = 0; l < kSubBlock; ++l) sum_squares += sub[l] * sub[l];
      const float rms = std::sqrt(sum_squares / static_cast<float>(kSubBlock));
      float weights[kSubBlock];
      for (int l = 0; l < kSubBlock; ++l) weights[l] = rms + std::fabs(sub[l]);
      fit[s] = fit_offset_scale(sub, weights, kTop, search, q + kSubBlock * s);
      if (fit[s].scale > max_scale) max_scale = fit[s].scale;
      if (fit[s].offset > max_offset) max_offset = fit[s].offset;
    }
    const float scale_inverse = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float offset_inverse = max_offset > 0.0f ? 63.0f / max_offset : 0.0f;
    uint8_t scale[kSubBlocks], mins[kSubBlocks];
    for (int s = 0; s < kSubBlocks; ++s) {
      // Truncated to a byte before the clamp, as GGML stores them.
      scale[s] = std::min<uint8_t>(
          63, static_cast<uint8_t>(round_half_even(scale_inverse * fit[s].scale)));
      mins[s] = std::min<uint8_t>(
          63, static_cast<uint8_t>(round_half_even(offset_inverse * fit[s].offset)));
    }
    for (int s = 0; s < 4; ++s) {
      out.scales[s] = static_cast<uint8_t>(scale[s] | ((scale[s + 4] >> 4) << 6));
      out.scales[s + 4] = static_cast<uint8_t>(mins[s] | ((mins[s + 4] >> 4) << 6));
      out.scales[s + 8] = static_cast<uint8_t>((scale[s + 4] & 0x0f) | ((mins[s + 4] & 0x0f) << 4));
    }
    out.d = f32_to_f16(max_scale / 63.0f);
    out.dmin = f32_to_f16(max_offset / 63.0f);
    const float d = f16_to_f32(out.d), dmin = f16_to_f32(out.dmin);
    for (int s = 0; s < kSubBlocks; ++s) {
      const float step = d * static_cast<float>(scale[s]);
      if (step == 0.0f) continue;
      const float offset = dmin * static_cast<float>(mins[s]);
      for (int l = 0; l < kSubBlock; ++l) {
        const float scaled = (block[kSubBlock * s + l] + offset) / step;
        q[kSubBlock * s + l] = static_cast<uint8_t>(std::clamp(round_half_even(scaled), 0, kTop));
      }
    }
    for (int i = 0; i < kKQuantBlockSize; ++i) {
      const int s = i / kSubBlock, l = i % kSubBlock;
      out.qs[32 * (s / 2) + l] |= static_cast<uint8_t>((q[i] & 0x0f) << (4 * (s % 2)));
      if constexpr (kTop == 31) out.qh[l] |= static_cast<uint8_t>((q[i] >> 4) << s);
    }
  }
}

// Fits value ~ scale * (q - 32), q in 0..63, to one Q6_K group of 16 values, writing q (GGML's
// make_qx_quants with weights x^2). The first grid maps the value of largest magnitude (the first
// one on ties), e, to -32; eighteen more follow, of step e / -(32 + 0.1 i) for i = -9..-1 and
// 1..9, and each one whose quants explain more of the weighted sum of squares than the best so
// far (a larger (sum w x l)^2 / sum w l^2) replaces it. Returns the least-squares scale of the
// quants kept; a group whose largest magnitude is below kGroupZero gets q = 0 and scale 0.
float fit_symmetric_scale(const float* x, uint8_t* q) {
  float extreme = 0.0f, max_abs = 0.0f;
  for (int i = 0; i < kGroup; ++i) {
    if (std::fabs(x[i]) > max_abs) {
      max_abs = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (max_abs < kGroupZero) {
    std::fill(q, q + kGroup, uint8_t{0});
    return 0.0f;
  }
  // Quants of x on the grid of step 1 / inverse, with the sums of w·x·l and w·l^2.
  const auto round_on = [x](float inverse, int* levels, float& sum_xl, float& sum_l2) {
    sum_xl = 0.0f;
    sum_l2 = 0.0f;
    for (int i = 0; i < kGroup; ++i) {
      levels[i] = std::clamp(round_half_even(inverse * x[i]), -32, 31);
      const float w = x[i] * x[i];
      const float level = static_cast<float>(levels[i]);
      sum_xl += w * x[i] * level;
      sum_l2 += w * level * level;
    }
  };
  int levels[kGroup];
  float sum_xl, sum_l2;
  round_on(-32.0f / extreme, levels, sum_xl, sum_l2);
  float scale = sum_l2 != 0.0f ? sum_xl / sum_l2 : 0.0f;
  float best = scale * sum_xl;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    int candidate[kGroup];
    float candidate_xl, candidate_l2;
    round_on(-(32.0f + 0.1f * static_cast<float>(step)) / extreme, candidate, candidate_xl,
             candidate_l2);
    if (candidate_l2 > 0.0f && candidate_xl * candidate_xl > best * candidate_l2) {
      std::copy(candidate, candidate + kGroup, levels);
      scale = candidate_xl / candidate_l2;
      best = scale * candidate_xl;
    }
  }
  for (int i = 0; i < kGroup; ++i) q[i] = static_cast<uint8_t>(levels[i] + 32);
  return scale;
}

}  // namespace

void quantize_row_q4_K(const float* x, void* y, int64_t n) {
  quantize_k_4_5<BlockQ4_K, 15>(x, static_cast<BlockQ4_K*>(y), n, "q4_K", {-1.0f, 0.1f, 20});
}

void quantize_row_q5_K(const float* x, void* y, int64_t n) {
  quantize_k_4_5<BlockQ5_K, 31>(x, static_cast<BlockQ5_K*>(y), n, "q5_K", {-0.5f, 0.1f, 15});
}

// Q6_K: each group's signed scale is fitted (fit_symmetric_scale); the sixteen scales are rounded
// to signed 8-bit multiples of d = 1 / (-128 / s), s the scale of largest magnitude, which maps s
// itself to -128 (the others' multiples are clamped to at most 127), and every value is
// requantized against its group's rounded scale. A group whose rounded scale is zero keeps the
// quants of its fit; a block whose scales are all below kGroupZero is all zero bytes.
void quantize_row_q6_K(const float* x, void* y, int64_t n) {
  check_row_length("q6_K", n, kKQuantBlockSize);
  auto* blocks = static_cast<BlockQ6_K*>(y);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* block = x + b * kKQuantBlockSize;
    BlockQ6_K& out = blocks[b];
    std::memset(&out, 0, sizeof(out));
    if (!all_finite(block)) {
      out.d = kHalfNaN;
      continue;
    }
    uint8_t q[kKQuantBlockSize];
    float scale[kGroups];
    float extreme = 0.0f, max_abs = 0.0f;
    for (int j = 0; j < kGroups; ++j) {
      scale[j] = fit_symmetric_scale(block + kGroup * j, q + kGroup * j);
      if (std::fabs(scale[j]) > max_abs) {
        max_abs = std::fabs(scale[j]);
        extreme = scale[j];
      }
    }
    if (max_abs < kGroupZero) continue;
    const float inverse = -128.0f / extreme;
    out.d = f32_to_f16(1.0f / inverse);
    for (int j = 0; j < kGroups; ++j)
      out.scales[j] = static_cast<int8_t>(std::min(127, round_half_even(inverse * scale[j])));
    const float d = f16_to_f32(out.d);
    for (int j = 0; j < kGroups; ++j) {
      const float step = d * static_cast<float>(out.scales[j]);
      if (step == 0.0f) continue;
      for (int l = 0; l < kGroup; ++l) {
        const int level = std::clamp(round_half_even(block[kGroup * j + l] / step), -32, 31);
        q[kGroup * j + l] = static_cast<uint8_t>(level + 32);
      }
    }
    for (int i = 0; i < kKQuantBlockSize; ++i) {
      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      out.ql[64 * h + 32 * (k % 2) + l] |= static_cast<uint8_t>((q[i] & 0x0f) << (4 * (k / 2)));
      out.qh[32 * h + l] |= static_cast<uint8_t>((q[i] >> 4) << (2 * k));
    }
  }
}

void unpack_k_scales(const uint8_t* packed, KScales& out) {
  for (int s = 0; s < 4; ++s) {
    out.scale[s] = packed[s] & 0x3f;
    out.min[s] = packed[s + 4] & 0x3f;
  }
  for (int s = 4; s < 8; ++s) {
    out.scale[s] = static_cast<uint8_t>((packed[s + 4] & 0x0f) | ((packed[s - 4] >> 6) << 4));
    out.min[s] = static_cast<uint8_t>((packed[s + 4] >> 4) | ((packed[s] >> 6) << 4));
  }
}

void dequantize_row_q4_K(const void* blocks, float* out, int64_t n) {
  dequantize_q4_5_K<BlockQ4_K>(blocks, out, n, "q4_K");
}
void dequantize_row_q5_K(const void* blocks, float* out, int64_t n) {
  dequantize_q4_5_K<BlockQ5_K>(blocks, out, n, "q5_K");
}
void dequantize_row_q6_K(const void* blocks, float* out, int64_t n) {
  dequantize_q6_K(blocks, out, n);
}
void dequantize_row_q4_K_exact(const void* blocks, double* out, int64_t n) {
  dequantize_q4_5_K<BlockQ4_K>(blocks, out, n, "q4_K");
}
void dequantize_row_q5_K_exact(const void* blocks, double* out, int64_t n) {
  dequantize_q4_5_K<BlockQ5_K>(blocks, out, n, "q5_K");
}
void dequantize_row_q6_K_exact(const void* blocks, double* out, int64_t n) {
  dequantize_q6_K(blocks, out, n);
}

}  // namespace edgelm
