#include "eval/teacher_forcing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace edgelm {

double NllStats::mean() const {
  return count > 0 ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
}

double NllStats::perplexity() const {
  return std::exp(mean());
}

double NllStats::mean_stderr() const {
  if (count < 2) return std::numeric_limits<double>::quiet_NaN();
  const double mu = mean();
  // mean(NLL^2) - mu^2 is the population variance; dividing it by count - 1 gives the squared
  // standard error of mu (llama.cpp's estimate). Rounding can take a tiny variance below zero.
  const double variance = sum_squares / static_cast<double>(count) - mu * mu;
  return variance > 0.0 ? std::sqrt(variance / static_cast<double>(count - 1)) : 0.0;
}

double NllStats::perplexity_stderr() const {
  return perplexity() * mean_stderr();
}

double token_nll(std::span<const float> logits, int32_t target, int64_t position) {
  EDGELM_CHECK(target >= 0 && static_cast<size_t>(target) < logits.size(), "[teacher_forcing] ",
               "token ", target, " at position ", position + 1, " is outside the vocabulary of ",
               logits.size());
  // log softmax(x)[t] = (x[t] - m) - log(sum_i exp(x[i] - m)) for any m. With m the largest
  // logit every exponent is <= 0: no term overflows (exp of a float overflows past 88.7, and
  // logits of confident models reach that), the largest term is exactly 1, so the sum is at least
  // 1 and its log loses nothing to underflow.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const float v : logits) max_logit = std::max(max_logit, v);
  // The sum runs over the whole vocabulary (49,152 to 128,256 terms) in double: a float
  // accumulator's rounding error grows with the number of terms (up to n * 2^-24 relative, about
  // 0.8 % at 128k), which would show in the NLL. Each term's own float exp error (~1e-7 relative)
  // does not accumulate that way. The sums over tokens (NllStats) are double for the same reason.
  double sum = 0.0;
  for (const float v : logits) sum += static_cast<double>(std::exp(v - max_logit));
  const double nll = std::log(sum) - (static_cast<double>(logits[static_cast<size_t>(target)]) -
                                      static_cast<double>(max_logit));
  // A NaN or infinite logit makes the sum (or the target's term) non-finite.
  EDGELM_CHECK(std::isfinite(nll), "[teacher_forcing] the logits after position ", position,
               " are not finite (NLL ", nll, "): the model computed a NaN or an infinity");
  return nll;
}

TeacherForcedStream::TeacherForcedStream(Generator& generator, std::span<const int32_t> tokens,
                                         const TeacherForcingOptions& options)
    : generator_(generator),
      tokens_(tokens),
      batch_(options.batch > 0 ? options.batch : generator.max_step()),
      score_from_(options.score_from),
      vocab_(generator.model().config().vocab_size) {
  const auto n = static_cast<int64_t>(tokens.size());
  EDGELM_CHECK(n > 0, "[teacher_forcing] no tokens to stream");
  EDGELM_CHECK(options.batch >= 0 && batch_ <= generator.max_step(), "[teacher_forcing] batch ",
               options.batch, " is outside [1, ", generator.max_step(),
               "] (the model's chunk, and what eviction can make room for)");
  EDGELM_CHECK(score_from_ >= 0 && score_from_ < n, "[teacher_forcing] score_from ", score_from_,
               " is outside [0, ", n, ")");
  chunk_nll_.resize(static_cast<size_t>(batch_));
  generator_.begin_prefill(n);
}

TeacherForcedChunk TeacherForcedStream::step() {
  EDGELM_CHECK(!done(), "[teacher_forcing] the stream is done");
  const auto n = static_cast<int64_t>(tokens_.size());
  const int64_t begin = next_;
  const int64_t count = std::min(batch_, n - begin);
  TeacherForcedChunk chunk;
  chunk.begin = begin;
  chunk.tokens = tokens_.subspan(static_cast<size_t>(begin), static_cast<size_t>(count));
  chunk.logits_from = std::clamp<int64_t>(score_from_ - begin, 0, count);
  chunk.vocab = vocab_;
  chunk.logits = generator_.prefill_step(chunk.tokens, chunk.logits_from);
  next_ += count;

  // Every row has a next token except the stream's last position's.
  const int64_t rows = count - chunk.logits_from;
  const int64_t scored = begin + count == n ? std::max<int64_t>(rows - 1, 0) : rows;
  const int64_t first_target = begin + chunk.logits_from + 1;
  chunk.targets = tokens_.subspan(static_cast<size_t>(first_target), static_cast<size_t>(scored));
  for (int64_t r = 0; r < scored; ++r) {
    const double nll = token_nll(chunk.row(r), chunk.targets[static_cast<size_t>(r)],
                                 begin + chunk.logits_from + r);
    chunk_nll_[static_cast<size_t>(r)] = nll;
    nll_.add(nll);
  }
  chunk.nll = std::span<const double>(chunk_nll_.data(), static_cast<size_t>(scored));
  return chunk;
}

NllStats teacher_force(Generator& generator, std::span<const int32_t> tokens,
                       const TeacherForcingOptions& options,
                       const std::function<void(const TeacherForcedChunk&)>& on_chunk) {
  TeacherForcedStream stream(generator, tokens, options);
  while (!stream.done()) {
    const TeacherForcedChunk chunk = stream.step();
    if (on_chunk) on_chunk(chunk);
  }
  return stream.nll();
}

}  // namespace edgelm
