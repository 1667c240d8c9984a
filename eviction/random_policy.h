// random: keeps a uniformly random subset of the positions seen so far, per layer and kv head,
// seeded (--eviction-seed); the floor every scored policy is compared with.
#pragma once

#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Each (layer, kv head, logical position) gets a fixed pseudo-random score from the seed, and the
// manager keeps the highest. Since a position's score never changes, the slots kept are always the
// top `budget` scores of every position seen so far: a uniform random subset of the history, as
// reservoir sampling would keep (evicting one random slot per step instead would favour recent
// tokens). The positions the coming step appends are in the cache after it whatever they score.
std::unique_ptr<EvictionPolicy> make_random_policy(const EvictionConfig& config);

// The score of `position` in (layer, kv_head) under `seed`: in [0, 1), a hash, the same on every
// call and machine.
float random_slot_score(uint64_t seed, int64_t layer, int64_t kv_head, int64_t position);

}  // namespace edgelm
