// Backends by name, for binaries and tests: "cpu" (best kernels for this CPU), "cpu:<isa>" for
// each kernel table this CPU can run (cpu:portable is the reference), later "opencl".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"

namespace edgelm {

struct BackendOptions {
  int n_threads = 0;  // CPU threads; 0 = one per hardware thread
};

// Every name create_backend accepts on this machine, the default "cpu" first.
std::vector<std::string> backend_names();

// Throws edgelm::Error naming the available backends when `name` is unknown.
std::unique_ptr<Backend> create_backend(const std::string& name,
                                        const BackendOptions& options = {});

}  // namespace edgelm
