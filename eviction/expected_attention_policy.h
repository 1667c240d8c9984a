// Expected Attention (Devoto et al., "Expected Attention: KV Cache Compression by Estimating
// Attention from Future Queries Distribution", arXiv 2510.00636; kvpress's ExpectedAttentionPress):
// scores each cached key by the attention that future queries are expected to pay it, from running
// statistics of the queries seen so far; needs no attention scores.
#pragma once

#include <memory>

#include "eviction/policy.h"

namespace edgelm {

// Per layer and query head it keeps the running mean mu and covariance Sigma of the queries before
// RoPE (every query from position --sink-tokens on, prompt and decode: StepExports::export_queries
// hands them over). To score, it averages the RoPE rotation R(t) over the next
// --ea-future-positions positions t, and takes the expected attention logit of key k (cached
// after RoPE) under q ~ N(R̄ mu, R̄ Sigma R̄ᵀ):
//   z(k) = (R̄ mu)·k / sqrt(d) + kᵀ (R̄ Sigma R̄ᵀ) k / (2 d)   (the second term: --ea-covariance)
// then a softmax of z over the non-sink slots, averaged over the query heads of each kv head
// (GQA), and weighted by the value's norm: score = (p + --ea-epsilon) * |v|. The first
// --sink-tokens positions are always kept. Under --kv-budget B, sinks inside it.
std::unique_ptr<EvictionPolicy> make_expected_attention_policy(const EvictionConfig& config);

}  // namespace edgelm
