// KeyDiff (Park et al., "KeyDiff: Key Similarity-Based KV Cache Eviction for Long-Context LLM
// Inference in Resource-Constrained Environments", arXiv 2504.15364): keeps the keys least similar
// to the mean key direction; needs no attention scores.
#pragma once

#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Per layer and kv head: the anchor is the mean of the cached keys, each normalised to unit
// length, and a slot scores -cos(key, anchor) (higher kept): the keys pointing away from what the
// cache mostly holds. Keys are read as cached (after RoPE), as the paper and kvpress's
// KeyDiffPress score them. Under --kv-budget B, with no carve-outs of its own.
std::unique_ptr<EvictionPolicy> make_keydiff_policy(const EvictionConfig& config);

}  // namespace edgelm
