// How the SIMD kernel tables (simd/quant_matmul.h for x86, arm/neon_quant_matmul.h) scale one
// 32-value block of x when they round it to 8 bits for a quantized matmul, written once. Textual
// header: each includes it inside its own anonymous namespace, so every instruction set compiles a
// private copy (see simd/vec_avx2.h). Needs <limits>.
//
// max_abs is the block's largest |x|, NaN when the block holds a NaN. A block holding a NaN or an
// infinity gets zero quants and a NaN scale, so every product with it is NaN, as the float
// reference's product is non-finite, and the sampler reports it; rounding such values instead
// would give INT_MIN lanes and an arbitrary finite result. A block below 2^-120, whose step
// 127 / max_abs would overflow, rounds to zeros.
struct XBlockScale {
  bool finite;    // false: store zero quants and `scale`, skip the rounding
  float inverse;  // x · inverse rounds to the 8-bit quant
  float scale;    // the block's step, max_abs / 127
};

XBlockScale x_block_scale(float max_abs) {
  if (!(max_abs <= std::numeric_limits<float>::max()))
    return {false, 0.0f, std::numeric_limits<float>::quiet_NaN()};
  return {true, max_abs >= 0x1p-120f ? 127.0f / max_abs : 0.0f, max_abs / 127.0f};
}
