// Protected classes: a wrapper that keeps some slots outside any policy's competition, because
// small models are reported to collapse without their attention sinks (e.g. Qwen2.5-0.5B until
// sinks were pinned). Classes (--protect, comma-separated):
//   sinks     the first --sink-tokens positions (StreamingLLM's attention sinks)
//   system    the system prompt's positions (TokenRecord::set_system_prompt; generate --chat sets
//             them from the chat template's rendering of the system message)
//   template  every position holding a special token (<|im_start|>, <|im_end|>, <|eot_id|>, ...:
//             TokenRecord::special, from the ids the Generator feeds)
// Budget accounting: protected slots count against the same per-layer limit as every other slot;
// the wrapped policy's scores compete for what is left (limit − protected − the coming step's
// tokens). When the protected slots alone exceed what a layer keeps, the sinks and the system
// prompt stay (or, if even they do not fit, an error names the limit) and the oldest template
// tokens are evicted first, with one warning.
#pragma once

#include <memory>
#include <string>

#include "eviction/policy.h"

namespace edgelm {

// The classes `protect` names, as a bit set of the values below; throws edgelm::Error naming
// --protect for an unknown or empty class.
enum ProtectClass : unsigned { kProtectSinks = 1, kProtectSystem = 2, kProtectTemplate = 4 };
unsigned parse_protect_classes(const std::string& protect);

// Wraps `inner` so that the classes in `classes` are always kept (sinks: the first `sink_tokens`
// positions).
std::unique_ptr<EvictionPolicy> make_protect_policy(std::unique_ptr<EvictionPolicy> inner,
                                                    unsigned classes, int64_t sink_tokens);

}  // namespace edgelm
