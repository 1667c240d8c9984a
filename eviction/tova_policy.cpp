#include "eviction/tova_policy.h"

namespace edgelm {
namespace {

class TovaPolicy final : public EvictionPolicy {
 public:
  explicit TovaPolicy(const EvictionConfig& c) : budget_(c.kv_budget) {}
  std::string name() const override { return "tova"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  int64_t stat_channels() const override { return 1; }  // the newest query's attention
  // Only the newest query of the step counts.
  std::optional<int64_t> mass_from(Phase, int64_t first, int64_t n, int64_t) const override {
    return first + n - 1;
  }
  void observe(int64_t, Phase, const float* mass, const SlotStats& stats) override {
    for (int64_t g = 0; g < stats.n_kv_heads; ++g) {
      for (int64_t s = 0; s < stats.n_slots; ++s) stats.at(g, s) = mass[g * stats.n_slots + s];
    }
  }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      for (int64_t s = 0; s < slots.n_slots; ++s)
        scores[g * slots.n_slots + s] = slots.stats.at(g, s);
    }
  }

 private:
  int64_t budget_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_tova_policy(const EvictionConfig& c) {
  return std::make_unique<TovaPolicy>(c);
}

}  // namespace edgelm
