// Reference element-wise and row-wise ops, evaluated in double.
#include <cmath>
#include <limits>

#include "backends/cpu/portable/portable.h"

namespace edgelm::cpu {

void f32_softmax__portable(const float* x, float* y, int64_t n) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - max_value);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::exp(x[i] - max_value) / sum);
}

void f32_silu_mul__portable(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void f32_add__portable(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace edgelm::cpu
