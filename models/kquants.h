// Dequantization of rows of any supported GGUF type to F32 (the K-quant block formats themselves
// are core types: core/quant.h).
#pragma once

#include <cstdint>

#include "core/quant.h"
#include "models/gguf.h"

namespace edgelm {

// Dequantize n elements of any supported type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q4_K, Q5_K, Q6_K) to F32. Throws edgelm::Error for I32 and unsupported types, or when n is not a
// multiple of the type's block size.
void dequantize_row_ggml(GgmlType type, const void* data, float* out, int64_t n);

}  // namespace edgelm
