#include <cmath>

#include "backends/cpu/portable/portable.h"

namespace edgelm::cpu {

// One token. x, out: [n_heads, head_dim]; pairs (i, i + head_dim/2) rotate by
// angle = float(position) * inv_freq[i]. The angle is formed in float32 as Hugging Face does; the
// sine, cosine and rotation are evaluated in double.
void f32_rope__portable(const float* x, float* out, int64_t n_heads, int64_t head_dim,
                        int32_t position, const float* inv_freq) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    const double c = std::cos(static_cast<double>(angle));
    const double s = std::sin(static_cast<double>(angle));
    for (int64_t h = 0; h < n_heads; ++h) {
      const double first = x[h * head_dim + i];
      const double second = x[h * head_dim + i + half];
      out[h * head_dim + i] = static_cast<float>(first * c - second * s);
      out[h * head_dim + i + half] = static_cast<float>(second * c + first * s);
    }
  }
}

}  // namespace edgelm::cpu
