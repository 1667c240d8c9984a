// The teacher-forced path: a known token sequence streamed through the model over a KV cache in
// chunks, every position's logits handed to the caller, and the negative log-likelihood of each
// next token summed as it goes. Perplexity (eval/perplexity.h) is one user; an eviction-quality
// run is another: a full-cache stream and a stream whose Generator has a CacheManager, stepped in
// lockstep over the same tokens, compare each position's two distributions chunk by chunk (give
// each stream its own LlamaModel over copies of the same LlamaWeights, which share the weight
// buffers, since a chunk's logits live in its model's workspace).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/generator.h"

namespace edgelm {

// Running sums of per-token negative log-likelihoods (natural log), and the statistics llama.cpp's
// perplexity reports from them.
struct NllStats {
  int64_t count = 0;
  double sum = 0.0;          // sum of NLL
  double sum_squares = 0.0;  // sum of NLL^2

  void add(double nll) {
    ++count;
    sum += nll;
    sum_squares += nll * nll;
  }
  void merge(const NllStats& other) {
    count += other.count;
    sum += other.sum;
    sum_squares += other.sum_squares;
  }
  // mu, the mean NLL (NaN without tokens).
  double mean() const;
  // exp(mu).
  double perplexity() const;
  // The standard error of mu: sqrt((mean(NLL^2) - mu^2) / (count - 1)); 0 when the variance
  // rounds to zero or below, NaN for fewer than two tokens.
  double mean_stderr() const;
  // The perplexity's, to first order: perplexity() * mean_stderr().
  double perplexity_stderr() const;
};

// -log softmax(logits)[target]. Throws edgelm::Error naming `position` when the logits hold a NaN
// or an infinity (the model computed a non-finite value), or when target is outside the row.
double token_nll(std::span<const float> logits, int32_t target, int64_t position);

// One chunk of a teacher-forced stream, as handed to the caller. Spans are valid until the
// stream's next step() or its model's next forward step.
struct TeacherForcedChunk {
  int64_t begin = 0;                // index in the stream of the chunk's first token
  std::span<const int32_t> tokens;  // the chunk's tokens: the stream's [begin, begin + n)
  int64_t logits_from = 0;          // index in the chunk of the first position with logits
  int64_t vocab = 0;
  // [n - logits_from, vocab]: row r holds the logits after the chunk's token logits_from + r,
  // i.e. the model's prediction for the stream's token begin + logits_from + r + 1.
  std::span<const float> logits;
  // The next tokens of the rows that have one (every row but the stream's last token's), and their
  // NLL under the row, in row order; each of these NLLs is counted in the stream's sums.
  std::span<const int32_t> targets;
  std::span<const double> nll;

  int64_t rows() const { return vocab > 0 ? static_cast<int64_t>(logits.size()) / vocab : 0; }
  std::span<const float> row(int64_t r) const {
    return logits.subspan(static_cast<size_t>(r * vocab), static_cast<size_t>(vocab));
  }
};

struct TeacherForcingOptions {
  // Tokens per forward step; 0: the generator's max_step(). At most max_step().
  int64_t batch = 0;
  // The first position of the stream whose prediction is scored: logits are computed, handed over
  // and scored for positions score_from .. n-2 (each predicting the next token) and for the last
  // position n-1 (no next token: handed over, not scored). Earlier positions only fill the cache.
  int64_t score_from = 0;
};

// Streams `tokens` through the generator's model and cache, one chunk of up to `batch` tokens per
// step() (a prefill step: with a CacheManager, eviction runs before each chunk as in prefill; the
// whole sequence is declared as one prompt, Generator::begin_prefill). The cache continues from
// its current position; the stream does not clear it.
class TeacherForcedStream {
 public:
  // Throws edgelm::Error for an empty sequence, a batch outside [0, max_step()] or score_from
  // outside [0, n). Keeps a view of `tokens`: they must outlive the stream.
  TeacherForcedStream(Generator& generator, std::span<const int32_t> tokens,
                      const TeacherForcingOptions& options = {});

  bool done() const { return next_ >= static_cast<int64_t>(tokens_.size()); }
  // Runs the next chunk, scores its rows and returns it. Throws edgelm::Error once done().
  TeacherForcedChunk step();
  // Sums over every scored position so far.
  const NllStats& nll() const { return nll_; }
  int64_t batch() const { return batch_; }

 private:
  Generator& generator_;
  std::span<const int32_t> tokens_;
  int64_t batch_;
  int64_t score_from_;
  int64_t next_ = 0;  // index of the next chunk's first token
  int64_t vocab_;
  NllStats nll_;
  std::vector<double> chunk_nll_;  // [batch], reused
};

// Runs a whole stream, handing every chunk to on_chunk (may be empty); returns the NLL sums.
NllStats teacher_force(Generator& generator, std::span<const int32_t> tokens,
                       const TeacherForcingOptions& options = {},
                       const std::function<void(const TeacherForcedChunk&)>& on_chunk = {});

}  // namespace edgelm
