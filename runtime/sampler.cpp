#include "runtime/sampler.h"

#include <algorithm>
#include <array>
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

// The loops below keep kLanes independent accumulators, which the compiler turns into vector
// instructions without reordering any arithmetic (a single running maximum or flag is a chain it
// leaves scalar: 72 us for the maximum of a 128k vocabulary).
constexpr size_t kLanes = 8;

// The probability of a draft proposed without a distribution (prompt lookup, a greedy draft).
constexpr double kPointMass = 1.0;

struct CopiedLogits {
  bool invalid = false;  // a NaN or +inf among them
  int64_t finite = 0;    // how many are not -inf
};

// dst = src, and what sample() checks about the values on the way.
CopiedLogits copy_and_check(std::span<const float> src, std::span<float> dst) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::array<int32_t, kLanes> bad{}, below{};  // per lane: NaN or +inf seen; count of -inf
  size_t i = 0;
  for (; i + kLanes <= src.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = src[i + j];
      bad[j] |= !(v < kInf) ? 1 : 0;
      below[j] += v == -kInf ? 1 : 0;
      dst[i + j] = v;
    }
  }
  int32_t any = 0;
  int64_t neg_inf = 0;
  for (; i < src.size(); ++i) {
    any |= !(src[i] < kInf) ? 1 : 0;
    neg_inf += src[i] == -kInf ? 1 : 0;
    dst[i] = src[i];
  }
  for (size_t j = 0; j < kLanes; ++j) {
    any |= bad[j];
    neg_inf += below[j];
  }
  return {any != 0, static_cast<int64_t>(src.size()) - neg_inf};
}

// The largest value (-inf for none); the values hold no NaN.
float max_of(std::span<const float> v) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::array<float, kLanes> lanes;
  lanes.fill(kNegInf);
  size_t i = 0;
  for (; i + kLanes <= v.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] = v[i + j] > lanes[j] ? v[i + j] : lanes[j];
  }
  float best = kNegInf;
  for (; i < v.size(); ++i) best = v[i] > best ? v[i] : best;
  for (const float lane : lanes) best = lane > best ? lane : best;
  return best;
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

void Sampler::select_top_k(size_t k) {
  const auto before = [this](int32_t a, int32_t b) {
    return logits_[a] != logits_[b] ? logits_[a] > logits_[b] : a < b;
  };
  const auto heap = candidates_.begin();
  const auto heap_end = heap + static_cast<std::ptrdiff_t>(k);
  // A heap of the best k ids seen so far whose front is the worst of them (std::make_heap puts the
  // element that `before` orders last at the front), filled with the first k that can be chosen.
  int64_t i = 0;
  size_t size = 0;
  for (; size < k; ++i) {
    if (logits_[i] != -std::numeric_limits<float>::infinity()) {
      candidates_[size++] = static_cast<int32_t>(i);
    }
  }
  std::make_heap(heap, heap_end, before);
  // Ids come in increasing order, so a later id enters only with a logit above the front's (an
  // equal one loses the tie). That rarely holds once the heap has filled with large logits, so
  // it is checked against the maximum of 64 logits at a time first.
  float floor = logits_[candidates_[0]];
  auto offer = [&](int64_t id) {
    if (!(logits_[id] > floor)) return;
    std::pop_heap(heap, heap_end, before);
    *(heap_end - 1) = static_cast<int32_t>(id);
    std::push_heap(heap, heap_end, before);
    floor = logits_[candidates_[0]];
  };
  constexpr int64_t kBlock = 64;
  for (; i < vocab_size_ && i % kBlock != 0; ++i) offer(i);
  for (; i + kBlock <= vocab_size_; i += kBlock) {
    if (!(max_of(std::span<const float>(logits_).subspan(static_cast<size_t>(i), kBlock)) > floor))
      continue;
    for (int64_t j = i; j < i + kBlock; ++j) offer(j);
  }
  for (; i < vocab_size_; ++i) offer(i);
  std::sort_heap(heap, heap_end, before);  // best first
}

