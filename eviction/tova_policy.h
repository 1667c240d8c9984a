// tova: TOVA (Oren et al., "Transformers are Multi-State RNNs", 2024): the cache as a bounded
// multi-state RNN; when over budget, drop the slots the current query attends to least.
#pragma once

#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Under --kv-budget B, ranked by the newest query's attention (the group average over the query
// heads of each kv head), which it keeps as one statistic per slot.
std::unique_ptr<EvictionPolicy> make_tova_policy(const EvictionConfig& config);

}  // namespace edgelm
