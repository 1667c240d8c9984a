// Reference row conversions between F32 and every storage dtype (used by embed, cast, kv_append).
#include <cstring>

#include "backends/cpu/portable/portable.h"
#include "core/half.h"
#include "core/quant.h"

namespace edgelm::cpu {

void f32_to_f32__portable(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void f16_to_f32__portable(const void* src, float* dst, int64_t n) {
  const auto* half = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(half[i]);
}

void bf16_to_f32__portable(const void* src, float* dst, int64_t n) {
  const auto* half = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(half[i]);
}

void q8_0_to_f32__portable(const void* src, float* dst, int64_t n) {
  dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
}

void q4_0_to_f32__portable(const void* src, float* dst, int64_t n) {
  dequantize_row_q4_0(static_cast<const BlockQ4_0*>(src), dst, n);
}

void q4_1_to_f32__portable(const void* src, float* dst, int64_t n) {
  dequantize_row_q4_1(static_cast<const BlockQ4_1*>(src), dst, n);
}

void q5_0_to_f32__portable(const void* src, float* dst, int64_t n) {
  dequantize_row_q5_0(static_cast<const BlockQ5_0*>(src), dst, n);
}

void q5_1_to_f32__portable(const void* src, float* dst, int64_t n) {
  dequantize_row_q5_1(static_cast<const BlockQ5_1*>(src), dst, n);
}

void f32_from_f32__portable(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void f16_from_f32__portable(const float* src, void* dst, int64_t n) {
  auto* half = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) half[i] = f32_to_f16(src[i]);
}

void bf16_from_f32__portable(const float* src, void* dst, int64_t n) {
  auto* half = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) half[i] = f32_to_bf16(src[i]);
}

void q8_0_from_f32__portable(const float* src, void* dst, int64_t n) {
  quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
}

void q4_0_from_f32__portable(const float* src, void* dst, int64_t n) {
  quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
}

void q4_1_from_f32__portable(const float* src, void* dst, int64_t n) {
  quantize_row_q4_1(src, static_cast<BlockQ4_1*>(dst), n);
}

void q5_0_from_f32__portable(const float* src, void* dst, int64_t n) {
  quantize_row_q5_0(src, static_cast<BlockQ5_0*>(dst), n);
}

void q5_1_from_f32__portable(const float* src, void* dst, int64_t n) {
  quantize_row_q5_1(src, static_cast<BlockQ5_1*>(dst), n);
}

}  // namespace edgelm::cpu
