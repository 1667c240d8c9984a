// Host side of kernels/elementwise.cl: add, silu_mul, rms_norm, softmax, rope.
#include "backends/opencl/checks.h"
#include "backends/opencl/opencl_backend.h"

namespace edgelm::opencl {

void OpenClBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  check_dtype(a, DType::F32, "add", "a");
  check_dtype(b, DType::F32, "add", "b");
  check_dtype(out, DType::F32, "add", "out");
  check_same_shape(a, b, "add");
  check_same_shape(a, out, "add");
  check_int32(a.numel(), "add", "elements");
  call("add", "elementwise", "add_f32")
      .tensor(a, "a")
      .tensor(b, "b")
      .tensor(out, "out")
      .i32(a.numel())
      .run({static_cast<size_t>(a.numel())}, {64});
}

void OpenClBackend::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check_dtype(gate, DType::F32, "silu_mul", "gate");
  check_dtype(up, DType::F32, "silu_mul", "up");
  check_dtype(out, DType::F32, "silu_mul", "out");
  check_same_shape(gate, up, "silu_mul");
  check_same_shape(gate, out, "silu_mul");
  check_int32(gate.numel(), "silu_mul", "elements");
  call("silu_mul", "elementwise", "silu_mul_f32")
      .tensor(gate, "gate")
      .tensor(up, "up")
      .tensor(out, "out")
      .i32(gate.numel())
      .run({static_cast<size_t>(gate.numel())}, {64});
}

void OpenClBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  check_dtype(x, DType::F32, "rms_norm", "x");
  check_dtype(weight, DType::F32, "rms_norm", "weight");
  check_dtype(y, DType::F32, "rms_norm", "y");
  check_same_shape(x, y, "rms_norm");
  const int64_t dim = x.shape().last();
  EDGELM_CHECK(weight.rank() == 1 && weight.dim(0) == dim, "[opencl] rms_norm: weight ",
               weight.describe(), " does not match x ", x.describe());
  EDGELM_CHECK(eps >= 0.0f, "[opencl] rms_norm: negative eps ", eps);
  check_int32(x.numel(), "rms_norm", "elements");
  const size_t group = row_group_size(dim);
  call("rms_norm", "elementwise", "rms_norm_f32")
      .tensor(x, "x")
      .tensor(weight, "weight")
      .tensor(y, "y")
      .i32(dim)
      .f32(eps)
      .local(group * sizeof(float))
      .run({static_cast<size_t>(x.rows()) * group}, {group});
}

void OpenClBackend::softmax(const Tensor& x, const Tensor& y) {
  check_dtype(x, DType::F32, "softmax", "x");
  check_dtype(y, DType::F32, "softmax", "y");
  check_same_shape(x, y, "softmax");
  check_int32(x.numel(), "softmax", "elements");
  const int64_t n = x.shape().last();
  const size_t group = row_group_size(n);
  call("softmax", "elementwise", "softmax_f32")
      .tensor(x, "x")
      .tensor(y, "y")
      .i32(n)
      .local(group * sizeof(float))
      .run({static_cast<size_t>(x.rows()) * group}, {group});
}

void OpenClBackend::rope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                         const Tensor& out) {
  check_dtype(x, DType::F32, "rope", "x");
  check_dtype(out, DType::F32, "rope", "out");
  check_dtype(positions, DType::I32, "rope", "positions");
  check_dtype(inv_freq, DType::F32, "rope", "inv_freq");
  check_same_shape(x, out, "rope");
  EDGELM_CHECK(x.rank() == 3 && x.dim(2) % 2 == 0, "[opencl] rope: x must be [n_tokens, ",
               "n_heads, head_dim] with even head_dim, got ", x.describe());
  const int64_t n_tokens = x.dim(0);
  const int64_t n_heads = x.dim(1);
  const int64_t head_dim = x.dim(2);
  EDGELM_CHECK(positions.rank() == 1 && positions.dim(0) == n_tokens, "[opencl] rope: positions ",
               positions.describe(), " does not match ", x.describe());
  EDGELM_CHECK(inv_freq.rank() == 1 && inv_freq.dim(0) == head_dim / 2, "[opencl] rope: inv_freq ",
               inv_freq.describe(), " must have head_dim / 2 = ", head_dim / 2, " entries");
  check_int32(x.numel(), "rope", "elements");
  call("rope", "elementwise", "rope_f32")
      .tensor(x, "x")
      .tensor(positions, "positions")
      .tensor(inv_freq, "inv_freq")
      .tensor(out, "out")
      .i32(n_heads)
      .i32(head_dim)
      .i32(n_tokens)
      .run({static_cast<size_t>(head_dim / 2), static_cast<size_t>(n_heads),
            static_cast<size_t>(n_tokens)},
           {static_cast<size_t>(std::min<int64_t>(head_dim / 2, 64)), 1, 1});
}

}  // namespace edgelm::opencl
