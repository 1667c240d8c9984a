#include "eviction/pyramid_budget.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "eviction/policy_wrapper.h"

namespace edgelm {

std::vector<int64_t> pyramid_layer_limits(int64_t n_layers, int64_t limit, int64_t floor,
                                          double beta) {
  EDGELM_CHECK(n_layers > 0 && limit > 0 && floor >= 0 && beta >= 1.0,
               "[eviction] pyramid: bad schedule (", n_layers, " layers, limit ", limit, ", floor ",
               floor, ", beta ", beta, ")");
  std::vector<int64_t> limits(static_cast<size_t>(n_layers), limit);
  const double shared = static_cast<double>(limit - floor);
  if (n_layers == 1 || shared <= 0.0) return limits;
  const double top = shared / beta;
  const double bottom = 2.0 * shared - top;
  const double step = (bottom - top) / static_cast<double>(n_layers - 1);
  std::vector<double> remainder(static_cast<size_t>(n_layers));
  int64_t assigned = 0;
  for (int64_t l = 0; l < n_layers; ++l) {
    const double exact = static_cast<double>(floor) + bottom - step * static_cast<double>(l);
    limits[l] = static_cast<int64_t>(std::floor(exact));
    remainder[l] = exact - static_cast<double>(limits[l]);
    assigned += limits[l];
  }
  // The slots the floors left over go to the largest remainders; a lower layer wins a tie, so
  // the limits stay non-increasing (a layer's remainder exceeds the next one's whenever both
  // round down to the same count).
  std::vector<int64_t> order(static_cast<size_t>(n_layers));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return remainder[a] > remainder[b]; });
  const int64_t total = n_layers * limit;
  for (int64_t i = 0; i < total - assigned; ++i) ++limits[order[static_cast<size_t>(i)]];
  return limits;
}

namespace {

class PyramidPolicy final : public PolicyWrapper {
 public:
  PyramidPolicy(std::unique_ptr<EvictionPolicy> inner, int64_t floor, double beta)
      : PolicyWrapper(std::move(inner)), floor_(floor), beta_(beta) {}

  std::string name() const override { return PolicyWrapper::name() + "+pyramid"; }

  int64_t layer_limit(int64_t layer, int64_t n_layers, int64_t limit) const override {
    EDGELM_CHECK(layer >= 0 && layer < n_layers, "[eviction] pyramid: layer ", layer, " of ",
                 n_layers);
    if (limit != schedule_limit_ || n_layers != static_cast<int64_t>(schedule_.size())) {
      schedule_ = pyramid_layer_limits(n_layers, limit, floor_, beta_);
      schedule_limit_ = limit;
    }
    return schedule_[static_cast<size_t>(layer)];
  }

 private:
  int64_t floor_;
  double beta_;
  // The schedule of the last limit asked for (the budget, in practice the only one).
  mutable int64_t schedule_limit_ = -1;
  mutable std::vector<int64_t> schedule_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_pyramid_policy(std::unique_ptr<EvictionPolicy> inner,
                                                    int64_t floor, double beta) {
  return std::make_unique<PyramidPolicy>(std::move(inner), floor, beta);
}

}  // namespace edgelm
