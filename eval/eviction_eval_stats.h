// The paired statistics of an eviction-quality run: each position's next-token distribution under
// an evicting cache compared with the full cache's (KL, top-1 agreement, NLL difference), summed
// per unit (a block of consecutive positions, or one window), and a paired bootstrap over units
// for 95 % intervals of the means.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace edgelm {

// One position compared: the full cache's row against the evicting cache's.
struct RowComparison {
  double kl = 0.0;           // KL(full || policy) in nats, over the whole vocabulary
  bool top1_agrees = false;  // the two rows have the same largest logit (first index on ties)
};

// Compares logit rows; keeps its scratch (two rows of doubles) between calls, so a long run
// allocates nothing per position.
class RowComparer {
 public:
  // KL(p || q) with p = softmax(full), q = softmax(policy), computed from the two log-softmaxes in
  // double: exactly 0 when the rows are equal bit for bit. Throws edgelm::Error for rows of
  // different sizes, an empty row, or a non-finite logit (naming `position`).
  RowComparison compare(std::span<const float> full, std::span<const float> policy,
                        int64_t position);

 private:
  std::vector<double> log_p_;
  std::vector<double> log_q_;
};

// Per-unit sums of the paired quantities; the means are ratios of sums to `count`.
struct PairedSums {
  int64_t count = 0;        // positions with a next token
  double kl = 0.0;          // sum of KL(full || policy)
  double top1 = 0.0;        // positions whose top-1 agrees
  double nll_full = 0.0;    // sum of the full cache's NLL of the next token
  double nll_policy = 0.0;  // the evicting cache's

  void add(const RowComparison& row, double full_nll, double policy_nll) {
    ++count;
    kl += row.kl;
    top1 += row.top1_agrees ? 1.0 : 0.0;
    nll_full += full_nll;
    nll_policy += policy_nll;
  }
};

// A mean with its bootstrap interval; low/high are NaN when there are fewer than two units.
struct Interval {
  double mean = 0.0;
  double low = 0.0;
  double high = 0.0;
};

struct BootstrapOptions {
  int64_t resamples = 1000;
  uint64_t seed = 0;
  double level = 0.95;
};

// The paired means over all units (token-weighted: sums over sums of counts) with percentile
// bootstrap intervals: each resample draws as many units as there are, with replacement, from a
// 64-bit Mersenne Twister seeded with options.seed, and the same draws serve every quantity, so the
// intervals are paired. Quantiles interpolate linearly between order statistics.
struct PairedSummary {
  int64_t tokens = 0;
  int64_t units = 0;
  Interval kl;
  Interval top1;       // share of positions whose top-1 agrees
  Interval delta_nll;  // mean NLL under the policy minus under the full cache
  double nll_full = 0.0;
  double nll_policy = 0.0;
};
PairedSummary summarize_paired(std::span<const PairedSums> units, const BootstrapOptions& options);

// The difference of two runs over the same units (the same positions in each unit): mean KL and
// mean ΔNLL of `a` minus those of `b`, with paired bootstrap intervals. Throws edgelm::Error when
// the units do not line up (different counts or unit counts).
struct PairedDifference {
  int64_t units = 0;
  Interval kl;
  Interval delta_nll;
};
PairedDifference difference_paired(std::span<const PairedSums> a, std::span<const PairedSums> b,
                                   const BootstrapOptions& options);

// The quantile q in [0, 1] of sorted values, interpolating linearly between order statistics
// (the usual "type 7" definition). NaN for an empty list.
double quantile_sorted(std::span<const double> sorted, double q);

}  // namespace edgelm
