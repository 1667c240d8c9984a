// The default path on the real default model against llama.cpp on the same file: every CPU kernel
// table this machine offers (the SIMD tables are what users run) and OpenCL, teacher-forced over
// llama.cpp's own greedy continuations of 13 prompts (tests/fixtures/llama_cpp, made by
// scripts/fixtures/make_llama_cpp_reference.py with llama.cpp built outside the repository), and
// perplexity over the fixture's text.
//
// The rule is tie-aware (docs/testing.md, "Real model"): the logits of llama.cpp's eight best
// tokens must lie within bounds of llama.cpp's (median, 95th percentile and largest over the
// steps), and the best token must be llama.cpp's wherever llama.cpp's top-2 margin is more than
// twice that step's difference. Near ties are left to rounding, as they must be: two correct
// implementations that sum in another order or round x to 8 bits differently can order them
// either way.
//
// The model is SmolLM2-135M-Instruct Q4_1 as scripts/fetch_smollm2.sh downloads it (into
// build/models/, or the file EDGELM_SMOLLM2 names, with EDGELM_LLAMA_CPP_FIXTURE for its fixture);
// tests never download. Without the file the
// test skips, and with EDGELM_REQUIRE_REAL_MODEL=1 (CI, which fetches it first) it fails instead.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "backends/registry.h"
#include "core/sha256.h"
#include "eval/perplexity.h"
#include "models/llama.h"
#include "models/loader.h"
#include "models/tokenizer.h"
#include "tests/opencl_test_util.h"
#include "tests/real_model_util.h"

namespace edgelm {
namespace {

using nlohmann::json;
using test::llama_cpp_fixture;
using test::llama_cpp_fixture_path;
using test::real_model_path;

// How far the logits of llama.cpp's eight best tokens may lie from llama.cpp's, in logits (this
// model's largest logits are about 20-40), as statistics over the steps of each step's largest
// difference. Measured on this file (docs/testing.md, "Real model"; AMD EPYC, AVX2), mean and
// median: the AVX2 table, whose x is rounded to 8 bits per block as llama.cpp rounds it, 0.317
// and 0.278 (95th percentile 0.6, largest 2.2: one step of 312, after a near tie upstream);
// OpenCL 0.328 and 0.293. Not met by the same table with the weights converted to Q8_0 at load
// (0.435 and 0.380: the fidelity fault the native kernels fixed) nor with one unit added to each
// Q4_1 block's integer dot product (0.65 and 0.605): a wrong kernel moves every step, and the
// mean and median see it first.
constexpr double kMeanBound = 0.38;
constexpr double kMedianBound = 0.34;
constexpr double kP95Bound = 1.0;
constexpr double kMaxBound = 3.0;

Backend& host_backend() {
  static const std::unique_ptr<Backend> backend = create_backend("cpu", {});
  return *backend;
}

// One configuration's departures from llama.cpp over the prompts it ran.
struct Comparison {
  std::vector<double> errors;  // per step: the largest difference over llama.cpp's eight best
  int decided_steps = 0;       // steps whose margin is more than twice their error
  int explained_flips = 0;     // best token not llama.cpp's, the margin within twice the error
  int faults = 0;              // best token not llama.cpp's although the margin says otherwise
  std::string first_fault;

