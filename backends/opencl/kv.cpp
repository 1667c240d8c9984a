// Host side of kernels/kv.cl: kv_append and kv_compact.
#include "backends/opencl/checks.h"
#include "backends/opencl/opencl_backend.h"

namespace edgelm::opencl {

void OpenClBackend::kv_append(const Tensor& src, const Tensor& slots, const Tensor& cache) {
  EDGELM_CHECK(supports(OpKind::KvAppend, {cache.dtype()}),
               "[opencl] kv_append: unsupported cache ", cache.describe());
  op_checks::kv_append("opencl", src, slots, cache);
  const int64_t capacity = cache.dim(0);
  check_int32(cache.numel(), "kv_append", "cache elements");
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
  op_checks::kv_compact("opencl", cache, keep);
  const int64_t capacity = cache.dim(0);
  const int64_t n_kv_heads = cache.dim(1);
  const int64_t n_keep = keep.dim(1);
  check_int32(static_cast<int64_t>(cache.nbytes()), "kv_compact", "cache bytes");
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
