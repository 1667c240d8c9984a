// Eviction policies. A policy says when it wants the cache bounded and how valuable each
// (kv head, slot) is; the CacheManager owns the mechanism (triggers, top-k per kv head,
// compaction, logging), so each policy stays a few lines of scoring.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace edgelm {

class TokenRecord;

enum class Phase { Prefill, Decode };

// The eviction settings. window and sink_tokens left unset take defaults that scale with the
// budget (with_budget_defaults).
struct EvictionConfig {
  std::string policy = "none";         // one of policy_names()
  std::optional<int64_t> window;       // recent tokens kept (sliding, sink, h2o)
  int64_t protected_prefix = 0;        // sliding: first tokens always kept
  std::optional<int64_t> sink_tokens;  // sink, snapkv's decode, expected_attention, --protect sinks
  int64_t kv_budget = 0;               // most slots per layer; 0 = no budget
  double memory_threshold_mb = 256;    // evict while available memory is below this
  double pressure_keep_ratio = 0.5;    // under memory pressure, cap the cache at this share of it
  int64_t pressure_floor = 0;          // ... but never below this many slots; 0: automatic
  int64_t snapkv_window = 32;          // observation window: the last prompt queries
  int64_t snapkv_kernel = 7;           // pooling kernel over slots (odd)
  std::string snapkv_pool = "max";     // max|avg

  // The attention-free policies (eviction/random_policy.h, eviction/expected_attention_policy.h).
  uint64_t seed = 0;                  // random: the seed of the kept subset
  int64_t ea_future_positions = 512;  // expected_attention: future queries averaged over
  bool ea_covariance = true;          // expected_attention: the query covariance term
  double ea_epsilon = 0.0;            // expected_attention: added before the value-norm weight

  // Wrappers around any policy (eviction/protect_policy.h, eviction/pyramid_budget.h).
  std::string protect;                   // comma-separated of sinks|system|template; empty: none
  std::string layer_budget = "uniform";  // uniform|pyramid
  double pyramid_beta = 20.0;            // pyramid: bottom-to-top slope (PyramidKV's beta)
};

// One layer's per-slot statistics (H2O's accumulated mass, SnapKV's window, TOVA's last query),
// which the CacheManager owns for the policy (EvictionPolicy::stat_channels): F32
// [n_slots, n_kv_heads, channels], laid out like K and V so that the manager's compaction moves
// them with their slots (KvCache::compact). A slot appended since the manager last handed the
// layer over reads 0 in every channel.
struct SlotStats {
  float* values = nullptr;  // null when the policy keeps no statistics
  int64_t n_slots = 0;
  int64_t n_kv_heads = 0;
  int64_t channels = 0;

  float& at(int64_t kv_head, int64_t slot, int64_t channel = 0) const {
    return values[(slot * n_kv_heads + kv_head) * channels + channel];
  }
};

// What a policy sees of one layer when it scores.
struct LayerSlots {
  int64_t layer = 0;
  int64_t n_slots = 0;
  int64_t n_kv_heads = 0;
  const int32_t* positions = nullptr;  // [n_slots, n_kv_heads]: logical position of each slot
  int64_t next_position = 0;           // logical position of the next token
  int64_t incoming = 0;                // tokens the coming step appends (they count as recent)

  // For policies that score by the cache's contents or protect what it holds.
  int64_t keep = 0;  // slots the manager keeps per kv head after this eviction
  Tensor k;          // [n_slots, n_kv_heads, head_dim] F32/F16, after RoPE; host-readable now
  Tensor v;          // [n_slots, n_kv_heads, head_dim]
  const TokenRecord* tokens = nullptr;  // what the cached positions hold (eviction/token_record.h)
  SlotStats stats;                      // the layer's statistics, as observe() left them
};

// The slots of every layer a policy keeps whatever it scores: the first positions (sinks) and
// the most recent ones (windows). Per-layer budgets share out only the rest
// (eviction/pyramid_budget.h); protecting the sinks adds those the policy does not keep already.
struct KeptSlots {
  int64_t first = 0;
  int64_t recent = 0;
};

// One forward step's queries of one layer before RoPE, for policies that keep query statistics
// (StepExports::export_queries; handed over by CacheManager::observe_queries).
struct QueryRows {
  int64_t layer = 0;
  const float* rows = nullptr;  // [n_tokens, n_heads, head_dim]
  int64_t n_tokens = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t first_position = 0;       // logical position of rows[0]
  std::span<const float> inv_freq;  // [head_dim / 2]: the model's RoPE frequencies
};

