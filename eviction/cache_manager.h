// The CacheManager runs between forward steps: it hands the step's attention mass to the
// policy, decides whether a trigger fires (the policy's own limit, the KV budget, memory pressure
// reported by a SystemMonitor, or a full cache), asks the policy for scores, keeps the top slots
// per kv head, and compacts every layer through the backend's kv_compact op. It owns the policy's
// per-slot statistics (EvictionPolicy::stat_channels) and compacts them with the cache, so a
// policy never follows compaction itself. It also sizes the cache: with a limit, the allocation
// follows the limit (capacity_for), not the logical context.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache.h"
#include "eviction/policy.h"
#include "eviction/system_monitor.h"
#include "eviction/token_record.h"

namespace edgelm {

// What the coming forward step must export for the policy. The model's step options
// (ForwardOptions, models/llama.h) carry the same fields; its caller copies them over.
struct StepExports {
  // Attention mass per (kv head, slot) into KvCache::mass(layer), summed over the query heads of
  // each group and over the step's queries at logical positions >= mass_from_position.
  bool export_mass = false;
  int64_t mass_from_position = 0;
  // Every layer's query rows before RoPE, handed over afterwards with observe_queries().
  bool export_queries = false;
};

// The queries a step exported (StepExports::export_queries), every layer's, as the model holds
// them: a plain view, valid until the model's next step.
struct StepQueries {
  // Layer l's rows, F32 [n_tokens, n_heads, head_dim], start at rows + l * layer_stride.
  const float* rows = nullptr;
  int64_t layer_stride = 0;  // floats from one layer's rows to the next
  int64_t n_tokens = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t first_position = 0;       // logical position of each layer's first row
  std::span<const float> inv_freq;  // [head_dim / 2]: the RoPE frequencies the model rotates by
};

struct EvictionEvent {
  int64_t step = 0;    // forward steps run so far
  std::string reason;  // "policy", "budget", "memory", "full", "chunk", "prefill"
  int64_t slots_before = 0;
  int64_t slots_after = 0;
  double seconds = 0.0;
  // Memory-pressure evictions give the pages past the pressure cap back to the system: the bytes
  // given back, and the process's resident set just before and after (0 for other evictions).
  size_t released_bytes = 0;
  size_t rss_before_bytes = 0;
  size_t rss_after_bytes = 0;
  // The parts of `seconds`: the policy's scores, the top-k selection per kv head, and the
  // compaction (kv_compact on K, V, positions and the policy's statistics).
  double score_seconds = 0.0;
  double select_seconds = 0.0;
  double compact_seconds = 0.0;
};

// The budget in slots that budget_bytes of K and V hold: floor(budget_bytes / slot_bytes), with
// slot_bytes the K and V bytes of one slot over all layers (KvCache::slot_bytes), so the budget's
// K and V never exceed budget_bytes. Throws edgelm::Error naming --budget-bytes when it holds less
// than one slot.
int64_t kv_budget_from_bytes(uint64_t budget_bytes, size_t slot_bytes);

class CacheManager {
 public:
  // monitor may be null (no memory trigger). Keeps with_budget_defaults(config).
  CacheManager(const EvictionConfig& config, std::unique_ptr<EvictionPolicy> policy,
               std::unique_ptr<SystemMonitor> monitor = nullptr);

  const EvictionConfig& config() const { return config_; }
  EvictionPolicy& policy() { return *policy_; }
  SystemMonitor* monitor() { return monitor_.get(); }

  // The slots to allocate for a logical context of `context` positions fed in prefill steps of
  // at most `max_chunk` tokens: the limit L (the tighter of the policy's own and the budget) for
  // a policy that evicts before each step (after the step it holds at most L), L + max_chunk for
  // one that compresses the prompt (SnapKV: a step of a prompt longer than the cache is appended
  // whole, then ranked with the cached slots by its window), and never more than the context.
  // With per-layer budgets every layer is allocated the largest layer's share (one capacity for
  // all layers). Without a limit (none), the context.
  int64_t capacity_for(int64_t context, int64_t max_chunk, int64_t n_layers) const;

