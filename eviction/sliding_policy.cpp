#include "eviction/sliding_policy.h"

#include "core/error.h"

namespace edgelm {
namespace {

class SlidingPolicy final : public EvictionPolicy {
 public:
  explicit SlidingPolicy(const EvictionConfig& c)
      : window_(*c.window), prefix_(c.protected_prefix) {}
  std::string name() const override { return "sliding"; }
  std::optional<int64_t> own_limit() const override { return window_ + prefix_; }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    score_recent(slots, prefix_, scores);
  }

 private:
  int64_t window_;
  int64_t prefix_;
};

}  // namespace

int64_t sliding_budget_window(const EvictionConfig& config) {
  return config.kv_budget - config.protected_prefix;
}

std::unique_ptr<EvictionPolicy> make_sliding_policy(const EvictionConfig& c) {
  if (c.kv_budget > 0 && *c.window < 1 && *c.window == sliding_budget_window(c)) {
    EDGELM_FAIL("[eviction] sliding: --protected-prefix ", c.protected_prefix,
                " leaves no room for a window in --kv-budget ", c.kv_budget);
  }
  // The prefix is always kept: the budget must hold it and the newest token.
  if (c.kv_budget != 0 && c.protected_prefix >= c.kv_budget) {
    EDGELM_FAIL("[eviction] sliding: --protected-prefix ", c.protected_prefix,
                " must be below --kv-budget ", c.kv_budget,
                " (the budget must hold them and the newest token)");
  }
  return std::make_unique<SlidingPolicy>(c);
}

}  // namespace edgelm
