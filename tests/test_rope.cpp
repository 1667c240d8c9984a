// Rotary embedding: the inverse frequencies (plain and llama3-scaled) against values worked out in
// double here, and the CPU rope op against rotations computed by hand.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/rope.h"
#include "core/tensor.h"

namespace edgelm {
namespace {

cpu::CpuBackend make_backend() {
  return cpu::CpuBackend(cpu::CpuOptions{.n_threads = 2, .isa = {}, .memory = nullptr});
}

Tensor make_f32(Backend& backend, Shape shape, const std::vector<float>& values) {
  Tensor t = Tensor::empty(backend.memory(), DType::F32, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Tensor make_i32(Backend& backend, const std::vector<int32_t>& values) {
  Tensor t =
      Tensor::empty(backend.memory(), DType::I32, Shape{static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<int32_t>());
  return t;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

RopeParams llama32_params() {
  RopeParams params;
  params.head_dim = 64;
  params.theta = 500000.0f;
  params.scaling.type = RopeScaling::Type::Llama3;
  params.scaling.factor = 32.0f;
  params.scaling.low_freq_factor = 1.0f;
  params.scaling.high_freq_factor = 4.0f;
  params.scaling.original_max_position_embeddings = 8192;
  return params;
}

// Hugging Face's _compute_llama3_parameters, in double, for the Llama 3.2 parameters.
std::vector<double> llama32_inv_freq_in_double() {
  constexpr double kTheta = 500000.0;
  constexpr int kHeadDim = 64;
  constexpr double kFactor = 32.0;
  constexpr double kLowFreqFactor = 1.0;
  constexpr double kHighFreqFactor = 4.0;
  constexpr double kOldContext = 8192.0;
  const double low_freq_wavelen = kOldContext / kLowFreqFactor;
  const double high_freq_wavelen = kOldContext / kHighFreqFactor;
  std::vector<double> inv_freq;
  for (int i = 0; i < kHeadDim / 2; ++i) {
    const double f = 1.0 / std::pow(kTheta, 2.0 * i / kHeadDim);
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_freq_wavelen) {
      inv_freq.push_back(f / kFactor);
    } else if (wavelen < high_freq_wavelen) {
      inv_freq.push_back(f);
    } else {
      const double smooth =
          (kOldContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      inv_freq.push_back((1.0 - smooth) * f / kFactor + smooth * f);
    }
  }
  return inv_freq;
}

TEST(RopeInvFreqTest, UnscaledIsInverseThetaPowers) {
  RopeParams params;
  params.head_dim = 8;
  params.theta = 10000.0f;
  // 10000^(-2i/8) = 10^-i.
  const double expected[] = {1.0, 0.1, 0.01, 0.001};
  const std::vector<float> inv_freq = rope_inv_freq(params);
  ASSERT_EQ(inv_freq.size(), 4u);
  EXPECT_EQ(inv_freq[0], 1.0f);
  // pow and the division each round in float: a few ulps at most.
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(inv_freq[i], expected[i], 1e-6 * expected[i]) << i;

  params.head_dim = 4;
  params.theta = 500000.0f;
  const std::vector<float> two = rope_inv_freq(params);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], 1.0f);
  EXPECT_NEAR(two[1], 1.0 / std::sqrt(500000.0), 1e-6 / std::sqrt(500000.0));
}

TEST(RopeInvFreqTest, Llama3ScalingMatchesTheHuggingFaceFormula) {
  const std::vector<float> actual = rope_inv_freq(llama32_params());
  const std::vector<double> expected = llama32_inv_freq_in_double();
  ASSERT_EQ(actual.size(), 32u);
  // The library evaluates the same formula in float32: a handful of roundings, each 2^-24 relative.
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6 * expected[i]) << "pair " << i;
  }

  // The three regimes, spelled out. The wavelength of pair i is 2π 500000^(i/32): below
  // 8192/4 = 2048 for i <= 14, above 8192 for i >= 18, smoothly interpolated in between.
  EXPECT_EQ(actual[0], 1.0f);
  const double last_unscaled = 1.0 / std::pow(500000.0, 62.0 / 64.0);
  EXPECT_NEAR(actual[31], last_unscaled / 32.0, 1e-6 * last_unscaled / 32.0);
  const double unscaled_14 = 1.0 / std::pow(500000.0, 28.0 / 64.0);
  EXPECT_NEAR(actual[14], unscaled_14, 1e-6 * unscaled_14);
  int smoothed = 0;
  for (int i = 0; i < 32; ++i) {
    const double f = 1.0 / std::pow(500000.0, 2.0 * i / 64.0);
    if (actual[i] > f / 32.0 * 1.01 && actual[i] < f * 0.99) ++smoothed;
  }
  EXPECT_EQ(smoothed, 3);  // pairs 15, 16 and 17
}

TEST(RopeInvFreqTest, RejectsBadParameters) {
  RopeParams params;
  params.head_dim = 7;
  EXPECT_THROW(rope_inv_freq(params), Error);
  params.head_dim = 0;
  EXPECT_THROW(rope_inv_freq(params), Error);
  params.head_dim = 8;
  params.theta = 0.0f;
  EXPECT_THROW(rope_inv_freq(params), Error);
}

TEST(RopeTest, PositionZeroIsTheIdentity) {
  cpu::CpuBackend backend = make_backend();
  const std::vector<float> values = random_values(3 * 4 * 64, 7);
  const Tensor x = make_f32(backend, Shape{3, 4, 64}, values);
  const Tensor positions = make_i32(backend, {0, 0, 0});
  const std::vector<float> freq = rope_inv_freq(llama32_params());
  const Tensor inv_freq = make_f32(backend, Shape{32}, freq);
  const Tensor out = Tensor::empty(backend.memory(), DType::F32, x.shape());
  backend.rope(x, positions, inv_freq, out);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(out.data<float>()[i], values[i]) << i;
}

// Rotates the pairs (i, i + 4) of an 8-wide head at angle position * f_i, with f_i = 10^-i the
// frequencies of theta 10000 worked out by hand, all in double.
std::vector<double> rotate_by_hand(const std::vector<float>& x, int position) {
  const double frequencies[] = {1.0, 0.1, 0.01, 0.001};
  std::vector<double> out(8);
  for (int i = 0; i < 4; ++i) {
    const double angle = position * frequencies[i];
    out[i] = x[i] * std::cos(angle) - x[i + 4] * std::sin(angle);
    out[i + 4] = x[i + 4] * std::cos(angle) + x[i] * std::sin(angle);
  }
  return out;
}

TEST(RopeTest, SingleHeadMatchesRotationByHand) {
  cpu::CpuBackend backend = make_backend();
  RopeParams params;
  params.head_dim = 8;
  params.theta = 10000.0f;
  const Tensor inv_freq = make_f32(backend, Shape{4}, rope_inv_freq(params));
  const std::vector<float> values = {1.0f, -2.0f, 3.0f, 0.5f, -1.5f, 4.0f, 0.25f, 2.0f};
  for (const int position : {7, 1000}) {
    const Tensor x = make_f32(backend, Shape{1, 1, 8}, values);
    const Tensor out = Tensor::empty(backend.memory(), DType::F32, x.shape());
    backend.rope(x, make_i32(backend, {position}), inv_freq, out);
    const std::vector<double> expected = rotate_by_hand(values, position);
    const double frequencies[] = {1.0, 0.1, 0.01, 0.001};
    for (int i = 0; i < 8; ++i) {
      const int pair = i % 4;
      const double norm = std::hypot(values[pair], values[pair + 4]);
      // The op forms the angle in float32 from a float32 frequency: the frequency is within an
      // ulp of 10^-i and the product rounds by half an ulp, so the angle is off by at most
      // 1.5 * 2^-23 of itself, which moves each rotated value by that many radians times the
      // pair's norm. 2^-22 more covers rounding the result to float.
      const double angle = position * frequencies[pair];
      const double tolerance = norm * (angle * 0x1p-22 + 0x1p-22);
      EXPECT_NEAR(out.data<float>()[i], expected[i], tolerance)
          << "position " << position << " element " << i;
    }
  }
}

TEST(RopeTest, ManyTokensAndHeadsMatchTheDocumentedFloatAngle) {
  cpu::CpuBackend backend = make_backend();
  const std::vector<float> freq = rope_inv_freq(llama32_params());
  const Tensor inv_freq = make_f32(backend, Shape{32}, freq);
  const std::vector<int32_t> positions = {0, 1, 7, 1000, 8191, 131071};
  const int64_t n_tokens = static_cast<int64_t>(positions.size());
  const int64_t n_heads = 3;
  const int64_t head_dim = 64;
  const std::vector<float> values =
      random_values(static_cast<size_t>(n_tokens * n_heads * head_dim), 11);
  const Tensor x = make_f32(backend, Shape{n_tokens, n_heads, head_dim}, values);
  const Tensor out = Tensor::empty(backend.memory(), DType::F32, x.shape());
  backend.rope(x, make_i32(backend, positions), inv_freq, out);
  const float* result = out.data<float>();
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t base = (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < head_dim / 2; ++i) {
        // Backend::rope specifies the angle as float(position) * inv_freq[i] in float32.
        const double angle = static_cast<float>(positions[t]) * freq[i];
        const double first = values[base + i];
        const double second = values[base + i + 32];
        const double norm = std::hypot(first, second);
        // Only the rounding of sin, cos and the result to float remains: 1e-6 of the norm.
        EXPECT_NEAR(result[base + i], first * std::cos(angle) - second * std::sin(angle),
                    1e-6 * norm)
            << "token " << t << " head " << h << " pair " << i;
        EXPECT_NEAR(result[base + i + 32], second * std::cos(angle) + first * std::sin(angle),
                    1e-6 * norm)
            << "token " << t << " head " << h << " pair " << i;
      }
    }
  }
}