  // Declares the prompt: its tokens end at logical position `prompt_end`.
  void begin_prefill(int64_t prompt_end) {
    prompt_end_ = prompt_end;
    policy_->begin_prefill();
  }
  // What the coming step (tokens at [first_position, first_position + n_tokens)) must export
  // (attention mass and queries for the policy, if it needs any).
  StepExports forward_options(Phase phase, int64_t first_position, int64_t n_tokens) const;
  // The same for the coming step of n_tokens on `cache` (after maybe_evict()); for a policy that
  // compresses the prompt, also the step's own window when the cache must be compressed before
  // the prompt's next step (a prompt longer than the cache: SnapKV scores it chunk by chunk).
  StepExports forward_options(const KvCache& cache, Phase phase, int64_t n_tokens) const;
  // After a step run with forward_options(): passes the exported mass of every layer to the
  // policy, with the layer's statistics to update.
  void observe(KvCache& cache, Phase phase, const StepExports& exports);
  // After a step run with forward_options() that asked for queries (export_queries): passes every
  // layer's query rows to the policy.
  void observe_queries(KvCache& cache, const StepQueries& queries);
  // What the cached positions hold (special tokens, the system prompt), for policies that protect
  // some of them: the Generator records every token it feeds; the caller sets the special ids and
  // the system prompt's positions.
  TokenRecord& tokens() { return tokens_; }
  // Run before each forward step of `need_free` tokens: evicts when a trigger fires, so that after
  // the step the cache holds at most the policy's limit and the budget (for SnapKV from decode on:
  // end_prefill compresses the prompt), and fits its capacity. A prompt longer than the cache of
  // a policy that compresses it is compressed here to make room for the step ("chunk"), ranked
  // by the window the step before exported. Memory pressure gives the freed pages back to the
  // system. Samples the memory monitor once per call.
  std::optional<EvictionEvent> maybe_evict(KvCache& cache, Phase phase, int64_t need_free = 1);
  // At the end of prefill: applies the policy's prefill limit (SnapKV), if any.
  std::optional<EvictionEvent> end_prefill(KvCache& cache);

  // The most tokens one prefill step may bring so that eviction can always make room for them:
  // half the tightest limit that holds in prefill (policy, budget, capacity; each layer's share
  // of them), less the slots the policy reserves (EvictionPolicy::reserved_slots: protected sinks
  // and system prompt); for a policy that compresses the prompt, the room the cache has beyond
  // the largest layer's prefill limit.
  int64_t max_step_tokens(const KvCache& cache) const;

  // Speculative decoding (runtime/speculative.h). How many one-token decode steps can follow the
  // next one (after maybe_evict() made room for it) before a trigger fires: each layer's share of
  // the policy's own limit and of the budget, the cache's capacity, a memory-pressure cap in
  // force (a new fall in memory is not foreseen). A verification step that feeds no more drafts
  // than this gives every row the cache plain decoding gives its token. The largest int64_t for
  // a policy that never evicts.
  int64_t decode_headroom(const KvCache& cache) const;
  // The cache dropped its last slots (KvCache::truncate, a rollback past rejected drafts): their
  // statistics are forgotten, so that the slots appended there next read 0 as new slots do.
  void truncated(const KvCache& cache);

  int64_t evictions() const { return evictions_; }
  int64_t evicted_tokens() const { return evicted_tokens_; }
  double eviction_seconds() const { return eviction_seconds_; }
  // Time spent handing queries to the policy (observe_queries: what keeping query statistics
  // costs beyond the forward pass).
  double query_seconds() const { return query_seconds_; }
  // eviction_seconds() split as in EvictionEvent (scoring, selection, compaction), summed.
  double score_seconds() const { return score_seconds_; }
  double select_seconds() const { return select_seconds_; }
  double compact_seconds() const { return compact_seconds_; }
  const std::vector<EvictionEvent>& events() const { return events_; }
  // Bytes given back to the system by memory-pressure evictions, and the resident set they took
  // away (the sum over those evictions of RSS before minus after).
  size_t released_bytes() const { return released_bytes_; }
  size_t rss_drop_bytes() const { return rss_drop_bytes_; }
  // The recent slots that the automatic pressure floor keeps beside the always-kept ones.
  static constexpr int64_t kPressureFloorWindow = 16;
  // How often the policy could not do what it promises, by kind (each logged once, as a warning,
  // when it first happens): "full" (the cache filled before the policy's limit), "no-window" (a
  // streaming prompt compressed without a window from the step before), "protected" (more
  // always-kept slots than the limit holds: the oldest go), "pressure" (memory pressure capped the
  // cache below the policy's limit), "floor" (memory stayed low with the cache at its floor).
  const std::map<std::string, int64_t>& fallbacks() const { return fallbacks_; }
  // All of them.
  int64_t fallback_count() const;

