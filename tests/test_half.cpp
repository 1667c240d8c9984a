// Conversions between float and the 16-bit float formats, checked against references computed a
// different way (the compiler's _Float16 where it has one, and distance comparisons in double),
// plus the dtype table.
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"

// _Float16 as an independent reference: GCC's C++ front end accepts it on x86-64 from GCC 12 but
// on AArch64 only from GCC 13, although both define __FLT16_MAX__.
#if defined(__FLT16_MAX__) && (defined(__x86_64__) || defined(__clang__) || __GNUC__ >= 13)
#define EDGELM_TEST_HAS_FLOAT16 1
#else
#define EDGELM_TEST_HAS_FLOAT16 0
#endif

namespace edgelm {
namespace {

bool is_f16_nan(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}
bool is_bf16_nan(uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
}

// Value of a non-negative half bit pattern from the IEEE definition, without any bit shuffling into
// a float. 0x7c00 (infinity) yields 2^16, the value the next binade would start at, which is what
// rounding compares against when deciding between 65504 and overflow.
double f16_pattern_value(uint16_t magnitude) {
  const int exponent = magnitude >> 10;
  const int mantissa = magnitude & 0x3ff;
  if (exponent == 0) return std::ldexp(mantissa, -24);
  return std::ldexp(1024 + mantissa, exponent - 25);
}

// Picks the nearer of the two halves around |x| by comparing distances in double, ties to the even
// pattern. Distances that could tie are exact (x then lies within a half ulp of both neighbours,
// and such a difference of a float and a half needs at most 24 significant bits); an inexact one
// belongs to an x far closer to the other neighbour, where its rounding cannot flip the comparison.
uint16_t f32_to_f16_by_distance(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isnan(x)) return sign | 0x7e00u;
  const double magnitude = std::fabs(static_cast<double>(x));
  if (magnitude >= f16_pattern_value(0x7c00u)) return sign | 0x7c00u;
  // Largest pattern in [0, 0x7c00) whose value is <= magnitude; values increase with patterns.
  uint32_t low = 0;
  uint32_t high = 0x7c00u;
  while (high - low > 1) {
    const uint32_t middle = (low + high) / 2;
    if (f16_pattern_value(static_cast<uint16_t>(middle)) <= magnitude) {
      low = middle;
    } else {
      high = middle;
    }
  }
  const double below = magnitude - f16_pattern_value(static_cast<uint16_t>(low));
  const double above = f16_pattern_value(static_cast<uint16_t>(low + 1)) - magnitude;
  uint32_t result = low;
  if (above < below || (above == below && (low & 1u) != 0)) result = low + 1;
  return static_cast<uint16_t>(sign | result);
}

#if EDGELM_TEST_HAS_FLOAT16
uint16_t f32_to_f16_by_compiler(float x) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(x));
}
#endif

double bf16_pattern_value(uint16_t magnitude) {
  if (magnitude == 0x7f80u) return std::ldexp(1.0, 128);  // see f16_pattern_value
  return std::bit_cast<float>(static_cast<uint32_t>(magnitude) << 16);
}

// The two candidates are the truncated pattern and the next one up; the nearer wins, ties to even.
uint16_t f32_to_bf16_by_distance(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(x)) return sign | 0x7fc0u;
  if (std::isinf(x)) return sign | 0x7f80u;
  const auto truncated = static_cast<uint16_t>((bits & 0x7fffffffu) >> 16);
  const double magnitude = std::fabs(static_cast<double>(x));
  const double below = magnitude - bf16_pattern_value(truncated);
  const double above = bf16_pattern_value(static_cast<uint16_t>(truncated + 1)) - magnitude;
  uint16_t result = truncated;
  if (above < below || (above == below && (truncated & 1u) != 0)) ++result;
  return sign | result;
}

// AssertionResult formats each streamed value on its own, so std::hex would not stick.
std::string hex(uint32_t value) {
  std::ostringstream text;
  text << "0x" << std::hex << value;
  return text.str();
}

std::string describe_float(float x) {
  std::ostringstream text;
  text << x << " (bits " << hex(std::bit_cast<uint32_t>(x)) << ")";
  return text.str();
}

