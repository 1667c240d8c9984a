// The OpenCL C sources of kernels/*.cl, embedded into the binary at build time (see
// cmake/embed_kernels.cmake), so a deployed binary needs no kernel files beside it.
#pragma once

#include <span>
#include <string_view>

namespace edgelm::opencl {

struct KernelSource {
  std::string_view family;  // file name without .cl: "common", "matmul", ...
  std::string_view text;
};

// Every family, in file-name order. "common" holds helpers prepended to every other family.
std::span<const KernelSource> kernel_sources();

}  // namespace edgelm::opencl
