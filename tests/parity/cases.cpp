// The parity matrix: all_cases() in one fixed order, from the op families' case files, and the
// helpers they share (tests/parity/cases.h).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/parity/cases.h"

namespace edgelm::parity {

int64_t uniform_int(std::mt19937_64& rng, int64_t low, int64_t high) {
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

std::vector<double> sorted_subset(std::mt19937_64& rng, int64_t range, int64_t count) {
  std::vector<int64_t> all(static_cast<size_t>(range));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(count));
  std::sort(all.begin(), all.end());
  return {all.begin(), all.end()};
}

std::string dims(std::initializer_list<std::pair<const char*, int64_t>> named) {
  std::string text;
  for (const auto& [key, value] : named) {
    if (!text.empty()) text += "_";
    text += key + std::to_string(value);
  }
  return text;
}

std::vector<double> spoiled_rows(std::mt19937_64& rng, int64_t M, int64_t K, Spoil first,
                                 double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> x(static_cast<size_t>(M * K));
  for (double& v : x) v = normal(rng);
  for (int64_t m = 0; m < M; ++m) {
    const auto spoil =
        static_cast<Spoil>((static_cast<int>(first) + m) % static_cast<int>(Spoil::kCount));
    double* row = x.data() + m * K;
    const int64_t k = uniform_int(rng, 0, K - 1);
    switch (spoil) {
      case Spoil::kNaN:
        row[k] = std::nan("");
        break;
      case Spoil::kPositiveInf:
        row[k] = INFINITY;
        break;
      case Spoil::kNegativeInf:
        row[k] = -INFINITY;
        break;
      case Spoil::kTinyBlock:
        for (int64_t i = k / 32 * 32; i < k / 32 * 32 + 32 && i < K; ++i) row[i] *= 1e-38 / scale;
        break;
      case Spoil::kNone:
      case Spoil::kCount:
        break;
    }
  }
  return x;
}

namespace {

std::vector<OpCase> build_cases() {
  std::vector<OpCase> cases;
  embed_cases(cases);
  matmul_cases(cases);
  rms_norm_cases(cases);
  rope_cases(cases);
  attention_cases(cases);
  elementwise_cases(cases);
  cast_cases(cases);
  kv_append_cases(cases);
  kv_compact_cases(cases);
  copy_cases(cases);
  return cases;
}

}  // namespace

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = build_cases();
  return cases;
}

}  // namespace edgelm::parity
