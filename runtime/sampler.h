// Next-token sampling: repetition penalty, greedy or top-k / temperature / top-p / min-p, and a
// seeded draw that gives the same tokens on every platform for a given seed.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace edgelm {

struct SamplerConfig {
  bool greedy = false;       // argmax (ties: lowest id); also used when temperature <= 0
  float temperature = 0.8f;  // finite; <= 0 means greedy
  int top_k = 40;            // <= 0: disabled
  float top_p = 0.95f;       // in (0, 1]; 1: disabled
  float min_p = 0.05f;       // in [0, 1]; 0: disabled; keeps tokens with p >= min_p * p_max
  // Finite and > 0; 1: disabled. HF rule: logit > 0 ? logit / penalty : logit * penalty, applied
  // once per distinct token among the last `repetition_window` history tokens.
  float repetition_penalty = 1.0f;
  int repetition_window = 64;  // >= 0; 0 makes the penalty look at nothing
  uint64_t seed = 0;
};

// Picks next tokens from logits. The pipeline is: repetition penalty -> (greedy: argmax) ->
// top-k -> softmax with temperature -> top-p -> min-p -> renormalise -> draw. Tokens whose logit
// is -inf are never chosen. Candidate ties are broken by lower token id, so the result does not
// depend on the standard library's sort; the draw uses std::mt19937_64 (fully specified by the
// standard) and its own 53-bit conversion to a double for the same reason.
class Sampler {
 public:
  // Validates `config` and allocates every buffer `sample` needs. Throws edgelm::Error naming the
  // bad field and value, e.g. "[sampler] top_p 1.5 must be in (0, 1]", or a vocab_size outside
  // [1, INT32_MAX].
  Sampler(const SamplerConfig& config, int64_t vocab_size);

  // The next token id for `logits` (vocab_size values); `history` holds the previous tokens
  // (prompt + generated), oldest first. Advances the random state unless sampling is greedy.
  // Allocates nothing. Throws edgelm::Error for a logits size other than vocab_size, a NaN or
  // +inf logit, a history id outside [0, vocab_size) within the repetition window, or logits
  // that are all -inf.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // A distribution over token ids: ids[i] has probability probs[i]; the probabilities sum to 1.
  struct Distribution {
    std::span<const int32_t> ids;
    std::span<const double> probs;
  };
  // The distribution sample() draws from for these logits and history (after the penalty, top-k,
  // temperature, top-p and min-p; greedy: the argmax with probability 1). Views of the sampler's
  // buffers, valid until its next call. Throws as sample() does.
  Distribution distribution(std::span<const float> logits, std::span<const int32_t> history);
  // Speculative sampling (runtime/speculative.h): the next token where a drafter proposed `draft`,
  // drawn from `proposal` (q; no ids: a point mass at the draft, as prompt lookup proposes). With
  // p the distribution sample() draws from, the draft is kept with probability min(1, p/q at the
  // draft), else the token is drawn from max(0, p - q) renormalised, so that it is distributed
  // as p whatever q is (Leviathan et al., Chen et al., 2023). Greedy: the argmax, like sample().
  // Advances the random state unless greedy (two draws on a rejection). Allocates a vocab_size
  // scratch on the first call.
  int32_t sample_draft(std::span<const float> logits, std::span<const int32_t> history,
                       int32_t draft, Distribution proposal = {});

  // Applies the repetition penalty of the config to `logits` in place (the first stage of
  // `sample`, exposed so the exact rule can be checked): each distinct token among the last
  // repetition_window entries of `history` is penalised once. A no-op when the penalty is 1.
  void apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> history);

  const SamplerConfig& config() const { return config_; }
  int64_t vocab_size() const { return vocab_size_; }

 private:
  bool greedy() const { return config_.greedy || config_.temperature <= 0.0f; }
  // Fills candidates_[0, n) and their unnormalised probabilities probs_[0, n) as sample() draws
  // from them (greedy: the argmax with 1) and returns n.
  size_t prepare(std::span<const float> logits, std::span<const int32_t> history);
  // One draw from candidates_[0, n) by the weights probs_[0, n).
  int32_t draw(size_t n);
  // candidates_[0, k) = the k best tokens (higher logit, then lower id), best first; k is below
  // the number of tokens whose logit is not -inf.
  void select_top_k(size_t k);
  // A uniform double in [0, 1) from the top 53 bits of one 64-bit draw.
  double next_uniform();

  SamplerConfig config_;
  int64_t vocab_size_ = 0;
  std::mt19937_64 rng_;
  std::vector<float> logits_;        // (vocab) penalised copy of the input logits
  std::vector<int32_t> candidates_;  // (vocab) ids still in play; a prefix is used
  // (vocab) unnormalised probabilities of candidates_, same order. Double because the draw walks
  // a cumulative sum over up to the whole vocab, where float would lose the small tail.
  std::vector<double> probs_;
  std::vector<uint8_t> in_window_;  // (vocab) marks tokens already penalised in this call
  std::vector<double> q_;           // (vocab) sample_draft's proposal, zero outside its ids
};

}  // namespace edgelm
