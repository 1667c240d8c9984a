// Eigen's F32 GEMM (y = x * W^T, x [M, K], W [N, K], y [M, N], row-major, one thread), built once
// per SIMD level so micro_bench sets ours against Eigen compiled for the same instructions rather
// than against the baseline build (SSE2 on x86-64). Each build is its own translation unit with
// its own flags (bin/CMakeLists.txt), and renames the Eigen namespace, so the template code the
// builds instantiate does not collide at link time: the linker would otherwise keep one copy of
// each inline function for all of them.
#pragma once

#include <cstdint>
#include <vector>

namespace edgelm::bench {

struct EigenGemm {
  const char* name;  // "eigen" (baseline build), "eigen-avx2", "eigen-avx512"
  void (*gemm)(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K);
  const char* (*simd)();  // the instruction sets Eigen reports for this build
};

// The builds this CPU can run, baseline first.
std::vector<EigenGemm> available_eigen_gemms();

}  // namespace edgelm::bench
