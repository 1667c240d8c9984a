// snapkv: SnapKV (Li et al., "SnapKV: LLM Knows What You are Looking for Before Generation",
// 2024): once, at the end of prefill, score each prompt slot by the attention the last
// --snapkv-window prompt queries pay it (summed over the query heads of its group, i.e. the group
// average up to a constant), pool the scores over neighbouring slots (--snapkv-kernel,
// --snapkv-pool) so kept tokens carry their context, and keep the best slots per kv head plus the
// window itself, to the budget. A prompt longer than the cache is scored the same way chunk by
// chunk: before each compression the CacheManager has the step before it export its own last
// queries' attention (a chunk's window), which ranks the cached slots and the chunk's. Decode
// then appends; a sink + recent-window rule (--sink-tokens) bounds further growth at the same
// budget.
#pragma once

#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Under --kv-budget B, which must hold the window and the sinks. Keeps one statistic per slot,
// the attention of the latest observation window.
std::unique_ptr<EvictionPolicy> make_snapkv_policy(const EvictionConfig& config);

}  // namespace edgelm
