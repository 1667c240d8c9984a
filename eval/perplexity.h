// Perplexity of a token sequence as llama.cpp's llama-perplexity computes it, over the
// teacher-forced path: the tokens are cut into non-overlapping windows of n_ctx (a last partial
// window is dropped), each window runs from an empty cache with its first token replaced by BOS
// when the tokenizer adds one, and only the second half of each window is scored, so that every
// scored token sees at least n_ctx/2 tokens of context (docs/model.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "core/kv_cache.h"
#include "eval/teacher_forcing.h"
#include "models/llama.h"

namespace edgelm {

struct PerplexityOptions {
  int64_t n_ctx = 512;  // tokens per window; at least 3 (so that a window scores one)
  // Tokens per forward step, capped at n_ctx (a step never spans two windows); 0: the model's
  // max_chunk. At most the model's max_chunk.
  int64_t batch = 0;
  int64_t max_chunks = -1;     // score at most this many windows; negative: all of them
  std::optional<int32_t> bos;  // set when the tokenizer adds BOS: each window's first token
};

struct PerplexityResult {
  int64_t n_ctx = 0;
  int64_t batch = 0;
  int64_t chunks = 0;                      // windows scored
  int64_t tokens_evaluated = 0;            // chunks * n_ctx: tokens run through the model
  NllStats nll;                            // over every scored token; nll.count tokens
  std::vector<double> running_perplexity;  // exp(mean NLL) after each window
  double seconds = 0.0;                    // model and scoring, tokenization excluded
};

// Tokens scored per window: positions n_ctx/2 .. n_ctx-2 predict tokens n_ctx/2+1 .. n_ctx-1.
inline int64_t perplexity_tokens_per_chunk(int64_t n_ctx) {
  return n_ctx - 1 - n_ctx / 2;
}

// Computes the perplexity of `tokens` (the whole text, tokenized with the model's add-BOS
// setting). `cache` must hold n_ctx tokens; it is cleared before every window. on_chunk, when
// given, is called after each window with its index (0-based) and the running result. Throws
// edgelm::Error for n_ctx < 3, fewer than 2 * n_ctx tokens (as llama.cpp), a batch beyond the
// model's max_chunk, or a cache smaller than n_ctx.
PerplexityResult compute_perplexity(
    LlamaModel& model, KvCache& cache, std::span<const int32_t> tokens,
    const PerplexityOptions& options,
    const std::function<void(int64_t chunk, const PerplexityResult& so_far)>& on_chunk = {});

}  // namespace edgelm
