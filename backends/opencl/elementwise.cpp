// Host side of kernels/elementwise.cl: add, silu_mul, rms_norm, softmax, rope.
#include "backends/opencl/checks.h"
#include "backends/opencl/opencl_backend.h"

namespace edgelm::opencl {

void OpenClBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  op_checks::elementwise("opencl", "add", a, b, out);
  check_int32(a.numel(), "add", "elements");
  call("add", "elementwise", "add_f32")
      .tensor(a, "a")
      .tensor(b, "b")
      .tensor(out, "out")
      .i32(a.numel())
      .run({static_cast<size_t>(a.numel())}, {64});
}

void OpenClBackend::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  op_checks::elementwise("opencl", "silu_mul", gate, up, out);
  check_int32(gate.numel(), "silu_mul", "elements");
  call("silu_mul", "elementwise", "silu_mul_f32")
      .tensor(gate, "gate")
      .tensor(up, "up")
      .tensor(out, "out")
      .i32(gate.numel())
      .run({static_cast<size_t>(gate.numel())}, {64});
}

void OpenClBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  op_checks::rms_norm("opencl", x, weight, eps, y);
  const int64_t dim = x.shape().last();
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
  op_checks::softmax("opencl", x, y);
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
  op_checks::rope("opencl", x, positions, inv_freq, out);
  const int64_t n_tokens = x.dim(0);
  const int64_t n_heads = x.dim(1);
  const int64_t head_dim = x.dim(2);
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
