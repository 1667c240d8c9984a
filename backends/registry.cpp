#include "backends/registry.h"

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

namespace edgelm {

std::vector<std::string> backend_names() {
  std::vector<std::string> names = {"cpu"};
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    names.push_back(std::string("cpu:") + table->isa);
  }
  return names;
}

std::unique_ptr<Backend> create_backend(const std::string& name, const BackendOptions& options) {
  if (name == "cpu" || name.starts_with("cpu:")) {
    cpu::CpuOptions cpu_options;
    cpu_options.n_threads = options.n_threads;
    if (name != "cpu") cpu_options.isa = name.substr(4);
    return std::make_unique<cpu::CpuBackend>(cpu_options);
  }
  std::string known;
  for (const std::string& candidate : backend_names()) known += " " + candidate;
  EDGELM_FAIL("[backend] unknown backend '", name, "'; available:", known);
}

}  // namespace edgelm
