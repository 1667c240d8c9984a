#include "eviction/h2o_policy.h"

#include "core/error.h"

namespace edgelm {
namespace {

class H2oPolicy final : public EvictionPolicy {
 public:
  explicit H2oPolicy(const EvictionConfig& c) : budget_(c.kv_budget), recent_(*c.window) {}
  std::string name() const override { return "h2o"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  KeptSlots always_kept() const override { return {.recent = recent_}; }
  int64_t stat_channels() const override { return 1; }  // the accumulated mass
  std::optional<int64_t> mass_from(Phase, int64_t first, int64_t, int64_t) const override {
    return first;
  }
  void observe(int64_t, Phase, const float* mass, const SlotStats& stats) override {
    for (int64_t g = 0; g < stats.n_kv_heads; ++g) {
      for (int64_t s = 0; s < stats.n_slots; ++s) stats.at(g, s) += mass[g * stats.n_slots + s];
    }
  }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        const int32_t position = slots.positions[s * slots.n_kv_heads + g];
        // The window counts the tokens about to be appended, so after the step it holds exactly
        // the `recent_` newest and the budget's remainder goes to heavy hitters.
        const bool recent = position >= slots.next_position + slots.incoming - recent_;
        scores[g * slots.n_slots + s] = recent ? kAlwaysKeep : slots.stats.at(g, s);
      }
    }
  }

 private:
  int64_t budget_;
  int64_t recent_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_h2o_policy(const EvictionConfig& c) {
  if (c.kv_budget < 2) {
    EDGELM_FAIL("[eviction] h2o: --kv-budget ", c.kv_budget,
                " holds no heavy hitter beside the recent window (use at least 2)");
  }
  if (*c.window >= c.kv_budget) {
    EDGELM_FAIL("[eviction] h2o: --eviction-window ", *c.window,
                " (recent tokens) must be below --kv-budget ", c.kv_budget,
                " to leave room for heavy hitters");
  }
  return std::make_unique<H2oPolicy>(c);
}

}  // namespace edgelm
