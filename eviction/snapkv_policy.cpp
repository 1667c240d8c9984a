#include "eviction/snapkv_policy.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"

namespace edgelm {
namespace {

class SnapKvPolicy final : public EvictionPolicy {
 public:
  explicit SnapKvPolicy(const EvictionConfig& c)
      : budget_(c.kv_budget),
        window_(c.snapkv_window),
        kernel_(c.snapkv_kernel),
        max_pool_(c.snapkv_pool == "max"),
        sinks_(*c.sink_tokens) {}
  std::string name() const override { return "snapkv"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  std::optional<int64_t> prefill_limit() const override { return budget_; }
  KeptSlots always_kept() const override { return {.recent = window_}; }
  int64_t stat_channels() const override { return 1; }  // the latest window's attention
  void prepare(int64_t n_layers, int64_t, int64_t capacity) override {
    observed_window_.assign(static_cast<size_t>(n_layers), kNoWindow);
    pooled_.resize(static_cast<size_t>(capacity));
  }
  // Each prompt is compressed by its own observation window: the attention an earlier turn's
  // window paid to the slots still cached must not add to this one's (until a window of this
  // prompt is observed, every slot scores 0).
  void begin_prefill() override {
    std::fill(observed_window_.begin(), observed_window_.end(), kNoWindow);
  }
  // The window is the `window_` queries before prompt_end (the prompt's own end, or a chunk's
  // when the manager asks for the window that scores a compression while the prompt streams).
  // Noted here, as the manager asks once before each step that exports, so that observe() knows
  // whether the step's mass opens a new window or continues one begun in an earlier step.
  std::optional<int64_t> mass_from(Phase phase, int64_t first, int64_t n,
                                   int64_t prompt_end) const override {
    const int64_t window_start = prompt_end - window_;
    if (phase != Phase::Prefill || first + n <= window_start) return std::nullopt;
    asked_window_ = window_start;
    return window_start;
  }
  // A new window replaces the scores of the one before (each compression is ranked by the latest
  // window alone, as one-shot SnapKV ranks by the prompt's last); the steps of one window add up.
  void observe(int64_t layer, Phase phase, const float* mass, const SlotStats& stats) override {
    if (phase != Phase::Prefill) return;
    int64_t& current = observed_window_[static_cast<size_t>(layer)];
    const bool opens = current != asked_window_;
    current = asked_window_;
    for (int64_t g = 0; g < stats.n_kv_heads; ++g) {
      for (int64_t s = 0; s < stats.n_slots; ++s) {
        const float value = mass[g * stats.n_slots + s];
        stats.at(g, s) = opens ? value : stats.at(g, s) + value;
      }
    }
  }
  void score(const LayerSlots& slots, Phase phase, float* scores) override {
    if (phase == Phase::Decode) {
      score_recent(slots, sinks_, scores);
      return;
    }
    const int64_t n = slots.n_slots;
    const int64_t half = kernel_ / 2;
    const bool observed = observed_window_[static_cast<size_t>(slots.layer)] != kNoWindow;
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      for (int64_t s = 0; s < n; ++s) {  // pooling with zero padding, stride 1
        float pooled = 0.0f;             // masses are >= 0, so 0 is also the neutral start for max
        for (int64_t t = std::max<int64_t>(0, s - half); t <= std::min(n - 1, s + half); ++t) {
          const float value = observed ? slots.stats.at(g, t) : 0.0f;
          pooled = max_pool_ ? std::max(pooled, value) : pooled + value;
        }
        pooled_[s] = max_pool_ ? pooled : pooled / static_cast<float>(kernel_);
      }
      // The window's own tokens (the last fed) are always kept.
      for (int64_t s = 0; s < n; ++s) {
        const int32_t position = slots.positions[s * slots.n_kv_heads + g];
        scores[g * n + s] = position >= slots.next_position - window_ ? kAlwaysKeep : pooled_[s];
      }
    }
  }

 private:
  static constexpr int64_t kNoWindow = std::numeric_limits<int64_t>::min();

  int64_t budget_;
  int64_t window_;
  int64_t kernel_;
  bool max_pool_;
  int64_t sinks_;
  std::vector<int64_t> observed_window_;      // per layer: the window whose mass the stats hold
  mutable int64_t asked_window_ = kNoWindow;  // the window of the step that will export next
  std::vector<float> pooled_;                 // [capacity] scratch, sized in prepare()
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_snapkv_policy(const EvictionConfig& c) {
  const int64_t sinks = *c.sink_tokens;
  if (c.snapkv_window < 1 || c.snapkv_window >= c.kv_budget) {
    EDGELM_FAIL("[eviction] snapkv: --snapkv-window ", c.snapkv_window,
                " must be in [1, --kv-budget ", c.kv_budget, ")");
  }
  if (sinks >= c.kv_budget) {
    EDGELM_FAIL("[eviction] snapkv: --sink-tokens ", sinks, " must be below --kv-budget ",
                c.kv_budget);
  }
  if (c.snapkv_kernel < 1 || c.snapkv_kernel % 2 == 0) {
    EDGELM_FAIL("[eviction] --snapkv-kernel ", c.snapkv_kernel, " must be odd and positive");
  }
  if (c.snapkv_pool != "max" && c.snapkv_pool != "avg") {
    EDGELM_FAIL("[eviction] --snapkv-pool '", c.snapkv_pool, "' must be max or avg");
  }
  return std::make_unique<SnapKvPolicy>(c);
}

}  // namespace edgelm
