// The GGML block quantizers: exact bytes for blocks worked out by hand and for blocks quantized by
// the gguf package's numpy reference (tests/fixtures/quant), dequantization of known bytes, and
// error bounds on random rows; the load-time layouts' repacking; and the CPU kernel
// tables' two-step quantized matmul against their one-step kernels.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "tests/fixtures/quant/gguf_quants.inc"

namespace edgelm {
namespace {

TEST(QuantTest, BlockLayoutIsGgml) {
  EXPECT_EQ(sizeof(BlockQ8_0), 34u);
  EXPECT_EQ(sizeof(BlockQ4_0), 18u);
  EXPECT_EQ(sizeof(BlockQ4_1), 20u);
  EXPECT_EQ(sizeof(BlockQ5_0), 22u);
  EXPECT_EQ(sizeof(BlockQ5_1), 24u);
  EXPECT_EQ(offsetof(BlockQ8_0, qs), 2u);
  EXPECT_EQ(offsetof(BlockQ4_0, qs), 2u);
  EXPECT_EQ(offsetof(BlockQ4_1, m), 2u);
  EXPECT_EQ(offsetof(BlockQ4_1, qs), 4u);
  EXPECT_EQ(offsetof(BlockQ5_0, qh), 2u);
  EXPECT_EQ(offsetof(BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(BlockQ5_1, m), 2u);
  EXPECT_EQ(offsetof(BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(BlockQ5_1, qs), 8u);
  // Rows are arrays of blocks with no padding between them.
  EXPECT_EQ(alignof(BlockQ8_0), 2u);
  EXPECT_EQ(alignof(BlockQ4_0), 2u);
  EXPECT_EQ(alignof(BlockQ4_1), 2u);
  EXPECT_EQ(alignof(BlockQ5_0), 2u);
  EXPECT_EQ(alignof(BlockQ5_1), 2u);
}

// One quantizer and dequantizer of the library and the known answers of gguf.quants for them.
struct KnownAnswers {
  const char* name;
  size_t block_bytes;
  void (*quantize)(const float* x, void* blocks, int64_t n);
  void (*dequantize)(const void* blocks, float* y, int64_t n);
  const uint8_t* bytes;
  const float* dequantized;
};

template <class Block, void (*Quantize)(const float*, Block*, int64_t),
          void (*Dequantize)(const Block*, float*, int64_t)>
KnownAnswers known_answers(const char* name, const uint8_t* bytes, const float* dequantized) {
  return {
      name,
      sizeof(Block),
      [](const float* x, void* blocks, int64_t n) { Quantize(x, static_cast<Block*>(blocks), n); },
      [](const void* blocks, float* y, int64_t n) {
        Dequantize(static_cast<const Block*>(blocks), y, n);
      },
      bytes,
      dequantized};
}

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// Bit for bit what GGML's reference rounding gives, as the gguf package's numpy port computes it
// (scripts/fixtures/make_quant_fixtures.py): Gaussian blocks over many binades, outliers, blocks
// of one sign far from zero, quants on exact halves, ties for the largest magnitude, a constant
// block and a zero block. Dequantization reproduces gguf's floats bit for bit too.
TEST(QuantTest, MatchesGgufQuantsKnownAnswers) {
  const KnownAnswers types[] = {
      known_answers<BlockQ8_0, quantize_row_q8_0, dequantize_row_q8_0>("q8_0", kGgufQ8_0Bytes,
                                                                       kGgufQ8_0Dequantized),
      known_answers<BlockQ4_0, quantize_row_q4_0, dequantize_row_q4_0>("q4_0", kGgufQ4_0Bytes,
                                                                       kGgufQ4_0Dequantized),
      known_answers<BlockQ4_1, quantize_row_q4_1, dequantize_row_q4_1>("q4_1", kGgufQ4_1Bytes,
                                                                       kGgufQ4_1Dequantized),
      known_answers<BlockQ5_0, quantize_row_q5_0, dequantize_row_q5_0>("q5_0", kGgufQ5_0Bytes,
                                                                       kGgufQ5_0Dequantized),
      known_answers<BlockQ5_1, quantize_row_q5_1, dequantize_row_q5_1>("q5_1", kGgufQ5_1Bytes,
                                                                       kGgufQ5_1Dequantized),
  };
  constexpr int64_t n = int64_t{kGgufQuantBlocks} * 32;
  static_assert(std::size(kGgufQuantInput) == n);
  for (const KnownAnswers& type : types) {
    std::vector<uint8_t> bytes(type.block_bytes * kGgufQuantBlocks, 0xcd);
    type.quantize(kGgufQuantInput, bytes.data(), n);
    for (size_t i = 0; i < bytes.size(); ++i) {
      ASSERT_EQ(bytes[i], type.bytes[i])
          << type.name << " block " << i / type.block_bytes << " byte " << i % type.block_bytes;
    }
    std::vector<float> y(static_cast<size_t>(n));
    type.dequantize(type.bytes, y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(float_bits(y[i]), float_bits(type.dequantized[i]))
          << type.name << " element " << i << ": " << y[i] << " vs " << type.dequantized[i];
    }
  }
}

TEST(QuantTest, Q8_0KnownBlocks) {
  std::array<float, 96> x{};
  std::array<int8_t, 96> expected{};
  // Block 0: max |x| = 127, so d = 1 and q = round(x) with halves going away from zero.
  const float block0[14] = {127,   -127,  0.5f,   -0.5f,  1.5f,   -1.5f, 2.5f,
                            -2.5f, 2.49f, -2.51f, 100.4f, -64.5f, 0.49f, -0.49f};
  const int8_t q0[14] = {127, -127, 1, -1, 2, -2, 3, -3, 2, -3, 100, -65, 0, 0};
  for (int i = 0; i < 14; ++i) {
    x[i] = block0[i];
    expected[i] = q0[i];
  }
  for (int i = 14; i < 32; ++i) {
    x[i] = static_cast<float>(i - 20);
    expected[i] = static_cast<int8_t>(i - 20);
  }
  // Block 1: max |x| = 63.5, so d = 0.5 and q = round(2x).
  const float block1[8] = {0.25f, -0.25f, 63.5f, -63.5f, 0.2f, 10.0f, -0.75f, 31.74f};
  const int8_t q1[8] = {1, -1, 127, -127, 0, 20, -2, 63};
  for (int i = 0; i < 8; ++i) {
    x[32 + i] = block1[i];
    expected[32 + i] = q1[i];
  }
  // Block 2: max |x| = 1, so d = 1/127, which fp16 stores as 0x2008 (0.0078735...). The quants
  // come from the unrounded float d: 1/(1/127.f) is exactly 127 in float, q = round(127 x).
  const float block2[5] = {1.0f, 0.25f, -0.1f, -1.0f, 0.3f};
  const int8_t q2[5] = {127, 32, -13, -127, 38};
  for (int i = 0; i < 5; ++i) {
    x[64 + i] = block2[i];
    expected[64 + i] = q2[i];
  }

  BlockQ8_0 blocks[3];
  std::memset(blocks, 0xcd, sizeof(blocks));
  quantize_row_q8_0(x.data(), blocks, 96);
  EXPECT_EQ(blocks[0].d, 0x3c00u);
  EXPECT_EQ(blocks[1].d, 0x3800u);
  EXPECT_EQ(blocks[2].d, 0x2008u);
  for (int b = 0; b < 3; ++b) {
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(blocks[b].qs[i], expected[b * 32 + i])
          << "block " << b << " element " << i << " x = " << x[b * 32 + i];
    }
  }
}

TEST(QuantTest, Q4_0KnownBlocks) {
  std::array<float, 64> x{};
  // Block 0: x[i] = i - 16. The largest magnitude is x[0] = -16, so d = -16 / -8 = 2 (0x4000) and
  // nibble = min(15, trunc((i - 16) / 2 + 8.5)) = min(15, trunc((i + 1) / 2)).
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);
  const uint8_t expected0[16] = {0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4,
                                 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8};
  // Block 1: the largest magnitude is +8 (first of the tie with -8: GGML keeps the first), so
  // d = 8 / -8 = -1 (0xbc00) and nibble = min(15, trunc(8.5 - x)).
  //   x:      8  -7  -7.4  0  0.5  -0.5  3  -3  1.25  -8   (elements 0..9, the rest 0)
  //   nibble: 0  15  15    8  8    9     5  11  7     15   (-8 -> 16.5 is clamped to 15)
  //   x:      -3  3  7.9  -6.6  2.5  -2.5                  (elements 16..21, the rest 0)
  //   nibble: 11  5  0    15    6    11
  const float low1[10] = {8, -7, -7.4f, 0, 0.5f, -0.5f, 3, -3, 1.25f, -8};
  const float high1[6] = {-3, 3, 7.9f, -6.6f, 2.5f, -2.5f};
  for (int i = 0; i < 10; ++i) x[32 + i] = low1[i];
  for (int i = 0; i < 6; ++i) x[32 + 16 + i] = high1[i];
  const uint8_t expected1[16] = {0xb0, 0x5f, 0x0f, 0xf8, 0x68, 0xb9, 0x85, 0x8b,
                                 0x87, 0x8f, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};

  BlockQ4_0 blocks[2];
  std::memset(blocks, 0xcd, sizeof(blocks));
  quantize_row_q4_0(x.data(), blocks, 64);
  EXPECT_EQ(blocks[0].d, 0x4000u);
  EXPECT_EQ(blocks[1].d, 0xbc00u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(blocks[0].qs[i], expected0[i]) << "block 0 byte " << i;
    EXPECT_EQ(blocks[1].qs[i], expected1[i]) << "block 1 byte " << i;
  }
}

TEST(QuantTest, ZeroBlocks) {
  const std::array<float, 32> x{};
  BlockQ8_0 q8;
  std::memset(&q8, 0xcd, sizeof(q8));
  quantize_row_q8_0(x.data(), &q8, 32);
  EXPECT_EQ(q8.d, 0u);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q8.qs[i], 0) << i;

