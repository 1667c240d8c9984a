// Reading cached K/V rows on the host, for policies that score by the keys and values themselves
// (KeyDiff, Expected Attention). The manager synchronises the backend before it asks for scores,
// so the shared (zero-copy) cache buffers hold what the kernels wrote.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"

namespace edgelm {

// Copies row (slot, kv_head) of `cache` (F32 or F16 [n_slots, n_kv_heads, head_dim]) into
// out[head_dim] as F32.
inline void read_cached_row(const Tensor& cache, int64_t slot, int64_t kv_head, float* out) {
  const int64_t n_kv_heads = cache.dim(1);
  const int64_t head_dim = cache.dim(2);
  const int64_t offset = (slot * n_kv_heads + kv_head) * head_dim;
  if (cache.dtype() == DType::F16) {
    const uint16_t* row = cache.data<uint16_t>() + offset;
    for (int64_t i = 0; i < head_dim; ++i) out[i] = f16_to_f32(row[i]);
  } else {
    const float* row = cache.data<float>() + offset;
    for (int64_t i = 0; i < head_dim; ++i) out[i] = row[i];
  }
}

// Throws unless `cache` is a K or V view the host can read row by row.
inline void check_cached_rows(const Tensor& cache, const char* policy) {
  EDGELM_CHECK(cache.defined() && cache.rank() == 3 &&
                   (cache.dtype() == DType::F32 || cache.dtype() == DType::F16) &&
                   cache.raw() != nullptr,
               "[eviction] ", policy, " reads cached keys and values on the host; got ",
               cache.defined() ? cache.describe() : std::string("no tensor"));
}

}  // namespace edgelm
