#include "eviction/keydiff_policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "eviction/cached_rows.h"

namespace edgelm {
namespace {

class KeyDiffPolicy final : public EvictionPolicy {
 public:
  explicit KeyDiffPolicy(const EvictionConfig& c) : budget_(c.kv_budget) {}
  std::string name() const override { return "keydiff"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    check_cached_rows(slots.k, "keydiff");
    const int64_t head_dim = slots.k.dim(2);
    // Sized by the first eviction, then reused: evicting allocates nothing afterwards.
    key_.resize(static_cast<size_t>(head_dim));
    anchor_.resize(static_cast<size_t>(head_dim));
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      std::fill(anchor_.begin(), anchor_.end(), 0.0);
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        read_cached_row(slots.k, s, g, key_.data());
        const double norm = std::sqrt(dot(key_.data(), key_.data(), head_dim));
        if (norm == 0.0) continue;  // a zero key has no direction
        for (int64_t i = 0; i < head_dim; ++i) anchor_[i] += key_[i] / norm;
      }
      // The cosine does not depend on the anchor's length, so the sum serves as the mean.
      double anchor_norm = 0.0;
      for (double a : anchor_) anchor_norm += a * a;
      anchor_norm = std::sqrt(anchor_norm);
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        read_cached_row(slots.k, s, g, key_.data());
        double along = 0.0;
        for (int64_t i = 0; i < head_dim; ++i) along += key_[i] * anchor_[i];
        const double norm = std::sqrt(dot(key_.data(), key_.data(), head_dim));
        // A zero key, or keys whose directions cancel out, have no angle to speak of: cosine 0.
        const double cosine = norm * anchor_norm > 0.0 ? along / (norm * anchor_norm) : 0.0;
        scores[g * slots.n_slots + s] = static_cast<float>(-cosine);
      }
    }
  }

 private:
  static double dot(const float* a, const float* b, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
    return sum;
  }

  int64_t budget_;
  std::vector<float> key_;      // [head_dim] one key as F32
  std::vector<double> anchor_;  // [head_dim] sum of the normalised keys of one kv head
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_keydiff_policy(const EvictionConfig& config) {
  return std::make_unique<KeyDiffPolicy>(config);
}

}  // namespace edgelm