TEST(RopeTest, PreservesTheNormOfEveryPair) {
  cpu::CpuBackend backend = make_backend();
  const std::vector<float> freq = rope_inv_freq(llama32_params());
  const Tensor inv_freq = make_f32(backend, Shape{32}, freq);
  const std::vector<float> values = random_values(4 * 2 * 64, 5);
  const Tensor x = make_f32(backend, Shape{4, 2, 64}, values);
  const Tensor out = Tensor::empty(backend.memory(), DType::F32, x.shape());
  backend.rope(x, make_i32(backend, {3, 77, 4096, 100000}), inv_freq, out);
  for (int64_t row = 0; row < 8; ++row) {
    for (int64_t i = 0; i < 32; ++i) {
      const int64_t a = row * 64 + i;
      const int64_t b = a + 32;
      const double before = std::hypot(values[a], values[b]);
      const double after = std::hypot(out.data<float>()[a], out.data<float>()[b]);
      EXPECT_NEAR(after, before, 1e-6 * before) << "row " << row << " pair " << i;
    }
  }
}

TEST(RopeTest, OutputMayAliasInput) {
  cpu::CpuBackend backend = make_backend();
  const Tensor inv_freq = make_f32(backend, Shape{32}, rope_inv_freq(llama32_params()));
  const std::vector<float> values = random_values(5 * 3 * 64, 9);
  const Tensor positions = make_i32(backend, {0, 5, 17, 300, 9000});
  const Tensor x = make_f32(backend, Shape{5, 3, 64}, values);
  const Tensor separate = Tensor::empty(backend.memory(), DType::F32, x.shape());
  backend.rope(x, positions, inv_freq, separate);
  backend.rope(x, positions, inv_freq, x);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(x.data<float>()[i], separate.data<float>()[i]) << i;
  }
}

