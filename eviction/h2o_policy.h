// h2o: H2O (Zhang et al., "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large
// Language Models", 2023): "heavy hitters" are the slots with the largest attention mass
// accumulated over every query so far (prompt and decode); keep them plus a recent window.
#pragma once

#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Under --kv-budget B: the newest --eviction-window tokens (B/2 unless set) and the heavy hitters
// in the rest. Keeps one statistic per slot, the accumulated mass.
std::unique_ptr<EvictionPolicy> make_h2o_policy(const EvictionConfig& config);

}  // namespace edgelm
