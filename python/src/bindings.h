// What the files of the Python module (_edgelm) share: the loaded model as the Python objects hold
// it, numpy views over the library's buffers, and the functions that bind each part.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "eviction/cache_manager.h"
#include "runtime/setup.h"

namespace edgelm::python {

namespace py = pybind11;

// One loaded model, shared by the Python Model and every Session made from it (each keeps it
// alive). The model has one workspace, so its forward steps run one at a time: `compute` is held
// around each, taken after the GIL is released.
struct ModelState {
  ModelState(Runtime loaded, std::string model_path)
      : runtime(std::move(loaded)), path(std::move(model_path)) {}
  Runtime runtime;
  std::string path;
  std::mutex compute;
};
using ModelRef = std::shared_ptr<ModelState>;

// The numpy dtype of a cache element type (F32, F16) or I32.
py::dtype numpy_dtype(DType dtype);
// A numpy array over `data` without a copy, C-contiguous of `shape`; `owner` is kept alive as the
// array's base. Read-only unless `writable`.
py::array array_view(DType dtype, const std::vector<py::ssize_t>& shape, const void* data,
                     py::handle owner, bool writable = false);

// The eviction settings of a policy by name (`none` when policy is None) at `budget` slots, with
// the keyword options of EvictionConfig (window, sink_tokens, ...) applied.
EvictionConfig eviction_config(const std::string& policy, std::optional<int64_t> budget,
                               const py::dict& options);
// A CacheManager for `policy`: a registry name (str), None (no eviction) or a Python object with
// a score() method (python_policy.cpp). No memory monitor: only the budget and the policy's own
// limit trigger evictions, so that runs repeat.
std::unique_ptr<CacheManager> make_manager(const py::object& policy, std::optional<int64_t> budget,
                                           const py::dict& options);
// The EvictionPolicy that calls a Python object's score() (python_policy.cpp).
std::unique_ptr<EvictionPolicy> make_python_policy(py::object policy, const EvictionConfig& config);

void bind_model(py::module_& m);
void bind_session(py::module_& m);
void bind_evaluate(py::module_& m);

}  // namespace edgelm::python
