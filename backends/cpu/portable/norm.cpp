#include <cmath>

#include "backends/cpu/portable/portable.h"

namespace edgelm::cpu {

// y = x / sqrt(mean(x²) + eps) * weight; x, y, weight: [dim]. Sum of squares in double.
void f32_rms_norm__portable(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const double inverse_rms = 1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) y[i] = static_cast<float>(x[i] * inverse_rms * weight[i]);
}

}  // namespace edgelm::cpu
