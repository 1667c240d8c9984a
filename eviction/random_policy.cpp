#include "eviction/random_policy.h"

namespace edgelm {
namespace {

// SplitMix64's finaliser (Steele et al., 2014): a bijection on 64 bits whose output bits each
// depend on every input bit, so neighbouring positions get unrelated scores.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class RandomPolicy final : public EvictionPolicy {
 public:
  explicit RandomPolicy(const EvictionConfig& c) : budget_(c.kv_budget), seed_(c.seed) {}
  std::string name() const override { return "random"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        const int32_t position = slots.positions[s * slots.n_kv_heads + g];
        scores[g * slots.n_slots + s] = random_slot_score(seed_, slots.layer, g, position);
      }
    }
  }

 private:
  int64_t budget_;
  uint64_t seed_;
};

}  // namespace

float random_slot_score(uint64_t seed, int64_t layer, int64_t kv_head, int64_t position) {
  uint64_t h = mix(seed);
  h = mix(h ^ static_cast<uint64_t>(layer));
  h = mix(h ^ static_cast<uint64_t>(kv_head));
  h = mix(h ^ static_cast<uint64_t>(position));
  // The top 24 bits: exactly representable in a float, so the score is h / 2^24 without rounding.
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

std::unique_ptr<EvictionPolicy> make_random_policy(const EvictionConfig& config) {
  return std::make_unique<RandomPolicy>(config);
}

}  // namespace edgelm
