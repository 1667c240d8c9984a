#include "eviction/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "eviction/expected_attention_policy.h"
#include "eviction/keydiff_policy.h"
#include "eviction/protect_policy.h"
#include "eviction/pyramid_budget.h"
#include "eviction/random_policy.h"

namespace edgelm {
namespace {

// Scores by recency; the first `protected_count` logical positions are always kept.
// Used by sliding (protected prefix) and sink (attention sinks).
void score_recent(const LayerSlots& slots, int64_t protected_count, float* scores) {
  for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
    for (int64_t s = 0; s < slots.n_slots; ++s) {
      const int32_t position = slots.positions[s * slots.n_kv_heads + g];
      scores[g * slots.n_slots + s] =
          position < protected_count ? kAlwaysKeep : static_cast<float>(position);
    }
  }
}

class NonePolicy final : public EvictionPolicy {
 public:
  std::string name() const override { return "none"; }
  bool evicts() const override { return false; }
  void score(const LayerSlots&, Phase, float*) override {}
};

// Keep the most recent `window` tokens plus the first `protected_prefix`.
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

// StreamingLLM (Xiao et al., 2023): the first tokens act as attention sinks; keep them and a
// window of recent tokens.
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

// Per-layer [n_kv_heads, capacity] accumulators that follow compaction.
class SlotValues {
 public:
  void prepare(int64_t n_layers, int64_t n_kv_heads, int64_t capacity) {
    n_kv_heads_ = n_kv_heads;
    capacity_ = capacity;
    values_.assign(static_cast<size_t>(n_layers),
                   std::vector<float>(static_cast<size_t>(n_kv_heads * capacity), 0.0f));
    filled_.assign(static_cast<size_t>(n_layers), 0);
  }
  float* row(int64_t layer, int64_t g) { return values_[layer].data() + g * capacity_; }
  // Zeroes the entries of slots appended since the last call.
  void grow(int64_t layer, int64_t n_slots) {
    for (int64_t g = 0; g < n_kv_heads_; ++g) {
      std::fill(row(layer, g) + std::min(filled_[layer], n_slots), row(layer, g) + n_slots, 0.0f);
    }
    filled_[layer] = n_slots;
  }
  void add(int64_t layer, const float* mass, int64_t n_slots) {
    grow(layer, n_slots);
    for (int64_t g = 0; g < n_kv_heads_; ++g) {
      float* values = row(layer, g);
      for (int64_t s = 0; s < n_slots; ++s) values[s] += mass[g * n_slots + s];
    }
  }
  void set(int64_t layer, const float* mass, int64_t n_slots) {
    filled_[layer] = 0;
    add(layer, mass, n_slots);
  }
  void compact(int64_t layer, const int32_t* keep, int64_t n_keep) {
    for (int64_t g = 0; g < n_kv_heads_; ++g) {
      float* values = row(layer, g);
      for (int64_t j = 0; j < n_keep; ++j)
        values[j] = values[keep[g * n_keep + j]];  // keep is increasing
    }
    filled_[layer] = n_keep;
  }
  void clear() {
    for (auto& layer : values_) std::fill(layer.begin(), layer.end(), 0.0f);
    std::fill(filled_.begin(), filled_.end(), 0);
  }

 private:
  int64_t n_kv_heads_ = 0;
  int64_t capacity_ = 0;
  std::vector<std::vector<float>> values_;
  std::vector<int64_t> filled_;
};

// H2O (Zhang et al., 2023): "heavy hitters" are the slots with the largest attention mass
// accumulated over every query so far (prompt and decode); keep them plus a recent window.
class H2oPolicy final : public EvictionPolicy {
 public:
  explicit H2oPolicy(const EvictionConfig& c) : budget_(c.kv_budget), recent_(*c.window) {}
  std::string name() const override { return "h2o"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  void prepare(int64_t n_layers, int64_t n_kv_heads, int64_t capacity) override {
    accumulated_.prepare(n_layers, n_kv_heads, capacity);
  }
  std::optional<int64_t> mass_from(Phase, int64_t first, int64_t, int64_t) const override {
    return first;
  }
  void observe(int64_t layer, Phase, const float* mass, int64_t, int64_t n_slots) override {
    accumulated_.add(layer, mass, n_slots);
  }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    accumulated_.grow(slots.layer, slots.n_slots);
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      const float* values = accumulated_.row(slots.layer, g);
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        const int32_t position = slots.positions[s * slots.n_kv_heads + g];
        // The window counts the tokens about to be appended, so after the step it holds exactly
        // the `recent_` newest and the budget's remainder goes to heavy hitters.
        const bool recent = position >= slots.next_position + slots.incoming - recent_;
        scores[g * slots.n_slots + s] = recent ? kAlwaysKeep : values[s];
      }
    }
  }
  void on_compact(int64_t layer, const int32_t* keep, int64_t, int64_t n_keep) override {
    accumulated_.compact(layer, keep, n_keep);
  }

 private:
  int64_t budget_;
  int64_t recent_;
  SlotValues accumulated_;
};

