// The K-quant reference dequantizers (core/quant.h).
#include <algorithm>
#include <cmath>
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

// Rounds to nearest, ties away from zero, within [lo, hi].
int clamp_round(float x, int lo, int hi) {
  const int q = static_cast<int>(std::lround(x));
  return q < lo ? lo : q > hi ? hi : q;
}

// Q4_K and Q5_K: each sub-block's range [min(0, lowest), highest] gives its step (range / top)
// and min; the eight steps and mins are then rounded to 6 bits against d = largest step / 63 and
// dmin = largest min / 63, and every value to the nearest quant of its sub-block's rounded step
// and min.
template <class Block, int kTop>
void quantize_k_4_5(const float* x, Block* y, int64_t n, const char* name) {
  check_row_length(name, n, kKQuantBlockSize);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* block = x + b * kKQuantBlockSize;
    float step[8], min[8], max_step = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 8; ++s) {
      float lo = 0.0f, hi = 0.0f;
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, block[32 * s + l]);
        hi = std::max(hi, block[32 * s + l]);
      }
      step[s] = (hi - lo) / kTop;
      min[s] = -lo;
      max_step = std::max(max_step, step[s]);
      max_min = std::max(max_min, min[s]);
    }
    const float d = max_step / 63.0f, dmin = max_min / 63.0f;
    Block& out = y[b];
    std::memset(&out, 0, sizeof(out));
    out.d = f32_to_f16(d);
    out.dmin = f32_to_f16(dmin);
    const float d_half = f16_to_f32(out.d), dmin_half = f16_to_f32(out.dmin);
    uint8_t scale[8], mins[8];
    for (int s = 0; s < 8; ++s) {
      scale[s] = static_cast<uint8_t>(d_half > 0.0f ? clamp_round(step[s] / d_half, 0, 63) : 0);
      mins[s] = static_cast<uint8_t>(dmin_half > 0.0f ? clamp_round(min[s] / dmin_half, 0, 63) : 0);
    }
    for (int s = 0; s < 4; ++s) {
      out.scales[s] = static_cast<uint8_t>((scale[s] & 0x3f) | ((scale[s + 4] >> 4) << 6));
      out.scales[s + 4] = static_cast<uint8_t>((mins[s] & 0x3f) | ((mins[s + 4] >> 4) << 6));
      out.scales[s + 8] = static_cast<uint8_t>((scale[s + 4] & 0x0f) | ((mins[s + 4] & 0x0f) << 4));
    }
    for (int s = 0; s < 8; ++s) {
      const float sub_step = d_half * scale[s], sub_min = dmin_half * mins[s];
      for (int l = 0; l < 32; ++l) {
        const int q =
            sub_step > 0.0f ? clamp_round((block[32 * s + l] + sub_min) / sub_step, 0, kTop) : 0;
        out.qs[32 * (s / 2) + l] |= static_cast<uint8_t>((q & 0x0f) << (4 * (s % 2)));
        if constexpr (kTop == 31) out.qh[l] |= static_cast<uint8_t>((q >> 4) << s);
      }
    }
  }
}

}  // namespace

void quantize_row_q4_K(const float* x, void* y, int64_t n) {
  quantize_k_4_5<BlockQ4_K, 15>(x, static_cast<BlockQ4_K*>(y), n, "q4_K");
}

void quantize_row_q5_K(const float* x, void* y, int64_t n) {
  quantize_k_4_5<BlockQ5_K, 31>(x, static_cast<BlockQ5_K*>(y), n, "q5_K");
}

// Q6_K: each 16 values get the step (signed value of largest magnitude) / -32, rounded to a signed
// 8-bit multiple of d = largest |step| / 127; values round to the nearest of -32..31.
void quantize_row_q6_K(const float* x, void* y, int64_t n) {
  check_row_length("q6_K", n, kKQuantBlockSize);
  auto* blocks = static_cast<BlockQ6_K*>(y);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* block = x + b * kKQuantBlockSize;
    float step[16], max_step = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float extreme = 0.0f;
      for (int l = 0; l < 16; ++l) {
        if (std::fabs(block[16 * j + l]) > std::fabs(extreme)) extreme = block[16 * j + l];
      }
      step[j] = extreme / -32.0f;
      max_step = std::max(max_step, std::fabs(step[j]));
    }
    BlockQ6_K& out = blocks[b];
    std::memset(&out, 0, sizeof(out));
    out.d = f32_to_f16(max_step / 127.0f);
    const float d = f16_to_f32(out.d);
    for (int j = 0; j < 16; ++j)
      out.scales[j] = static_cast<int8_t>(d > 0.0f ? clamp_round(step[j] / d, -127, 127) : 0);
    for (int i = 0; i < kKQuantBlockSize; ++i) {
      const float sub_step = d * out.scales[i / 16];
      const int q = (sub_step != 0.0f ? clamp_round(block[i] / sub_step, -32, 31) : 0) + 32;
      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      out.ql[64 * h + 32 * (k % 2) + l] |= static_cast<uint8_t>((q & 0x0f) << (4 * (k / 2)));
      out.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
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