// Returns a result rather than asserting, so that loops over millions of values stop at the first
// mismatch (ASSERT_TRUE at the call site) instead of reporting every one.
testing::AssertionResult f16_matches_references(float x) {
  const uint16_t actual = f32_to_f16(x);
  const uint16_t by_distance = f32_to_f16_by_distance(x);
  if (std::isnan(x)) {
    if (is_f16_nan(actual) && (actual & 0x8000u) == (by_distance & 0x8000u)) {
      return testing::AssertionSuccess();
    }
    return testing::AssertionFailure()
           << describe_float(x) << " -> " << hex(actual) << ", want a NaN of the same sign";
  }
  if (actual != by_distance) {
    return testing::AssertionFailure() << describe_float(x) << " -> " << hex(actual)
                                       << ", distance reference " << hex(by_distance);
  }
#if EDGELM_TEST_HAS_FLOAT16
  const uint16_t by_compiler = f32_to_f16_by_compiler(x);
  if (actual != by_compiler) {
    return testing::AssertionFailure() << describe_float(x) << " -> " << hex(actual)
                                       << ", _Float16 reference " << hex(by_compiler);
  }
#endif
  return testing::AssertionSuccess();
}

testing::AssertionResult bf16_matches_reference(float x) {
  const uint16_t actual = f32_to_bf16(x);
  const uint16_t expected = f32_to_bf16_by_distance(x);
  if (std::isnan(x)) {
    if (is_bf16_nan(actual) && (actual & 0x8000u) == (expected & 0x8000u)) {
      return testing::AssertionSuccess();
    }
    return testing::AssertionFailure()
           << describe_float(x) << " -> " << hex(actual) << ", want a NaN of the same sign";
  }
  if (actual != expected) {
    return testing::AssertionFailure() << describe_float(x) << " -> " << hex(actual)
                                       << ", distance reference " << hex(expected);
  }
  return testing::AssertionSuccess();
}

// Floats that sit on or next to a rounding decision of the half format, both signs.
std::vector<float> f16_edge_cases() {
  std::vector<float> values = {
      0.0f,
      std::ldexp(1.0f, -24),     // smallest subnormal
      std::ldexp(1023.0f, -24),  // largest subnormal
      std::ldexp(1.0f, -14),     // smallest normal
      std::ldexp(1023.5f, -24),  // tie between largest subnormal (odd) and 2^-14
      std::ldexp(1.0f, -25),     // tie between 0 and 2^-24: even is 0
      std::ldexp(3.0f, -25),     // tie between 2^-24 (odd) and 2^-23: goes up
      std::ldexp(5.0f, -25),     // tie between 2 * 2^-24 (even) and 3 * 2^-24: stays
      std::ldexp(1.0f, -26),     // a quarter ulp: rounds to 0
      std::ldexp(1.0f, -149),    // smallest float subnormal
      std::ldexp(1.0f, -30),
      65504.0f,   // largest half
      65519.99f,  // just under the overflow midpoint
      65520.0f,   // the midpoint: ties to even goes to infinity
      65536.0f,
      1.0e6f,
      std::numeric_limits<float>::max(),
      std::numeric_limits<float>::infinity(),
      1.0f + std::ldexp(1.0f, -11),  // tie between 1 (even) and 1 + 2^-10: stays at 1
      1.0f + std::ldexp(3.0f, -11),  // tie between 1 + 2^-10 (odd) and 1 + 2^-9: goes up
      2047.0f + 0.5f,                // tie at the top of the 1024..2048 binade
      2048.0f + 1.0f,                // tie between 2048 (even) and 2050
      2048.0f + 3.0f,                // tie between 2050 (odd) and 2052
      0.1f,
      1.0f / 3.0f,
      3.14159265f,
  };
  values.push_back(std::nextafter(std::ldexp(1.0f, -25), 0.0f));
  values.push_back(std::nextafter(std::ldexp(1.0f, -25), 1.0f));
  values.push_back(std::nextafter(65520.0f, 0.0f));
  values.push_back(std::nextafter(std::ldexp(1.0f, -14), 0.0f));
  values.push_back(std::numeric_limits<float>::denorm_min());
  values.push_back(std::numeric_limits<float>::min());
  const size_t n = values.size();
  for (size_t i = 0; i < n; ++i) values.push_back(-values[i]);
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  values.push_back(-std::numeric_limits<float>::quiet_NaN());
  values.push_back(std::bit_cast<float>(0x7f800001u));  // signalling NaN, payload below bit 13
  return values;
}