// TOVA (Oren et al., 2024): the cache as a bounded multi-state RNN; when over budget, drop the
// slots the current query attends to least.
class TovaPolicy final : public EvictionPolicy {
 public:
  explicit TovaPolicy(const EvictionConfig& c) : budget_(c.kv_budget) {}
  std::string name() const override { return "tova"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  void prepare(int64_t n_layers, int64_t n_kv_heads, int64_t capacity) override {
    current_.prepare(n_layers, n_kv_heads, capacity);
  }
  // Only the newest query of the step counts.
  std::optional<int64_t> mass_from(Phase, int64_t first, int64_t n, int64_t) const override {
    return first + n - 1;
  }
  void observe(int64_t layer, Phase, const float* mass, int64_t, int64_t n_slots) override {
    current_.set(layer, mass, n_slots);
  }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    current_.grow(slots.layer, slots.n_slots);
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      std::copy_n(current_.row(slots.layer, g), slots.n_slots, scores + g * slots.n_slots);
    }
  }
  void on_compact(int64_t layer, const int32_t* keep, int64_t, int64_t n_keep) override {
    current_.compact(layer, keep, n_keep);
  }

 private:
  int64_t budget_;
  SlotValues current_;
};

// SnapKV (Li et al., 2024): once, at the end of prefill, score each prompt slot by the attention
// the last `snapkv_window` prompt queries pay it (summed over the query heads of its group, i.e.
// the group average up to a constant), pool the scores over neighbouring slots so kept tokens
// carry their context, and keep the best slots per kv head plus the window itself, to the budget.
// A prompt longer than the cache is scored the same way chunk by chunk: before each compression
// the CacheManager has the step before it export its own last queries' attention (a chunk's
// window), which ranks the cached slots and the chunk's. Decode then appends; a sink +
// recent-window rule bounds further growth at the same budget.
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
  void prepare(int64_t n_layers, int64_t n_kv_heads, int64_t capacity) override {
    observed_.prepare(n_layers, n_kv_heads, capacity);
    observed_window_.assign(static_cast<size_t>(n_layers), kNoWindow);
    pooled_.resize(static_cast<size_t>(capacity));
  }
  // Each prompt is compressed by its own observation window: the attention an earlier turn's
  // window paid to the slots still cached must not add to this one's.
  void begin_prefill() override {
    observed_.clear();
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
  void observe(int64_t layer, Phase phase, const float* mass, int64_t, int64_t n_slots) override {
    if (phase != Phase::Prefill) return;
    int64_t& current = observed_window_[static_cast<size_t>(layer)];
    if (current != asked_window_) {
      observed_.set(layer, mass, n_slots);
      current = asked_window_;
    } else {
      observed_.add(layer, mass, n_slots);
    }
  }
  void score(const LayerSlots& slots, Phase phase, float* scores) override {
    if (phase == Phase::Decode) {
      score_recent(slots, sinks_, scores);
      return;
    }
    const int64_t n = slots.n_slots;
    const int64_t half = kernel_ / 2;
    observed_.grow(slots.layer, n);
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      const float* values = observed_.row(slots.layer, g);
      for (int64_t s = 0; s < n; ++s) {  // pooling with zero padding, stride 1
        float pooled = 0.0f;             // masses are >= 0, so 0 is also the neutral start for max
        for (int64_t t = std::max<int64_t>(0, s - half); t <= std::min(n - 1, s + half); ++t) {
          pooled = max_pool_ ? std::max(pooled, values[t]) : pooled + values[t];
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
  void on_compact(int64_t layer, const int32_t* keep, int64_t, int64_t n_keep) override {
    observed_.compact(layer, keep, n_keep);
  }

 private:
  static constexpr int64_t kNoWindow = std::numeric_limits<int64_t>::min();

  int64_t budget_;
  int64_t window_;
  int64_t kernel_;
  bool max_pool_;
  int64_t sinks_;
  SlotValues observed_;
  std::vector<int64_t> observed_window_;      // per layer: the window whose mass observed_ holds
  mutable int64_t asked_window_ = kNoWindow;  // the window of the step that will export next
  std::vector<float> pooled_;
};

void require(bool ok, const std::string& message) {
  if (!ok) EDGELM_FAIL("[eviction] ", message);
}

}  // namespace

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"none",   "sliding", "sink",
                                                 "snapkv", "h2o",     "tova",
                                                 "random", "keydiff", "expected_attention"};
  return names;
}