size_t Sampler::prepare(std::span<const float> logits, std::span<const int32_t> history) {
  if (std::ssize(logits) != vocab_size_) {
    EDGELM_FAIL("[sampler] got ", logits.size(), " logits for a vocab of ", vocab_size_);
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr float kNegInf = -kInf;
  // Copy and check in one pass without branches, which the compiler vectorizes: over a 128k
  // vocabulary the element-by-element check and the copy took ~130 us of a decode step.
  const CopiedLogits copied = copy_and_check(logits, logits_);
  if (copied.invalid) {
    for (int64_t i = 0; i < vocab_size_; ++i) {
      if (!(logits[i] < kInf)) {
        EDGELM_FAIL("[sampler] logit of token ", i, " is ", logits[i],
                    ": the model computed a non-finite value (corrupt weights, or activations "
                    "that overflowed)");
      }
    }
  }
  apply_repetition_penalty(logits_, history);

  if (config_.greedy || config_.temperature <= 0.0f) {
    // The best logit, then the lowest id holding it.
    const float best = max_of(logits_);
    if (best == kNegInf) EDGELM_FAIL("[sampler] every logit is -inf; no token can be chosen");
    candidates_[0] =
        static_cast<int32_t>(std::find(logits_.begin(), logits_.end(), best) - logits_.begin());
    probs_[0] = 1.0;
    return 1;
  }

  // Candidates: every token that can be chosen at all (the penalty keeps -inf as it is).
  const int64_t n_finite = copied.finite;
  if (n_finite == 0) EDGELM_FAIL("[sampler] every logit is -inf; no token can be chosen");

  // Higher logit first, then lower id: a strict total order, so the kept set and its order are
  // the same whatever algorithm the standard library's sort uses.
  const auto before = [this](int32_t a, int32_t b) {
    return logits_[a] != logits_[b] ? logits_[a] > logits_[b] : a < b;
  };
  const auto first = candidates_.begin();

  const bool top_p_enabled = config_.top_p < 1.0f;
  bool sorted = false;
  size_t n = 0;
  if (config_.top_k > 0 && config_.top_k < n_finite) {
    n = static_cast<size_t>(config_.top_k);
    select_top_k(n);
    sorted = true;
  } else {
    for (int64_t i = 0; i < vocab_size_; ++i) {
      if (logits_[i] != kNegInf) candidates_[n++] = static_cast<int32_t>(i);
    }
    if (top_p_enabled) {
      std::sort(first, first + static_cast<std::ptrdiff_t>(n), before);
      sorted = true;
    }
  }

  // Softmax numerators relative to the best logit, so the best token's weight is exactly 1.
  const float max_logit =
      sorted ? logits_[candidates_[0]]
             : logits_[*std::min_element(first, first + static_cast<std::ptrdiff_t>(n), before)];
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

  return n;
}

int32_t Sampler::draw(size_t n) {
  double total = 0.0;
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

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const size_t n = prepare(logits, history);
  if (greedy()) return candidates_[0];
  return draw(n);
}

Sampler::Distribution Sampler::distribution(std::span<const float> logits,
                                            std::span<const int32_t> history) {
  const size_t n = prepare(logits, history);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += probs_[i];
  for (size_t i = 0; i < n; ++i) probs_[i] /= total;
  return {.ids = std::span<const int32_t>(candidates_).first(n),
          .probs = std::span<const double>(probs_).first(n)};
}

int32_t Sampler::sample_draft(std::span<const float> logits, std::span<const int32_t> history,
                              int32_t draft, Distribution proposal) {
  EDGELM_CHECK(draft >= 0 && draft < vocab_size_, "[sampler] draft token ", draft,
               " is outside the vocab [0, ", vocab_size_, ")");
  for (const int32_t id : proposal.ids) {
    EDGELM_CHECK(id >= 0 && id < vocab_size_, "[sampler] proposed token ", id,
                 " is outside the vocab [0, ", vocab_size_, ")");
  }
  const size_t n = prepare(logits, history);
  // Greedy: p is a point mass at the argmax, which is accepted or else drawn: no randomness.
  if (greedy()) return candidates_[0];
  if (proposal.ids.empty()) {  // a point mass at the draft
    proposal = {.ids = std::span<const int32_t>(&draft, 1),
                .probs = std::span<const double>(&kPointMass, 1)};
  }
  if (q_.empty()) q_.assign(static_cast<size_t>(vocab_size_), 0.0);
  for (size_t i = 0; i < proposal.ids.size(); ++i) q_[proposal.ids[i]] = proposal.probs[i];
  double total = 0.0;
  double p_draft = 0.0;
  for (size_t i = 0; i < n; ++i) {
    total += probs_[i];
    if (candidates_[i] == draft) p_draft = probs_[i];
  }
  p_draft /= total;
  const double q_draft = q_[draft];
  // Accepted with probability min(1, p / q): always where p >= q, as u < 1.
  int32_t token = draft;
  if (!(next_uniform() * q_draft < p_draft)) {
    // Rejected: drawn from the residual max(0, p - q), over p's candidates (q's others add
    // nothing). p <= q everywhere means p == q, where nothing is rejected: only rounding gets
    // here, and draws from p.
    double residual = 0.0;
    for (size_t i = 0; i < n; ++i)
      residual += std::max(0.0, probs_[i] / total - q_[candidates_[i]]);
    if (residual > 0.0) {
      for (size_t i = 0; i < n; ++i)
        probs_[i] = std::max(0.0, probs_[i] / total - q_[candidates_[i]]);
    }
    token = draw(n);
  }
  for (const int32_t id : proposal.ids) q_[id] = 0.0;
  return token;
}

}  // namespace edgelm
