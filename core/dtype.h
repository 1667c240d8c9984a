// Element types of tensors, and their storage geometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace edgelm {

// Storage types. Activations are F32; weights F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 and the
// K-quants Q4_K/Q5_K/Q6_K; KV cache F32/F16; token ids and positions I32. The Q types are the
// GGML/GGUF block formats (see core/quant.h). Q4_0x8,
// Q8_0x8, Q4_Kx8, Q6_Kx8 and F16x4 are Q4_0, Q8_0, Q4_K, Q6_K and F16 repacked at load for the
// CPU's matmul: the same bytes per weight, groups of rows interleaved (eight rows block by block,
// BlockQ4_0x8, BlockQ8_0x8, BlockQ4_Kx8, BlockQ6_Kx8; four F16 rows 16 elements at a time), so they
// only exist for matrices of whole row groups and only as matmul weights; files never hold them.
// The order is also that of the DT_* codes of the OpenCL kernels (kernels/common.cl).
enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  I32,
  Q4_0x8,
  Q8_0x8,
  F16x4,
  Q4_K,
  Q5_K,
  Q6_K,
  Q4_Kx8,
  Q6_Kx8,
  Count
};
inline constexpr int kDTypeCount = static_cast<int>(DType::Count);

// How a quantized dot product rounds the activations it multiplies weights of a type by, as GGML's
// reference dot product for that type does: F32 (no rounding: float weights), Q8_0 (8 bits per
// block of 32, step max|x|/127), Q8_1 (the same rounding, with each block's sum of quants, for the
// types whose values carry an offset), Q8_K (8 bits per block of 256, one step for all of it, with
// sums per 16). The CPU's SIMD tables and the portable oracle differ by exactly this rounding.
enum class ActivationFormat : uint8_t { F32, Q8_0, Q8_1, Q8_K };

// One row per storage type: everything the library needs to know about a type to store, decode
// and multiply it (docs/adding_a_kernel.md says what adding a type takes).
struct DTypeInfo {
  const char* name;    // lower case, as used on the command line: "f32", "q4_0"
  int64_t block_size;  // elements per block (1 for plain types)
  size_t block_bytes;  // bytes per block
  bool is_quantized;
  bool is_float;  // F32, F16, BF16, F16x4
  // Rows stored together (1: every row is contiguous; Q4_0x8, Q8_0x8, Q4_Kx8, Q6_Kx8: groups of 8
  // rows interleaved, F16x4: groups of 4, so a tensor needs a multiple of that many rows and has
  // no addressable single row).
  int64_t row_group = 1;
  // The stored type a load-time layout interleaves (Q4_0x8 -> Q4_0); every other type its own.
  DType stored = DType::Count;  // Count: the type itself (see dtype_unpacked)
  ActivationFormat activation = ActivationFormat::F32;
  // Decodes n elements (whole blocks) of a row of this type to F32, as GGML's reference
  // dequantizer does; null for I32 and the interleaved layouts (whose rows are not contiguous).
  void (*to_f32)(const void* src, float* dst, int64_t n) = nullptr;
};

const DTypeInfo& dtype_info(DType dtype);
inline const char* dtype_name(DType dtype) {
  return dtype_info(dtype).name;
}
inline int64_t dtype_block_size(DType dtype) {
  return dtype_info(dtype).block_size;
}
inline size_t dtype_block_bytes(DType dtype) {
  return dtype_info(dtype).block_bytes;
}
inline bool dtype_is_quantized(DType dtype) {
  return dtype_info(dtype).is_quantized;
}
inline int64_t dtype_row_group(DType dtype) {
  return dtype_info(dtype).row_group;
}

// The stored type whose rows a load-time layout interleaves (Q4_0x8 -> Q4_0, Q8_0x8 -> Q8_0,
// Q4_Kx8 -> Q4_K, Q6_Kx8 -> Q6_K, F16x4 -> F16); any other dtype is its own.
DType dtype_unpacked(DType dtype);

// Bytes of a row of n elements. Throws edgelm::Error when n is not a multiple of the block size.
size_t dtype_row_bytes(DType dtype, int64_t n);

// Parses a name as printed by dtype_name (case-insensitive); nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace edgelm
