// Backends by name, for binaries and tests: "cpu" (best kernels for this CPU), "cpu:<isa>" for
// each kernel table this CPU can run (cpu:portable is the reference), and "opencl" when the binary
// has the OpenCL backend and an OpenCL device is present.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"

namespace edgelm {

struct BackendOptions {
  int n_threads = 0;      // CPU threads; 0: plan_cpu_threads' default (core/cpu_topology.h)
  std::vector<int> cpus;  // pin CPU thread i to cpus[i % size]; empty: plan_cpu_threads' default
  int cl_platform = -1;   // OpenCL platform index; -1: the first with a GPU, else any
  int cl_device = -1;     // OpenCL device index in that platform; -1: its first GPU, else first
  bool profile = false;   // time every kernel (OpenCL) or op call (CPU): Backend::op_timings
  // Let the loader put matmul weights in the layout the backend multiplies fastest
  // (Backend::matmul_weight_type): the CPU's interleaved layouts of Q4_0, Q8_0 and F16 (the same
  // values in another order). false (--no-repack): every weight as stored.
  bool repack_weights = true;
  // CPU backends: allocate every tensor (activations, caches, repacked weights) from this memory
  // instead of their own, e.g. an OpenCL backend's shared buffers, so that both backends work on
  // the same bytes (CpuOptions::memory). It must outlive the backend. Null: the CPU's own memory.
  std::shared_ptr<Memory> memory;
};

// True when this binary was built with the OpenCL backend (EDGELM_OPENCL=ON).
bool opencl_built();

// Lines describing every OpenCL device ("<platform>:<device> name (type, ...)"), for
// --list-devices; a single explanatory line when there is none or OpenCL is not built.
std::vector<std::string> opencl_device_lines();

// Every name create_backend accepts on this machine, the default "cpu" first; "opencl" only when a
// device is present (create_backend("opencl") still explains why when it is not).
std::vector<std::string> backend_names();

// Throws edgelm::Error naming the available backends when `name` is unknown.
std::unique_ptr<Backend> create_backend(const std::string& name,
                                        const BackendOptions& options = {});

// The backend that converts a model's weights on the host while they load onto the backend named
// `name` (LoadOptions::converter in models/loader.h): null for a CPU backend, which converts its
// own; for any other, the CPU backend ("cpu": the best table) with the threads and pinning of
// `options`, so loading uses what the user chose.
std::unique_ptr<Backend> create_weight_converter(const std::string& name,
                                                 const BackendOptions& options = {});

}  // namespace edgelm
