// Compiled with -mavx512f -mavx512dq -mfma (bin/CMakeLists.txt); called only when the CPU has
// them.
#define EDGELM_EIGEN_BUILD avx512
#include "bin/eigen_gemm_impl.inc"
