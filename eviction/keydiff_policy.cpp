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
  void prepare(int64_t, int64_t, int64_t capacity) override { capacity_ = capacity; }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    check_cached_rows(slots.k, "keydiff");
    const int64_t d = slots.k.dim(2);
    // Sized by the first eviction, then reused: evicting allocates nothing afterwards.
    units_.resize(static_cast<size_t>(capacity_ * d));
    anchor_.resize(static_cast<size_t>(d));
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      // Each key once: converted, normalised (a zero key has no direction and stays 0), summed.
      std::fill(anchor_.begin(), anchor_.end(), 0.0f);
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        float* unit = units_.data() + s * d;
        read_cached_row(slots.k, s, g, unit);
        float squares = 0.0f;
        for (int64_t i = 0; i < d; ++i) squares += unit[i] * unit[i];
        const float scale = squares > 0.0f ? 1.0f / std::sqrt(squares) : 0.0f;
        for (int64_t i = 0; i < d; ++i) {
          unit[i] *= scale;
          anchor_[i] += unit[i];
        }
      }
      // The cosine does not depend on the anchor's length, so the sum serves as the mean.
      float anchor_squares = 0.0f;
      for (const float a : anchor_) anchor_squares += a * a;
      // Keys whose directions cancel out have no angle to speak of: cosine 0.
      const float inverse = anchor_squares > 0.0f ? 1.0f / std::sqrt(anchor_squares) : 0.0f;
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        const float* unit = units_.data() + s * d;
        float along = 0.0f;
        for (int64_t i = 0; i < d; ++i) along += unit[i] * anchor_[i];
        scores[g * slots.n_slots + s] = -along * inverse;
      }
    }
  }

 private:
  int64_t budget_;
  int64_t capacity_ = 0;
  std::vector<float> units_;   // [capacity, head_dim] one kv head's keys, normalised
  std::vector<float> anchor_;  // [head_dim] their sum
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_keydiff_policy(const EvictionConfig& config) {
  return std::make_unique<KeyDiffPolicy>(config);
}

}  // namespace edgelm
