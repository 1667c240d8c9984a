#include "backends/registry.h"

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

#if EDGELM_HAVE_OPENCL
#include "backends/opencl/device.h"
#include "backends/opencl/opencl_backend.h"
#endif

namespace edgelm {
namespace {

// "cpu" and "cpu:<isa>".
bool names_cpu(const std::string& name) {
  return name == "cpu" || name.starts_with("cpu:");
}

}  // namespace

bool opencl_built() {
#if EDGELM_HAVE_OPENCL
  return true;
#else
  return false;
#endif
}

std::vector<std::string> opencl_device_lines() {
#if EDGELM_HAVE_OPENCL
  std::vector<std::string> lines;
  try {
    for (const opencl::DeviceInfo& info : opencl::list_devices()) lines.push_back(info.describe());
  } catch (const Error& error) {
    return {error.what()};  // no OpenCL library: the loader's line says which were tried
  }
  if (lines.empty()) lines.push_back("no OpenCL platform or device found");
  return lines;
#else
  return {"this build has no OpenCL backend (configured with -DEDGELM_OPENCL=OFF)"};
#endif
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu"};
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    names.push_back(std::string("cpu:") + table->isa);
  }
#if EDGELM_HAVE_OPENCL
  if (opencl::any_device()) names.push_back("opencl");
#endif
  return names;
}

std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options) {
  if (names_cpu(name)) {
    cpu::CpuOptions cpu_options;
    cpu_options.n_threads = options.n_threads;
    cpu_options.cpus = options.cpus;
    cpu_options.repack_weights = options.repack_weights;
    cpu_options.profile = options.profile;
    cpu_options.memory = options.memory;
    if (name != "cpu") cpu_options.isa = name.substr(4);
    return std::make_unique<cpu::CpuBackend>(cpu_options);
  }
  if (name == "opencl") {
#if EDGELM_HAVE_OPENCL
    opencl::OpenClOptions cl_options;
    cl_options.platform = options.cl_platform;
    cl_options.device = options.cl_device;
    cl_options.profile = options.profile;
    return std::make_unique<opencl::OpenClBackend>(cl_options);
#else
    EDGELM_FAIL("[backend] opencl: this build has no OpenCL backend (reconfigure with ",
                "-DEDGELM_OPENCL=ON)");
#endif
  }
  std::string known;
  for (const std::string& candidate : backend_names()) known += " " + candidate;
  EDGELM_FAIL("[backend] unknown backend '", name, "'; available:", known);
}

std::unique_ptr<Backend> create_weight_converter(const std::string& name,
                                                 const BackendOptions& options) {
  if (names_cpu(name)) return nullptr;
  return create_backend("cpu", {.n_threads = options.n_threads, .cpus = options.cpus});
}

}  // namespace edgelm
