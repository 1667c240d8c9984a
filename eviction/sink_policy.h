// sink: StreamingLLM (Xiao et al., "Efficient Streaming Language Models with Attention Sinks",
// 2023): the first tokens act as attention sinks; keep --sink-tokens of them and the most recent
// --eviction-window tokens.
#pragma once

#include <cstdint>
#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Its own limit is sinks + window; the budget must hold the sinks and the newest token.
std::unique_ptr<EvictionPolicy> make_sink_policy(const EvictionConfig& config);

// Under --kv-budget B an unset window is what the sinks leave: B - --sink-tokens.
int64_t sink_budget_window(const EvictionConfig& config);

}  // namespace edgelm