 private:
  void prepare(KvCache& cache);
  // SnapKV: the policy keeps a share of the prompt chosen once prefill has seen all of it, so its
  // own limit and the budget hold from decode on.
  bool compresses_prompt() const { return policy_->prefill_limit().has_value(); }
  // The tighter of the policy's own limit and the budget (before per-layer shares); nullopt when
  // neither is set.
  std::optional<int64_t> limit() const;
  // The largest and the smallest share of `uniform` over the n_layers layers.
  int64_t largest_share(int64_t uniform, int64_t n_layers) const;
  int64_t smallest_share(int64_t uniform, int64_t n_layers) const;
  // The policy's statistics of `layer` for the cache's filled slots, the rows of slots appended
  // since the last hand-over zeroed first, and every row after the cache was cleared or pruned
  // (KvCache::slot_epoch). Host access: the backend must be synchronized.
  SlotStats layer_stats(const KvCache& cache, int64_t layer);
  // How many slots each layer keeps: at most `flat` in every layer, and at most the layer's
  // share (EvictionPolicy::layer_limit) of `layered` minus `reserve` (slots left free for what
  // comes next).
  struct Targets {
    int64_t flat = std::numeric_limits<int64_t>::max();
    std::optional<int64_t> layered;
    int64_t reserve = 0;
  };
  int64_t layer_target(const KvCache& cache, int64_t layer, const Targets& targets) const;
  EvictionEvent evict_to(KvCache& cache, Phase phase, const Targets& targets, int64_t incoming,
                         const char* reason);
  // The fewest slots memory pressure leaves before a step of need_free tokens: --pressure-floor,
  // or what the policy always keeps + kPressureFloorWindow recent slots + the largest step so far
  // (so that the floor does not move between prefill steps and decode steps).
  int64_t pressure_floor(int64_t need_free);
  // Counts a fallback of `kind`; the first of each kind is logged as a warning.
  void fall_back(const std::string& kind, const std::string& what);

  EvictionConfig config_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unique_ptr<SystemMonitor> monitor_;
  int64_t prompt_end_ = 0;
  int64_t steps_ = 0;
  int64_t largest_step_ = 0;              // the most tokens one step has brought
  std::optional<int64_t> pressure_cap_;   // set while memory is below the threshold
  std::optional<int64_t> released_from_;  // pages past this slot were given back under pressure
  bool window_observed_ = false;          // a prefill window was observed since the last compaction
  bool prepared_ = false;
  TokenRecord tokens_;
  // The policy's per-slot statistics: per layer F32 [capacity, n_kv_heads, stat_channels] in the
  // backend's memory, compacted with K and V (KvCache::compact); none when it keeps none.
  int64_t stat_channels_ = 0;
  std::vector<Tensor> stats_;
  std::vector<int64_t> stats_filled_;  // per layer: slots whose statistics are the policy's
  uint64_t stats_epoch_ = 0;           // the cache's slot_epoch() the statistics belong to

  // Scratch, sized on first use (capacity-bound), so evicting allocates nothing afterwards.
  std::vector<float> scores_;
  std::vector<int32_t> order_;
  Tensor keep_;  // I32 [n_kv_heads * capacity] in the backend's memory

  int64_t evictions_ = 0;
  int64_t evicted_tokens_ = 0;
  double eviction_seconds_ = 0.0;
  double query_seconds_ = 0.0;
  size_t released_bytes_ = 0;
  size_t rss_drop_bytes_ = 0;
  double score_seconds_ = 0.0;
  double select_seconds_ = 0.0;
  double compact_seconds_ = 0.0;
  std::vector<EvictionEvent> events_;
  std::map<std::string, int64_t> fallbacks_;
};

}  // namespace edgelm
