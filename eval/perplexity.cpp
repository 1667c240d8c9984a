#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "runtime/generator.h"

namespace edgelm {

PerplexityResult compute_perplexity(
    LlamaModel& model, KvCache& cache, std::span<const int32_t> tokens,
    const PerplexityOptions& options,
    const std::function<void(int64_t chunk, const PerplexityResult& so_far)>& on_chunk) {
  const int64_t n_ctx = options.n_ctx;
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  // n_ctx 2 would score no token per window (n_ctx - 1 - n_ctx/2 = 0).
  EDGELM_CHECK(n_ctx >= 3, "[perplexity] a context of ", n_ctx,
               " tokens scores none; it must be at least 3");
  EDGELM_CHECK(n_tokens >= 2 * n_ctx, "[perplexity] ", n_tokens,
               " tokens are too few for a context of ", n_ctx, ": at least ", 2 * n_ctx,
               " (two windows) are needed");
  EDGELM_CHECK(options.batch >= 0 && options.batch <= model.max_chunk(), "[perplexity] batch ",
               options.batch, " is outside [1, ", model.max_chunk(), "] (the model's chunk)");
  EDGELM_CHECK(cache.capacity() >= n_ctx, "[perplexity] the KV cache holds ", cache.capacity(),
               " tokens, fewer than the context of ", n_ctx);
  if (options.bos) {
    EDGELM_CHECK(*options.bos >= 0 && *options.bos < model.config().vocab_size,
                 "[perplexity] BOS id ", *options.bos, " is outside the vocabulary of ",
                 model.config().vocab_size);
  }

  PerplexityResult result;
  result.n_ctx = n_ctx;
  result.batch = std::min(options.batch > 0 ? options.batch : model.max_chunk(), n_ctx);
  const int64_t available = n_tokens / n_ctx;
  const int64_t chunks =
      options.max_chunks < 0 ? available : std::min(options.max_chunks, available);
  const int64_t first = n_ctx / 2;

  Generator generator(model, cache);
  std::vector<int32_t> window(static_cast<size_t>(n_ctx));
  const auto start = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < chunks; ++c) {
    const auto from = tokens.begin() + c * n_ctx;
    std::copy(from, from + n_ctx, window.begin());
    if (options.bos) window[0] = *options.bos;
    cache.clear();
    // Positions first .. n_ctx-2 are scored; the stream also hands over n_ctx-1's logits, which
    // have no next token in the window.
    result.nll.merge(
        teacher_force(generator, window, {.batch = result.batch, .score_from = first}));
    result.chunks = c + 1;
    result.tokens_evaluated += n_ctx;
    result.running_perplexity.push_back(result.nll.perplexity());
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (on_chunk) on_chunk(c, result);
  }
  return result;
}

}  // namespace edgelm