  BlockQ4_0 q4;
  std::memset(&q4, 0xcd, sizeof(q4));
  quantize_row_q4_0(x.data(), &q4, 32);
  // d = 0 / -8 is -0 (0x8000), the bytes GGML's reference quantizer writes for a zero block.
  EXPECT_EQ(q4.d, 0x8000u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(q4.qs[i], 0x88u) << i;

  std::array<float, 32> y;
  y.fill(1.0f);
  dequantize_row_q8_0(&q8, y.data(), 32);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  y.fill(1.0f);
  dequantize_row_q4_0(&q4, y.data(), 32);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

// A block holding a NaN or an infinity is stored with a NaN scale (0x7e00) and zero quants, so it
// decodes to NaN; a block too small for a finite reciprocal scale is stored as zeros. The blocks
// around them are quantized as usual.
TEST(QuantTest, NonFiniteAndTinyBlocks) {
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    std::array<float, 96> x;
    for (int i = 0; i < 96; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    x[40] = bad;
    for (int i = 64; i < 96; ++i) x[i] = 1e-39f * static_cast<float>(i - 80);

    BlockQ8_0 q8[3];
    quantize_row_q8_0(x.data(), q8, 96);
    EXPECT_EQ(q8[0].d, f32_to_f16(3.0f / 127.0f));
    EXPECT_EQ(q8[1].d, 0x7e00u) << bad;
    EXPECT_EQ(q8[2].d, 0u);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(q8[1].qs[i], 0) << i;
      EXPECT_EQ(q8[2].qs[i], 0) << i;
    }
    BlockQ4_0 q4[3];
    quantize_row_q4_0(x.data(), q4, 96);
    EXPECT_EQ(q4[1].d, 0x7e00u) << bad;
    EXPECT_EQ(q4[2].d & 0x7fffu, 0u);  // ±0
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(q4[1].qs[i], 0x88u) << i;
      EXPECT_EQ(q4[2].qs[i], 0x88u) << i;
    }

    std::array<float, 96> y;
    dequantize_row_q8_0(q8, y.data(), 96);
    for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 0.01f) << i;  // d rounded to half
    for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
    for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f) << i;
    dequantize_row_q4_0(q4, y.data(), 96);
    for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
    for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f) << i;
  }
}

