// Host side of kernels/convert.cl: embed and cast.
#include "backends/opencl/checks.h"
#include "backends/opencl/opencl_backend.h"

namespace edgelm::opencl {

void OpenClBackend::embed(const Tensor& table, const Tensor& ids, const Tensor& out) {
  EDGELM_CHECK(supports(OpKind::Embed, {table.dtype()}), "[opencl] embed: unsupported table dtype ",
               table.describe());
  op_checks::embed("opencl", table, ids, out);
  const int64_t vocab = table.dim(0);
  const int64_t dim = table.dim(1);
  check_int32(vocab, "embed", "vocab");
  check_int32(out.numel(), "embed", "elements");
  call("embed", "convert", "embed_rows")
      .tensor(table, "table")
      .tensor(ids, "ids")
      .tensor(out, "out")
      .i32(static_cast<int64_t>(table.dtype()))
      .i32(vocab)
      .i32(dim)
      .i32(ids.dim(0))
      .run({static_cast<size_t>(dim), static_cast<size_t>(ids.dim(0))}, {64, 1});
}

void OpenClBackend::cast(const Tensor& src, const Tensor& dst) {
  EDGELM_CHECK(supports(OpKind::Cast, {src.dtype(), dst.dtype()}), "[opencl] cast: unsupported ",
               dtype_name(src.dtype()), " -> ", dtype_name(dst.dtype()));
  op_checks::cast("opencl", src, dst);
  const int64_t n = src.shape().last();
  const int64_t rows = src.rows();
  check_int32(src.numel(), "cast", "elements");
  const auto src_dtype = static_cast<int64_t>(src.dtype());
  if (!dtype_is_quantized(dst.dtype())) {
    call("cast", "convert", "cast_to_float")
        .tensor(src, "src")
        .tensor(dst, "dst")
        .i32(src_dtype)
        .i32(static_cast<int64_t>(dst.dtype()))
        .i32(n)
        .i32(rows)
        .run({static_cast<size_t>(n), static_cast<size_t>(rows)}, {64, 1});
    return;
  }
  const char* kernel = nullptr;
  switch (dst.dtype()) {
    case DType::Q8_0:
      kernel = "cast_to_q8_0";
      break;
    case DType::Q4_0:
      kernel = "cast_to_q4_0";
      break;
    case DType::Q4_1:
      kernel = "cast_to_q4_1";
      break;
    case DType::Q5_0:
      kernel = "cast_to_q5_0";
      break;
    case DType::Q5_1:
      kernel = "cast_to_q5_1";
      break;
    default:
      EDGELM_FAIL("[opencl] cast: no kernel quantizes to ", dtype_name(dst.dtype()));
  }
  const int64_t blocks = n / dtype_block_size(dst.dtype());
  call("cast", "convert", kernel)
      .tensor(src, "src")
      .tensor(dst, "dst")
      .i32(src_dtype)
      .i32(n)
      .i32(rows)
      .run({static_cast<size_t>(blocks), static_cast<size_t>(rows)}, {1, 1});
}

}  // namespace edgelm::opencl
