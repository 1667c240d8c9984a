#include "models/kquants.h"

#include <cstring>

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
  EDGELM_CHECK(n >= 0 && n % block_size == 0, "[kquants] ", type_name, " row length ", n,
               " is not a multiple of ", block_size);
}

// The 12 scale bytes of Q4_K and Q5_K hold eight 6-bit scales and eight 6-bit mins, one pair per
// sub-block s of 32 elements:
//   s in 0..3: scale = low 6 bits of byte s,      min = low 6 bits of byte s + 4
//   s in 4..7: scale = low nibble of byte s + 4,  min = high nibble of byte s + 4,
//              and their top two bits are the top two bits of byte s - 4 (scale) and byte s
//              (min), the bits that sub-blocks 0..3 leave free.
struct ScalesAndMins {
  uint8_t scale[8];
  uint8_t min[8];
};

ScalesAndMins unpack_scales_and_mins(const uint8_t packed[kKQuantScaleBytes]) {
  ScalesAndMins result;
  for (int s = 0; s < 4; ++s) {
    result.scale[s] = packed[s] & 0x3f;
    result.min[s] = packed[s + 4] & 0x3f;
  }
  for (int s = 4; s < 8; ++s) {
    result.scale[s] = static_cast<uint8_t>((packed[s + 4] & 0x0f) | ((packed[s - 4] >> 6) << 4));
    result.min[s] = static_cast<uint8_t>((packed[s + 4] >> 4) | ((packed[s] >> 6) << 4));
  }
  return result;
}

}  // namespace

// Q4_K element order: the 128 quant bytes form four groups of 32; group g holds sub-blocks 2g (low
// nibbles) and 2g + 1 (high nibbles). So element i of a block is in sub-block s = i / 32 and is
// the low nibble of qs[32 * (s / 2) + i % 32] when s is even, its high nibble when s is odd.
void dequantize_row_q4_K(const void* blocks, float* out, int64_t n) {
  check_row_length("q4_K", n, kKQuantBlockSize);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const auto block = load_block<BlockQ4_K>(blocks, b);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    const ScalesAndMins sm = unpack_scales_and_mins(block.scales);
    float* y = out + b * kKQuantBlockSize;
    for (int s = 0; s < 8; ++s) {
      // Factors are formed first, as ggml does, so results match it bit for bit.
      const float scale = d * static_cast<float>(sm.scale[s]);
      const float min = dmin * static_cast<float>(sm.min[s]);
      const uint8_t* q = block.qs + 32 * (s / 2);
      const int shift = (s % 2) * 4;
      for (int l = 0; l < 32; ++l) {
        y[32 * s + l] = scale * static_cast<float>((q[l] >> shift) & 0x0f) - min;
      }
    }
  }
}

// Q5_K: the low 4 bits are laid out exactly as Q4_K's quants. The fifth bit of element i
// (sub-block s = i / 32, l = i % 32) is bit s of qh[l]: the 32 qh bytes are shared by all eight
// sub-blocks, one bit plane each.
void dequantize_row_q5_K(const void* blocks, float* out, int64_t n) {
  check_row_length("q5_K", n, kKQuantBlockSize);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const auto block = load_block<BlockQ5_K>(blocks, b);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    const ScalesAndMins sm = unpack_scales_and_mins(block.scales);
    float* y = out + b * kKQuantBlockSize;
    for (int s = 0; s < 8; ++s) {
      const float scale = d * static_cast<float>(sm.scale[s]);
      const float min = dmin * static_cast<float>(sm.min[s]);
      const uint8_t* q = block.qs + 32 * (s / 2);
      const int shift = (s % 2) * 4;
      for (int l = 0; l < 32; ++l) {
        const int low = (q[l] >> shift) & 0x0f;
        const int high = (block.qh[l] >> s) & 1;
        y[32 * s + l] = scale * static_cast<float>(low | (high << 4)) - min;
      }
    }
  }
}

// Q6_K element order: a block is two halves of 128 elements; half h uses ql[64h .. 64h + 64) and
// qh[32h .. 32h + 32). Within a half, element j = 32 * k + l (quarter k in 0..3, l in 0..31) takes
//   low 4 bits:  ql[64h + 32 * (k % 2) + l], low nibble for k < 2, high nibble for k >= 2
//   high 2 bits: bits 2k and 2k + 1 of qh[32h + l]
// and the 6-bit q is stored with a bias of 32. Element i of the block uses scales[i / 16].
void dequantize_row_q6_K(const void* blocks, float* out, int64_t n) {
  check_row_length("q6_K", n, kKQuantBlockSize);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const auto block = load_block<BlockQ6_K>(blocks, b);
    const float d = f16_to_f32(block.d);
    float* y = out + b * kKQuantBlockSize;
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
          y[i] = d * static_cast<float>(block.scales[i / 16]) *
                 static_cast<float>((low | (high << 4)) - 32);
        }
      }
    }
  }
}

void dequantize_row_ggml(GgmlType type, const void* data, float* out, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  switch (type) {
    case GgmlType::F32:
      check_row_length("f32", n, 1);
      std::memcpy(out, data, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
    case GgmlType::BF16: {
      check_row_length(ggml_type_name(type), n, 1);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t half;
        std::memcpy(&half, bytes + 2 * i, sizeof(half));
        out[i] = type == GgmlType::F16 ? f16_to_f32(half) : bf16_to_f32(half);
      }
      return;
    }
    case GgmlType::Q8_0:
      check_row_length("q8_0", n, kQ8_0BlockSize);
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const auto block = load_block<BlockQ8_0>(data, b);
        dequantize_row_q8_0(&block, out + b * kQ8_0BlockSize, kQ8_0BlockSize);
      }
      return;
    case GgmlType::Q4_0:
      check_row_length("q4_0", n, kQ4_0BlockSize);
      for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
        const auto block = load_block<BlockQ4_0>(data, b);
        dequantize_row_q4_0(&block, out + b * kQ4_0BlockSize, kQ4_0BlockSize);
      }
      return;
    case GgmlType::Q4_1:
      check_row_length("q4_1", n, kQ4_1BlockSize);
      for (int64_t b = 0; b < n / kQ4_1BlockSize; ++b) {
        const auto block = load_block<BlockQ4_1>(data, b);
        dequantize_row_q4_1(&block, out + b * kQ4_1BlockSize, kQ4_1BlockSize);
      }
      return;
    case GgmlType::Q5_0:
      check_row_length("q5_0", n, kQ5_0BlockSize);
      for (int64_t b = 0; b < n / kQ5_0BlockSize; ++b) {
        const auto block = load_block<BlockQ5_0>(data, b);
        dequantize_row_q5_0(&block, out + b * kQ5_0BlockSize, kQ5_0BlockSize);
      }
      return;
    case GgmlType::Q5_1:
      check_row_length("q5_1", n, kQ5_1BlockSize);
      for (int64_t b = 0; b < n / kQ5_1BlockSize; ++b) {
        const auto block = load_block<BlockQ5_1>(data, b);
        dequantize_row_q5_1(&block, out + b * kQ5_1BlockSize, kQ5_1BlockSize);
      }
      return;
    case GgmlType::Q4_K:
      dequantize_row_q4_K(data, out, n);
      return;
    case GgmlType::Q5_K:
      dequantize_row_q5_K(data, out, n);
      return;
    case GgmlType::Q6_K:
      dequantize_row_q6_K(data, out, n);
      return;
    default:
      break;
  }
  EDGELM_FAIL("[kquants] cannot dequantize type ", static_cast<uint32_t>(type), " (",
              ggml_type_name(type), ") to f32");
}

}  // namespace edgelm
