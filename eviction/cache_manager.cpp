#include "eviction/cache_manager.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"

namespace edgelm {

CacheManager::CacheManager(const EvictionConfig& config, std::unique_ptr<EvictionPolicy> policy,
                           std::unique_ptr<SystemMonitor> monitor)
    : config_(config), policy_(std::move(policy)), monitor_(std::move(monitor)) {
  EDGELM_CHECK(policy_ != nullptr, "[eviction] no policy");
}

void CacheManager::prepare(KvCache& cache) {
  if (prepared_) return;
  policy_->prepare(cache.n_layers(), cache.n_kv_heads(), cache.capacity());
  scores_.resize(static_cast<size_t>(cache.n_kv_heads() * cache.capacity()));
  order_.resize(static_cast<size_t>(cache.capacity()));
  keep_ =
      Tensor::empty(cache.backend().memory(), DType::I32, {cache.n_kv_heads() * cache.capacity()});
  const int64_t uniform = std::min(policy_->own_limit().value_or(cache.capacity()),
                                   config_.kv_budget > 0 ? config_.kv_budget : cache.capacity());
  int64_t limit = 0;  // the largest layer's share
  for (int64_t l = 0; l < cache.n_layers(); ++l)
    limit = std::max(limit, policy_->layer_limit(l, cache.n_layers(), uniform));
  EDGELM_CHECK(!policy_->evicts() || limit < cache.capacity(), "[eviction] policy '",
               policy_->name(), "' keeps up to ", limit, " slots but the cache holds only ",
               cache.capacity(), ": raise -c/--ctx-size above the window/budget");
  prepared_ = true;
}

int64_t CacheManager::max_step_tokens(const KvCache& cache) const {
  if (!policy_->evicts()) return cache.capacity();
  int64_t limit = cache.capacity();
  if (!compresses_prompt()) {
    auto bound = [&](int64_t uniform) {
      for (int64_t l = 0; l < cache.n_layers(); ++l)
        limit = std::min(limit, policy_->layer_limit(l, cache.n_layers(), uniform));
    };
    if (const auto own = policy_->own_limit()) bound(*own);
    if (config_.kv_budget > 0) bound(config_.kv_budget);
  }
  return std::max<int64_t>(1, (limit - policy_->reserved_slots(tokens_)) / 2);
}

ForwardOptions CacheManager::forward_options(Phase phase, int64_t first_position,
                                             int64_t n_tokens) const {
  ForwardOptions options;
  if (const auto from = policy_->mass_from(phase, first_position, n_tokens, prompt_end_)) {
    options.export_mass = true;
    options.mass_from_position = *from;
  }
  options.export_queries = policy_->wants_queries();
  return options;
}

void CacheManager::observe(KvCache& cache, Phase phase, const ForwardOptions& options) {
  prepare(cache);
  if (!options.export_mass) return;
  cache.backend().synchronize();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const Tensor mass = cache.mass(l);
    policy_->observe(l, phase, mass.data<float>(), cache.n_kv_heads(), cache.size(l));
  }
}

void CacheManager::observe_queries(KvCache& cache, const LlamaModel& model,
                                   int64_t first_position) {
  prepare(cache);
  const auto start = std::chrono::steady_clock::now();
  cache.backend().synchronize();
  const LlamaConfig& config = model.config();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const Tensor rows = model.query_rows(l);
    policy_->observe_queries({.layer = l,
                              .rows = rows.data<float>(),
                              .n_tokens = rows.dim(0),
                              .n_heads = config.n_heads,
                              .head_dim = config.head_dim,
                              .first_position = first_position,
                              .inv_freq = model.rope_inv_freq()});
  }
  query_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::optional<EvictionEvent> CacheManager::maybe_evict(KvCache& cache, Phase phase,
                                                       int64_t need_free) {
  prepare(cache);
  ++steps_;
  if (!policy_->evicts()) return std::nullopt;
  const int64_t slots = cache.size(0);
  Targets targets;
  targets.reserve = need_free;
  int64_t tightest = std::numeric_limits<int64_t>::max();  // the reason is the tightest bound's
  const char* reason = nullptr;
  auto note = [&](int64_t limit, const char* why) {
    if (limit < tightest) {
      tightest = limit;
      reason = why;
    }
  };
  auto bound = [&](int64_t limit, const char* why) {
    if (slots + need_free > limit) {
      targets.flat = std::min(targets.flat, limit - need_free);
      note(limit, why);
    }
  };
  // The policy's own limit and the budget hold per layer, each layer to its share.
  auto bound_layers = [&](int64_t limit, const char* why) {
    for (int64_t l = 0; l < cache.n_layers(); ++l) {
      if (cache.size(l) + need_free > policy_->layer_limit(l, cache.n_layers(), limit)) {
        targets.layered = std::min(targets.layered.value_or(limit), limit);
        note(limit, why);
        return;
      }
    }
  };
  // A policy that compresses the prompt when prefill ends needs it whole until then: in prefill
  // only the capacity and memory pressure bound it.
  if (phase == Phase::Decode || !compresses_prompt()) {
    if (const auto limit = policy_->own_limit()) bound_layers(*limit, "policy");
    if (config_.kv_budget > 0) bound_layers(config_.kv_budget, "budget");
  }
  bound(cache.capacity(), "full");
  if (monitor_ != nullptr) {
    if (monitor_->available_mb() < config_.memory_threshold_mb) {
      // Under pressure, cap the cache at a share of what it held when pressure began; the cap
      // holds (like a budget) until memory recovers.
      if (!pressure_cap_)
        pressure_cap_ =
            std::max<int64_t>(1, static_cast<int64_t>(slots * config_.pressure_keep_ratio));
      bound(*pressure_cap_, "memory");
    } else {
      pressure_cap_.reset();
    }
  }
  if (reason == nullptr) return std::nullopt;
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    EDGELM_CHECK(layer_target(cache, l, targets) >= 0, "[eviction] cannot free ", need_free,
                 " slots in layer ", l, " under a limit of ",
                 layer_target(cache, l, targets) + need_free);
  }
  return evict_to(cache, phase, targets, need_free, reason);
}

