// Host side of kernels/kv.cl: kv_append and kv_compact.
#include "backends/opencl/checks.h"
#include "backends/opencl/opencl_backend.h"

namespace edgelm::opencl {

void OpenClBackend::kv_append(const Tensor& src, const Tensor& slots, const Tensor& cache) {
  EDGELM_CHECK(supports(OpKind::KvAppend, {cache.dtype()}),
               "[opencl] kv_append: unsupported cache ", cache.describe());
  check_dtype(src, DType::F32, "kv_append", "src");
  check_dtype(slots, DType::I32, "kv_append", "slots");
  EDGELM_CHECK(src.rank() == 3 && cache.rank() == 3 && src.dim(1) == cache.dim(1) &&
                   src.dim(2) == cache.dim(2),
               "[opencl] kv_append: src ", src.describe(), " does not match cache ",
               cache.describe());
  EDGELM_CHECK(slots.rank() == 1 && slots.dim(0) == src.dim(0), "[opencl] kv_append: slots ",
               slots.describe(), " must have one entry per token of ", src.describe());
  const int64_t capacity = cache.dim(0);
  check_int32(cache.numel(), "kv_append", "cache elements");
  if (const auto* values = slots.data<int32_t>()) {
    for (int64_t t = 0; t < slots.dim(0); ++t) {
      EDGELM_CHECK(values[t] >= 0 && values[t] < capacity, "[opencl] kv_append: slot ", values[t],
                   " outside the cache capacity ", capacity);
    }
  }
  const int64_t row = src.dim(1) * src.dim(2);
  call("kv_append", "kv", "kv_append")
      .tensor(src, "src")
      .tensor(slots, "slots")
      .tensor(cache, "cache")
      .i32(static_cast<int64_t>(cache.dtype()))
      .i32(row)
      .i32(src.dim(0))
      .i32(capacity)
      .run({static_cast<size_t>(row), static_cast<size_t>(src.dim(0))}, {64, 1});
}

void OpenClBackend::kv_compact(const Tensor& cache, const Tensor& keep) {
  EDGELM_CHECK(supports(OpKind::KvCompact, {cache.dtype()}),
               "[opencl] kv_compact: unsupported cache ", cache.describe());
  check_dtype(keep, DType::I32, "kv_compact", "keep");
  EDGELM_CHECK(cache.rank() == 3, "[opencl] kv_compact: cache must be [capacity, n_kv_heads, ",
               "row], got ", cache.describe());
  const int64_t capacity = cache.dim(0);
  const int64_t n_kv_heads = cache.dim(1);
  EDGELM_CHECK(keep.rank() == 2 && keep.dim(0) == n_kv_heads && keep.dim(1) <= capacity,
               "[opencl] kv_compact: keep ", keep.describe(), " must be [", n_kv_heads,
               ", n_keep <= ", capacity, "]");
  const int64_t n_keep = keep.dim(1);
  check_int32(static_cast<int64_t>(cache.nbytes()), "kv_compact", "cache bytes");
  if (const auto* values = keep.data<int32_t>()) {
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      for (int64_t j = 0; j < n_keep; ++j) {
        const int32_t slot = values[g * n_keep + j];
        EDGELM_CHECK(slot >= 0 && slot < capacity && (j == 0 || slot > values[g * n_keep + j - 1]),
                     "[opencl] kv_compact: keep[", g, ", ", j, "] = ", slot, " must be below ",
                     capacity, " and greater than the previous entry");
      }
    }
  }
  if (n_keep == 0) return;
  const size_t row_bytes = cache.row_bytes();
  const bool words = row_bytes % 4 == 0 && cache.byte_offset() % 4 == 0;
  const size_t row_words = words ? row_bytes / 4 : row_bytes;
  call("kv_compact", "kv", words ? "kv_compact_u32" : "kv_compact_u8")
      .tensor(cache, "cache")
      .tensor(keep, "keep")
      .i32(n_kv_heads)
      .i32(static_cast<int64_t>(row_words))
      .i32(n_keep)
      .i32(capacity)
      .run({row_words, static_cast<size_t>(n_kv_heads)}, {std::min<size_t>(row_words, 64), 1});
}

}  // namespace edgelm::opencl
