// The quantized matmuls with the Armv8.2 dot-product extension (SDOT), compiled with
// -march=armv8.2-a+dotprod; the "neon_dotprod" table is only offered when the CPU reports it
// (HWCAP_ASIMDDP). Everything else in that table comes from neon.cpp.
//
// Nothing here calls an inline or template function from a shared header (see arm.h).
#include <arm_neon.h>

#include "backends/cpu/arm/arm.h"
#include "backends/cpu/arm/neon_quant_matmul.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

struct DotprodDot {
  // Four lanes that sum to Σ w·x over the block at x: each SDOT adds four byte products into each
  // 32-bit lane, so two of them cover the 32 elements without any 16-bit intermediate.
  static int32x4_t block(int8x16_t w_low, int8x16_t w_high, const int8_t* x) {
    const int32x4_t low = vdotq_s32(vdupq_n_s32(0), w_low, vld1q_s8(x));
    return vdotq_s32(low, w_high, vld1q_s8(x + 16));
  }
};

}  // namespace

void q8_0_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                               int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q8_0Format, DotprodDot>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul__neon_dotprod(const float* x, const void* w, float* y, int64_t M, int64_t N,
                               int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q4_0Format, DotprodDot>(quantize_x(x, M, K), w, y, M, N, K, n_begin, n_end);
}

void q8_0_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                  int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q8_0Format, DotprodDot>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

void q4_0_matmul_xq__neon_dotprod(const void* xq, const void* w, float* y, int64_t M, int64_t N,
                                  int64_t K, int64_t n_begin, int64_t n_end) {
  quant_matmul<Q4_0Format, DotprodDot>(quantized_view(xq, M, K), w, y, M, N, K, n_begin, n_end);
}

}  // namespace edgelm::cpu