// The same rule for Q4_1, Q5_0 and Q5_1, and what m is: a block holding a NaN or an infinity gets
// a NaN scale, a NaN m (Q4_1, Q5_1) and zero quants (Q5_0: the quant of zero, 16), and decodes to
// NaN; a block whose scale has no finite reciprocal gets zero quants, so Q5_0 decodes it to zeros
// and Q4_1/Q5_1 to m, the block's minimum in half, here zero. A block whose max - min overflows
// float is stored like a non-finite one (its scale would be infinite).
TEST(QuantTest, NonFiniteAndTinyBlocksOfTheOffsetAndFiveBitTypes) {
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    std::array<float, 128> x;
    for (int i = 0; i < 96; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    x[40] = bad;
    for (int i = 64; i < 96; ++i) x[i] = 1e-39f * static_cast<float>(i - 80);
    for (int i = 96; i < 128; ++i) x[i] = i % 2 ? 3e38f : -3e38f;  // max - min = inf

    BlockQ4_1 q41[4];
    quantize_row_q4_1(x.data(), q41, 128);
    EXPECT_EQ(q41[0].d, f32_to_f16(6.0f / 15.0f));
    EXPECT_EQ(q41[0].m, f32_to_f16(-3.0f));
    for (int b : {1, 3}) {
      EXPECT_EQ(q41[b].d, 0x7e00u) << bad << " block " << b;
      EXPECT_EQ(q41[b].m, 0x7e00u) << bad << " block " << b;
      for (int i = 0; i < 16; ++i) EXPECT_EQ(q41[b].qs[i], 0u) << i;
    }
    EXPECT_EQ(q41[2].m & 0x7fffu, 0u);  // the minimum, -1.6e-38, is -0 in half
    for (int i = 0; i < 16; ++i) EXPECT_EQ(q41[2].qs[i], 0u) << i;

    BlockQ5_0 q50[3];
    quantize_row_q5_0(x.data(), q50, 96);
    EXPECT_EQ(q50[1].d, 0x7e00u) << bad;
    EXPECT_EQ(q50[2].d & 0x7fffu, 0u);
    for (int b : {1, 2}) {
      for (int i = 0; i < 16; ++i) EXPECT_EQ(q50[b].qs[i], 0u) << i;    // q = 16: nibble 0 ...
      for (int i = 0; i < 4; ++i) EXPECT_EQ(q50[b].qh[i], 0xffu) << i;  // ... and the fifth bit
    }

    BlockQ5_1 q51[4];
    quantize_row_q5_1(x.data(), q51, 128);
    EXPECT_EQ(q51[0].d, f32_to_f16(6.0f / 31.0f));
    for (int b : {1, 3}) {
      EXPECT_EQ(q51[b].d, 0x7e00u) << bad << " block " << b;
      EXPECT_EQ(q51[b].m, 0x7e00u) << bad << " block " << b;
    }
    for (int b : {1, 2, 3}) {
      for (int i = 0; i < 16; ++i) EXPECT_EQ(q51[b].qs[i], 0u) << i;
      for (int i = 0; i < 4; ++i) EXPECT_EQ(q51[b].qh[i], 0u) << i;
    }

    std::array<float, 128> y;
    dequantize_row_q4_1(q41, y.data(), 128);
    for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 0.21f) << i;  // half a step of 0.4
    for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
    for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f) << i;
    for (int i = 96; i < 128; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
    dequantize_row_q5_0(q50, y.data(), 96);
    // d = -3 / -16: +3 would be quant 32, clamped to 31, a step (0.1875) below.
    for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 0.19f) << i;
    for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
    for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f) << i;
    dequantize_row_q5_1(q51, y.data(), 128);
    for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 0.1f) << i;
    for (int i = 32; i < 64; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
    for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f) << i;
    for (int i = 96; i < 128; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  }
}

TEST(QuantTest, Q8_0DequantizesKnownBytes) {
  BlockQ8_0 blocks[2];
  blocks[0].d = 0xc000;  // -2
  const int8_t head[6] = {1, -1, 127, -128, 0, 5};
  const float head_values[6] = {-2, 2, -254, 256, 0, -10};
  for (int i = 0; i < 6; ++i) blocks[0].qs[i] = head[i];
  for (int i = 6; i < 32; ++i) blocks[0].qs[i] = static_cast<int8_t>((i - 16) * 7);
  blocks[1].d = 0x0001;  // 2^-24, the smallest subnormal half
  for (int i = 0; i < 32; ++i) blocks[1].qs[i] = static_cast<int8_t>(i * 8 - 128);

  std::array<float, 64> y{};
  dequantize_row_q8_0(blocks, y.data(), 64);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], head_values[i]) << i;
  for (int i = 6; i < 32; ++i) EXPECT_EQ(y[i], static_cast<float>((i - 16) * 7 * -2)) << i;
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(y[32 + i], std::ldexp(static_cast<float>(i * 8 - 128), -24)) << 32 + i;
  }
}

TEST(QuantTest, Q4_0DequantizesKnownBytes) {
  BlockQ4_0 blocks[2];
  blocks[0].d = 0x3800;  // 0.5
  blocks[0].qs[0] = 0x0f;
  blocks[0].qs[1] = 0xf0;
  blocks[0].qs[2] = 0x88;
  blocks[0].qs[3] = 0x19;
  for (int i = 4; i < 16; ++i) blocks[0].qs[i] = 0x7a;
  blocks[1].d = 0x0001;  // 2^-24
  for (int i = 0; i < 16; ++i) blocks[1].qs[i] = 0xf0;

  std::array<float, 64> y{};
  dequantize_row_q4_0(blocks, y.data(), 64);
  // Element i is the low nibble of byte i, element i + 16 its high nibble; value (nibble - 8) d.
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -4.0f);
  EXPECT_EQ(y[1], -4.0f);
  EXPECT_EQ(y[17], 3.5f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[18], 0.0f);
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[19], -3.5f);
  for (int i = 4; i < 16; ++i) {
    EXPECT_EQ(y[i], 1.0f) << i;
    EXPECT_EQ(y[i + 16], -0.5f) << i + 16;
  }
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(y[32 + i], std::ldexp(-8.0f, -24)) << 32 + i;
    EXPECT_EQ(y[48 + i], std::ldexp(7.0f, -24)) << 48 + i;
  }
}

// Rows of several blocks with different characters: Gaussian, Gaussian with one large outlier,
// all one sign, tiny values whose fp16 scale is subnormal, and a pair of near-opposite extremes
// (the second lands past +7.5 steps, where Q4_0 clamps).
std::vector<float> make_test_row(uint32_t seed, int n_blocks) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> position(0, 31);
  std::vector<float> x(static_cast<size_t>(n_blocks) * 32);
  for (int b = 0; b < n_blocks; ++b) {
    float* block = x.data() + b * 32;
    for (int i = 0; i < 32; ++i) block[i] = normal(rng);
    switch (b % 5) {
      case 1:
        block[position(rng)] *= 60.0f;
        break;
      case 2:
        for (int i = 0; i < 32; ++i) block[i] = std::fabs(block[i]) + 3.0f;
        break;
      case 3:
        for (int i = 0; i < 32; ++i) block[i] *= 1e-5f;
        break;
      case 4:
        block[3] = 5.0f;
        block[20] = -4.9f;
        break;
      default:
        break;
    }
  }
  return x;
}

