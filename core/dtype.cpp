#include "core/dtype.h"

#include <array>
#include <cctype>

#include "core/error.h"
#include "core/quant.h"

namespace edgelm {
namespace {

constexpr std::array<DTypeInfo, kDTypeCount> kInfo = {{
    {"f32", 1, 4, false, true},
    {"f16", 1, 2, false, true},
    {"bf16", 1, 2, false, true},
    {"q8_0", kQ8_0BlockSize, sizeof(BlockQ8_0), true, false},
    {"q4_0", kQ4_0BlockSize, sizeof(BlockQ4_0), true, false},
    {"q4_1", kQ4_1BlockSize, sizeof(BlockQ4_1), true, false},
    {"q5_0", kQ5_0BlockSize, sizeof(BlockQ5_0), true, false},
    {"q5_1", kQ5_1BlockSize, sizeof(BlockQ5_1), true, false},
    {"i32", 1, 4, false, false},
    // Per row and block the same 18 bytes as Q4_0 (BlockQ4_0x8 holds 8 rows of one block).
    {"q4_0x8", kQ4_0BlockSize, sizeof(BlockQ4_0x8) / kQ4_0x8Rows, true, false, kQ4_0x8Rows},
    {"q8_0x8", kQ8_0BlockSize, sizeof(BlockQ8_0x8) / kQ8_0x8Rows, true, false, kQ8_0x8Rows},
    // Rows are cut into chunks of 16 elements (32 bytes per row), which the interleaving moves.
    {"f16x4", kF16x4Chunk, kF16x4Chunk * sizeof(uint16_t), false, true, kF16x4Rows},
}};
static_assert(kInfo.size() == static_cast<size_t>(DType::Count), "one entry per DType");

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  const auto index = static_cast<size_t>(dtype);
  EDGELM_CHECK(index < kInfo.size(), "[dtype] invalid dtype value ", index);
  return kInfo[index];
}

DType dtype_unpacked(DType dtype) {
  switch (dtype) {
    case DType::Q4_0x8:
      return DType::Q4_0;
    case DType::Q8_0x8:
      return DType::Q8_0;
    case DType::F16x4:
      return DType::F16;
    default:
      return dtype;
  }
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
