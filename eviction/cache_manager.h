// The CacheManager runs between forward steps: it hands the step's attention mass to the
// policy, decides whether a trigger fires (the policy's own limit, the KV budget, memory pressure
// reported by a SystemMonitor, or a full cache), asks the policy for scores, keeps the top slots
// per kv head, and compacts every layer through the backend's kv_compact op.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache.h"
#include "eviction/policy.h"
#include "eviction/system_monitor.h"
#include "models/llama.h"

namespace edgelm {

struct EvictionEvent {
  int64_t step = 0;    // forward steps run so far
  std::string reason;  // "policy", "budget", "memory", "full", "prefill"
  int64_t slots_before = 0;
  int64_t slots_after = 0;
  double seconds = 0.0;
  // The parts of `seconds`: the policy's scores, the top-k selection per kv head, and the
  // compaction (kv_compact on K, V and positions, then the policy's on_compact).
  double score_seconds = 0.0;
  double select_seconds = 0.0;
  double compact_seconds = 0.0;
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
  // Run before each forward step of `need_free` tokens: evicts when a trigger fires, so that after
  // the step the cache holds at most the policy's limit and the budget (for SnapKV from decode on:
  // end_prefill compresses the prompt), and fits its capacity.
  // Samples the memory monitor once per call.
  std::optional<EvictionEvent> maybe_evict(KvCache& cache, Phase phase, int64_t need_free = 1);
  // At the end of prefill: applies the policy's prefill limit (SnapKV), if any.
  std::optional<EvictionEvent> end_prefill(KvCache& cache);

  // The most tokens one prefill step may bring so that eviction can always make room for them:
  // half the tightest limit that holds in prefill (policy, budget, capacity; only the capacity for
  // a policy that compresses the prompt when prefill ends).
  int64_t max_step_tokens(const KvCache& cache) const;

  int64_t evictions() const { return evictions_; }
  int64_t evicted_tokens() const { return evicted_tokens_; }
  double eviction_seconds() const { return eviction_seconds_; }
  // eviction_seconds() split as in EvictionEvent (scoring, selection, compaction), summed.
  double score_seconds() const { return score_seconds_; }
  double select_seconds() const { return select_seconds_; }
  double compact_seconds() const { return compact_seconds_; }
  const std::vector<EvictionEvent>& events() const { return events_; }

 private:
  void prepare(KvCache& cache);
  // SnapKV: the policy keeps a share of the prompt chosen once prefill has seen all of it, so its
  // own limit and the budget hold from decode on.
  bool compresses_prompt() const { return policy_->prefill_limit().has_value(); }
  EvictionEvent evict_to(KvCache& cache, Phase phase, int64_t target, int64_t incoming,
                         const char* reason);

  EvictionConfig config_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unique_ptr<SystemMonitor> monitor_;
  int64_t prompt_end_ = 0;
  int64_t steps_ = 0;
  std::optional<int64_t> pressure_cap_;  // set while memory is below the threshold
  bool prepared_ = false;

  // Scratch, sized on first use (capacity-bound), so evicting allocates nothing afterwards.
  std::vector<float> scores_;
  std::vector<int32_t> order_;
  Tensor keep_;  // I32 [n_kv_heads * capacity] in the backend's memory

  int64_t evictions_ = 0;
  int64_t evicted_tokens_ = 0;
  double eviction_seconds_ = 0.0;
  double score_seconds_ = 0.0;
  double select_seconds_ = 0.0;
  double compact_seconds_ = 0.0;
  std::vector<EvictionEvent> events_;
};

}  // namespace edgelm