TEST(RopeTest, RejectsMismatchedShapes) {
  cpu::CpuBackend backend = make_backend();
  Memory& memory = backend.memory();
  const Tensor x = Tensor::empty(memory, DType::F32, Shape{2, 2, 8});
  const Tensor out = Tensor::empty(memory, DType::F32, Shape{2, 2, 8});
  const Tensor positions = make_i32(backend, {1, 2});
  const Tensor inv_freq = Tensor::empty(memory, DType::F32, Shape{4});
  for (int i = 0; i < 4; ++i) inv_freq.data<float>()[i] = 1.0f;
  EXPECT_NO_THROW(backend.rope(x, positions, inv_freq, out));

  EXPECT_THROW(backend.rope(x, positions, Tensor::empty(memory, DType::F32, Shape{5}), out), Error);
  EXPECT_THROW(backend.rope(x, positions, Tensor::empty(memory, DType::F32, Shape{3}), out), Error);
  EXPECT_THROW(backend.rope(x, positions, Tensor::empty(memory, DType::F32, Shape{8}), out), Error);
  EXPECT_THROW(backend.rope(x, make_i32(backend, {1, 2, 3}), inv_freq, out), Error);
  EXPECT_THROW(backend.rope(x, Tensor::empty(memory, DType::F32, Shape{2}), inv_freq, out), Error);
  EXPECT_THROW(
      backend.rope(x, positions, inv_freq, Tensor::empty(memory, DType::F32, Shape{2, 2, 6})),
      Error);
  const Tensor odd = Tensor::empty(memory, DType::F32, Shape{2, 2, 7});
  EXPECT_THROW(backend.rope(odd, positions, Tensor::empty(memory, DType::F32, Shape{3}), odd),
               Error);
  const Tensor flat = Tensor::empty(memory, DType::F32, Shape{2, 16});
  EXPECT_THROW(backend.rope(flat, positions, inv_freq, flat), Error);
}

}  // namespace
}  // namespace edgelm
