#include "core/dtype.h"

#include <array>
#include <cctype>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"

namespace edgelm {
namespace {

void f32_row(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void f16_row(const void* src, float* dst, int64_t n) {
  const auto* halves = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(halves[i]);
}
void bf16_row(const void* src, float* dst, int64_t n) {
  const auto* halves = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(halves[i]);
}
template <class Block, void (*kDequantize)(const Block*, float*, int64_t)>
void block_row(const void* src, float* dst, int64_t n) {
  kDequantize(static_cast<const Block*>(src), dst, n);
}

using A = ActivationFormat;
constexpr DType kSelf = DType::Count;
constexpr std::array<DTypeInfo, kDTypeCount> kInfo = {{
    {"f32", 1, 4, false, true, 1, kSelf, A::F32, f32_row},
    {"f16", 1, 2, false, true, 1, kSelf, A::F32, f16_row},
    {"bf16", 1, 2, false, true, 1, kSelf, A::F32, bf16_row},
    {"q8_0", kQ8_0BlockSize, sizeof(BlockQ8_0), true, false, 1, kSelf, A::Q8_0,
     block_row<BlockQ8_0, dequantize_row_q8_0>},
    {"q4_0", kQ4_0BlockSize, sizeof(BlockQ4_0), true, false, 1, kSelf, A::Q8_0,
     block_row<BlockQ4_0, dequantize_row_q4_0>},
    {"q4_1", kQ4_1BlockSize, sizeof(BlockQ4_1), true, false, 1, kSelf, A::Q8_1,
     block_row<BlockQ4_1, dequantize_row_q4_1>},
    {"q5_0", kQ5_0BlockSize, sizeof(BlockQ5_0), true, false, 1, kSelf, A::Q8_0,
     block_row<BlockQ5_0, dequantize_row_q5_0>},
    {"q5_1", kQ5_1BlockSize, sizeof(BlockQ5_1), true, false, 1, kSelf, A::Q8_1,
     block_row<BlockQ5_1, dequantize_row_q5_1>},
    {"i32", 1, 4, false, false},
    // Per row and block the same 18 bytes as Q4_0 (BlockQ4_0x8 holds 8 rows of one block).
    {"q4_0x8", kQ4_0BlockSize, sizeof(BlockQ4_0x8) / kQ4_0x8Rows, true, false, kQ4_0x8Rows,
     DType::Q4_0, A::Q8_0},
    {"q8_0x8", kQ8_0BlockSize, sizeof(BlockQ8_0x8) / kQ8_0x8Rows, true, false, kQ8_0x8Rows,
     DType::Q8_0, A::Q8_0},
    // Rows are cut into chunks of 16 elements (32 bytes per row), which the interleaving moves.
    {"f16x4", kF16x4Chunk, kF16x4Chunk * sizeof(uint16_t), false, true, kF16x4Rows, DType::F16},
    {"q4_k", kKQuantBlockSize, sizeof(BlockQ4_K), true, false, 1, kSelf, A::Q8_K,
     dequantize_row_q4_K},
    {"q5_k", kKQuantBlockSize, sizeof(BlockQ5_K), true, false, 1, kSelf, A::Q8_K,
     dequantize_row_q5_K},
    {"q6_k", kKQuantBlockSize, sizeof(BlockQ6_K), true, false, 1, kSelf, A::Q8_K,
     dequantize_row_q6_K},
    // Per row and super-block the same bytes as Q4_K and Q6_K.
    {"q4_kx8", kKQuantBlockSize, sizeof(BlockQ4_Kx8) / kKx8Rows, true, false, kKx8Rows, DType::Q4_K,
     A::Q8_K},
    {"q6_kx8", kKQuantBlockSize, sizeof(BlockQ6_Kx8) / kKx8Rows, true, false, kKx8Rows, DType::Q6_K,
     A::Q8_K},
}};
static_assert(kInfo.size() == static_cast<size_t>(DType::Count), "one entry per DType");

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  const auto index = static_cast<size_t>(dtype);
  EDGELM_CHECK(index < kInfo.size(), "[dtype] invalid dtype value ", index);
  return kInfo[index];
}

DType dtype_unpacked(DType dtype) {
  const DType stored = dtype_info(dtype).stored;
  return stored == kSelf ? dtype : stored;
}

size_t dtype_row_bytes(DType dtype, int64_t n) {
  const DTypeInfo& info = dtype_info(dtype);
  EDGELM_CHECK(n >= 0 && n % info.block_size == 0, "[dtype] ", info.name, ": row of ", n,
               " elements is not a multiple of the block size ", info.block_size);
  return static_cast<size_t>(n / info.block_size) * info.block_bytes;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    std::string_view candidate = kInfo[i].name;
    if (candidate.size() != name.size()) continue;
    bool equal = true;
    for (size_t c = 0; c < name.size(); ++c) {
      if (std::tolower(static_cast<unsigned char>(name[c])) != candidate[c]) equal = false;
    }
    if (equal) return static_cast<DType>(i);
  }
  return std::nullopt;
}

}  // namespace edgelm
