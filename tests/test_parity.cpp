// The parity library (eval/parity.h): the step rule on hand-made logits, and two configurations of
// the tiny models run in lockstep: every backend and kernel table against cpu:portable agree
// within the bound, and a planted wrong kernel row is a fault located at its layer.
#include "eval/parity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/error.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "tests/opencl_test_util.h"
#include "tests/temp_dir.h"

namespace edgelm {
namespace {

TEST(ParityRule, ComparesTwoRows) {
  const std::vector<float> a = {1.0f, 3.0f, 2.5f, -1.0f};
  const std::vector<float> b = {1.5f, 2.9f, 2.5f, -1.0f};
  const LogitDiff d = compare_logits(a, b);
  EXPECT_DOUBLE_EQ(d.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(d.max_rel, 0.5 / 3.0);
  EXPECT_EQ(d.top_a, 1);
  EXPECT_EQ(d.top_b, 1);
  EXPECT_DOUBLE_EQ(d.margin_a, 0.5);
  EXPECT_NEAR(d.margin_b, 0.4, 1e-6);
  // KL(p_a || p_b) from its definition, in double.
  double za = 0, zb = 0, kl = 0;
  for (size_t i = 0; i < a.size(); ++i) za += std::exp(double{a[i]}), zb += std::exp(double{b[i]});
  for (size_t i = 0; i < a.size(); ++i) {
    const double pa = std::exp(double{a[i]}) / za, pb = std::exp(double{b[i]}) / zb;
    kl += pa * std::log(pa / pb);
  }
  EXPECT_NEAR(d.kl, kl, 1e-12);
  EXPECT_TRUE(d.finite);
  EXPECT_DOUBLE_EQ(compare_logits(a, a).kl, 0.0);
  EXPECT_THROW(compare_logits(a, std::span<const float>(b).first(3)), Error);
}

TEST(ParityRule, NonFiniteIsAFault) {
  const std::vector<float> a = {1.0f, 2.0f};
  const std::vector<float> b = {std::numeric_limits<float>::quiet_NaN(), 2.0f};
  const LogitDiff d = compare_logits(a, b);
  EXPECT_FALSE(d.finite);
  EXPECT_EQ(judge_step(d, {.logit = 1.0}), StepVerdict::NonFinite);
  EXPECT_TRUE(is_fault(StepVerdict::NonFinite));
}

// Different best tokens are a near tie when a's margin is within twice the bound, a fault above;
// a difference beyond the bound is a fault whatever the tokens.
TEST(ParityRule, TieRule) {
  const ParityBound bound{.logit = 0.1};
  const std::vector<float> a = {2.0f, 1.85f, 0.0f};
  // margin 0.15 <= 0.2, both logits within the bound.
  EXPECT_EQ(judge_step(compare_logits(a, std::vector<float>{1.92f, 1.94f, 0.0f}), bound),
            StepVerdict::Explained);
  // margin 0.25: no pair within the bound swaps it.
  const std::vector<float> wide = {2.0f, 1.75f, 0.0f};
  EXPECT_EQ(judge_step(compare_logits(wide, std::vector<float>{1.7f, 1.8f, 0.0f}), bound),
            StepVerdict::Unexplained);
  // The same best token, one logit beyond the bound.
  EXPECT_EQ(judge_step(compare_logits(wide, std::vector<float>{2.0f, 1.75f, 0.2f}), bound),
            StepVerdict::BoundExceeded);
  // A near tie whose logits moved beyond the bound: the bound decides.
  EXPECT_EQ(judge_step(compare_logits(a, std::vector<float>{1.7f, 1.9f, 0.0f}), bound),
            StepVerdict::BoundExceeded);
  EXPECT_EQ(judge_step(compare_logits(a, std::vector<float>{2.05f, 1.8f, 0.05f}), bound),
            StepVerdict::Agree);
  EXPECT_FALSE(is_fault(StepVerdict::Explained));
  EXPECT_TRUE(is_fault(StepVerdict::Unexplained));
}

// Two free-running runs are judged up to and including their first different token.
TEST(ParityRule, GreedyLogitsStopAtTheFirstDivergence) {
  const std::vector<float> a = {1, 0, 0, 1, 1, 0.95f, 1, 0};
  const std::vector<float> b = {1, 0, 0, 1, 0.95f, 1, 0, 1};
  const auto steps = compare_greedy_logits(a, b, 2, {.logit = 0.1});
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].verdict, StepVerdict::Agree);
  EXPECT_EQ(steps[2].verdict, StepVerdict::Explained);  // a's margin 0.05, logits 0.05 apart
  EXPECT_EQ(steps[2].index, 2);
  EXPECT_THROW(compare_greedy_logits(a, std::span<const float>(a).first(6), 2, {.logit = 0.1}),
               Error);
  EXPECT_THROW(compare_greedy_logits(a, b, 3, {.logit = 0.1}), Error);
}

TEST(ParityRule, BoundsFollowTheActivationRounding) {
  EXPECT_LT(parity_bound(DType::F32, DType::F16).logit,
            parity_bound(DType::F32, DType::Q8_0).logit);
  EXPECT_EQ(parity_bound(DType::Q4_1, DType::F32).logit,
            parity_bound(DType::Q4_K, DType::Q6_K).logit);
}

// One side of a model run.
struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Backend> faulty;
  std::unique_ptr<LlamaModel> model;
  std::optional<KvCache> cache;
};

