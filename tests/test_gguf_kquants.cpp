// The K-quant dequantizers (models/kquants.h): blocks built by hand, expected floats worked out
// by hand from the documented formulas, and bad lengths and types refused.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/half.h"
#include "models/gguf.h"
#include "models/kquants.h"

namespace edgelm {
namespace {

// ---- K-quant known answers -----------------------------------------------------------------

struct Expected {
  int index;
  float value;
};

// Sub-block scales and mins used by the Q4_K and Q5_K blocks below (6 bits each):
//   scale = {1, 2, 3, 63, 17, 33, 50, 7},  min = {0, 5, 10, 40, 20, 36, 1, 63}
// Packed as documented: bytes 0..3 = scale[0..3] | top 2 bits of scale[4..7] << 6,
// bytes 4..7 = min[0..3] | top 2 bits of min[4..7] << 6,
// bytes 8..11 = low 4 bits of scale[4..7] | low 4 bits of min[4..7] << 4.
// E.g. byte 0 = 1 | (17 >> 4) << 6 = 0x41, byte 7 = 40 | (63 >> 4) << 6 = 0xe8,
// byte 11 = (7 & 15) | (63 & 15) << 4 = 0xf7.
constexpr uint8_t kPackedScales[12] = {0x41, 0x82, 0xc3, 0x3f, 0x40, 0x85,
                                       0x0a, 0xe8, 0x41, 0x41, 0x12, 0xf7};
constexpr uint16_t kHalfOne = 0x3c00;      // 1.0
constexpr uint16_t kHalfHalf = 0x3800;     // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;  // 0.25

// Quant bytes of Q4_K/Q5_K: byte 32g + l has low nibble l % 16 and high nibble 15 - l % 16, so
// even sub-blocks (low nibbles) count up and odd ones (high nibbles) count down.
void fill_k_nibbles(uint8_t qs[128]) {
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l)
      qs[32 * g + l] = static_cast<uint8_t>((l % 16) | (15 - l % 16) << 4);
  }
}

TEST(KQuantTest, Q4_KKnownBlocks) {
  BlockQ4_K blocks[2];
  blocks[0].d = kHalfHalf;
  blocks[0].dmin = kHalfQuarter;
  std::memcpy(blocks[0].scales, kPackedScales, 12);
  fill_k_nibbles(blocks[0].qs);
  blocks[1] = blocks[0];
  blocks[1].d = kHalfOne;
  blocks[1].dmin = 0;

  std::vector<float> out(512);
  dequantize_row_q4_K(blocks, out.data(), 512);
  // value = 0.5 * scale[s] * q - 0.25 * min[s], element 32 s + l, q = l % 16 (s even) or
  // 15 - l % 16 (s odd). E.g. element 96 (s 3, l 0): 0.5 * 63 * 15 - 0.25 * 40 = 462.5.
  const Expected expected[] = {
      {0, 0.0f},     {5, 2.5f},      {31, 7.5f},      // s0: scale 1, min 0
      {32, 13.75f},  {37, 8.75f},    {63, -1.25f},    // s1: scale 2, min 5
      {64, -2.5f},   {69, 5.0f},     {95, 20.0f},     // s2: scale 3, min 10
      {96, 462.5f},  {101, 305.0f},  {127, -10.0f},   // s3: scale 63, min 40
      {128, -5.0f},  {133, 37.5f},   {159, 122.5f},   // s4: scale 17, min 20
      {160, 238.5f}, {165, 156.0f},  {191, -9.0f},    // s5: scale 33, min 36
      {192, -0.25f}, {197, 124.75f}, {223, 374.75f},  // s6: scale 50, min 1
      {224, 36.75f}, {229, 19.25f},  {255, -15.75f},  // s7: scale 7, min 63
  };
  for (const Expected& e : expected) EXPECT_EQ(out[e.index], e.value) << "element " << e.index;
  // Block 1 (elements 256..511): d 1, dmin 0, so value = scale[s] * q.
  const Expected expected_block1[] = {
      {256, 0.0f}, {288, 30.0f}, {352, 945.0f}, {389, 85.0f}, {479, 750.0f},
  };
  for (const Expected& e : expected_block1) {
    EXPECT_EQ(out[e.index], e.value) << "element " << e.index;
  }

  std::vector<float> via_dispatch(512);
  dequantize_row_ggml(GgmlType::Q4_K, blocks, via_dispatch.data(), 512);
  EXPECT_EQ(via_dispatch, out);
}

