// none: keeps every token; no trigger ever evicts (the full cache every other policy is compared
// with).
#pragma once

#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// The settings are not read.
std::unique_ptr<EvictionPolicy> make_none_policy(const EvictionConfig& config);

}  // namespace edgelm