std::string policy_list() {
  std::string list;
  for (const std::string& name : policy_names()) list += (list.empty() ? "" : "|") + name;
  return list;
}

const std::vector<std::string>& eviction_flags() {
  static const std::vector<std::string> flags = {
      "--eviction-window",     "--protected-prefix", "--sink-tokens",    "--kv-budget",
      "--memory-threshold-mb", "--simulate-memory",  "--pressure-floor", "--snapkv-window",
      "--snapkv-kernel",       "--snapkv-pool",      "--eviction-seed",  "--ea-future-positions",
      "--ea-covariance",       "--ea-epsilon",       "--protect",        "--layer-budget",
      "--pyramid-beta"};
  return flags;
}

namespace {

// Policies whose limit is --kv-budget (the others keep a fixed window, or nothing).
bool budgeted(const std::string& policy) {
  return policy == "snapkv" || policy == "h2o" || policy == "tova" || policy == "random" ||
         policy == "keydiff" || policy == "expected_attention";
}

}  // namespace

bool policy_reads(const std::string& policy, const std::string& flag) {
  if (policy == "none") return false;
  if (flag == "--kv-budget" || flag == "--memory-threshold-mb" || flag == "--simulate-memory" ||
      flag == "--pressure-floor" || flag == "--protect") {
    return true;  // the CacheManager's triggers and the protection wrapper, whatever is scored
  }
  if (flag == "--layer-budget" || flag == "--pyramid-beta") return budgeted(policy);
  if (flag == "--eviction-window")
    return policy == "sliding" || policy == "sink" || policy == "h2o";
  if (flag == "--protected-prefix") return policy == "sliding";
  if (flag == "--sink-tokens")
    return policy == "sink" || policy == "snapkv" || policy == "expected_attention";
  if (flag == "--eviction-seed") return policy == "random";
  if (flag.starts_with("--ea-")) return policy == "expected_attention";
  return policy == "snapkv" && flag.starts_with("--snapkv-");
}

bool policy_reads(const EvictionConfig& config, const std::string& flag) {
  if (config.policy == "none") return false;
  if (flag == "--sink-tokens" && !config.protect.empty() &&
      (parse_protect_classes(config.protect) & kProtectSinks) != 0) {
    return true;
  }
  if (flag == "--pyramid-beta" && config.layer_budget != "pyramid") return false;
  return policy_reads(config.policy, flag);
}

EvictionConfig with_budget_defaults(const EvictionConfig& config) {
  EvictionConfig c = config;
  const int64_t budget = c.kv_budget;
  if (!c.sink_tokens) {
    // A 64th of the budget, 1 to 4: StreamingLLM's 4 sinks from 256 slots on; below that the
    // recent window needs the slots more (4 of 64 would be 6 %), and one sink already holds most
    // of the attention that a cut-off beginning would otherwise scatter. Never the whole budget.
    c.sink_tokens = budget > 0 ? std::min(std::clamp<int64_t>(budget / 64, 1, 4), budget - 1) : 4;
  }
  if (!c.window) {
    if (budget <= 0) {
      c.window = 512;
    } else if (c.policy == "sliding") {
      c.window = budget - c.protected_prefix;
    } else if (c.policy == "sink") {
      c.window = budget - *c.sink_tokens;
    } else {
      c.window = std::max<int64_t>(1, budget / 2);  // h2o: half heavy hitters, half recent
    }
  }
  return c;
}

