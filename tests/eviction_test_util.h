// Shared by the eviction tests: a tiny random-weight model on the portable CPU backend, a
// generation run through the CacheManager that records what each step keeps, per-policy settings
// and limits, and a one-layer cache with planted attention.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "eviction/cache_manager.h"
#include "eviction/policy_registry.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "runtime/generator.h"

namespace edgelm::eviction_test {

namespace fs = std::filesystem;

inline cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2, .isa = "portable"});
  return cpu;
}

inline LlamaModel& tiny_model() {
  static LlamaModel model = [] {
    const fs::path dir =
        fs::path(::testing::TempDir()) / ("edgelm_eviction_tiny_" + std::to_string(::getpid()));
    const std::string path = make_model({.preset = "tiny",
                                         .format = "hf",
                                         .quant = DType::F32,
                                         .seed = 5,
                                         .out_dir = dir.string()});
    LoadedModel loaded = load_llama(path, backend());
    return LlamaModel(backend(), std::move(loaded.config), std::move(loaded.weights), 8);
  }();
  return model;
}

inline int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

inline std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % 300));
  return ids;
}

// A policy name, optionally with wrappers: "h2o+protect" (sinks protected), "tova+pyramid".
inline EvictionConfig config_for(const std::string& variant) {
  const std::string policy = variant.substr(0, variant.find('+'));
  EvictionConfig c;
  c.policy = policy;
  c.window = 12;
  c.sink_tokens = 4;
  c.protected_prefix = 3;
  // A policy bounded by its own rule (sliding: 3 + 12, sink: 4 + 12) runs without a budget.
  c.kv_budget = find_policy(policy).limit == PolicyLimit::kOwn ? 0 : 24;
  c.snapkv_window = 6;
  c.snapkv_kernel = 3;
  c.seed = 3;
  c.pyramid_beta = 4;  // the top layer of a 24-slot budget keeps 6 slots beyond the floor
  if (variant.find("+protect") != std::string::npos) c.protect = "sinks";
  if (variant.find("+pyramid") != std::string::npos) c.layer_budget = "pyramid";
  return c;
}

// The limit each policy promises with config_for(), in layer `layer` of the tiny model.
inline int64_t limit_for(const std::string& variant, int64_t layer) {
  const EvictionConfig c = config_for(variant);
  const std::unique_ptr<EvictionPolicy> policy = make_policy(c);
  const int64_t own = policy->own_limit().value_or(c.kv_budget);
  const int64_t limit = c.kv_budget > 0 ? std::min(own, c.kv_budget) : own;
  return policy->layer_limit(layer, tiny_model().config().n_layers, limit);
}

// Every evicting policy of the registry, then wrapped variants: the protection wrapper around a
// policy that keeps no sinks of its own, per-layer budgets (the tiny model's two layers then keep
// different counts), and both.
inline std::vector<std::string> every_policy_variant() {
  std::vector<std::string> variants;
  for (const PolicyEntry& entry : policy_registry()) {
    if (entry.limit != PolicyLimit::kNever) variants.emplace_back(entry.name);
  }
  for (const char* wrapped : {"tova+protect", "keydiff+pyramid", "h2o+pyramid+protect",
                              "expected_attention+pyramid", "snapkv+pyramid"}) {
    variants.emplace_back(wrapped);
  }
  return variants;
}

struct GenerationRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  std::vector<std::set<int32_t>> kept;  // positions of layer 0, kv head 0 after each step
};

inline GenerationRun generate(
    const std::string& policy, int64_t capacity, int steps, EvictionConfig config,
    const std::function<void(const KvCache&, const std::string&)>& check = {}) {
  LlamaModel& model = tiny_model();
  KvCache cache = model.make_cache(capacity, DType::F32);
  CacheManager manager(config, make_policy(config));
  Generator generator(model, cache, &manager);
  GenerationRun run;
  std::span<const float> logits = generator.prefill(prompt(30));
  for (int i = 0; i < steps; ++i) {
    run.logits.emplace_back(logits.begin(), logits.end());
    const int32_t token = argmax(logits);
    run.tokens.push_back(token);
    logits = generator.decode(token);
    std::set<int32_t> kept;
    for (int64_t s = 0; s < cache.size(0); ++s) kept.insert(cache.position(0, s, 0));
    run.kept.push_back(kept);
    if (check) check(cache, policy);
  }
  return run;
}

// A one-layer cache of 2 kv heads (head_dim 16) whose token at logical position p has key 8·e_p
// (p < 16), so a query a·e_p + b·e_q attends to positions p and q only, with weights set by a, b.
struct Planted {
  static constexpr int64_t kHeads = 4;  // 2 query heads per kv head
  static constexpr int64_t kKvHeads = 2;
  static constexpr int64_t kDim = 16;
  KvCache cache{backend(), 1, 32, kKvHeads, kDim, DType::F32};

  void append(int64_t n) {
    Tensor k = Tensor::empty(backend().memory(), DType::F32, {n, kKvHeads, kDim});
    Tensor v = Tensor::empty(backend().memory(), DType::F32, {n, kKvHeads, kDim});
    std::vector<int32_t> positions;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t position = cache.next_position() + t;
      positions.push_back(static_cast<int32_t>(position));
      for (int64_t g = 0; g < kKvHeads; ++g) {
        for (int64_t d = 0; d < kDim; ++d) {
          k.data<float>()[(t * kKvHeads + g) * kDim + d] = d == position % kDim ? 8.0f : 0.0f;
          v.data<float>()[(t * kKvHeads + g) * kDim + d] = 1.0f;
        }
      }
    }
    cache.append(0, k, v, positions);
    cache.advance(n);
  }

  // Runs attention for queries at the last `n_queries` positions; query head h of every query is
  // targets[h] = {{position, logit}, ...}. Exports mass into cache.mass(0).
  void attend(int64_t n_queries, const std::vector<std::vector<std::pair<int, float>>>& targets) {
    AttentionArgs args;
    args.q = Tensor::empty(backend().memory(), DType::F32, {n_queries, kHeads, kDim});
    std::fill_n(args.q.data<float>(), n_queries * kHeads * kDim, 0.0f);
    for (int64_t i = 0; i < n_queries; ++i) {
      for (int64_t h = 0; h < kHeads; ++h) {
        for (const auto& [position, logit] : targets[h]) {
          // score = q·k / sqrt(16) = q[position] * 8 / 4, so q[position] = logit / 2.
          args.q.data<float>()[(i * kHeads + h) * kDim + position % kDim] = logit / 2.0f;
        }
      }
    }
    args.q_pos = Tensor::empty(backend().memory(), DType::I32, {n_queries});
    for (int64_t i = 0; i < n_queries; ++i) {
      args.q_pos.data<int32_t>()[i] = static_cast<int32_t>(cache.next_position() - n_queries + i);
    }
    const KvCache::View view = cache.view(0);
    args.k = view.k;
    args.v = view.v;
    args.kv_pos = view.kv_pos;
    args.out = Tensor::empty(backend().memory(), DType::F32, {n_queries, kHeads, kDim});
    args.mass = cache.mass(0);
    args.scale = 0.25f;
    backend().attention(args);
  }

  std::set<int32_t> kept(int64_t g) {
    std::set<int32_t> positions;
    for (int64_t s = 0; s < cache.size(0); ++s) positions.insert(cache.position(0, s, g));
    return positions;
  }
};

}  // namespace edgelm::eviction_test