inline constexpr float kAlwaysKeep = std::numeric_limits<float>::infinity();

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual std::string name() const = 0;
  // False only for `none`: no trigger ever evicts.
  virtual bool evicts() const { return true; }
  // The most slots a layer may hold by the policy's own rule (e.g. sinks + window); nullopt when
  // it evicts only under a budget, memory pressure or a full cache.
  virtual std::optional<int64_t> own_limit() const { return std::nullopt; }
  // Slots to keep when prefill ends (SnapKV compresses the prompt once); nullopt: nothing then.
  // A policy with such a limit sees as much of the prompt as the cache holds first: during
  // prefill neither its own limit nor the budget evicts, only a full cache (a prompt longer than
  // the cache streams through it, scored chunk by chunk) or memory pressure (CacheManager).
  virtual std::optional<int64_t> prefill_limit() const { return std::nullopt; }

  // Called once with the cache geometry, before anything else.
  virtual void prepare(int64_t /*n_layers*/, int64_t /*n_kv_heads*/, int64_t /*capacity*/) {}
  // A new prompt's prefill begins (the first, or a later chat turn): state that belongs to one
  // prompt resets here.
  virtual void begin_prefill() {}
  // Whether the coming step (tokens at logical positions [first, first + n)) must export attention
  // mass, and from which query position on. prompt_end: first position after the prompt. When a
  // policy with a prefill_limit() must compress a prompt before it ends, the CacheManager asks
  // again with prompt_end = first + n for the step before each such compression (its window).
  virtual std::optional<int64_t> mass_from(Phase /*phase*/, int64_t /*first*/, int64_t /*n*/,
                                           int64_t /*prompt_end*/) const {
    return std::nullopt;
  }
  // How many F32 statistics per (kv head, slot) the CacheManager keeps for the policy (SlotStats);
  // 0 (the default): none. Asked once, before prepare(). State that is not per slot (Expected
  // Attention's query statistics) stays in the policy.
  virtual int64_t stat_channels() const { return 0; }
  // The mass the step exported for `layer`: [stats.n_kv_heads, stats.n_slots] (mass[g * n_slots +
  // s]), summed over the query heads of each group (the group average up to a constant factor) and
  // the requested queries. `stats` is the layer's statistics to update (values null when
  // stat_channels() is 0; its sizes are set either way).
  virtual void observe(int64_t /*layer*/, Phase /*phase*/, const float* /*mass*/,
                       const SlotStats& /*stats*/) {}
  // Scores every (kv head, slot) into scores[g * n_slots + s]: higher is kept first, kAlwaysKeep
  // marks slots the policy promises to keep. `phase` is Prefill for the end-of-prefill call.
  virtual void score(const LayerSlots& slots, Phase phase, float* scores) = 0;
  // What the policy keeps in every layer whatever it scores (KeptSlots); none by default.
  virtual KeptSlots always_kept() const { return {}; }

  // Whether forward steps must hand over their queries (observe_queries); false by default, so
  // the model exports none.
  virtual bool wants_queries() const { return false; }
  // One layer's queries of the step just run, before RoPE.
  virtual void observe_queries(const QueryRows& /*queries*/) {}
  // The share of `limit` (the policy's own limit, the budget or the prefill limit, stated per
  // layer) that `layer` of n_layers may hold: `limit` itself unless per-layer budgets share it
  // out (eviction/pyramid_budget.h). Memory pressure and the cache's capacity stay alike for
  // every layer.
  virtual int64_t layer_limit(int64_t /*layer*/, int64_t /*n_layers*/, int64_t limit) const {
    return limit;
  }
  // Slots of every layer kept whatever the policy scores, as far as known before a step (the
  // protected sinks and system prompt): the manager sizes prefill steps to fit beside them.
  virtual int64_t reserved_slots(const TokenRecord& /*tokens*/) const { return 0; }
};

// Without a budget: the window and the sink count left unset are 512 and 4. With one (B slots),
// they are carved out of it, so that every policy holds the same B: the sink count is B/64
// between 1 and 4 (StreamingLLM's 4 from B = 256 on; fewer below, where the window needs the
// slots; never all of B); the window is B minus the sinks (sink), B minus the protected prefix
// (sliding), or B/2 (h2o: H2O's even split between heavy hitters and recent tokens). Settings
// that are set stay as they are.
EvictionConfig with_budget_defaults(const EvictionConfig& config);

// Builds the policy the registry (eviction/policy_registry.h) names config.policy with
// with_budget_defaults(config), wrapped as --protect and --layer-budget ask, checking the
// settings it depends on. Throws edgelm::Error naming the flag when a setting is missing or
// inconsistent (e.g. sinks or a protected prefix that leave no room in the budget).
std::unique_ptr<EvictionPolicy> make_policy(const EvictionConfig& config);

// Scores each (kv head, slot) by its logical position (newer kept first) into
// scores[g * n_slots + s], and the first `protected_count` positions kAlwaysKeep: the rule of
// sliding (a protected prefix), sink and SnapKV's decode phase (attention sinks).
void score_recent(const LayerSlots& slots, int64_t protected_count, float* scores);

// The policy names of the registry (eviction/policy_registry.h), in its order, for help texts.
const std::vector<std::string>& policy_names();
// The same joined with '|' ("none|sliding|..."), for help texts and errors.
std::string policy_list();

// The command-line flags of the eviction settings (the fields of EvictionConfig but the policy,
// plus --simulate-memory), and whether `policy` reads `flag`: every policy that evicts reads
// --kv-budget, --memory-threshold-mb, --simulate-memory, --pressure-floor and --protect; the
// budgeted ones --layer-budget and --pyramid-beta; and each the settings its registry line lists
// (eviction/policy_registry.cpp); `none` reads none. Throws edgelm::Error naming
// --eviction-policy for a name the registry does not hold. generate warns about a flag given that
// the chosen configuration ignores.
const std::vector<std::string>& eviction_flags();
bool policy_reads(const std::string& policy, const std::string& flag);
// The same for a whole configuration, which also knows what the wrappers' settings turn on:
// --sink-tokens is read by every evicting policy when --protect names sinks, and --pyramid-beta
// only with --layer-budget pyramid.
bool policy_reads(const EvictionConfig& config, const std::string& flag);

}  // namespace edgelm
