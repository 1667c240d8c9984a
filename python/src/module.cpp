// _edgelm: the compiled half of the `edgelm` Python package (python/edgelm/ is the other).
// docs/python.md describes the API.
#include "core/error.h"
#include "python/src/bindings.h"

namespace edgelm::python {

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return py::dtype::of<float>();
    case DType::F16:
      return py::dtype("float16");
    case DType::I32:
      return py::dtype::of<int32_t>();
    default:
      EDGELM_FAIL("[python] no numpy type for ", dtype_name(dtype));
  }
}

py::array array_view(DType dtype, const std::vector<py::ssize_t>& shape, const void* data,
                     py::handle owner, bool writable) {
  py::array array(numpy_dtype(dtype), shape, data, owner);
  if (!writable) array.attr("flags").attr("writeable") = false;
  return array;
}

}  // namespace edgelm::python

PYBIND11_MODULE(_edgelm, m) {
  namespace py = pybind11;
  m.doc() = "edgelm's compiled module; import the `edgelm` package instead";
  // Every edgelm::Error becomes edgelm.Error (a RuntimeError) with the same one-line message.
  py::register_exception<edgelm::Error>(m, "Error", PyExc_RuntimeError);
  edgelm::python::bind_model(m);
  edgelm::python::bind_session(m);
  edgelm::python::bind_evaluate(m);
}
