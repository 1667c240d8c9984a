#define EDGELM_EIGEN_BUILD baseline
#include "bin/eigen_gemm_impl.inc"