TEST(QuantTest, Q8_0RoundTripErrorIsHalfAStep) {
  for (const uint32_t seed : {1u, 2u, 3u, 42u}) {
    const int n_blocks = 20;
    const std::vector<float> x = make_test_row(seed, n_blocks);
    std::vector<BlockQ8_0> blocks(n_blocks);
    quantize_row_q8_0(x.data(), blocks.data(), n_blocks * 32);
    std::vector<float> y(x.size());
    dequantize_row_q8_0(blocks.data(), y.data(), n_blocks * 32);
    for (int b = 0; b < n_blocks; ++b) {
      double max_abs = 0.0;
      for (int i = 0; i < 32; ++i) max_abs = std::max(max_abs, std::fabs(double{x[b * 32 + i]}));
      const double d = max_abs / 127.0;
      const double stored_d = f16_to_f32(blocks[b].d);
      for (int i = 0; i < 32; ++i) {
        const int j = b * 32 + i;
        const int q = blocks[b].qs[i];
        // |x - q d'| <= |x - q d| + |q| |d - d'|: half a step from rounding x/d, plus what storing
        // d in fp16 moves the grid point. The last term covers float evaluation of x * (1/d)
        // (three roundings of ~2^-24 on a scaled value of at most 127, ~2.3e-5 steps) and of q d'.
        const double bound = 0.5 * d + std::abs(q) * std::fabs(d - stored_d) + 1e-4 * d;
        ASSERT_LE(std::fabs(double{x[j]} - y[j]), bound)
            << "seed " << seed << " block " << b << " element " << i << " x = " << x[j];
        ASSERT_EQ(y[j], static_cast<float>(q * stored_d));
      }
    }
  }
}

TEST(QuantTest, Q4_0RoundTripErrorIsHalfAStepInsideTheRange) {
  int clamped_seen = 0;
  for (const uint32_t seed : {1u, 2u, 3u, 42u}) {
    const int n_blocks = 20;
    const std::vector<float> x = make_test_row(seed, n_blocks);
    std::vector<BlockQ4_0> blocks(n_blocks);
    quantize_row_q4_0(x.data(), blocks.data(), n_blocks * 32);
    std::vector<float> y(x.size());
    dequantize_row_q4_0(blocks.data(), y.data(), n_blocks * 32);
    for (int b = 0; b < n_blocks; ++b) {
      int extreme_index = 0;
      for (int i = 1; i < 32; ++i) {
        if (std::fabs(x[b * 32 + i]) > std::fabs(x[b * 32 + extreme_index])) extreme_index = i;
      }
      const double d = double{x[b * 32 + extreme_index]} / -8.0;
      const double stored_d = f16_to_f32(blocks[b].d);
      const double step = std::fabs(d);
      for (int i = 0; i < 32; ++i) {
        const int j = b * 32 + i;
        const int nibble = i < 16 ? blocks[b].qs[i] & 0x0f : blocks[b].qs[i - 16] >> 4;
        const int q = nibble - 8;
        const double error = std::fabs(double{x[j]} - y[j]);
        const double grid_shift = std::abs(q) * std::fabs(d - stored_d);
        // Scaled values in (7.5, 8] would round to 8, which a nibble cannot hold: they are clamped
        // to 7 and may be off by a whole step. The margin keeps float evaluation of x * (1/d)
        // (a few 2^-24 roundings on a value below 8.5) from moving an element across the edge.
        const double scaled = double{x[j]} / d;
        if (i == extreme_index) {
          ASSERT_EQ(nibble, 0) << "seed " << seed << " block " << b;
          ASSERT_LE(error, grid_shift + 1e-6 * step) << "seed " << seed << " block " << b;
        } else if (scaled < 7.5 - 1e-5) {
          ASSERT_LE(error, 0.5 * step + grid_shift + 1e-5 * step)
              << "seed " << seed << " block " << b << " element " << i << " x = " << x[j];
        } else {
          ++clamped_seen;
          ASSERT_EQ(nibble, 15) << "seed " << seed << " block " << b << " element " << i;
          ASSERT_LE(error, step + grid_shift + 1e-5 * step);
        }
        ASSERT_EQ(y[j], static_cast<float>(q * stored_d));
      }
    }
  }
  EXPECT_GT(clamped_seen, 0) << "no element exercised the clamp";
}

// The offset types on random rows: |x - y| is at most half a step, plus what storing d and m in
// half moves the grid (|q|·|d - d'| + |m - m'|), plus float evaluation of (x - min)·(1/d) and of
// q·d' + m'; the smallest element decodes to m' itself. Every element's quant is within range.
template <class Block>
void check_offset_round_trip(void (*quantize)(const float*, Block*, int64_t),
                             void (*dequantize)(const Block*, float*, int64_t), int levels,
                             int (*quant)(const Block&, int)) {
  for (const uint32_t seed : {1u, 2u, 3u, 42u}) {
    const int n_blocks = 20;
    const std::vector<float> x = make_test_row(seed, n_blocks);
    std::vector<Block> blocks(n_blocks);
    quantize(x.data(), blocks.data(), n_blocks * 32);
    std::vector<float> y(x.size());
    dequantize(blocks.data(), y.data(), n_blocks * 32);
    for (int b = 0; b < n_blocks; ++b) {
      const float* block = x.data() + b * 32;
      const double min = *std::min_element(block, block + 32);
      const double max = *std::max_element(block, block + 32);
      const double d = (max - min) / (levels - 1);
      const double stored_d = f16_to_f32(blocks[b].d);
      const double stored_m = f16_to_f32(blocks[b].m);
      for (int i = 0; i < 32; ++i) {
        const int q = quant(blocks[b], i);
        ASSERT_GE(q, 0);
        ASSERT_LT(q, levels);
        const double bound = 0.5 * d + q * std::fabs(d - stored_d) + std::fabs(min - stored_m) +
                             1e-5 * d + 1e-6 * std::fabs(stored_m);
        ASSERT_LE(std::fabs(double{block[i]} - y[b * 32 + i]), bound)
            << "seed " << seed << " block " << b << " element " << i << " x = " << block[i];
        if (block[i] == min) {
          ASSERT_EQ(q, 0);
        }
      }
    }
  }
}

int q4_1_quant(const BlockQ4_1& block, int i) {
  return i < 16 ? block.qs[i] & 0x0f : block.qs[i - 16] >> 4;
}

int q5_1_quant(const BlockQ5_1& block, int i) {
  const int nibble = i < 16 ? block.qs[i] & 0x0f : block.qs[i - 16] >> 4;
  return nibble | ((block.qh[i / 8] >> (i % 8)) & 1) << 4;
}

TEST(QuantTest, Q4_1RoundTripErrorIsHalfAStep) {
  check_offset_round_trip<BlockQ4_1>(quantize_row_q4_1, dequantize_row_q4_1, 16, q4_1_quant);
}