namespace {

// The policy config.policy names, without the wrappers: c is `given` with the budget's defaults.
std::unique_ptr<EvictionPolicy> make_scored_policy(const EvictionConfig& c,
                                                   const EvictionConfig& given) {
  const int64_t window = *c.window;
  const int64_t sinks = *c.sink_tokens;
  require(c.protected_prefix >= 0,
          str_cat("--protected-prefix ", c.protected_prefix, " must be >= 0"));
  require(sinks >= 0, str_cat("--sink-tokens ", sinks, " must be >= 0"));
  require(c.kv_budget >= 0, str_cat("--kv-budget ", c.kv_budget, " must be >= 0"));
  if (c.kv_budget > 0 && !given.window) {
    // The window is what the budget leaves: say which setting took it all.
    if (c.policy == "sliding") {
      require(window >= 1, str_cat("sliding: --protected-prefix ", c.protected_prefix,
                                   " leaves no room for a window in --kv-budget ", c.kv_budget));
    } else if (c.policy == "sink") {
      require(window >= 1, str_cat("sink: --sink-tokens ", sinks,
                                   " leave no room for a window in --kv-budget ", c.kv_budget));
    }
  }
  require(window >= 1, str_cat("--eviction-window ", window, " must be at least 1"));
  require(c.memory_threshold_mb >= 0 && std::isfinite(c.memory_threshold_mb),
          str_cat("--memory-threshold-mb ", c.memory_threshold_mb, " must be finite and >= 0"));
  require(c.pressure_keep_ratio > 0 && c.pressure_keep_ratio < 1,
          str_cat("pressure keep ratio ", c.pressure_keep_ratio, " must be in (0, 1)"));
  require(c.pressure_floor >= 0,
          str_cat("--pressure-floor ", c.pressure_floor, " must be >= 0 (0: automatic)"));
  if (c.policy == "none") return std::make_unique<NonePolicy>();
  if (c.policy == "sliding" || c.policy == "sink") {
    // Slots the rule always keeps must leave the budget room for the newest token.
    const int64_t kept = c.policy == "sliding" ? c.protected_prefix : sinks;
    const char* flag = c.policy == "sliding" ? "--protected-prefix" : "--sink-tokens";
    require(c.kv_budget == 0 || kept < c.kv_budget,
            str_cat(c.policy, ": ", flag, " ", kept, " must be below --kv-budget ", c.kv_budget,
                    " (the budget must hold them and the newest token)"));
    if (c.policy == "sliding") return std::make_unique<SlidingPolicy>(c);
    return std::make_unique<SinkPolicy>(c);
  }
  if (budgeted(c.policy)) {
    require(c.kv_budget > 0, str_cat("--eviction-policy ", c.policy,
                                     " needs --kv-budget (slots per layer to keep)"));
  }
  if (c.policy == "h2o") {
    require(given.window || c.kv_budget >= 2,
            str_cat("h2o: --kv-budget ", c.kv_budget,
                    " holds no heavy hitter beside the recent window (use at least 2)"));
    require(window < c.kv_budget, str_cat("h2o: --eviction-window ", window,
                                          " (recent tokens) must be below --kv-budget ",
                                          c.kv_budget, " to leave room for heavy hitters"));
    return std::make_unique<H2oPolicy>(c);
  }
  if (c.policy == "tova") return std::make_unique<TovaPolicy>(c);
  if (c.policy == "snapkv") {
    require(c.snapkv_window >= 1 && c.snapkv_window < c.kv_budget,
            str_cat("snapkv: --snapkv-window ", c.snapkv_window, " must be in [1, --kv-budget ",
                    c.kv_budget, ")"));
    require(sinks < c.kv_budget,
            str_cat("snapkv: --sink-tokens ", sinks, " must be below --kv-budget ", c.kv_budget));
    require(c.snapkv_kernel >= 1 && c.snapkv_kernel % 2 == 1,
            str_cat("--snapkv-kernel ", c.snapkv_kernel, " must be odd and positive"));
    require(c.snapkv_pool == "max" || c.snapkv_pool == "avg",
            str_cat("--snapkv-pool '", c.snapkv_pool, "' must be max or avg"));
    return std::make_unique<SnapKvPolicy>(c);
  }
  if (c.policy == "random") return make_random_policy(c);
  if (c.policy == "keydiff") return make_keydiff_policy(c);
  if (c.policy == "expected_attention") {
    require(sinks < c.kv_budget, str_cat("expected_attention: --sink-tokens ", sinks,
                                         " must be below --kv-budget ", c.kv_budget));
    require(c.ea_future_positions >= 1,
            str_cat("--ea-future-positions ", c.ea_future_positions, " must be at least 1"));
    require(c.ea_epsilon >= 0 && std::isfinite(c.ea_epsilon),
            str_cat("--ea-epsilon ", c.ea_epsilon, " must be finite and >= 0"));
    return make_expected_attention_policy(c);
  }
  EDGELM_FAIL("[eviction] --eviction-policy '", c.policy, "' is not one of ", policy_list());
}

// The slots a policy keeps in every layer whatever it scores (PyramidKV keeps SnapKV's window in
// every layer): the pyramid shares out only the rest.
int64_t pyramid_floor(const EvictionConfig& c, unsigned protect) {
  int64_t floor = 0;
  if (c.policy == "h2o") floor = *c.window;
  if (c.policy == "snapkv") floor = c.snapkv_window;
  if (c.policy == "expected_attention") floor = *c.sink_tokens;
  if ((protect & kProtectSinks) != 0 && c.policy != "expected_attention") floor += *c.sink_tokens;
  return floor;
}

}  // namespace

