#include "eval/eviction_eval_stats.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "core/error.h"

namespace edgelm {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// log softmax(row) in double, into out; returns the index of the largest logit (first on ties).
size_t log_softmax(std::span<const float> row, std::vector<double>& out, int64_t position) {
  size_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = i;
  }
  const double max_logit = row[best];
  // With the largest logit subtracted every exponent is <= 0, so nothing overflows and the sum is
  // at least 1 (see token_nll); double keeps the vocabulary-long sum's rounding far below the
  // KL values of interest (1e-6 and up).
  double sum = 0.0;
  out.resize(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    out[i] = static_cast<double>(row[i]) - max_logit;
    sum += std::exp(out[i]);
  }
  const double log_sum = std::log(sum);
  EDGELM_CHECK(std::isfinite(log_sum) && std::isfinite(max_logit), "[eviction_eval] the logits ",
               "after position ", position, " are not finite: the model computed a NaN or an ",
               "infinity");
  for (double& v : out) v -= log_sum;
  return best;
}

// Draws `resamples` bootstrap samples of unit indices and hands each to `visit` as the list of
// drawn indices. An index is a 64-bit output modulo n: the bias is below n / 2^64, nothing next to
// the resampling noise, and unlike std::uniform_int_distribution it draws the same indices on
// every standard library.
void bootstrap_draws(size_t n, const BootstrapOptions& options,
                     const std::function<void(std::span<const size_t>)>& visit) {
  std::mt19937_64 rng(options.seed);
  std::vector<size_t> drawn(n);
  for (int64_t r = 0; r < options.resamples; ++r) {
    for (size_t& index : drawn) {
      index = static_cast<size_t>(rng() % n);
    }
    visit(drawn);
  }
}

Interval interval_of(double mean, std::vector<double>& samples, const BootstrapOptions& options) {
  Interval interval{mean, kNaN, kNaN};
  if (samples.empty()) return interval;
  std::sort(samples.begin(), samples.end());
  const double tail = (1.0 - options.level) / 2.0;
  interval.low = quantile_sorted(samples, tail);
  interval.high = quantile_sorted(samples, 1.0 - tail);
  return interval;
}

void check_options(const BootstrapOptions& options) {
  EDGELM_CHECK(options.resamples >= 0, "[eviction_eval] bootstrap resamples ", options.resamples,
               " must be >= 0");
  EDGELM_CHECK(options.level > 0.0 && options.level < 1.0, "[eviction_eval] interval level ",
               options.level, " must be in (0, 1)");
}

}  // namespace

RowComparison RowComparer::compare(std::span<const float> full, std::span<const float> policy,
                                   int64_t position) {
  EDGELM_CHECK(!full.empty() && full.size() == policy.size(), "[eviction_eval] rows of ",
               full.size(), " and ", policy.size(), " logits cannot be compared");
  RowComparison row;
  const size_t full_top = log_softmax(full, log_p_, position);
  const size_t policy_top = log_softmax(policy, log_q_, position);
  row.top1_agrees = full_top == policy_top;
  double kl = 0.0;
  for (size_t i = 0; i < full.size(); ++i) kl += std::exp(log_p_[i]) * (log_p_[i] - log_q_[i]);
  row.kl = kl;
  return row;
}

double quantile_sorted(std::span<const double> sorted, double q) {
  if (sorted.empty()) return kNaN;
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(at));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = at - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

PairedSummary summarize_paired(std::span<const PairedSums> units, const BootstrapOptions& options) {
  check_options(options);
  PairedSummary summary;
  summary.units = static_cast<int64_t>(units.size());
  PairedSums total;
  for (const PairedSums& u : units) {
    total.count += u.count;
    total.kl += u.kl;
    total.top1 += u.top1;
    total.nll_full += u.nll_full;
    total.nll_policy += u.nll_policy;
  }
  summary.tokens = total.count;
  const double n = static_cast<double>(total.count);
  const auto mean = [&](double sum) { return total.count > 0 ? sum / n : kNaN; };
  summary.nll_full = mean(total.nll_full);
  summary.nll_policy = mean(total.nll_policy);
  std::vector<double> kl, top1, delta;
  if (units.size() >= 2 && total.count > 0) {
    bootstrap_draws(units.size(), options, [&](std::span<const size_t> drawn) {
      PairedSums sample;
      for (const size_t i : drawn) {
        sample.count += units[i].count;
        sample.kl += units[i].kl;
        sample.top1 += units[i].top1;
        sample.nll_full += units[i].nll_full;
        sample.nll_policy += units[i].nll_policy;
      }
      if (sample.count == 0) return;  // only empty units drawn: no mean to take
      const double c = static_cast<double>(sample.count);
      kl.push_back(sample.kl / c);
      top1.push_back(sample.top1 / c);
      delta.push_back((sample.nll_policy - sample.nll_full) / c);
    });
  }
  summary.kl = interval_of(mean(total.kl), kl, options);
  summary.top1 = interval_of(mean(total.top1), top1, options);
  summary.delta_nll = interval_of(mean(total.nll_policy - total.nll_full), delta, options);
  return summary;
}

PairedDifference difference_paired(std::span<const PairedSums> a, std::span<const PairedSums> b,
                                   const BootstrapOptions& options) {
  check_options(options);
  EDGELM_CHECK(a.size() == b.size(), "[eviction_eval] ", a.size(), " and ", b.size(),
               " units cannot be paired");
  int64_t count = 0;
  double kl = 0.0, delta = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    EDGELM_CHECK(a[i].count == b[i].count, "[eviction_eval] unit ", i, " holds ", a[i].count,
                 " positions in one run and ", b[i].count, " in the other");
    count += a[i].count;
    kl += a[i].kl - b[i].kl;
    delta += (a[i].nll_policy - a[i].nll_full) - (b[i].nll_policy - b[i].nll_full);
  }
  PairedDifference difference;
  difference.units = static_cast<int64_t>(a.size());
  const double n = static_cast<double>(count);
  std::vector<double> kl_samples, delta_samples;
  if (a.size() >= 2 && count > 0) {
    bootstrap_draws(a.size(), options, [&](std::span<const size_t> drawn) {
      int64_t c = 0;
      double k = 0.0, d = 0.0;
      for (const size_t i : drawn) {
        c += a[i].count;
        k += a[i].kl - b[i].kl;
        d += (a[i].nll_policy - a[i].nll_full) - (b[i].nll_policy - b[i].nll_full);
      }
      if (c == 0) return;
      kl_samples.push_back(k / static_cast<double>(c));
      delta_samples.push_back(d / static_cast<double>(c));
    });
  }
  difference.kl = interval_of(count > 0 ? kl / n : kNaN, kl_samples, options);
  difference.delta_nll = interval_of(count > 0 ? delta / n : kNaN, delta_samples, options);
  return difference;
}

}  // namespace edgelm