TEST(QuantTest, Q5_1RoundTripErrorIsHalfAStep) {
  check_offset_round_trip<BlockQ5_1>(quantize_row_q5_1, dequantize_row_q5_1, 32, q5_1_quant);
}

// Q5_0 as Q4_0 with twice the levels: error within half a step of max/16 except for the clamped
// top (scaled values past 15.5), checked loosely here; the exact bytes are the known answers'.
TEST(QuantTest, Q5_0RoundTripErrorIsAtMostAStep) {
  for (const uint32_t seed : {1u, 2u, 3u, 42u}) {
    const int n_blocks = 20;
    const std::vector<float> x = make_test_row(seed, n_blocks);
    std::vector<BlockQ5_0> blocks(n_blocks);
    quantize_row_q5_0(x.data(), blocks.data(), n_blocks * 32);
    std::vector<float> y(x.size());
    dequantize_row_q5_0(blocks.data(), y.data(), n_blocks * 32);
    for (int b = 0; b < n_blocks; ++b) {
      double max_abs = 0.0;
      for (int i = 0; i < 32; ++i) max_abs = std::max(max_abs, std::fabs(double{x[b * 32 + i]}));
      const double step = max_abs / 16.0;
      const double stored_step = std::fabs(f16_to_f32(blocks[b].d));
      for (int i = 0; i < 32; ++i) {
        const int j = b * 32 + i;
        ASSERT_LE(std::fabs(double{x[j]} - y[j]),
                  step + 16 * std::fabs(step - stored_step) + 1e-5 * step)
            << "seed " << seed << " block " << b << " element " << i;
      }
    }
  }
}

TEST(QuantTest, RowLengthMustBeAMultipleOf32) {
  std::vector<float> x(64, 1.0f);
  std::vector<BlockQ8_0> q8(2);
  std::vector<BlockQ4_0> q4(2);
  std::vector<BlockQ4_1> q41(2);
  std::vector<BlockQ5_0> q50(2);
  std::vector<BlockQ5_1> q51(2);
  for (const int64_t n : {1, 31, 33, 48}) {
    EXPECT_THROW(quantize_row_q8_0(x.data(), q8.data(), n), Error) << n;
    EXPECT_THROW(quantize_row_q4_0(x.data(), q4.data(), n), Error) << n;
    EXPECT_THROW(quantize_row_q4_1(x.data(), q41.data(), n), Error) << n;
    EXPECT_THROW(quantize_row_q5_0(x.data(), q50.data(), n), Error) << n;
    EXPECT_THROW(quantize_row_q5_1(x.data(), q51.data(), n), Error) << n;
    EXPECT_THROW(dequantize_row_q8_0(q8.data(), x.data(), n), Error) << n;
    EXPECT_THROW(dequantize_row_q4_0(q4.data(), x.data(), n), Error) << n;
    EXPECT_THROW(dequantize_row_q4_1(q41.data(), x.data(), n), Error) << n;
    EXPECT_THROW(dequantize_row_q5_0(q50.data(), x.data(), n), Error) << n;
    EXPECT_THROW(dequantize_row_q5_1(q51.data(), x.data(), n), Error) << n;
  }
}

// Q4_0x8 and Q8_0x8 move bytes only: a record holds block b of rows 8g..8g+7, scales first, then
// for each four-byte chunk c the eight rows' chunks side by side; records come in K segments of
// `segment` blocks (the last one shorter), each holding every group's blocks of it, group after
// group. Unpacking restores every byte, and row counts that are not whole groups of eight are
// refused. Checked with one segment (3 blocks) and with three (2·segment + 3 blocks).
template <class Block, class Record, class Repack, class Unpack>
void check_x8_repack(Repack repack, Unpack unpack, int64_t segment) {
  constexpr int64_t kRows = 16;
  constexpr int64_t kGroups = kRows / 8;
  constexpr int kBytes = static_cast<int>(sizeof(Block::qs));
  for (const int64_t blocks : {int64_t{3}, 2 * segment + 3}) {
    std::mt19937 rng(5);
    std::vector<Block> rows(static_cast<size_t>(kRows * blocks));
    for (Block& block : rows) {
      block.d = static_cast<uint16_t>(rng());
      for (auto& byte : block.qs)
        byte = static_cast<std::remove_reference_t<decltype(byte)>>(rng());
    }
    std::vector<Record> packed(static_cast<size_t>(kGroups * blocks));
    repack(rows.data(), packed.data(), kRows, blocks);
    for (int64_t g = 0; g < kGroups; ++g) {
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t s = b / segment;
        const int64_t in_segment = s < blocks / segment ? segment : blocks % segment;
        const Record& record = packed[kGroups * s * segment + g * in_segment + b % segment];
        for (int r = 0; r < 8; ++r) {
          const Block& block = rows[(g * 8 + r) * blocks + b];
          ASSERT_EQ(record.d[r], block.d)
              << "blocks " << blocks << " group " << g << " block " << b;
          for (int j = 0; j < kBytes; ++j) {
            ASSERT_EQ(record.qs[(j / 4 * 8 + r) * 4 + j % 4], block.qs[j]) << "byte " << j;
          }
        }
      }
    }
    std::vector<Block> unpacked(rows.size());
    unpack(packed.data(), unpacked.data(), kRows, blocks);
    EXPECT_EQ(std::memcmp(unpacked.data(), rows.data(), rows.size() * sizeof(Block)), 0);
    for (const int64_t bad_rows : {1, 7, 12}) {
      EXPECT_THROW(repack(rows.data(), packed.data(), bad_rows, blocks), Error);
      EXPECT_THROW(unpack(packed.data(), unpacked.data(), bad_rows, blocks), Error);
    }
  }
}

TEST(QuantTest, Q4_0x8RepackInterleavesEightRowsAndRoundTrips) {
  static_assert(kQ4_0x8Rows == 8 && kQ4_0x8SegmentBlocks == 64);
  check_x8_repack<BlockQ4_0, BlockQ4_0x8>(repack_q4_0_x8, unpack_q4_0_x8, 64);
}

TEST(QuantTest, Q8_0x8RepackInterleavesEightRowsAndRoundTrips) {
  static_assert(kQ8_0x8Rows == 8 && kQ8_0x8SegmentBlocks == 64);
  check_x8_repack<BlockQ8_0, BlockQ8_0x8>(repack_q8_0_x8, unpack_q8_0_x8, 64);
}