std::unique_ptr<EvictionPolicy> make_policy(const EvictionConfig& config) {
  const EvictionConfig c = with_budget_defaults(config);
  const int64_t sinks = *c.sink_tokens;
  const unsigned protect = c.protect.empty() ? 0 : parse_protect_classes(c.protect);
  require(c.layer_budget == "uniform" || c.layer_budget == "pyramid",
          str_cat("--layer-budget '", c.layer_budget, "' must be uniform or pyramid"));
  require(c.pyramid_beta >= 1 && std::isfinite(c.pyramid_beta),
          str_cat("--pyramid-beta ", c.pyramid_beta, " must be finite and >= 1"));
  std::unique_ptr<EvictionPolicy> policy = make_scored_policy(c, config);
  if (!policy->evicts()) return policy;  // generate warns that the wrappers' flags do nothing
  if (protect != 0) {
    if ((protect & kProtectSinks) != 0) {
      require(sinks >= 1, "--protect sinks needs --sink-tokens >= 1");
      int64_t limit = policy->own_limit().value_or(std::numeric_limits<int64_t>::max());
      if (c.kv_budget > 0) limit = std::min(limit, c.kv_budget);
      require(sinks < limit, str_cat("--protect sinks: --sink-tokens ", sinks,
                                     " must be below the limit of ", limit, " slots"));
    }
    policy = make_protect_policy(std::move(policy), protect, sinks);
  }
  if (c.layer_budget == "pyramid" && budgeted(c.policy)) {
    const int64_t floor = pyramid_floor(c, protect);
    const double top =
        static_cast<double>(floor) + static_cast<double>(c.kv_budget - floor) / c.pyramid_beta;
    require(floor < c.kv_budget && top >= 2.0,
            str_cat("--layer-budget pyramid: the top layer would keep ", top, " slots (", floor,
                    " kept in every layer + (--kv-budget ", c.kv_budget, " - ", floor,
                    ") / --pyramid-beta ", c.pyramid_beta,
                    "); raise --kv-budget or lower --pyramid-beta"));
    policy = make_pyramid_policy(std::move(policy), floor, c.pyramid_beta);
  }
  return policy;
}

}  // namespace edgelm
