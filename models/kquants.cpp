#include "models/kquants.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace edgelm {

// Every GGML type that maps to a DType decodes through that type's reference row decoder
// (DTypeInfo::to_f32), a block at a time: each block is first copied out of the (possibly
// unaligned) input into an aligned buffer.
void dequantize_row_ggml(GgmlType type, const void* data, float* out, int64_t n) {
  const std::optional<DType> dtype = dtype_from_ggml(type);
  if (!dtype || dtype_info(*dtype).to_f32 == nullptr) {
    EDGELM_FAIL("[kquants] cannot dequantize type ", static_cast<uint32_t>(type), " (",
                ggml_type_name(type), ") to f32");
  }
  const DTypeInfo& info = dtype_info(*dtype);
  EDGELM_CHECK(n >= 0 && n % info.block_size == 0, "[kquants] ", ggml_type_name(type),
               " row length ", n, " is not a multiple of ", info.block_size);
  alignas(64) unsigned char block[256];  // the largest block, Q6_K's, is 210 bytes
  EDGELM_CHECK(info.block_bytes <= sizeof(block), "[kquants] ", info.name, " blocks too large");
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (int64_t b = 0; b < n / info.block_size; ++b) {
    std::memcpy(block, bytes + static_cast<size_t>(b) * info.block_bytes, info.block_bytes);
    info.to_f32(block, out + b * info.block_size, info.block_size);
  }
}

}  // namespace edgelm