  double mean() const {
    double sum = 0.0;
    for (double e : errors) sum += e;
    return errors.empty() ? 0.0 : sum / static_cast<double>(errors.size());
  }
  double quantile(double q) const {
    std::vector<double> sorted = errors;
    std::sort(sorted.begin(), sorted.end());
    return sorted.empty() ? 0.0 : sorted[static_cast<size_t>(q * (sorted.size() - 1))];
  }
};

// Teacher-forces each prompt and llama.cpp's greedy tokens through `model`, comparing every step.
// A step's best token may differ from llama.cpp's only where llama.cpp's top-2 margin is at most
// twice the step's own logit difference: if both tokens' logits lie within that difference of
// llama.cpp's, either order is possible; a larger margin turned over is a fault.
Comparison compare(LlamaModel& model, size_t max_prompts, size_t max_steps) {
  Comparison result;
  const json& prompts = llama_cpp_fixture()["prompts"];
  for (size_t p = 0; p < std::min(max_prompts, prompts.size()); ++p) {
    const json& prompt = prompts[p];
    const auto ids = prompt["prompt_ids"].get<std::vector<int32_t>>();
    KvCache cache = model.make_cache(512, DType::F16);
    std::span<const float> logits = model.forward(ids, cache);
    const json& steps = prompt["steps"];
    for (size_t s = 0; s < std::min(max_steps, steps.size()); ++s) {
      const json& step = steps[s];
      double error = 0.0;
      for (const json& top : step["top"]) {
        error = std::max(error, std::fabs(logits[top[0].get<size_t>()] - top[1].get<double>()));
      }
      result.errors.push_back(error);
      if (std::getenv("EDGELM_REAL_MODEL_TRACE") != nullptr)  // one line per step, for docs
        std::printf("step %zu %zu error %.4f margin %.4f\n", p, s, error,
                    step["margin"].get<double>());
      const auto best =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      const auto expected = step["id"].get<int32_t>();
      const double margin = step["margin"].get<double>();
      const bool decided = margin > 2 * error;
      result.decided_steps += decided;
      if (best != expected && !decided) ++result.explained_flips;
      if (best != expected && decided && result.faults++ == 0) {
        result.first_fault = "prompt " + std::to_string(p) + " step " + std::to_string(s) +
                             ": best " + std::to_string(best) + ", llama.cpp's " +
                             std::to_string(expected) + " by a margin of " +
                             std::to_string(margin) + " against a logit error of " +
                             std::to_string(error);
      }
      if (s + 1 < steps.size()) logits = model.forward(std::span(&expected, 1), cache);
    }
  }
  return result;
}

void expect_close_to_llama_cpp(Backend& backend, const std::string& path, const std::string& label,
                               size_t max_prompts, size_t max_steps) {
  LoadedModel loaded = load_llama(path, backend, {.converter = &host_backend()});
  LlamaModel model(backend, std::move(loaded.config), std::move(loaded.weights), 64);
  const Comparison c = compare(model, max_prompts, max_steps);
  std::printf(
      "%-14s %zu steps: logit error mean %.3f, median %.3f, p95 %.3f, max %.3f; %d decided, %d "
      "explained flips, %d faults\n",
      label.c_str(), c.errors.size(), c.mean(), c.quantile(0.5), c.quantile(0.95), c.quantile(1.0),
      c.decided_steps, c.explained_flips, c.faults);
  EXPECT_LE(c.mean(), kMeanBound) << label;
  EXPECT_LE(c.quantile(0.5), kMedianBound) << label;
  EXPECT_LE(c.quantile(0.95), kP95Bound) << label;
  EXPECT_LE(c.quantile(1.0), kMaxBound) << label;
  EXPECT_EQ(c.faults, 0) << label << ": " << c.first_fault;
  EXPECT_GT(c.decided_steps, static_cast<int>(c.errors.size()) / 2) << label;
}

TEST(RealModel, FixtureIsForTheFetchedFile) {
  const std::string path = real_model_path();
  REQUIRE_REAL_MODEL(path);
  EXPECT_EQ(sha256_file_hex(path), llama_cpp_fixture()["model_sha256"].get<std::string>()) << path;
}

// Every table this CPU offers: the SIMD ones on every prompt, the slow portable oracle on two.
TEST(RealModel, EveryCpuTableFollowsLlamaCpp) {
  const std::string path = real_model_path();
  REQUIRE_REAL_MODEL(path);
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    const std::string isa = table->isa;
    const std::unique_ptr<Backend> backend = create_backend("cpu:" + isa, {});
    const bool portable = isa == "portable";
    expect_close_to_llama_cpp(*backend, path, "cpu:" + isa, portable ? 1 : 99, portable ? 8 : 99);
  }
}

TEST(RealModel, OpenClFollowsLlamaCpp) {
  REQUIRE_OPENCL_DEVICE();
  const std::string path = real_model_path();
  REQUIRE_REAL_MODEL(path);
  const std::unique_ptr<Backend> opencl = create_backend("opencl", {});
  expect_close_to_llama_cpp(*opencl, path, "opencl", 99, 99);
}

// The tokenizer corpus (tests/fixtures/tokenizer/corpus.jsonl, 2,444 lines of prose, code, CJK,
// emoji, numbers, whitespace runs and special tokens) as llama.cpp tokenizes it under this file's
// vocabulary: one digest per line beside the fixture (<fixture>-corpus.json, made by
// scripts/fixtures/make_llama_cpp_corpus_ids.py), every line's ids equal.
TEST(RealModel, CorpusTokenizesAsLlamaCpp) {
  const std::string path = real_model_path();
  REQUIRE_REAL_MODEL(path);
  std::string corpus_fixture = llama_cpp_fixture_path();
  corpus_fixture.replace(corpus_fixture.size() - 5, 5, "-corpus.json");
  std::ifstream fixture_in(corpus_fixture);
  ASSERT_TRUE(fixture_in.good()) << corpus_fixture;
  const json expected = json::parse(fixture_in);
  EXPECT_EQ(expected["model_sha256"], llama_cpp_fixture()["model_sha256"]) << corpus_fixture;
  const Tokenizer tokenizer = Tokenizer::from_model_path(path);
  std::ifstream corpus(std::string(EDGELM_FIXTURE_DIR) + "/tokenizer/corpus.jsonl",
                       std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(corpus, line);) lines.push_back(json::parse(line));
  const json& digests = expected["line_digests"];
  ASSERT_EQ(lines.size(), digests.size());
  std::vector<size_t> differ;
  for (size_t i = 0; i < lines.size(); ++i) {
    // FNV-1a 64 over the id count, then the ids, as little-endian uint32.
    uint64_t h = 0xCBF29CE484222325ull;
    const auto mix = [&](uint32_t value) {
      for (int b = 0; b < 4; ++b) h = (h ^ ((value >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
    };
    const std::vector<int32_t> ids = tokenizer.encode(lines[i], /*add_bos=*/true);
    mix(static_cast<uint32_t>(ids.size()));
    for (const int32_t id : ids) mix(static_cast<uint32_t>(id));
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
    if (digests[i].get<std::string>() != hex) differ.push_back(i);
  }
  std::string first;
  for (size_t k = 0; k < std::min<size_t>(differ.size(), 5); ++k) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict) on a chain of string temporaries here.
    first.append(" ").append(std::to_string(differ[k])).append(": ");
    first.append(json(lines[differ[k]]).dump().substr(0, 60));
  }
  EXPECT_TRUE(differ.empty()) << differ.size() << " of " << lines.size()
                              << " corpus lines tokenize otherwise than llama.cpp's; first:"
                              << first;
}

// llama-perplexity's estimate over the fixture's text (-c 128, 4 windows) on the default table.
TEST(RealModel, PerplexityMatchesLlamaCpp) {
  const std::string path = real_model_path();
  REQUIRE_REAL_MODEL(path);
  const json& ppl = llama_cpp_fixture()["perplexity"];
  Backend& backend = host_backend();
  LoadedModel loaded = load_llama(path, backend, {});
  const Tokenizer tokenizer = Tokenizer::from_model_path(path);
  LlamaModel model(backend, std::move(loaded.config), std::move(loaded.weights), 128);
  const std::vector<int32_t> tokens = tokenizer.encode(
      llama_cpp_fixture()["perplexity_text"].get<std::string>(), /*add_bos=*/false);
  KvCache cache = model.make_cache(128, DType::F16);
  const PerplexityResult result =
      compute_perplexity(model, cache, tokens, {.n_ctx = 128, .batch = 128, .max_chunks = 4});
  const double expected = ppl["final"].get<double>();
  std::printf("perplexity %.4f, llama.cpp %.4f (%+.2f %%)\n", result.nll.perplexity(), expected,
              100.0 * (result.nll.perplexity() / expected - 1.0));
  EXPECT_EQ(result.chunks, 4);
  // 1 %: the two sum in another order and round x alike; a wrong kernel moves it by far more.
  EXPECT_NEAR(result.nll.perplexity(), expected, 0.01 * expected);
}

}  // namespace
}  // namespace edgelm
