// sliding: keeps the most recent --eviction-window tokens plus the first --protected-prefix.
#pragma once

#include <cstdint>
#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Its own limit is window + prefix; the budget and the prefix must leave room for the newest
// token.
std::unique_ptr<EvictionPolicy> make_sliding_policy(const EvictionConfig& config);

// Under --kv-budget B an unset window is what the prefix leaves: B - --protected-prefix.
int64_t sliding_budget_window(const EvictionConfig& config);

}  // namespace edgelm
