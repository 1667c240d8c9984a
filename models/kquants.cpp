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

}  // namespace

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
