// A policy around another: forwards every call to the inner policy, so that a wrapper (protected
// classes, per-layer budgets) overrides only what it changes.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "eviction/policy.h"

namespace edgelm {

class PolicyWrapper : public EvictionPolicy {
 public:
  explicit PolicyWrapper(std::unique_ptr<EvictionPolicy> inner) : inner_(std::move(inner)) {
    EDGELM_CHECK(inner_ != nullptr, "[eviction] a wrapper needs a policy");
  }

  const EvictionPolicy& inner() const { return *inner_; }

  std::string name() const override { return inner_->name(); }
  bool evicts() const override { return inner_->evicts(); }
  std::optional<int64_t> own_limit() const override { return inner_->own_limit(); }
  std::optional<int64_t> prefill_limit() const override { return inner_->prefill_limit(); }
  void prepare(int64_t n_layers, int64_t n_kv_heads, int64_t capacity) override {
    inner_->prepare(n_layers, n_kv_heads, capacity);
  }
  void begin_prefill() override { inner_->begin_prefill(); }
  std::optional<int64_t> mass_from(Phase phase, int64_t first, int64_t n,
                                   int64_t prompt_end) const override {
    return inner_->mass_from(phase, first, n, prompt_end);
  }
  int64_t stat_channels() const override { return inner_->stat_channels(); }
  void observe(int64_t layer, Phase phase, const float* mass, const SlotStats& stats) override {
    inner_->observe(layer, phase, mass, stats);
  }
  void score(const LayerSlots& slots, Phase phase, float* scores) override {
    inner_->score(slots, phase, scores);
  }
  KeptSlots always_kept() const override { return inner_->always_kept(); }
  bool wants_queries() const override { return inner_->wants_queries(); }
  void observe_queries(const QueryRows& queries) override { inner_->observe_queries(queries); }
  int64_t layer_limit(int64_t layer, int64_t n_layers, int64_t limit) const override {
    return inner_->layer_limit(layer, n_layers, limit);
  }
  int64_t reserved_slots(const TokenRecord& tokens) const override {
    return inner_->reserved_slots(tokens);
  }

 protected:
  EvictionPolicy& inner_policy() { return *inner_; }

 private:
  std::unique_ptr<EvictionPolicy> inner_;
};

}  // namespace edgelm
