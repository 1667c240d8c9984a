#include "bin/eigen_gemm.h"

namespace edgelm::bench {

void eigen_gemm_baseline(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K);
const char* eigen_simd_baseline();
#if defined(__x86_64__)
void eigen_gemm_avx2(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K);
const char* eigen_simd_avx2();
void eigen_gemm_avx512(const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K);
const char* eigen_simd_avx512();
#endif

std::vector<EigenGemm> available_eigen_gemms() {
  std::vector<EigenGemm> gemms{{"eigen", eigen_gemm_baseline, eigen_simd_baseline}};
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    gemms.push_back({"eigen-avx2", eigen_gemm_avx2, eigen_simd_avx2});
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma")) {
    gemms.push_back({"eigen-avx512", eigen_gemm_avx512, eigen_simd_avx512});
  }
#endif
  return gemms;
}

}  // namespace edgelm::bench
