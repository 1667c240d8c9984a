#include "eviction/sink_policy.h"

#include "core/error.h"

namespace edgelm {
namespace {

class SinkPolicy final : public EvictionPolicy {
 public:
  explicit SinkPolicy(const EvictionConfig& c) : window_(*c.window), sinks_(*c.sink_tokens) {}
  std::string name() const override { return "sink"; }
  std::optional<int64_t> own_limit() const override { return window_ + sinks_; }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    score_recent(slots, sinks_, scores);
  }

 private:
  int64_t window_;
  int64_t sinks_;
};

}  // namespace

int64_t sink_budget_window(const EvictionConfig& config) {
  return config.kv_budget - *config.sink_tokens;
}

std::unique_ptr<EvictionPolicy> make_sink_policy(const EvictionConfig& c) {
  const int64_t sinks = *c.sink_tokens;
  if (c.kv_budget > 0 && *c.window < 1 && *c.window == sink_budget_window(c)) {
    EDGELM_FAIL("[eviction] sink: --sink-tokens ", sinks,
                " leave no room for a window in --kv-budget ", c.kv_budget);
  }
  if (c.kv_budget != 0 && sinks >= c.kv_budget) {
    EDGELM_FAIL("[eviction] sink: --sink-tokens ", sinks, " must be below --kv-budget ",
                c.kv_budget, " (the budget must hold them and the newest token)");
  }
  return std::make_unique<SinkPolicy>(c);
}

}  // namespace edgelm