// F16x4 moves halves only: chunk c of group g holds elements 16c..16c+15 of rows 4g..4g+3, one
// row after the other; the columns come in segments of 2048 (the last one shorter), each holding
// every group's chunks of its columns, group after group. Unpacking restores every value, and
// shapes that are not whole groups of four rows and whole chunks of 16 columns are refused.
// Checked with one segment (48 columns) and with three (2·2048 + 48).
TEST(QuantTest, F16x4RepackInterleavesFourRowsAndRoundTrips) {
  static_assert(kF16x4Rows == 4 && kF16x4Chunk == 16 && kF16x4SegmentElements == 2048);
  constexpr int64_t kRows = 8;
  for (const int64_t cols : {int64_t{48}, int64_t{2 * 2048 + 48}}) {
    std::mt19937 rng(6);
    std::vector<uint16_t> rows(static_cast<size_t>(kRows * cols));
    for (uint16_t& value : rows) value = static_cast<uint16_t>(rng());
    std::vector<uint16_t> packed(rows.size());
    repack_f16_x4(rows.data(), packed.data(), kRows, cols);
    for (int64_t row = 0; row < kRows; ++row) {
      for (int64_t k = 0; k < cols; ++k) {
        const int64_t segment = k / 2048 * 2048;  // its first column
        const int64_t width = std::min<int64_t>(2048, cols - segment);
        const int64_t chunk = kRows * segment / 64 + (row / 4) * (width / 16) + (k - segment) / 16;
        ASSERT_EQ(packed[(chunk * 4 + row % 4) * 16 + k % 16], rows[row * cols + k])
            << "columns " << cols << " row " << row << " column " << k;
      }
    }
    std::vector<uint16_t> unpacked(rows.size());
    unpack_f16_x4(packed.data(), unpacked.data(), kRows, cols);
    EXPECT_EQ(unpacked, rows);
  }
  std::vector<uint16_t> rows(8 * 48);
  std::vector<uint16_t> packed(rows.size());
  std::vector<uint16_t> unpacked(rows.size());
  for (const auto& [bad_rows, bad_cols] :
       {std::pair<int64_t, int64_t>{6, 48}, {3, 48}, {8, 40}, {8, 8}}) {
    EXPECT_THROW(repack_f16_x4(rows.data(), packed.data(), bad_rows, bad_cols), Error);
    EXPECT_THROW(unpack_f16_x4(packed.data(), unpacked.data(), bad_rows, bad_cols), Error);
  }
}

// Quantized weights of `dtype` (Q8_0, Q4_0 or their interleaved layouts) for an N x K matrix.
std::vector<std::byte> random_quantized_weights(DType dtype, int64_t N, int64_t K,
                                                std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(N * K));
  for (float& v : values) v = normal(rng);
  const int64_t blocks = K / 32;
  std::vector<BlockQ8_0> q8(static_cast<size_t>(N * blocks));
  std::vector<BlockQ4_0> q4(static_cast<size_t>(N * blocks));
  quantize_row_q8_0(values.data(), q8.data(), N * K);
  quantize_row_q4_0(values.data(), q4.data(), N * K);
  std::vector<std::byte> bytes(dtype_row_bytes(dtype, K) * static_cast<size_t>(N));
  switch (dtype) {
    case DType::Q8_0:
      std::memcpy(bytes.data(), q8.data(), bytes.size());
      break;
    case DType::Q4_0:
      std::memcpy(bytes.data(), q4.data(), bytes.size());
      break;
    case DType::Q8_0x8:
      repack_q8_0_x8(q8.data(), reinterpret_cast<BlockQ8_0x8*>(bytes.data()), N, blocks);
      break;
    case DType::Q4_0x8:
      repack_q4_0_x8(q4.data(), reinterpret_cast<BlockQ4_0x8*>(bytes.data()), N, blocks);
      break;
    default:
      ADD_FAILURE() << "no quantized weights of " << dtype_name(dtype);
  }
  return bytes;
}

// What the CPU backend runs (x quantized once, in pieces of rows, then multiplied in ranges of
// weight rows) is bit for bit what the table's one-step kernel computes. The first range holds
// three groups of the interleaved layouts, so a decode kernel that pairs the two halves of its
// range (when they are far enough apart: 1024 rows of K = 2048) pairs other groups than over the
// whole matrix, and leaves some alone.
TEST(QuantizedMatmul, TwoStepsEqualTheOneStepKernelOnEveryTable) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int checked = 0;
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (int d = 0; d < kDTypeCount; ++d) {
      const auto dtype = static_cast<DType>(d);
      const cpu::QuantizedMatmul two_step = table->quantized_matmul[static_cast<size_t>(d)];
      if (two_step.matmul == nullptr) continue;
      ASSERT_NE(two_step.quantize_x, nullptr) << table->isa << " " << dtype_name(dtype);
      struct Shape3 {
        int64_t M, K, N;
      };
      for (const auto& [M, K, N] :
           {Shape3{1, 96, 48}, {5, 288, 48}, {9, 256, 48}, {1, 2048, 1024}}) {
        SCOPED_TRACE(std::string(table->isa) + " " + dtype_name(dtype) + " M=" + std::to_string(M) +
                     " K=" + std::to_string(K) + " N=" + std::to_string(N));
        std::vector<float> x(static_cast<size_t>(M * K));
        for (float& v : x) v = normal(rng);
        const std::vector<std::byte> w = random_quantized_weights(dtype, N, K, rng);
        std::vector<float> one(static_cast<size_t>(M * N), NAN);
        table->matmul[static_cast<size_t>(d)](x.data(), w.data(), one.data(), M, N, K, 0, N);
        std::vector<std::byte> xq(cpu::quantized_x_bytes(M, K));
        two_step.quantize_x(x.data(), xq.data(), M, K, 0, M / 2);
        two_step.quantize_x(x.data(), xq.data(), M, K, M / 2, M);
        std::vector<float> two(static_cast<size_t>(M * N), NAN);
        two_step.matmul(xq.data(), w.data(), two.data(), M, N, K, 0, 24);
        two_step.matmul(xq.data(), w.data(), two.data(), M, N, K, 24, N);
        ASSERT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
        ++checked;
      }
    }
  }
#if defined(__x86_64__) || defined(__aarch64__)
  if (cpu::available_kernel_tables().size() > 1) {
    EXPECT_GT(checked, 0);
  }
#endif
}