TEST(KQuantTest, Q5_KKnownBlock) {
  BlockQ5_K block;
  block.d = kHalfHalf;
  block.dmin = kHalfQuarter;
  std::memcpy(block.scales, kPackedScales, 12);
  fill_k_nibbles(block.qs);
  // qh[l] = 0xa5 (bits 0, 2, 5, 7) for even l, 0x5a (bits 1, 3, 4, 6) for odd l; bit s of qh[l]
  // is the fifth bit (+16) of element 32 s + l.
  for (int l = 0; l < 32; ++l) block.qh[l] = l % 2 == 0 ? 0xa5 : 0x5a;

  std::vector<float> out(256);
  dequantize_row_q5_K(&block, out.data(), 256);
  // value = 0.5 * scale[s] * (q + 16 * bit) - 0.25 * min[s]. E.g. element 101 (s 3, l 5, odd l so
  // bit 3 set): q = 15 - 5 = 10, 0.5 * 63 * 26 - 10 = 809.
  const Expected expected[] = {
      {0, 8.0f},     {5, 2.5f},      {31, 7.5f},      // s0: bit set for even l
      {32, 13.75f},  {37, 24.75f},   {63, 14.75f},    // s1: bit set for odd l
      {64, 21.5f},   {69, 5.0f},     {95, 20.0f},     // s2: even
      {96, 462.5f},  {101, 809.0f},  {127, 494.0f},   // s3: odd
      {128, -5.0f},  {133, 173.5f},  {159, 258.5f},   // s4: odd
      {160, 502.5f}, {165, 156.0f},  {191, -9.0f},    // s5: even
      {192, -0.25f}, {197, 524.75f}, {223, 774.75f},  // s6: odd
      {224, 92.75f}, {229, 19.25f},  {255, -15.75f},  // s7: even
  };
  for (const Expected& e : expected) EXPECT_EQ(out[e.index], e.value) << "element " << e.index;

  std::vector<float> via_dispatch(256);
  dequantize_row_ggml(GgmlType::Q5_K, &block, via_dispatch.data(), 256);
  EXPECT_EQ(via_dispatch, out);
}

TEST(KQuantTest, Q6_KKnownBlock) {
  BlockQ6_K block;
  block.d = kHalfHalf;
  // ql[k] = k: low nibble k % 16, high nibble k / 16.
  for (int k = 0; k < 128; ++k) block.ql[k] = static_cast<uint8_t>(k);
  // First half: qh = 0xe4 (bit pairs 0, 1, 2, 3 for quarters 0..3) for even l, 0 for odd l.
  // Second half: 0x1b (pairs 3, 2, 1, 0) for even l, 0xff (all 3) for odd l.
  for (int l = 0; l < 32; ++l) {
    block.qh[l] = l % 2 == 0 ? 0xe4 : 0x00;
    block.qh[32 + l] = l % 2 == 0 ? 0x1b : 0xff;
  }
  const int8_t scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -128};
  std::memcpy(block.scales, scales, 16);

  std::vector<float> out(256);
  dequantize_row_q6_K(&block, out.data(), 256);
  // Element i = 128 h + 32 k + l: low 4 bits from ql[64 h + 32 (k % 2) + l] (low nibble for k < 2,
  // high for k >= 2), high 2 bits = pair k of qh[32 h + l], value = 0.5 * scales[i / 16] *
  // (q - 32). E.g. element 96 (h 0, k 3, l 0): ql[32] >> 4 = 2, pair 3 of 0xe4 = 3, q = 50,
  // 0.5 * 7 * 18 = 63. Element 255: ql[127] >> 4 = 7, pair 3 of 0xff = 3, q = 55,
  // 0.5 * -128 * 23 = -1472.
  const Expected expected[] = {
      {0, -16.0f},    {5, -13.5f},    {31, 17.0f},      // h0 k0
      {32, -24.0f},   {37, -40.5f},   {63, 34.0f},      // h0 k1
      {64, 0.0f},     {69, -80.0f},   {95, 93.0f},      // h0 k2
      {96, 63.0f},    {101, -105.0f}, {127, 116.0f},    // h0 k3
      {128, 72.0f},   {133, 94.5f},   {159, -155.0f},   // h1 k0
      {160, 0.0f},    {165, 115.5f},  {191, -186.0f},   // h1 k1
      {192, -78.0f},  {197, 130.0f},  {223, -147.0f},   // h1 k2
      {224, -195.0f}, {229, 165.0f},  {255, -1472.0f},  // h1 k3
  };
  for (const Expected& e : expected) EXPECT_EQ(out[e.index], e.value) << "element " << e.index;

  std::vector<float> via_dispatch(256);
  dequantize_row_ggml(GgmlType::Q6_K, &block, via_dispatch.data(), 256);
  EXPECT_EQ(via_dispatch, out);
}

TEST(KQuantTest, RejectsBadLengthsAndTypes) {
  BlockQ6_K block{};
  std::vector<float> out(512);
  EXPECT_THROW(dequantize_row_q4_K(&block, out.data(), 128), Error);
  EXPECT_THROW(dequantize_row_q5_K(&block, out.data(), 257), Error);
  EXPECT_THROW(dequantize_row_q6_K(&block, out.data(), -256), Error);
  EXPECT_THROW(dequantize_row_ggml(GgmlType::Q8_0, &block, out.data(), 31), Error);
  EXPECT_THROW(dequantize_row_ggml(GgmlType::I32, &block, out.data(), 4), Error);
  EXPECT_THROW(dequantize_row_ggml(GgmlType::Q8_1, &block, out.data(), 32), Error);
  EXPECT_THROW(dequantize_row_ggml(GgmlType::Q5_1, &block, out.data(), 48), Error);
  dequantize_row_q6_K(&block, out.data(), 0);  // an empty row is fine
}

}  // namespace
}  // namespace edgelm
