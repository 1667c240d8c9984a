// What the tests of the whole model on OpenCL against the CPU backend share (test_opencl.cpp,
// test_hybrid.cpp): the device check, the relative logit difference, the weight x KV types they
// run and the prompt they feed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

#if EDGELM_HAVE_OPENCL
#include "backends/opencl/device.h"
#endif

namespace edgelm::test {

inline bool have_opencl_device() {
#if EDGELM_HAVE_OPENCL
  return opencl::any_device();
#else
  return false;
#endif
}

// Skips the test without an OpenCL device, or fails it when EDGELM_REQUIRE_OPENCL is set (the test
// scripts set it when the build has OpenCL, so a broken ICD fails CI instead of skipping).
#define REQUIRE_OPENCL_DEVICE()                                                  \
  do {                                                                           \
    if (!::edgelm::test::have_opencl_device()) {                                 \
      if (std::getenv("EDGELM_REQUIRE_OPENCL") != nullptr) {                     \
        FAIL() << "EDGELM_REQUIRE_OPENCL is set but no OpenCL device was found"; \
      }                                                                          \
      GTEST_SKIP() << "no OpenCL device";                                        \
    }                                                                            \
  } while (0)

// max |a - b| / max |b|.
inline double max_relative_diff(std::span<const float> a, std::span<const float> b) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
    scale = std::max(scale, std::fabs(double{b[i]}));
  }
  return worst / scale;
}

// The bound on max_relative_diff between the logits of OpenCL and CPU steps:
// - float weights: both backends compute the same products in different float orders (~1e-7),
//   but an F16 cache rounds K/V, and an input that differs in its last bit can round to the
//   neighbouring half (2^-11 apart); measured up to 1.6e-4, bound 1e-3.
// - quantized weights: both round activations to 8 bits per block, a discontinuous step; where a
//   value sits on a rounding boundary the tiny float differences move it by a whole step (1/127 of
//   the block's largest value), which reaches the logits as ~1e-2; measured up to 2.2e-2, bound
//   5e-2.
// A wrong kernel gives differences of order 1.
inline double logit_tolerance(DType weight_type) {
  return dtype_is_quantized(weight_type) ? 5e-2 : 1e-3;
}

// A weight type (the tiny F32 presets converted on load) with a KV cache type.
struct ModelCase {
  DType weight_type;
  DType kv_type;
};

inline constexpr ModelCase kModelCases[] = {
    {DType::F32, DType::F32},  {DType::F32, DType::F16},  {DType::F16, DType::F32},
    {DType::F16, DType::F16},  {DType::Q8_0, DType::F32}, {DType::Q8_0, DType::F16},
    {DType::Q4_0, DType::F32}, {DType::Q4_0, DType::F16}, {DType::Q4_1, DType::F32},
    {DType::Q4_1, DType::F16}, {DType::Q5_0, DType::F32}, {DType::Q5_1, DType::F32},
};

// The test name of a case: "<weights>_weights_<kv>_kv".
inline std::string model_case_name(const ::testing::TestParamInfo<ModelCase>& info) {
  return std::string(dtype_name(info.param.weight_type)) + "_weights_" +
         dtype_name(info.param.kv_type) + "_kv";
}

// The 40-token prompt of the model tests (ids spread over the vocabulary).
inline std::vector<int32_t> test_prompt(int64_t vocab) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37 + 11) % static_cast<int32_t>(vocab - 1));
  return prompt;
}

}  // namespace edgelm::test
