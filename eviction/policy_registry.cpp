#include "eviction/policy_registry.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "eviction/expected_attention_policy.h"
#include "eviction/h2o_policy.h"
#include "eviction/keydiff_policy.h"
#include "eviction/none_policy.h"
#include "eviction/protect_policy.h"
#include "eviction/pyramid_budget.h"
#include "eviction/random_policy.h"
#include "eviction/sink_policy.h"
#include "eviction/sliding_policy.h"
#include "eviction/snapkv_policy.h"
#include "eviction/tova_policy.h"

namespace edgelm {
namespace {

using enum PolicyLimit;

// The policies: name, factory, description, the flags of its own settings, what bounds it, and
// (where it is not half the budget) the window an unset --eviction-window takes under a budget.
// An explicit table rather than self-registration from each file, which a static library would
// drop with the object files nothing else references. Left unformatted: one line per policy.
// clang-format off
const PolicyEntry kPolicies[] = {
    {"none", make_none_policy, "keeps every token (no eviction)", {}, kNever},
    {"sliding", make_sliding_policy, "the newest --eviction-window tokens and a protected prefix", {"--eviction-window", "--protected-prefix"}, kOwn, sliding_budget_window},
    {"sink", make_sink_policy, "StreamingLLM: attention sinks and the newest tokens", {"--eviction-window", "--sink-tokens"}, kOwn, sink_budget_window},
    {"snapkv", make_snapkv_policy, "SnapKV: the prompt compressed once by its last queries' attention", {"--sink-tokens", "--snapkv-window", "--snapkv-kernel", "--snapkv-pool"}, kBudget},
    {"h2o", make_h2o_policy, "H2O: heavy hitters by accumulated attention and the newest tokens", {"--eviction-window"}, kBudget},
    {"tova", make_tova_policy, "TOVA: the slots the newest query attends to most", {}, kBudget},
    {"random", make_random_policy, "a seeded uniform random subset of the history (the floor)", {"--eviction-seed"}, kBudget},
    {"keydiff", make_keydiff_policy, "KeyDiff: the keys least like the mean key direction", {}, kBudget},
    {"expected_attention", make_expected_attention_policy, "Expected Attention: the attention future queries are expected to pay", {"--sink-tokens", "--ea-future-positions", "--ea-covariance", "--ea-epsilon"}, kBudget},
};
// clang-format on

void require(bool ok, const std::string& message) {
  if (!ok) EDGELM_FAIL("[eviction] ", message);
}

bool budgeted(const std::string& policy) {
  return find_policy(policy).limit == kBudget;
}

}  // namespace

std::span<const PolicyEntry> policy_registry() {
  return kPolicies;
}

const PolicyEntry& find_policy(std::string_view name) {
  for (const PolicyEntry& entry : kPolicies) {
    if (entry.name == name) return entry;
  }
  EDGELM_FAIL("[eviction] --eviction-policy '", name, "' is not one of ", policy_list());
}

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const PolicyEntry& entry : kPolicies) list.emplace_back(entry.name);
    return list;
  }();
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

bool policy_reads(const std::string& policy, const std::string& flag) {
  const PolicyEntry& entry = find_policy(policy);
  if (entry.limit == kNever) return false;
  if (flag == "--kv-budget" || flag == "--memory-threshold-mb" || flag == "--simulate-memory" ||
      flag == "--pressure-floor" || flag == "--protect") {
    return true;  // the CacheManager's triggers and the protection wrapper, whatever is scored
  }
  if (flag == "--layer-budget" || flag == "--pyramid-beta") return entry.limit == kBudget;
  return std::ranges::find(entry.flags, flag) != entry.flags.end();
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
    const PolicyEntry* entry = nullptr;
    for (const PolicyEntry& e : kPolicies) {
      if (e.name == c.policy) entry = &e;
    }
    if (budget <= 0) {
      c.window = 512;
    } else if (entry != nullptr && entry->budget_window != nullptr) {
      c.window = entry->budget_window(c);
    } else {
      c.window = std::max<int64_t>(1, budget / 2);  // h2o: half heavy hitters, half recent
    }
  }
  return c;
}

std::unique_ptr<EvictionPolicy> make_policy(const EvictionConfig& config) {
  const EvictionConfig c = with_budget_defaults(config);
  const int64_t sinks = *c.sink_tokens;
  const unsigned protect = c.protect.empty() ? 0 : parse_protect_classes(c.protect);
  require(c.layer_budget == "uniform" || c.layer_budget == "pyramid",
          str_cat("--layer-budget '", c.layer_budget, "' must be uniform or pyramid"));
  require(c.pyramid_beta >= 1 && std::isfinite(c.pyramid_beta),
          str_cat("--pyramid-beta ", c.pyramid_beta, " must be finite and >= 1"));
  require(c.protected_prefix >= 0,
          str_cat("--protected-prefix ", c.protected_prefix, " must be >= 0"));
  require(sinks >= 0, str_cat("--sink-tokens ", sinks, " must be >= 0"));
  require(c.kv_budget >= 0, str_cat("--kv-budget ", c.kv_budget, " must be >= 0"));
  require(c.memory_threshold_mb >= 0 && std::isfinite(c.memory_threshold_mb),
          str_cat("--memory-threshold-mb ", c.memory_threshold_mb, " must be finite and >= 0"));
  require(c.pressure_keep_ratio > 0 && c.pressure_keep_ratio < 1,
          str_cat("pressure keep ratio ", c.pressure_keep_ratio, " must be in (0, 1)"));
  require(c.pressure_floor >= 0,
          str_cat("--pressure-floor ", c.pressure_floor, " must be >= 0 (0: automatic)"));
  const PolicyEntry& entry = find_policy(c.policy);
  if (entry.limit == kBudget) {
    require(c.kv_budget > 0, str_cat("--eviction-policy ", c.policy,
                                     " needs --kv-budget (slots per layer to keep)"));
  }
  // The policy's own checks first: where the window is what the budget left, they name the
  // setting that took it all.
  std::unique_ptr<EvictionPolicy> policy = entry.make(c);
  require(*c.window >= 1, str_cat("--eviction-window ", *c.window, " must be at least 1"));
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
    // The slots a policy keeps in every layer whatever it scores (PyramidKV keeps SnapKV's
    // window in every layer): the pyramid shares out only the rest.
    const KeptSlots kept = policy->always_kept();
    const int64_t floor = kept.first + kept.recent;
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
