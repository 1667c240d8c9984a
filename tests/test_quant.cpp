// The GGML block quantizers: exact bytes for blocks worked out by hand and for blocks quantized by
// the gguf package's numpy reference or by GGML itself (tests/fixtures/quant), dequantization of
// known bytes, and error bounds on random rows. The load-time layouts' repacking is in
// test_quant_layouts.cpp, the CPU kernel tables' quantized matmul in test_quant_matmul.cpp (one
// executable, test_quant).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"
#include "tests/fixtures/quant/ggml_k_quants.inc"
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

// Bit for bit the bytes of GGML's reference K-quant quantizers, made by GGML itself
// (scripts/fixtures/make_k_quant_fixtures.py): Gaussian super-blocks over many binades, outliers,
// one sign far from zero, a narrow positive range, evenly spaced values, sub-blocks of very
// different scales with zero ones among them, constant super-blocks and zeros.
TEST(QuantTest, KQuantizersMatchGgmlKnownAnswers) {
  struct KType {
    const char* name;
    void (*quantize)(const float* x, void* y, int64_t n);
    size_t block_bytes;
    const uint8_t* bytes;
    size_t size;
  };
  const KType types[] = {
      {"q4_K", quantize_row_q4_K, sizeof(BlockQ4_K), kGgmlQ4_KBytes, std::size(kGgmlQ4_KBytes)},
      {"q5_K", quantize_row_q5_K, sizeof(BlockQ5_K), kGgmlQ5_KBytes, std::size(kGgmlQ5_KBytes)},
      {"q6_K", quantize_row_q6_K, sizeof(BlockQ6_K), kGgmlQ6_KBytes, std::size(kGgmlQ6_KBytes)},
  };
  constexpr int64_t n = int64_t{kGgmlKQuantBlocks} * kKQuantBlockSize;
  static_assert(std::size(kGgmlKQuantInput) == n);
  for (const KType& type : types) {
    ASSERT_EQ(type.size, type.block_bytes * kGgmlKQuantBlocks) << type.name;
    std::vector<uint8_t> bytes(type.size, 0xcd);
    type.quantize(kGgmlKQuantInput, bytes.data(), n);
    const auto [ours, ggml] = std::mismatch(bytes.begin(), bytes.end(), type.bytes);
    if (ours == bytes.end()) continue;
    int differing = 0;
    for (size_t i = 0; i < bytes.size(); ++i) differing += bytes[i] != type.bytes[i];
    const size_t at = static_cast<size_t>(ours - bytes.begin());
    ADD_FAILURE() << type.name << ": " << differing << " of " << bytes.size()
                  << " bytes differ; the first is byte " << at % type.block_bytes << " of block "
                  << at / type.block_bytes << ": " << int{*ours} << ", GGML's " << int{*ggml};
  }
}

// GGML leaves a K-quant block holding a NaN or an infinity undefined; edgelm stores it as it
// stores the 32-value types: NaN d (and dmin), zero scales and quants, so it decodes to NaN. The
// super-blocks around it are quantized as on their own, and a zero super-block is zero bytes (as
// GGML writes it).
TEST(QuantTest, KQuantNonFiniteAndZeroBlocks) {
  struct KType {
    const char* name;
    void (*quantize)(const float* x, void* y, int64_t n);
    void (*dequantize)(const void* blocks, float* out, int64_t n);
    size_t block_bytes;
    std::vector<size_t> nan_factors;  // byte offsets of the half factors that hold NaN
  };
  const KType types[] = {
      {"q4_K", quantize_row_q4_K, dequantize_row_q4_K, sizeof(BlockQ4_K), {0, 2}},
      {"q5_K", quantize_row_q5_K, dequantize_row_q5_K, sizeof(BlockQ5_K), {0, 2}},
      {"q6_K", quantize_row_q6_K, dequantize_row_q6_K, sizeof(BlockQ6_K), {208}},
  };
  constexpr int n = 3 * kKQuantBlockSize;
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    std::vector<float> x(n, 0.0f);
    for (int i = 0; i < 2 * kKQuantBlockSize; ++i) x[i] = static_cast<float>(i % 13) * 0.25f - 1.5f;
    x[kKQuantBlockSize + 77] = bad;
    for (const KType& type : types) {
      SCOPED_TRACE(std::string(type.name) + " with " + std::to_string(bad));
      std::vector<uint8_t> bytes(3 * type.block_bytes, 0xcd);
      type.quantize(x.data(), bytes.data(), n);
      std::vector<uint8_t> alone(type.block_bytes, 0xcd);
      type.quantize(x.data(), alone.data(), kKQuantBlockSize);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), bytes.begin()));
      const uint8_t* spoiled = bytes.data() + type.block_bytes;
      for (size_t i = 0; i < type.block_bytes; ++i) {
        const bool nan_factor = std::find(type.nan_factors.begin(), type.nan_factors.end(),
                                          i & ~size_t{1}) != type.nan_factors.end();
        const int expected = nan_factor ? (i % 2 == 0 ? 0x00 : 0x7e) : 0;
        ASSERT_EQ(int{spoiled[i]}, expected) << "byte " << i << " of the block with " << bad;
        ASSERT_EQ(int{bytes[2 * type.block_bytes + i]}, 0) << "byte " << i << " of the zero block";
      }
      std::vector<float> y(n, 1.0f);
      type.dequantize(bytes.data(), y.data(), n);
      for (int i = kKQuantBlockSize; i < 2 * kKQuantBlockSize; ++i)
        ASSERT_TRUE(std::isnan(y[i])) << "element " << i;
      for (int i = 2 * kKQuantBlockSize; i < n; ++i) ASSERT_EQ(y[i], 0.0f) << "element " << i;
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

}  // namespace
}  // namespace edgelm