TEST(HalfTest, EveryF16PatternRoundTripsExactly) {
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    const auto h = static_cast<uint16_t>(pattern);
    ASSERT_EQ(f32_to_f16(f16_to_f32(h)), h) << "pattern " << hex(pattern);
  }
}

TEST(HalfTest, EveryBf16PatternRoundTripsExactly) {
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    const auto h = static_cast<uint16_t>(pattern);
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(h)), h) << "pattern " << hex(pattern);
  }
}

TEST(HalfTest, F16ToF32GivesTheIeeeValueOfEveryPattern) {
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    const auto h = static_cast<uint16_t>(pattern);
    const float actual = f16_to_f32(h);
    if (is_f16_nan(h)) {
      ASSERT_TRUE(std::isnan(actual)) << "pattern " << hex(pattern);
      continue;
    }
    const auto magnitude = static_cast<uint16_t>(h & 0x7fffu);
    double expected = magnitude == 0x7c00u ? std::numeric_limits<double>::infinity()
                                           : f16_pattern_value(magnitude);
    if ((h & 0x8000u) != 0) expected = -expected;
    ASSERT_EQ(static_cast<double>(actual), expected) << "pattern " << hex(pattern);
    ASSERT_EQ(std::signbit(actual), (h & 0x8000u) != 0) << "pattern " << hex(pattern);
  }
}

#if EDGELM_TEST_HAS_FLOAT16
TEST(HalfTest, ReferencesAgreeWithEachOther) {
  // The two references are only worth something if they are independent and agree.
  for (const float x : f16_edge_cases()) {
    if (std::isnan(x)) continue;
    EXPECT_EQ(f32_to_f16_by_distance(x), f32_to_f16_by_compiler(x)) << "x = " << x;
  }
}
#endif

TEST(HalfTest, F32ToF16RoundsEdgeCasesToNearestEven) {
  for (const float x : f16_edge_cases()) ASSERT_TRUE(f16_matches_references(x));

  // Spelled out, so the intent does not rest on the references alone.
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000u);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000u);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001u);
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.0f, -24)), 0x03ffu);
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400u);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000u);
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001u);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002u);
  EXPECT_EQ(f32_to_f16(std::ldexp(5.0f, -25)), 0x0002u);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bffu);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bffu);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);
  EXPECT_EQ(f32_to_f16(-65520.0f), 0xfc00u);
  EXPECT_EQ(f32_to_f16(1.0e6f), 0x7c00u);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02u);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00u);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00u);
}

TEST(HalfTest, F32ToF16KeepsNanPayloadAndSign) {
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0x7fc00000u)), 0x7e00u);
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0xffc00000u)), 0xfe00u);
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0x7f802000u)), 0x7c01u);
  // A payload that lives only below the bits a half keeps must still give a NaN, not infinity.
  EXPECT_TRUE(is_f16_nan(f32_to_f16(std::bit_cast<float>(0x7f800001u))));
  EXPECT_TRUE(is_f16_nan(f32_to_f16(std::bit_cast<float>(0xff800fffu))));
}

TEST(HalfTest, F32ToF16MatchesReferencesOnEveryMidpointBetweenHalves) {
  // For every pair of adjacent positive halves: the midpoint (exactly representable in float, it
  // has 12 significant bits) and its two float neighbours, with both signs.
  for (uint32_t pattern = 0; pattern < 0x7c00u; ++pattern) {
    const auto low = static_cast<float>(f16_pattern_value(static_cast<uint16_t>(pattern)));
    const auto high = static_cast<float>(f16_pattern_value(static_cast<uint16_t>(pattern + 1)));
    const float middle = low + (high - low) / 2;
    for (const float x : {low, middle, std::nextafter(middle, 0.0f),
                          std::nextafter(middle, std::numeric_limits<float>::infinity())}) {
      ASSERT_TRUE(f16_matches_references(x));
      ASSERT_TRUE(f16_matches_references(-x));
    }
  }
}

