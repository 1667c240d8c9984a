#include "models/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace edgelm {

namespace {

void validate(const SamplerConfig& c, int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > std::numeric_limits<int32_t>::max()) {
    EDGELM_FAIL("[sampler] vocab_size ", vocab_size, " must be in [1, 2147483647]");
  }
  if (!std::isfinite(c.temperature)) {
    EDGELM_FAIL("[sampler] temperature ", c.temperature, " must be finite (<= 0 means greedy)");
  }
  if (!(c.top_p > 0.0f && c.top_p <= 1.0f)) {
    EDGELM_FAIL("[sampler] top_p ", c.top_p, " must be in (0, 1]");
  }
  if (!(c.min_p >= 0.0f && c.min_p <= 1.0f)) {
    EDGELM_FAIL("[sampler] min_p ", c.min_p, " must be in [0, 1]");
  }
  if (!(c.repetition_penalty > 0.0f && std::isfinite(c.repetition_penalty))) {
    EDGELM_FAIL("[sampler] repetition_penalty ", c.repetition_penalty,
                " must be finite and > 0 (1 disables it)");
  }
  if (c.repetition_window < 0) {
    EDGELM_FAIL("[sampler] repetition_window ", c.repetition_window, " must be >= 0");
  }
}

}  // namespace

Sampler::Sampler(const SamplerConfig& config, int64_t vocab_size)
    : config_(config), vocab_size_(vocab_size), rng_(config.seed) {
  validate(config_, vocab_size_);
  const auto n = static_cast<size_t>(vocab_size_);
  logits_.resize(n);
  candidates_.resize(n);
  probs_.resize(n);
  in_window_.assign(n, 0);
}

double Sampler::next_uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::apply_repetition_penalty(std::span<float> logits, std::span<const int32_t> history) {
  if (std::ssize(logits) != vocab_size_) {
    EDGELM_FAIL("[sampler] got ", logits.size(), " logits for a vocab of ", vocab_size_);
  }
  const float penalty = config_.repetition_penalty;
  if (penalty == 1.0f) return;
  const size_t window = std::min(history.size(), static_cast<size_t>(config_.repetition_window));
  const std::span<const int32_t> recent = history.last(window);
  for (const int32_t id : recent) {
    if (id < 0 || id >= vocab_size_) {
      EDGELM_FAIL("[sampler] history token ", id, " is outside the vocab [0, ", vocab_size_, ")");
    }
  }
  for (const int32_t id : recent) {
    if (in_window_[id]) continue;
    in_window_[id] = 1;
    float& logit = logits[id];
    logit = logit > 0.0f ? logit / penalty : logit * penalty;
  }
  for (const int32_t id : recent) in_window_[id] = 0;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  if (std::ssize(logits) != vocab_size_) {
    EDGELM_FAIL("[sampler] got ", logits.size(), " logits for a vocab of ", vocab_size_);
  }
  for (int64_t i = 0; i < vocab_size_; ++i) {
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity()) {
      EDGELM_FAIL("[sampler] logit of token ", i, " is ", logits[i]);
    }
  }
  std::copy(logits.begin(), logits.end(), logits_.begin());
  apply_repetition_penalty(logits_, history);

  // Candidates: every token that can be chosen at all.
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  size_t n = 0;
  for (int64_t i = 0; i < vocab_size_; ++i) {
    if (logits_[i] != kNegInf) candidates_[n++] = static_cast<int32_t>(i);
  }
  if (n == 0) EDGELM_FAIL("[sampler] every logit is -inf; no token can be chosen");

  // Higher logit first, then lower id: a strict total order, so the kept set and its order are
  // the same whatever algorithm the standard library's sort uses.
  const auto before = [this](int32_t a, int32_t b) {
    return logits_[a] != logits_[b] ? logits_[a] > logits_[b] : a < b;
  };
  const auto first = candidates_.begin();

  if (config_.greedy || config_.temperature <= 0.0f) {
    return *std::min_element(first, first + n, before);
  }

  const bool top_p_enabled = config_.top_p < 1.0f;
  bool sorted = false;
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < n) {
    const size_t k = static_cast<size_t>(config_.top_k);
    std::partial_sort(first, first + k, first + n, before);
    n = k;
    sorted = true;
  } else if (top_p_enabled) {
    std::sort(first, first + n, before);
    sorted = true;
  }

  // Softmax numerators relative to the best logit, so the best token's weight is exactly 1.
  const float max_logit =
      sorted ? logits_[candidates_[0]] : logits_[*std::min_element(first, first + n, before)];
  const double inv_temperature = 1.0 / static_cast<double>(config_.temperature);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    probs_[i] =
        std::exp((static_cast<double>(logits_[candidates_[i]]) - max_logit) * inv_temperature);
    total += probs_[i];
  }

  if (top_p_enabled) {
    // Smallest prefix (in descending order) whose mass reaches top_p; never empty.
    const double target = static_cast<double>(config_.top_p) * total;
    double mass = 0.0;
    size_t kept = 0;
    while (kept < n) {
      mass += probs_[kept++];
      if (mass >= target) break;
    }
    n = kept;
  }

  if (config_.min_p > 0.0f) {
    // The best token's weight is 1, so the threshold min_p * p_max is min_p itself. The ratio is
    // unaffected by the truncations above, which only drop tokens and scale the rest equally.
    const double threshold = static_cast<double>(config_.min_p);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (probs_[i] >= threshold) {
        candidates_[kept] = candidates_[i];
        probs_[kept] = probs_[i];
        ++kept;
      }
    }
    n = kept;
  }

  total = 0.0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  const double u = next_uniform() * total;
  double cumulative = 0.0;
  size_t last_nonzero = 0;
  for (size_t i = 0; i < n; ++i) {
    if (probs_[i] == 0.0) continue;
    cumulative += probs_[i];
    if (u < cumulative) return candidates_[i];
    last_nonzero = i;
  }
  // Only reached when rounding makes u * total land on the final cumulative sum.
  return candidates_[last_nonzero];
}

}  // namespace edgelm
