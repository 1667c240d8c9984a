// Per-layer budgets (PyramidKV: Cai et al., "PyramidKV: Dynamic KV Cache Compression based on
// Pyramidal Information Funneling", arXiv 2406.02069): a wrapper that gives lower layers more
// slots and higher layers fewer, the total over the layers unchanged, around any budgeted policy.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "eviction/policy.h"

namespace edgelm {

// The per-layer limits for a uniform `limit` over n_layers layers: every layer keeps `floor`
// slots (the policy's own carve-outs, as PyramidKV keeps SnapKV's observation window in every
// layer), and the rest, A = limit − floor per layer on average, falls linearly from layer 0 to
// the last layer between PyramidKV's bottom and top sizes: top = A / beta, bottom = 2 A − top.
// Rounded to whole slots by largest remainder (ties to the lower layer), so the limits sum to
// exactly n_layers × limit and never increase with the layer. One layer, or limit <= floor,
// gives `limit` everywhere; beta = 1 is uniform.
std::vector<int64_t> pyramid_layer_limits(int64_t n_layers, int64_t limit, int64_t floor,
                                          double beta);

// Wraps `inner` so that CacheManager holds each layer to its pyramid share of every per-layer
// limit (the budget, the policy's own limit, SnapKV's prefill limit); `floor` and `beta` as
// above. The schedule is computed once per distinct limit, so evicting allocates nothing after.
std::unique_ptr<EvictionPolicy> make_pyramid_policy(std::unique_ptr<EvictionPolicy> inner,
                                                    int64_t floor, double beta);

}  // namespace edgelm