TEST(HalfTest, F32ToF16MatchesReferencesOnRandomFloats) {
  std::mt19937 rng(1234);
  // Uniform bit patterns are mostly far outside the half range, so half of the samples draw the
  // exponent from the range where halves are normal, subnormal or just overflow.
  std::uniform_int_distribution<int> exponent(-28, 17);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  constexpr int kSamples = 1 << 21;
  for (int i = 0; i < kSamples; ++i) {
    ASSERT_TRUE(f16_matches_references(std::bit_cast<float>(static_cast<uint32_t>(rng()))));
    float x = std::ldexp(mantissa(rng), exponent(rng));
    if ((rng() & 1u) != 0) x = -x;
    ASSERT_TRUE(f16_matches_references(x));
  }
}

TEST(HalfTest, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80u);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80u);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82u);  // tie, odd goes up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f807fffu)), 0x3f80u);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80u);  // rounds past the top
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7fu);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000u);  // subnormal tie
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002u);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7fc00000u)), 0x7fc0u);
  // NaN payloads only below the kept bits must not turn into infinity.
  EXPECT_TRUE(is_bf16_nan(f32_to_bf16(std::bit_cast<float>(0x7f800001u))));
  EXPECT_TRUE(is_bf16_nan(f32_to_bf16(std::bit_cast<float>(0xff80ffffu))));
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0xff80ffffu)) & 0x8000u, 0x8000u);
}

TEST(HalfTest, F32ToBf16MatchesReferenceOnTiesAndRandomFloats) {
  for (uint32_t top = 0; top <= 0xffffu; ++top) {
    for (const uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      ASSERT_TRUE(bf16_matches_reference(std::bit_cast<float>(top << 16 | low)));
    }
  }
  std::mt19937 rng(99);
  constexpr int kSamples = 1 << 21;
  for (int i = 0; i < kSamples; ++i) {
    ASSERT_TRUE(bf16_matches_reference(std::bit_cast<float>(static_cast<uint32_t>(rng()))));
  }
}

TEST(DTypeTest, InfoDescribesEachType) {
  struct Expected {
    DType dtype;
    const char* name;
    int64_t block_size;
    size_t block_bytes;
    bool is_quantized;
    bool is_float;
    int64_t row_group = 1;
    ActivationFormat activation = ActivationFormat::F32;
  };
  using A = ActivationFormat;
  const Expected table[] = {
      {DType::F32, "f32", 1, 4, false, true},
      {DType::F16, "f16", 1, 2, false, true},
      {DType::BF16, "bf16", 1, 2, false, true},
      {DType::Q8_0, "q8_0", 32, 34, true, false, 1, A::Q8_0},
      {DType::Q4_0, "q4_0", 32, 18, true, false, 1, A::Q8_0},
      {DType::Q4_1, "q4_1", 32, 20, true, false, 1, A::Q8_1},
      {DType::Q5_0, "q5_0", 32, 22, true, false, 1, A::Q8_0},
      {DType::Q5_1, "q5_1", 32, 24, true, false, 1, A::Q8_1},
      {DType::I32, "i32", 1, 4, false, false},
      {DType::Q4_0x8, "q4_0x8", 32, 18, true, false, 8, A::Q8_0},
      {DType::Q8_0x8, "q8_0x8", 32, 34, true, false, 8, A::Q8_0},
      {DType::F16x4, "f16x4", 16, 32, false, true, 4},
      // The K-quants' super-blocks (GGML's block_q4_K, block_q5_K, block_q6_K).
      {DType::Q4_K, "q4_k", 256, 144, true, false, 1, A::Q8_K},
      {DType::Q5_K, "q5_k", 256, 176, true, false, 1, A::Q8_K},
      {DType::Q6_K, "q6_k", 256, 210, true, false, 1, A::Q8_K},
      // Q4_K and Q6_K repacked at load: eight rows per record, the same bytes per row.
      {DType::Q4_Kx8, "q4_kx8", 256, 144, true, false, 8, A::Q8_K},
      {DType::Q6_Kx8, "q6_kx8", 256, 210, true, false, 8, A::Q8_K},
  };
  static_assert(std::size(table) == kDTypeCount, "one row per DType");
  for (const Expected& e : table) {
    const DTypeInfo& info = dtype_info(e.dtype);
    EXPECT_STREQ(info.name, e.name);
    EXPECT_STREQ(dtype_name(e.dtype), e.name);
    EXPECT_EQ(info.block_size, e.block_size) << e.name;
    EXPECT_EQ(dtype_block_size(e.dtype), e.block_size) << e.name;
    EXPECT_EQ(info.block_bytes, e.block_bytes) << e.name;
    EXPECT_EQ(dtype_block_bytes(e.dtype), e.block_bytes) << e.name;
    EXPECT_EQ(info.is_quantized, e.is_quantized) << e.name;
    EXPECT_EQ(dtype_is_quantized(e.dtype), e.is_quantized) << e.name;
    EXPECT_EQ(info.is_float, e.is_float) << e.name;
    EXPECT_EQ(dtype_row_group(e.dtype), e.row_group) << e.name;
    EXPECT_EQ(info.activation, e.activation) << e.name;
    // Every plain stored type decodes through its row; layouts and I32 have none.
    const bool decodes = e.row_group == 1 && e.dtype != DType::I32;
    EXPECT_EQ(info.to_f32 != nullptr, decodes) << e.name;
  }
  EXPECT_THROW(dtype_info(DType::Count), Error);
}

