#include "eviction/cache_manager.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"

namespace edgelm {
namespace {

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

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
  const int64_t limit = std::min(policy_->own_limit().value_or(cache.capacity()),
                                 config_.kv_budget > 0 ? config_.kv_budget : cache.capacity());
  EDGELM_CHECK(!policy_->evicts() || limit < cache.capacity(), "[eviction] policy '",
               policy_->name(), "' keeps up to ", limit, " slots but the cache holds only ",
               cache.capacity(), ": raise -c/--ctx-size above the window/budget");
  prepared_ = true;
}

int64_t CacheManager::max_step_tokens(const KvCache& cache) const {
  if (!policy_->evicts()) return cache.capacity();
  int64_t limit = cache.capacity();
  if (!compresses_prompt()) {
    if (const auto own = policy_->own_limit()) limit = std::min(limit, *own);
    if (config_.kv_budget > 0) limit = std::min(limit, config_.kv_budget);
  }
  return std::max<int64_t>(1, limit / 2);
}

ForwardOptions CacheManager::forward_options(Phase phase, int64_t first_position,
                                             int64_t n_tokens) const {
  ForwardOptions options;
  if (const auto from = policy_->mass_from(phase, first_position, n_tokens, prompt_end_)) {
    options.export_mass = true;
    options.mass_from_position = *from;
  }
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

std::optional<EvictionEvent> CacheManager::maybe_evict(KvCache& cache, Phase phase,
                                                       int64_t need_free) {
  prepare(cache);
  ++steps_;
  if (!policy_->evicts()) return std::nullopt;
  const int64_t slots = cache.size(0);
  int64_t target = slots;
  const char* reason = nullptr;
  auto bound = [&](int64_t limit, const char* why) {
    if (slots + need_free > limit && limit - need_free < target) {
      target = limit - need_free;
      reason = why;
    }
  };
  // A policy that compresses the prompt when prefill ends needs it whole until then: in prefill
  // only the capacity and memory pressure bound it.
  if (phase == Phase::Decode || !compresses_prompt()) {
    if (const auto limit = policy_->own_limit()) bound(*limit, "policy");
    if (config_.kv_budget > 0) bound(config_.kv_budget, "budget");
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
  EDGELM_CHECK(target >= 0, "[eviction] cannot free ", need_free, " slots under a limit of ",
               target + need_free);
  return evict_to(cache, phase, target, need_free, reason);
}

std::optional<EvictionEvent> CacheManager::end_prefill(KvCache& cache) {
  prepare(cache);
  const auto limit = policy_->prefill_limit();
  // Keep one slot free so the first decode token does not take the cache over the limit.
  if (!limit || cache.size(0) <= *limit - 1) return std::nullopt;
  return evict_to(cache, Phase::Prefill, *limit - 1, 0, "prefill");
}

EvictionEvent CacheManager::evict_to(KvCache& cache, Phase phase, int64_t target, int64_t incoming,
                                     const char* reason) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n_kv_heads = cache.n_kv_heads();
  EvictionEvent event;
  event.step = steps_;
  event.reason = reason;
  event.slots_before = cache.size(0);
  cache.backend().synchronize();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const int64_t n_slots = cache.size(l);
    const int64_t n_keep = std::min(target, n_slots);
    if (n_keep == n_slots) continue;
    const KvCache::View view = cache.view(l);
    const auto* positions = view.kv_pos.data<int32_t>();
    LayerSlots slots{l, n_slots, n_kv_heads, positions, cache.next_position(), incoming};
    const auto score_start = std::chrono::steady_clock::now();
    policy_->score(slots, phase, scores_.data());
    const auto select_start = std::chrono::steady_clock::now();
    event.score_seconds += seconds_between(score_start, select_start);
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
    const auto compact_start = std::chrono::steady_clock::now();
    event.select_seconds += seconds_between(select_start, compact_start);
    cache.compact(l, keep);
    cache.backend().synchronize();  // the next layer rewrites the keep list
    policy_->on_compact(l, keep_values, n_kv_heads, n_keep);
    event.compact_seconds += seconds_between(compact_start, std::chrono::steady_clock::now());
  }
  cache.backend().synchronize();
  event.slots_after = cache.size(0);
  event.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++evictions_;
  evicted_tokens_ += event.slots_before - event.slots_after;
  eviction_seconds_ += event.seconds;
  score_seconds_ += event.score_seconds;
  select_seconds_ += event.select_seconds;
  compact_seconds_ += event.compact_seconds;
  events_.push_back(event);
  log_debug("[eviction] step ", event.step, ": ", policy_->name(), " (", reason, ") ",
            event.slots_before, " -> ", event.slots_after, " slots in ", event.seconds * 1e3,
            " ms");
  return event;
}

}  // namespace edgelm
