// Helpers of the OpenCL op files beyond the ops' shared preconditions (core/op_checks.h).
#pragma once

#include "core/error.h"
#include "core/op_checks.h"
#include "core/tensor.h"

namespace edgelm::opencl {

// Kernel arguments are 32-bit; tensors beyond that are refused rather than truncated.
inline void check_int32(int64_t value, const char* op, const char* what) {
  EDGELM_CHECK(value >= 0 && value <= INT32_MAX, "[opencl] ", op, ": ", what, " = ", value,
               " exceeds the 32-bit index range of the kernels");
}

// Work-group size for row reductions: a power of two, at most 256 and at most the row length
// rounded up (short rows do not need many idle work-items).
inline size_t row_group_size(int64_t row_length) {
  size_t size = 1;
  while (size < 256 && static_cast<int64_t>(size) < row_length) size *= 2;
  return size;
}

}  // namespace edgelm::opencl