TEST(DTypeTest, RowBytes) {
  EXPECT_EQ(dtype_row_bytes(DType::F32, 7), 28u);
  EXPECT_EQ(dtype_row_bytes(DType::F16, 7), 14u);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 3), 6u);
  EXPECT_EQ(dtype_row_bytes(DType::I32, 5), 20u);
  EXPECT_EQ(dtype_row_bytes(DType::F32, 0), 0u);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 32), 34u);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 4096), 128u * 34u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 0), 0u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_1, 64), 40u);
  EXPECT_EQ(dtype_row_bytes(DType::Q5_0, 64), 44u);
  EXPECT_EQ(dtype_row_bytes(DType::Q5_1, 576), 18u * 24u);
  EXPECT_THROW(dtype_row_bytes(DType::Q5_1, 48), Error);
  EXPECT_THROW(dtype_row_bytes(DType::Q4_0, 33), Error);
  EXPECT_THROW(dtype_row_bytes(DType::Q4_0, 16), Error);
  EXPECT_THROW(dtype_row_bytes(DType::Q8_0, 100), Error);
  EXPECT_THROW(dtype_row_bytes(DType::F32, -1), Error);
}

TEST(DTypeTest, UnpackedNamesTheStoredTypeOfALayout) {
  EXPECT_EQ(dtype_unpacked(DType::Q4_0x8), DType::Q4_0);
  EXPECT_EQ(dtype_unpacked(DType::Q8_0x8), DType::Q8_0);
  EXPECT_EQ(dtype_unpacked(DType::F16x4), DType::F16);
  EXPECT_EQ(dtype_unpacked(DType::Q4_Kx8), DType::Q4_K);
  EXPECT_EQ(dtype_unpacked(DType::Q6_Kx8), DType::Q6_K);
  for (DType stored : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                       DType::Q5_0, DType::Q5_1, DType::I32}) {
    EXPECT_EQ(dtype_unpacked(stored), stored) << dtype_name(stored);
    EXPECT_EQ(dtype_row_group(stored), 1) << dtype_name(stored);
  }
}

TEST(DTypeTest, FromNameRoundTripsAndRejectsUnknownNames) {
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_EQ(dtype_from_name(dtype_name(dtype)), dtype) << dtype_name(dtype);
  }
  EXPECT_EQ(dtype_from_name("Q4_0"), DType::Q4_0);
  EXPECT_EQ(dtype_from_name("BF16"), DType::BF16);
  EXPECT_EQ(dtype_from_name("Q5_1"), DType::Q5_1);
  for (const char* unknown :
       {"", "f", "f64", "q4_2", "q4_", "q8_1", "f32 ", " f32", "i32x", "float"}) {
    EXPECT_EQ(dtype_from_name(unknown), std::nullopt) << "'" << unknown << "'";
  }
}

}  // namespace
}  // namespace edgelm