Loaded load(const std::string& path, const std::string& backend_name, DType kv_type,
            int64_t fault_layer = -1) {
  Loaded side;
  side.backend = create_backend(backend_name, {.n_threads = 2});
  const auto converter = create_weight_converter(backend_name, {.n_threads = 2});
  LoadedModel loaded = load_llama(path, *side.backend, {.converter = converter.get()});
  Backend* backend = side.backend.get();
  if (fault_layer >= 0) {
    side.faulty = plant_fault(*side.backend, loaded.weights.layers[fault_layer].w_down, 3, 4.0f);
    backend = side.faulty.get();
  }
  side.model = std::make_unique<LlamaModel>(*backend, std::move(loaded.config),
                                            std::move(loaded.weights), 16);
  side.cache.emplace(side.model->make_cache(128, kv_type));
  return side;
}

// The tiny models' logits are a few units wide, far below a real model's, so their runs are
// judged by a bound of their own, above the largest difference measured between any backend and
// cpu:portable on them (8-bit x: 0.107 per logit and 0.035 per layer output on the Llama ones,
// 0.357 per logit on tiny-qwen2, whose biases widen its logits; F16 weights: 9.2e-5 and 3.0e-5;
// F32: 2.7e-6 and 9.3e-7) and between generate and generate_hybrid's schedules
// (tests/cli/generate_hybrid.sh; F32 weights and an F16 cache, where a K or V that differs in
// its last bit can round to the neighbouring half: 3.1e-4).
ParityBound tiny_bound(DType weights) {
  return parity_bound(weights, weights).logit > 1.0 ? ParityBound{.logit = 0.6, .hidden = 0.1}
                                                    : ParityBound{.logit = 1e-3, .hidden = 3e-4};
}

ParitySummary run_pair(Loaded& a, Loaded& b, const ParityBound& bound) {
  ParitySummary summary;
  ParityRun run(*a.model, *a.cache, *b.model, *b.cache,
                {.bound = bound, .layers = true, .batch = 16});
  const std::vector<int32_t> text = test::test_prompt(a.model->config().vocab_size);
  const auto on_step = [&](const ParityStep& s) { summary.add(s); };
  run.teacher_forced(text, on_step);
  a.cache->clear();
  b.cache->clear();
  const std::vector<int32_t> chosen =
      run.greedy(std::span<const int32_t>(text).first(7), 24, on_step);
  EXPECT_EQ(chosen.size(), 24u);
  return summary;
}

class ParityTiny : public ::testing::TestWithParam<test::ModelCase> {};

// Every backend name of this machine (every kernel table, OpenCL where present) against the
// oracle: no fault over 39 teacher-forced and 24 greedy steps.
TEST_P(ParityTiny, EveryBackendAgreesWithThePortableKernels) {
  const test::ModelCase c = GetParam();
  testing::TempDir dir("edgelm-parity");
  const std::string path = make_model(
      {.format = "gguf", .quant = c.weight_type, .seed = 5, .out_dir = dir.path().string()});
  const ParityBound bound = tiny_bound(c.weight_type);
  Loaded oracle = load(path, "cpu:portable", c.kv_type);
  int compared = 0;
  for (const std::string& name : backend_names()) {
    if (name == "cpu:portable") continue;
    SCOPED_TRACE(name);
    Loaded other = load(path, name, c.kv_type);
    oracle.cache->clear();
    const ParitySummary s = run_pair(oracle, other, bound);
    EXPECT_EQ(s.faults, 0) << "first fault at " << (s.first_fault ? s.first_fault->index : -1)
                           << ": max |a-b| " << s.max_abs;
    EXPECT_EQ(s.steps, 39 + 24);
    ++compared;
  }
  EXPECT_GT(compared, 0);
  // OpenCL is among them wherever the scripts require a device (EDGELM_REQUIRE_OPENCL).
  if (std::getenv("EDGELM_REQUIRE_OPENCL") != nullptr) {
    const auto names = backend_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "opencl"), names.end());
  }
}

