// An eviction policy scored in Python: the CacheManager calls the object's score() for each layer
// it evicts (the slow path: the GIL is taken for each call, and the arrays handed over are views of
// the cache's buffers, valid only during the call). The statistics it keeps per slot are the
// attention mass of the newest query of each step ("last", TOVA's) or its sum over every query
// ("sum", H2O's), as the built-in policies keep them; an observe() method, when the object has
// one, updates them instead.
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "python/src/bindings.h"

namespace edgelm::python {
namespace {

enum class StatMode { None, Last, Sum };

class PythonPolicy final : public EvictionPolicy {
 public:
  PythonPolicy(py::object policy, const EvictionConfig& config)
      : policy_(std::move(policy)), budget_(config.kv_budget) {
    if (!py::hasattr(policy_, "score") || !PyCallable_Check(policy_.attr("score").ptr()))
      EDGELM_FAIL("[python policy] ", py::repr(policy_).cast<std::string>(),
                  " has no score() method");
    name_ = py::hasattr(policy_, "name") ? py::str(policy_.attr("name")).cast<std::string>()
                                         : py::str(py::type::of(policy_).attr("__name__"))
                                               .cast<std::string>();
    const py::object stats =
        py::hasattr(policy_, "stats") ? policy_.attr("stats") : py::object(py::str("last"));
    const std::string mode = stats.is_none() ? "none" : stats.cast<std::string>();
    if (mode == "last") {
      mode_ = StatMode::Last;
    } else if (mode == "sum") {
      mode_ = StatMode::Sum;
    } else if (mode == "none") {
      mode_ = StatMode::None;
    } else {
      EDGELM_FAIL("[python policy] ", name_, ": stats '", mode, "' is not 'last', 'sum' or None");
    }
    custom_observe_ = py::hasattr(policy_, "observe");
  }

  ~PythonPolicy() override {
    py::gil_scoped_acquire gil;
    policy_ = py::object();
  }

  std::string name() const override { return name_; }
  std::optional<int64_t> own_limit() const override {
    return budget_ > 0 ? std::optional<int64_t>(budget_) : std::nullopt;
  }
  int64_t stat_channels() const override { return mode_ == StatMode::None ? 0 : 1; }
  std::optional<int64_t> mass_from(Phase, int64_t first, int64_t n, int64_t) const override {
    switch (mode_) {
      case StatMode::Last:
        return first + n - 1;
      case StatMode::Sum:
        return first;
      case StatMode::None:
        break;
    }
    return std::nullopt;
  }

  void observe(int64_t layer, Phase phase, const float* mass, const SlotStats& stats) override {
    if (custom_observe_) {
      py::gil_scoped_acquire gil;
      const py::array mass_view =
          array_view(DType::F32, {stats.n_kv_heads, stats.n_slots}, mass, py::none());
      const py::array stats_view =
          array_view(DType::F32, {stats.n_slots, stats.n_kv_heads, stats.channels}, stats.values,
                     py::none(), /*writable=*/true);
      policy_.attr("observe")(layer, phase == Phase::Prefill ? "prefill" : "decode", mass_view,
                              stats_view);
      return;
    }
    for (int64_t g = 0; g < stats.n_kv_heads; ++g) {
      for (int64_t s = 0; s < stats.n_slots; ++s) {
        const float m = mass[g * stats.n_slots + s];
        stats.at(g, s) = mode_ == StatMode::Sum ? stats.at(g, s) + m : m;
      }
    }
  }

  void score(const LayerSlots& slots, Phase phase, float* scores) override {
    py::gil_scoped_acquire gil;
    const py::ssize_t n_slots = slots.n_slots, n_kv_heads = slots.n_kv_heads;
    const py::ssize_t head_dim = slots.k.shape().last();
    const py::array keys =
        array_view(slots.k.dtype(), {n_slots, n_kv_heads, head_dim}, slots.k.data<uint8_t>(), py::none());
    const py::array values =
        array_view(slots.v.dtype(), {n_slots, n_kv_heads, head_dim}, slots.v.data<uint8_t>(), py::none());
    const py::array positions =
        array_view(DType::I32, {n_slots, n_kv_heads}, slots.positions, py::none());
    py::object stats = py::none();
    if (slots.stats.values != nullptr) {
      stats = array_view(DType::F32, {n_slots, n_kv_heads, slots.stats.channels},
                         slots.stats.values, py::none());
    }
    const py::object info = py::module_::import("types").attr("SimpleNamespace")(
        py::arg("layer") = slots.layer, py::arg("positions") = positions,
        py::arg("next_position") = slots.next_position, py::arg("incoming") = slots.incoming,
        py::arg("keep") = slots.keep, py::arg("phase") = phase == Phase::Prefill ? "prefill" : "decode");
    const py::object result = policy_.attr("score")(info, keys, values, stats);
    const auto array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(result);
    if (!array) {
      EDGELM_FAIL("[python policy] ", name_, ".score returned ",
                  py::repr(py::type::of(result)).cast<std::string>(),
                  ", not an array of floats");
    }
    if (array.size() != n_kv_heads * n_slots || (array.ndim() == 2 && (array.shape(0) != n_kv_heads ||
                                                                       array.shape(1) != n_slots))) {
      EDGELM_FAIL("[python policy] ", name_, ".score returned ",
                  py::str(py::tuple(py::cast(std::vector<py::ssize_t>(
                              array.shape(), array.shape() + array.ndim()))))
                      .cast<std::string>(),
                  " scores for layer ", slots.layer, "; expected (", n_kv_heads, ", ", n_slots,
                  "): one per kv head and slot");
    }
    const float* data = array.data();
    for (py::ssize_t i = 0; i < array.size(); ++i) {
      if (std::isnan(data[i]))
        EDGELM_FAIL("[python policy] ", name_, ".score returned NaN for layer ", slots.layer);
    }
    std::memcpy(scores, data, static_cast<size_t>(array.size()) * sizeof(float));
  }

 private:
  py::object policy_;
  std::string name_;
  int64_t budget_;
  StatMode mode_ = StatMode::Last;
  bool custom_observe_ = false;
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_python_policy(py::object policy, const EvictionConfig& config) {
  return std::make_unique<PythonPolicy>(std::move(policy), config);
}

}  // namespace edgelm::python
