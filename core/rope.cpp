#include "core/rope.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace edgelm {

std::vector<float> rope_inv_freq(const RopeParams& params) {
  EDGELM_CHECK(params.head_dim > 0 && params.head_dim % 2 == 0, "[rope] head_dim ", params.head_dim,
               " must be positive and even");
  EDGELM_CHECK(params.theta > 0.0f, "[rope] theta ", params.theta, " must be positive");
  const int64_t n_pairs = params.head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(n_pairs));
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(params.head_dim);
    inv_freq[i] = 1.0f / std::pow(params.theta, exponent);
  }
  if (!params.freq_factors.empty()) {
    EDGELM_CHECK(static_cast<int64_t>(params.freq_factors.size()) == n_pairs, "[rope] ",
                 params.freq_factors.size(), " frequency factors for ", n_pairs, " pairs");
    for (int64_t i = 0; i < n_pairs; ++i) {
      EDGELM_CHECK(params.freq_factors[i] > 0.0f, "[rope] frequency factor ", i, " is ",
                   params.freq_factors[i]);
      inv_freq[i] /= params.freq_factors[i];
    }
    return inv_freq;
  }
  if (params.scaling.type == RopeScaling::Type::None) return inv_freq;

  const RopeScaling& s = params.scaling;
  EDGELM_CHECK(s.factor > 0.0f && s.high_freq_factor > s.low_freq_factor && s.low_freq_factor > 0,
               "[rope] invalid llama3 scaling: factor ", s.factor, ", low_freq_factor ",
               s.low_freq_factor, ", high_freq_factor ", s.high_freq_factor);
  const auto old_context = static_cast<float>(s.original_max_position_embeddings);
  const float low_freq_wavelen = old_context / s.low_freq_factor;
  const float high_freq_wavelen = old_context / s.high_freq_factor;
  const auto two_pi = static_cast<float>(2.0 * std::numbers::pi);
  for (float& f : inv_freq) {
    const float wavelen = two_pi / f;
    if (wavelen > low_freq_wavelen) {
      f = f / s.factor;  // low frequencies: fully scaled
    } else if (wavelen >= high_freq_wavelen) {
      const float smooth =
          (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0f - smooth) * f / s.factor + smooth * f;
    }  // high frequencies: unchanged
  }
  return inv_freq;
}

}  // namespace edgelm
