// The CacheManager runs between forward steps: it hands the step's attention mass to the
// policy, decides whether a trigger fires (the policy's own limit, the KV budget, memory pressure
// reported by a SystemMonitor, or a full cache), asks the policy for scores, keeps the top slots
// per kv head, and compacts every layer through the backend's kv_compact op.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache.h"
#include "eviction/policy.h"
#include "eviction/system_monitor.h"
#include "eviction/token_record.h"
#include "models/llama.h"

namespace edgelm {

struct EvictionEvent {
  int64_t step = 0;    // forward steps run so far
  std::string reason;  // "policy", "budget", "memory", "full", "prefill"
  int64_t slots_before = 0;
  int64_t slots_after = 0;
  double seconds = 0.0;
};

class CacheManager {
 public:
  // monitor may be null (no memory trigger).
  CacheManager(const EvictionConfig& config, std::unique_ptr<EvictionPolicy> policy,
               std::unique_ptr<SystemMonitor> monitor = nullptr);

  const EvictionConfig& config() const { return config_; }
  EvictionPolicy& policy() { return *policy_; }
  SystemMonitor* monitor() { return monitor_.get(); }

  // Declares the prompt: its tokens end at logical position `prompt_end`.
  void begin_prefill(int64_t prompt_end) {
    prompt_end_ = prompt_end;
    policy_->begin_prefill();
  }
  // What the coming step must export (attention mass for the policy, if it needs any).
  ForwardOptions forward_options(Phase phase, int64_t first_position, int64_t n_tokens) const;
  // After a step run with forward_options(): passes the exported mass of every layer to the policy.
  void observe(KvCache& cache, Phase phase, const ForwardOptions& options);
  // After a step run with forward_options() that asked for queries (export_queries): passes every
  // layer's query rows (LlamaModel::query_rows) to the policy; first_position is the step's first
  // logical position.
  void observe_queries(KvCache& cache, const LlamaModel& model, int64_t first_position);
  // What the cached positions hold (special tokens, the system prompt), for policies that protect
  // some of them: the Generator records every token it feeds; the caller sets the special ids and
  // the system prompt's positions.
  TokenRecord& tokens() { return tokens_; }
  // Run before each forward step of `need_free` tokens: evicts when a trigger fires, so that after
  // the step the cache holds at most the policy's limit and the budget (for SnapKV from decode on:
  // end_prefill compresses the prompt), and fits its capacity.
  // Samples the memory monitor once per call.
  std::optional<EvictionEvent> maybe_evict(KvCache& cache, Phase phase, int64_t need_free = 1);
  // At the end of prefill: applies the policy's prefill limit (SnapKV), if any.
  std::optional<EvictionEvent> end_prefill(KvCache& cache);

  // The most tokens one prefill step may bring so that eviction can always make room for them:
  // half the tightest limit that holds in prefill (policy, budget, capacity; only the capacity for
  // a policy that compresses the prompt when prefill ends), less the slots the policy reserves
  // (EvictionPolicy::reserved_slots: protected sinks and system prompt).
  int64_t max_step_tokens(const KvCache& cache) const;

  int64_t evictions() const { return evictions_; }
  int64_t evicted_tokens() const { return evicted_tokens_; }
  double eviction_seconds() const { return eviction_seconds_; }
  // Time spent handing queries to the policy (observe_queries: what keeping query statistics
  // costs beyond the forward pass).
  double query_seconds() const { return query_seconds_; }
  const std::vector<EvictionEvent>& events() const { return events_; }

 private:
  void prepare(KvCache& cache);
  // SnapKV: the policy keeps a share of the prompt chosen once prefill has seen all of it, so its
  // own limit and the budget hold from decode on.
  bool compresses_prompt() const { return policy_->prefill_limit().has_value(); }
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

  EvictionConfig config_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unique_ptr<SystemMonitor> monitor_;
  int64_t prompt_end_ = 0;
  int64_t steps_ = 0;
  std::optional<int64_t> pressure_cap_;  // set while memory is below the threshold
  bool prepared_ = false;
  TokenRecord tokens_;

  // Scratch, sized on first use (capacity-bound), so evicting allocates nothing afterwards.
  std::vector<float> scores_;
  std::vector<int32_t> order_;
  Tensor keep_;  // I32 [n_kv_heads * capacity] in the backend's memory

  int64_t evictions_ = 0;
  int64_t evicted_tokens_ = 0;
  double eviction_seconds_ = 0.0;
  double query_seconds_ = 0.0;
  std::vector<EvictionEvent> events_;
};

}  // namespace edgelm