std::optional<EvictionEvent> CacheManager::end_prefill(KvCache& cache) {
  prepare(cache);
  const auto limit = policy_->prefill_limit();
  if (!limit) return std::nullopt;
  // Keep one slot free so the first decode token does not take the cache over the limit.
  Targets targets;
  targets.layered = *limit;
  targets.reserve = 1;
  bool over = false;
  for (int64_t l = 0; l < cache.n_layers(); ++l)
    over = over || cache.size(l) > layer_target(cache, l, targets);
  if (!over) return std::nullopt;
  return evict_to(cache, Phase::Prefill, targets, 0, "prefill");
}

int64_t CacheManager::layer_target(const KvCache& cache, int64_t layer,
                                   const Targets& targets) const {
  int64_t target = targets.flat;
  if (targets.layered) {
    target = std::min(
        target, policy_->layer_limit(layer, cache.n_layers(), *targets.layered) - targets.reserve);
  }
  return target;
}

EvictionEvent CacheManager::evict_to(KvCache& cache, Phase phase, const Targets& targets,
                                     int64_t incoming, const char* reason) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n_kv_heads = cache.n_kv_heads();
  EvictionEvent event;
  event.step = steps_;
  event.reason = reason;
  event.slots_before = cache.size(0);
  cache.backend().synchronize();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const int64_t n_slots = cache.size(l);
    const int64_t n_keep = std::min(layer_target(cache, l, targets), n_slots);
    if (n_keep == n_slots) continue;
    const KvCache::View view = cache.view(l);
    const auto* positions = view.kv_pos.data<int32_t>();
    LayerSlots slots{l,        n_slots, n_kv_heads, positions, cache.next_position(),
                     incoming, n_keep,  view.k,     view.v,    &tokens_};
    policy_->score(slots, phase, scores_.data());
    Tensor keep = keep_.view(DType::I32, {n_kv_heads, n_keep});
    int32_t* keep_values = keep.data<int32_t>();
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      const float* score = scores_.data() + g * n_slots;
      auto* order = order_.data();
      for (int64_t s = 0; s < n_slots; ++s) order[s] = static_cast<int32_t>(s);
      // Highest score first; ties go to the more recent token, then the lower slot, so the
      // selection is deterministic.
      std::partial_sort(order, order + n_keep, order + n_slots, [&](int32_t a, int32_t b) {
        if (score[a] != score[b]) return score[a] > score[b];
        const int32_t pa = positions[a * n_kv_heads + g], pb = positions[b * n_kv_heads + g];
        if (pa != pb) return pa > pb;
        return a < b;
      });
      std::sort(order, order + n_keep);
      std::copy_n(order, n_keep, keep_values + g * n_keep);
    }
    cache.compact(l, keep);
    cache.backend().synchronize();  // the next layer rewrites the keep list
    policy_->on_compact(l, keep_values, n_kv_heads, n_keep);
  }
  cache.backend().synchronize();
  event.slots_after = cache.size(0);
  event.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++evictions_;
  evicted_tokens_ += event.slots_before - event.slots_after;
  eviction_seconds_ += event.seconds;
  events_.push_back(event);
  log_debug("[eviction] step ", event.step, ": ", policy_->name(), " (", reason, ") ",
            event.slots_before, " -> ", event.slots_after, " slots in ", event.seconds * 1e3,
            " ms");
  return event;
}

}  // namespace edgelm
