#include "eviction/cache_manager.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "core/error.h"
#include "core/log.h"

namespace edgelm {
namespace {

double seconds_between(std::chrono::steady_clock::time_point from,
                       std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

int64_t kv_budget_from_bytes(uint64_t budget_bytes, size_t slot_bytes) {
  EDGELM_CHECK(slot_bytes > 0, "[eviction] a KV slot of 0 bytes");
  const uint64_t slots = budget_bytes / slot_bytes;
  if (slots == 0) {
    EDGELM_FAIL("[eviction] --budget-bytes ", budget_bytes,
                " holds no KV slot: one slot (K and V over all layers) takes ", slot_bytes,
                " bytes");
  }
  return static_cast<int64_t>(
      std::min<uint64_t>(slots, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

CacheManager::CacheManager(const EvictionConfig& config, std::unique_ptr<EvictionPolicy> policy,
                           std::unique_ptr<SystemMonitor> monitor)
    : config_(with_budget_defaults(config)),
      policy_(std::move(policy)),
      monitor_(std::move(monitor)) {
  EDGELM_CHECK(policy_ != nullptr, "[eviction] no policy");
}

std::optional<int64_t> CacheManager::limit() const {
  std::optional<int64_t> limit = policy_->own_limit();
  if (config_.kv_budget > 0) limit = std::min(limit.value_or(config_.kv_budget), config_.kv_budget);
  return limit;
}

int64_t CacheManager::largest_share(int64_t uniform, int64_t n_layers) const {
  int64_t share = 0;
  for (int64_t l = 0; l < n_layers; ++l)
    share = std::max(share, policy_->layer_limit(l, n_layers, uniform));
  return share;
}

int64_t CacheManager::smallest_share(int64_t uniform, int64_t n_layers) const {
  int64_t share = std::numeric_limits<int64_t>::max();
  for (int64_t l = 0; l < n_layers; ++l)
    share = std::min(share, policy_->layer_limit(l, n_layers, uniform));
  return share;
}

int64_t CacheManager::capacity_for(int64_t context, int64_t max_chunk, int64_t n_layers) const {
  EDGELM_CHECK(context > 0 && max_chunk > 0 && n_layers > 0, "[eviction] a context of ", context,
               " positions in steps of ", max_chunk, " tokens over ", n_layers, " layers");
  const std::optional<int64_t> held = limit();
  if (!policy_->evicts() || !held) return context;
  // A policy that evicts before each step to its limit minus the step never holds more than
  // the limit (in each layer, that layer's share). One that compresses the prompt appends a
  // prompt step before ranking it.
  const int64_t step = compresses_prompt() ? max_chunk : 0;
  return std::min(context, largest_share(*held, n_layers) + step);
}

void CacheManager::prepare(KvCache& cache) {
  if (prepared_) return;
  stat_channels_ = policy_->stat_channels();
  EDGELM_CHECK(stat_channels_ >= 0, "[eviction] policy '", policy_->name(), "' asks for ",
               stat_channels_, " statistics per slot");
  if (stat_channels_ > 0) {
    for (int64_t l = 0; l < cache.n_layers(); ++l) {
      stats_.push_back(Tensor::empty(cache.backend().memory(), DType::F32,
                                     {cache.capacity(), cache.n_kv_heads(), stat_channels_}));
    }
    stats_filled_.assign(static_cast<size_t>(cache.n_layers()), 0);
    stats_epoch_ = cache.slot_epoch();
  }
  policy_->prepare(cache.n_layers(), cache.n_kv_heads(), cache.capacity());
  // Every layer's scores at once: evict_to scores all layers before it compacts any.
  scores_.resize(static_cast<size_t>(cache.n_layers() * cache.n_kv_heads() * cache.capacity()));
  order_.resize(static_cast<size_t>(cache.capacity()));
  keep_ =
      Tensor::empty(cache.backend().memory(), DType::I32, {cache.n_kv_heads() * cache.capacity()});
  // A cache that holds the whole logical context never fills; otherwise the limit must fit,
  // with room for a prompt step beyond it where the prompt is compressed as it streams.
  if (policy_->evicts() && cache.max_positions() > cache.capacity()) {
    const int64_t held = largest_share(limit().value_or(cache.capacity()), cache.n_layers());
    const int64_t needed = held + (compresses_prompt() ? 1 : 0);
    if (needed > cache.capacity()) {
      EDGELM_FAIL("[eviction] policy '", policy_->name(), "' keeps up to ", held,
                  " slots but the cache holds only ", cache.capacity(), " (it needs at least ",
                  needed, "): raise the cache's capacity or lower the window/budget");
    }
  }
  prepared_ = true;
}

int64_t CacheManager::max_step_tokens(const KvCache& cache) const {
  if (!policy_->evicts()) return cache.capacity();
  if (compresses_prompt()) {
    // A prompt step is appended whole and the cache compressed back to the room for the next
    // one, which keeps at least the prefill limit (in every layer, its share of it).
    const int64_t held = largest_share(*policy_->prefill_limit(), cache.n_layers());
    if (cache.capacity() > held) return cache.capacity() - held;
    return std::max<int64_t>(1, cache.capacity() / 2);
  }
  int64_t held = cache.capacity();
  if (const auto uniform = limit())
    held = std::min(held, smallest_share(*uniform, cache.n_layers()));
  return std::max<int64_t>(1, (held - policy_->reserved_slots(tokens_)) / 2);
}

int64_t CacheManager::decode_headroom(const KvCache& cache) const {
  int64_t room = std::numeric_limits<int64_t>::max();
  if (!policy_->evicts()) return room;
  // The bounds maybe_evict() checks before a decode step: the step after the next one fires
  // one when the slots then held (the next token's included) plus its own reach a bound.
  auto bound_layers = [&](int64_t limit) {
    for (int64_t l = 0; l < cache.n_layers(); ++l)
      room = std::min(room, policy_->layer_limit(l, cache.n_layers(), limit) - cache.size(l) - 1);
  };
  if (const auto own = policy_->own_limit()) bound_layers(*own);
  if (config_.kv_budget > 0) bound_layers(config_.kv_budget);
  room = std::min(room, cache.capacity() - cache.size(0) - 1);
  if (pressure_cap_) room = std::min(room, *pressure_cap_ - cache.size(0) - 1);
  return std::max<int64_t>(0, room);
}

void CacheManager::truncated(const KvCache& cache) {
  for (size_t l = 0; l < stats_filled_.size(); ++l)
    stats_filled_[l] = std::min(stats_filled_[l], cache.size(static_cast<int64_t>(l)));
}

StepExports CacheManager::forward_options(Phase phase, int64_t first_position,
                                          int64_t n_tokens) const {
  StepExports exports;
  if (const auto from = policy_->mass_from(phase, first_position, n_tokens, prompt_end_)) {
    exports.export_mass = true;
    exports.mass_from_position = *from;
  }
  exports.export_queries = policy_->wants_queries();
  return exports;
}

StepExports CacheManager::forward_options(const KvCache& cache, Phase phase,
                                          int64_t n_tokens) const {
  const int64_t first = cache.next_position();
  StepExports exports = forward_options(phase, first, n_tokens);
  if (exports.export_mass || phase != Phase::Prefill || !compresses_prompt()) return exports;
  // Will the prompt's next step find the cache full? Then this step's window ranks what stays.
  const int64_t remaining = prompt_end_ - (first + n_tokens);
  if (remaining <= 0) return exports;
  const int64_t next_step = std::min(remaining, max_step_tokens(cache));
  if (cache.size(0) + n_tokens + next_step <= cache.capacity()) return exports;
  if (const auto from = policy_->mass_from(phase, first, n_tokens, first + n_tokens)) {
    exports.export_mass = true;
    exports.mass_from_position = *from;
  }
  return exports;
}

void CacheManager::observe(KvCache& cache, Phase phase, const StepExports& exports) {
  prepare(cache);
  if (!exports.export_mass) return;
  if (phase == Phase::Prefill) window_observed_ = true;
  cache.backend().synchronize();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const Tensor mass = cache.mass(l);
    policy_->observe(l, phase, mass.data<float>(), layer_stats(cache, l));
  }
}

void CacheManager::observe_queries(KvCache& cache, const StepQueries& queries) {
  prepare(cache);
  const auto start = std::chrono::steady_clock::now();
  cache.backend().synchronize();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    policy_->observe_queries({.layer = l,
                              .rows = queries.rows + l * queries.layer_stride,
                              .n_tokens = queries.n_tokens,
                              .n_heads = queries.n_heads,
                              .head_dim = queries.head_dim,
                              .first_position = queries.first_position,
                              .inv_freq = queries.inv_freq});
  }
  query_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

SlotStats CacheManager::layer_stats(const KvCache& cache, int64_t layer) {
  SlotStats stats{
      .n_slots = cache.size(layer), .n_kv_heads = cache.n_kv_heads(), .channels = stat_channels_};
  if (stat_channels_ == 0) return stats;
  stats.values = stats_[static_cast<size_t>(layer)].data<float>();
  if (cache.slot_epoch() != stats_epoch_) {
    // Emptied or shifted outside the manager's compaction: no row matches its slot any more.
    std::fill(stats_filled_.begin(), stats_filled_.end(), 0);
    stats_epoch_ = cache.slot_epoch();
  }
  int64_t& filled = stats_filled_[static_cast<size_t>(layer)];
  const int64_t row = stats.n_kv_heads * stats.channels;
  std::fill(stats.values + std::min(filled, stats.n_slots) * row,
            stats.values + stats.n_slots * row, 0.0f);
  filled = stats.n_slots;
  return stats;
}

int64_t CacheManager::pressure_floor(int64_t need_free) {
  largest_step_ = std::max(largest_step_, need_free);
  if (config_.pressure_floor > 0) return std::max(config_.pressure_floor, largest_step_);
  // What the policy always keeps (sinks, a protected prefix, protected classes), a short recent
  // window, and the coming step.
  int64_t kept = policy_->reserved_slots(tokens_);
  if (policy_reads(config_, "--sink-tokens"))
    kept = std::max(kept, config_.sink_tokens.value_or(0));
  if (policy_reads(config_, "--protected-prefix")) kept = std::max(kept, config_.protected_prefix);
  return kept + kPressureFloorWindow + largest_step_;
}

int64_t CacheManager::fallback_count() const {
  int64_t count = 0;
  for (const auto& [kind, n] : fallbacks_) count += n;
  return count;
}

void CacheManager::fall_back(const std::string& kind, const std::string& what) {
  if (fallbacks_[kind]++ == 0) log_warn("[eviction] ", policy_->name(), ": ", what);
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
  // only the capacity (the prompt then streams: compressed as each step needs room) and memory
  // pressure bound it.
  const bool streams_prompt = phase == Phase::Prefill && compresses_prompt();
  if (!streams_prompt) {
    if (const auto own = policy_->own_limit()) bound_layers(*own, "policy");
    if (config_.kv_budget > 0) bound_layers(config_.kv_budget, "budget");
  }
  bound(cache.capacity(), streams_prompt ? "chunk" : "full");
  if (monitor_ != nullptr) {
    if (monitor_->available_mb() < config_.memory_threshold_mb) {
      // Under pressure, cap the cache at a share of what it held when pressure began; the cap
      // holds (like a budget) until memory recovers, and never below the floor, so that memory
      // that stays low slows the cache's growth instead of emptying it.
      const int64_t floor = pressure_floor(need_free);
      if (!pressure_cap_) {
        pressure_cap_ = std::max<int64_t>(
            floor, static_cast<int64_t>(static_cast<double>(slots) * config_.pressure_keep_ratio));
        const std::optional<int64_t> held = limit();
        if (held && *pressure_cap_ < *held) {
          fall_back("pressure", str_cat("memory pressure caps the cache at ", *pressure_cap_,
                                        " slots, below the policy's limit of ", *held,
                                        ": it keeps less than its rule asks until memory "
                                        "recovers"));
        }
      }
      if (*pressure_cap_ <= floor) {
        pressure_cap_ = floor;
        fall_back("floor",
                  str_cat("memory stays below --memory-threshold-mb ", config_.memory_threshold_mb,
                          ": the cache is held at its floor of ", floor,
                          " slots (--pressure-floor) and generation goes on"));
      }
      bound(*pressure_cap_, "memory");
    } else {
      pressure_cap_.reset();
      released_from_.reset();  // the cache may grow into the released pages again
    }
  }
  if (reason == nullptr) return std::nullopt;
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    EDGELM_CHECK(layer_target(cache, l, targets) >= 0, "[eviction] cannot free ", need_free,
                 " slots in layer ", l, " under a limit of ",
                 layer_target(cache, l, targets) + need_free);
  }
  const std::string why = reason;
  if (why == "full") {
    fall_back("full", str_cat("the cache of ", cache.capacity(),
                              " slots filled before the policy's limit: slots are dropped by its "
                              "scores to make room"));
  } else if (why == "chunk" && !window_observed_) {
    fall_back("no-window", str_cat("the prompt is compressed at position ", cache.next_position(),
                                   " without an observation window from the step before: "
                                   "slots are ranked by older scores"));
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
  int64_t promised = 0;  // the most always-kept slots of one kv head beyond its layer's target
  int64_t promised_target = 0;
  cache.backend().synchronize();
  // Every layer is scored before any is compacted, so that a policy that throws (a policy written
  // in Python may raise) leaves the cache as it was.
  const int64_t layer_scores = n_kv_heads * cache.capacity();
  const auto score_start = std::chrono::steady_clock::now();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const int64_t n_slots = cache.size(l);
    const int64_t n_keep = std::min(layer_target(cache, l, targets), n_slots);
    if (n_keep == n_slots) continue;
    const KvCache::View view = cache.view(l);
    const LayerSlots slots{l,      n_slots, n_kv_heads, view.kv_pos.data<int32_t>(),
                           cache.next_position(),       incoming,
                           n_keep, view.k,  view.v,     &tokens_,
                           layer_stats(cache, l)};
    policy_->score(slots, phase, scores_.data() + l * layer_scores);
  }
  event.score_seconds = seconds_between(score_start, std::chrono::steady_clock::now());
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const int64_t n_slots = cache.size(l);
    const int64_t n_keep = std::min(layer_target(cache, l, targets), n_slots);
    if (n_keep == n_slots) continue;
    const auto select_start = std::chrono::steady_clock::now();
    const auto* positions = cache.view(l).kv_pos.data<int32_t>();
    Tensor keep = keep_.view(DType::I32, {n_kv_heads, n_keep});
    int32_t* keep_values = keep.data<int32_t>();
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      const float* score = scores_.data() + l * layer_scores + g * n_slots;
      const auto kept = static_cast<int64_t>(std::count(score, score + n_slots, kAlwaysKeep));
      if (kept > n_keep && kept - n_keep > promised - promised_target) {
        promised = kept;
        promised_target = n_keep;
      }
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
    // The statistics move with their slots, by the same keep list in the same op.
    if (stat_channels_ > 0) {
      cache.compact(l, keep, std::span(&stats_[static_cast<size_t>(l)], 1));
      stats_filled_[static_cast<size_t>(l)] = n_keep;
    } else {
      cache.compact(l, keep);
    }
    cache.backend().synchronize();  // the next layer rewrites the keep list
    event.compact_seconds += seconds_between(compact_start, std::chrono::steady_clock::now());
  }
  cache.backend().synchronize();
  if (promised > promised_target) {
    fall_back("protected",
              str_cat("it promises to keep ", promised, " slots (sinks, windows) ", "but the ",
                      reason, " limit leaves ", promised_target, ": the oldest of them go"));
  }
  // Under memory pressure the cache stays at the cap until memory recovers: the pages past it
  // go back to the system now (once per cap: while it holds, no append reaches past it).
  if (event.reason == "memory" && pressure_cap_ &&
      (!released_from_ || *pressure_cap_ < *released_from_)) {
    const int64_t cap = *pressure_cap_;
    event.rss_before_bytes = resident_set_bytes();
    event.released_bytes = cache.release_free_slots(cap);
    event.rss_after_bytes = resident_set_bytes();
    released_from_ = cap;
    released_bytes_ += event.released_bytes;
    if (event.rss_before_bytes > event.rss_after_bytes)
      rss_drop_bytes_ += event.rss_before_bytes - event.rss_after_bytes;
  }
  window_observed_ = false;
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
            event.slots_before, " -> ", event.slots_after, " slots in ", event.seconds * 1e3, " ms",
            event.released_bytes > 0 ? str_cat(", ", event.released_bytes, " bytes released")
                                     : std::string());
  return event;
}

}  // namespace edgelm