// A weight tensor of `dtype` (as stored or in an interleaved layout) with random values.
Tensor random_weight_tensor(Memory& memory, DType dtype, int64_t N, int64_t K, std::mt19937& rng) {
  Tensor t = Tensor::empty(memory, dtype, Shape{N, K});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (dtype == DType::F32) {
    for (int64_t i = 0; i < N * K; ++i) t.data<float>()[i] = normal(rng);
  } else if (dtype == DType::F16 || dtype == DType::F16x4) {
    std::vector<uint16_t> rows(static_cast<size_t>(N * K));
    for (uint16_t& h : rows) h = f32_to_f16(normal(rng));
    if (dtype == DType::F16) {
      std::memcpy(t.raw(), rows.data(), rows.size() * sizeof(uint16_t));
    } else {
      repack_f16_x4(rows.data(), static_cast<uint16_t*>(t.raw()), N, K);
    }
  } else {
    const std::vector<std::byte> bytes = random_quantized_weights(dtype, N, K, rng);
    std::memcpy(t.raw(), bytes.data(), bytes.size());
  }
  return t;
}

// matmul_shared_x (a layer's K, V and Q in one dispatch: x quantized once, the rows of all three
// weights split over the threads as one sequence) gives bit for bit what three matmul calls
// give, on every table, for every weight layout a table multiplies, with the decode split
// (M <= 4, and a decode step in K slices) and the prefill split, on one, two and three threads
// (uneven ranges that cross the weights' boundaries).
TEST(MatmulSharedX, EqualsOneMatmulPerWeightOnEveryTable) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int checked = 0;
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (const int threads : {1, 2, 3}) {
      cpu::CpuBackend backend({.n_threads = threads, .isa = table->isa});
      Memory& memory = backend.memory();
      for (const DType stored : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
        for (const DType dtype : {stored, backend.matmul_weight_type(stored)}) {
          if (!backend.supports(OpKind::Matmul, {dtype})) continue;
          // K = 4160 decodes Q4_0x8 in two K slices (six parts) and Q8_0x8 and F16x4 in three
          // (nine: one matmul per weight).
          for (const auto& [M, K] :
               {std::pair<int64_t, int64_t>{1, 96}, {3, 288}, {9, 256}, {1, 4160}}) {
            SCOPED_TRACE(std::string(table->isa) + " t" + std::to_string(threads) + " " +
                         dtype_name(dtype) + " M=" + std::to_string(M) + " K=" + std::to_string(K));
            Tensor x = Tensor::empty(memory, DType::F32, Shape{M, K});
            for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = normal(rng);
            const int64_t sizes[] = {16, 40, 24};
            std::vector<Tensor> w, fused, alone;
            for (const int64_t N : sizes) {
              w.push_back(random_weight_tensor(memory, dtype, N, K, rng));
              fused.push_back(Tensor::empty(memory, DType::F32, Shape{M, N}));
              alone.push_back(Tensor::empty(memory, DType::F32, Shape{M, N}));
            }
            backend.matmul_shared_x(x, {w[0], w[1], w[2]}, {fused[0], fused[1], fused[2]});
            for (size_t i = 0; i < w.size(); ++i) backend.matmul(x, w[i], alone[i]);
            for (size_t i = 0; i < w.size(); ++i) {
              ASSERT_EQ(std::memcmp(fused[i].raw(), alone[i].raw(), fused[i].nbytes()), 0)
                  << "weight " << i;
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// KernelTable::decode_pairs and decode_pairs_prefetch: rows [a, a + rows) beside rows [b, b + rows)
// (or the first range alone) give, bit for bit, the table's own decode matmul's rows, and write no
// other row of y; for whole halves, pieces of them, and K past one segment.
TEST(DecodePairs, EqualTheTablesMatmulRowForRow) {
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  cpu::CpuBackend host({.n_threads = 1, .isa = "portable"});
  int checked = 0;
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (int d = 0; d < 2 * kDTypeCount; ++d) {
      const bool prefetch = d >= kDTypeCount;
      const auto& kernels = prefetch ? table->decode_pairs_prefetch : table->decode_pairs;
      const cpu::DecodePairsFn pairs = kernels[static_cast<size_t>(d % kDTypeCount)];
      if (pairs == nullptr) continue;
      const auto dtype = static_cast<DType>(d % kDTypeCount);
      const cpu::QuantizedMatmul quantized = table->quantized_matmul[static_cast<size_t>(dtype)];
      for (const int64_t K : {2048, 4160}) {
        constexpr int64_t N = 64;
        SCOPED_TRACE(std::string(table->isa) + " " + dtype_name(dtype) +
                     (prefetch ? " (prefetch)" : "") + " K=" + std::to_string(K));
        const Tensor w = random_weight_tensor(host.memory(), dtype, N, K, rng);
        std::vector<float> x(static_cast<size_t>(K));
        for (float& v : x) v = normal(rng);
        std::vector<std::byte> xq(cpu::quantized_x_bytes(1, K));
        std::vector<float> expected(N, NAN);
        const void* x_row = x.data();
        if (quantized.matmul != nullptr) {
          quantized.quantize_x(x.data(), xq.data(), 1, K, 0, 1);
          quantized.matmul(xq.data(), w.raw(), expected.data(), 1, N, K, 0, N);
          x_row = xq.data();
        } else {
          table->matmul[static_cast<size_t>(dtype)](x.data(), w.raw(), expected.data(), 1, N, K, 0,
                                                    N);
        }
        struct Call {
          int64_t a, b, rows;
        };
        const std::vector<std::vector<Call>> cases = {
            {{0, 32, 32}},                           // the two halves
            {{0, 32, 8}, {8, 40, 24}},               // halves in two pieces
            {{0, -1, 64}},                           // one stream
            {{16, 48, 8}},                           // a piece alone: only its rows
            {{0, 56, 8}, {8, 24, 16}, {40, -1, 16}}  // unequal distances, a single range
        };
        for (const std::vector<Call>& calls : cases) {
          std::vector<float> y(N, NAN);
          std::vector<bool> written(N, false);
          for (const Call& c : calls) {
            pairs(x_row, w.raw(), y.data(), N, K, c.a, c.b, c.rows);
            for (int64_t r = 0; r < c.rows; ++r) {
              written[static_cast<size_t>(c.a + r)] = true;
              if (c.b >= 0) written[static_cast<size_t>(c.b + r)] = true;
            }
          }
          for (int64_t n = 0; n < N; ++n) {
            if (written[static_cast<size_t>(n)]) {
              ASSERT_EQ(std::memcmp(&y[n], &expected[n], sizeof(float)), 0) << "row " << n;
            } else {
              ASSERT_TRUE(std::isnan(y[n])) << "row " << n << " written";
            }
          }
          ++checked;
        }
      }
    }
  }
#if defined(__x86_64__)
  if (cpu::available_kernel_tables().size() > 1) {
    EXPECT_GT(checked, 0);
  }
#endif
}

// EDGELM_CPU_PREFETCH chooses the decode kernels (on|off; unset: on for Intel CPUs) where the table
// has prefetching ones, and the backend's device() says when they are in use; another value is an
// error naming the variable.
TEST(DecodePairs, PrefetchIsChosenByTheEnvironmentOrTheVendor) {
  const char* saved = std::getenv("EDGELM_CPU_PREFETCH");
  const std::string saved_value = saved != nullptr ? saved : "";
  auto has_prefetch_kernels = [](const cpu::KernelTable& table) {
    for (const cpu::DecodePairsFn kernel : table.decode_pairs_prefetch)
      if (kernel != nullptr) return true;
    return false;
  };
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (const std::string value : {"on", "off"}) {
      ::setenv("EDGELM_CPU_PREFETCH", value.c_str(), 1);
      const cpu::CpuBackend backend({.n_threads = 1, .isa = table->isa});
      const bool expected = value == "on" && has_prefetch_kernels(*table);
      EXPECT_EQ(backend.decode_prefetch(), expected) << table->isa << " " << value;
      EXPECT_EQ(backend.device().find("with decode prefetch") != std::string::npos, expected)
          << backend.device();
    }
  }
  ::setenv("EDGELM_CPU_PREFETCH", "yes", 1);
  try {
    const cpu::CpuBackend backend({.n_threads = 1});
    ADD_FAILURE() << "EDGELM_CPU_PREFETCH=yes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EDGELM_CPU_PREFETCH='yes': expected on or off"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("EDGELM_CPU_PREFETCH");
  const cpu::CpuBackend backend({.n_threads = 1});
#if defined(__x86_64__)
  const bool intel = __builtin_cpu_is("intel");
#else
  const bool intel = false;
#endif
  EXPECT_EQ(backend.decode_prefetch(), intel && has_prefetch_kernels(backend.kernels()));
  if (saved != nullptr) ::setenv("EDGELM_CPU_PREFETCH", saved_value.c_str(), 1);
}

TEST(MatmulSharedX, MixedWeightTypesAndBadArgumentsOnTheCpu) {
  std::mt19937 rng(12);
  cpu::CpuBackend backend({.n_threads = 2});
  Memory& memory = backend.memory();
  constexpr int64_t M = 2, K = 64;
  Tensor x = Tensor::empty(memory, DType::F32, Shape{M, K});
  for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = 0.01f * static_cast<float>(i % 37);
  const Tensor a = random_weight_tensor(memory, DType::F32, 8, K, rng);
  const Tensor b = random_weight_tensor(memory, DType::Q8_0, 16, K, rng);
  Tensor ya = Tensor::empty(memory, DType::F32, Shape{M, 8});
  Tensor yb = Tensor::empty(memory, DType::F32, Shape{M, 16});
  Tensor ya_alone = Tensor::empty(memory, DType::F32, Shape{M, 8});
  Tensor yb_alone = Tensor::empty(memory, DType::F32, Shape{M, 16});
  // Different weight types: one matmul each, same results.
  backend.matmul_shared_x(x, {a, b}, {ya, yb});
  backend.matmul(x, a, ya_alone);
  backend.matmul(x, b, yb_alone);
  EXPECT_EQ(std::memcmp(ya.raw(), ya_alone.raw(), ya.nbytes()), 0);
  EXPECT_EQ(std::memcmp(yb.raw(), yb_alone.raw(), yb.nbytes()), 0);
  // One output per weight, each of the right shape.
  EXPECT_THROW(backend.matmul_shared_x(x, {a, a}, {ya}), Error);
  EXPECT_THROW(backend.matmul_shared_x(x, {a, a}, {ya, yb}), Error);
  EXPECT_THROW(backend.matmul_shared_x(x, {a, Tensor()}, {ya, ya_alone}), Error);
}

// With profile on, the CPU backend records every op call under (op, kernel): a matmul's row names
// the table, weight type, gemv/gemm and [N, K], and counts the weight bytes read; an op that throws
// records nothing; without profile nothing is recorded.
TEST(CpuProfile, TimesEveryOpCallAndCountsMatmulWeightBytes) {
  std::mt19937 rng(13);
  for (const bool profile : {false, true}) {
    cpu::CpuBackend backend({.n_threads = 2, .isa = "portable", .profile = profile});
    Memory& memory = backend.memory();
    constexpr int64_t K = 64;
    Tensor x = Tensor::empty(memory, DType::F32, Shape{1, K});
    for (int64_t i = 0; i < K; ++i) x.data<float>()[i] = 0.02f * static_cast<float>(i % 11);
    const Tensor w = random_weight_tensor(memory, DType::Q8_0, 16, K, rng);
    const Tensor w2 = random_weight_tensor(memory, DType::Q8_0, 8, K, rng);
    Tensor y = Tensor::empty(memory, DType::F32, Shape{1, 16});
    Tensor y2 = Tensor::empty(memory, DType::F32, Shape{1, 8});
    backend.matmul(x, w, y);
    backend.matmul(x, w, y);
    backend.matmul_shared_x(x, {w, w2}, {y, y2});
    backend.add(y, y, y);
    EXPECT_THROW(backend.add(y, y2, y), Error);
    const std::vector<OpTiming> rows = backend.op_timings();
    if (!profile) {
      EXPECT_TRUE(rows.empty());
      continue;
    }
    ASSERT_EQ(rows.size(), 3u);
    auto find = [&](const std::string& kernel) -> const OpTiming* {
      for (const OpTiming& row : rows)
        if (row.kernel == kernel) return &row;
      ADD_FAILURE() << "no row " << kernel;
      return nullptr;
    };
    const OpTiming* single = find("portable q8_0 gemv 16x64");
    const OpTiming* shared = find("portable q8_0 gemv 24x64 (2 weights)");
    const OpTiming* add = find("portable");
    ASSERT_TRUE(single && shared && add);
    EXPECT_EQ(single->op, "matmul");
    EXPECT_EQ(single->calls, 2);
    EXPECT_EQ(single->bytes, 2 * w.nbytes());
    EXPECT_EQ(shared->calls, 1);
    EXPECT_EQ(shared->bytes, w.nbytes() + w2.nbytes());
    EXPECT_EQ(add->op, "add");
    EXPECT_EQ(add->calls, 1);
    EXPECT_EQ(add->bytes, 0u);
    for (const OpTiming& row : rows) EXPECT_GT(row.seconds, 0.0) << row.kernel;
    for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].seconds, rows[i].seconds);
    backend.reset_op_timings();
    EXPECT_TRUE(backend.op_timings().empty());
  }
}

}  // namespace
}  // namespace edgelm
