// Compiled with -mavx2 -mfma (bin/CMakeLists.txt); called only when the CPU has both.
#define EDGELM_EIGEN_BUILD avx2
#include "bin/eigen_gemm_impl.inc"