INSTANTIATE_TEST_SUITE_P(WeightAndKvTypes, ParityTiny,
                         ::testing::Values(test::ModelCase{DType::F32, DType::F32},
                                           test::ModelCase{DType::F16, DType::F16},
                                           test::ModelCase{DType::Q8_0, DType::F16},
                                           test::ModelCase{DType::Q4_1, DType::F16}),
                         test::model_case_name);

// A wrong kernel row (one output of layer 1's down projection off by 4) on one side: faults, and
// the layer outputs name layer 1 as the first that departs, against the same backend and against
// the oracle, on the CPU and on OpenCL (whose shared buffers the fault writes from the host).
TEST(ParityTiny, PlantedFaultIsAFaultAtItsLayer) {
  testing::TempDir dir("edgelm-parity-fault");
  const std::string path = make_model({.preset = "tiny-odd-heads",
                                       .format = "gguf",
                                       .quant = DType::Q8_0,
                                       .out_dir = dir.path().string()});
  std::vector<std::string> faulty = {"cpu"};
  if (test::have_opencl_device()) faulty.push_back("opencl");
  for (const std::string& b_name : faulty) {
    for (const std::string& a_name : {b_name, std::string("cpu:portable")}) {
      SCOPED_TRACE(a_name + " against " + b_name + " with the fault");
      Loaded a = load(path, a_name, DType::F16);
      Loaded b = load(path, b_name, DType::F16, /*fault_layer=*/1);
      const ParitySummary s = run_pair(a, b, tiny_bound(DType::Q8_0));
      EXPECT_GT(s.faults, 0);
      EXPECT_EQ(s.first_departing_layer, 1);
      // Without the fault, the same pair agrees.
      Loaded clean = load(path, b_name, DType::F16);
      a.cache->clear();
      EXPECT_EQ(run_pair(a, clean, tiny_bound(DType::Q8_0)).faults, 0);
    }
  }
}

// Qwen2 (q/k/v biases) and Qwen3 (per-head q/k norms, head_dim 32 beside hidden 64) on every
// backend against the oracle, from the GGUF fixtures of tests/fixtures/gguf (whose logits
// test_gguf_independent checks against transformers').
TEST(ParityTiny, QwenOnEveryBackend) {
  for (const char* file : {"tiny-qwen2-q8_0.gguf", "tiny-qwen2-f32.gguf", "tiny-qwen3-q8_0.gguf",
                           "tiny-qwen3-f16.gguf"}) {
    SCOPED_TRACE(file);
    const std::string path = std::string(EDGELM_FIXTURE_DIR) + "/gguf/" + file;
    const bool rounds_x = std::string(file).find("q8_0") != std::string::npos;
    const ParityBound bound = tiny_bound(rounds_x ? DType::Q8_0 : DType::F32);
    Loaded oracle = load(path, "cpu:portable", DType::F16);
    for (const std::string& name : backend_names()) {
      if (name == "cpu:portable") continue;
      SCOPED_TRACE(name);
      Loaded other = load(path, name, DType::F16);
      oracle.cache->clear();
      const ParitySummary s = run_pair(oracle, other, bound);
      EXPECT_EQ(s.faults, 0) << "max |a-b| " << s.max_abs;
    }
  }
}

TEST(ParityTiny, RefusesModelsOfDifferentShapes) {
  testing::TempDir dir("edgelm-parity-shapes");
  const std::string p1 = make_model({.format = "gguf", .out_dir = (dir.path() / "a").string()});
  const std::string p2 =
      make_model({.preset = "tiny-long", .format = "gguf", .out_dir = (dir.path() / "b").string()});
  Loaded a = load(p1, "cpu", DType::F32);
  Loaded b = load(p2, "cpu", DType::F32);
  EXPECT_THROW(ParityRun(*a.model, *a.cache, *b.model, *b.cache, {}), Error);
}

}  // namespace
}  // namespace edgelm
