// The teacher-forced path and perplexity on a tiny Hugging Face fixture model
// (tests/fixtures/hf/tiny-gqa-llama3): the stream's logits and NLLs against transformers' logits,
// perplexity against a one-token-at-a-time recomputation with an independent log-softmax, the
// batch size leaving it unchanged, eviction between chunks through a CacheManager, and the OpenCL
// backend giving the CPU's numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "backends/registry.h"
#include "core/error.h"
#include "core/npy.h"
#include "eval/perplexity.h"
#include "eval/teacher_forcing.h"
#include "eviction/cache_manager.h"
#include "models/loader.h"
#include "runtime/generator.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

const fs::path kModel = fs::path(EDGELM_FIXTURE_DIR) / "hf" / "tiny-gqa-llama3";

cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2, .isa = "portable"});
  return cpu;
}

LlamaModel load_model(Backend& b, int64_t chunk) {
  // The CPU backend converts what a backend that does not read host memory (OpenCL) cannot.
  LoadedModel loaded = load_llama(kModel.string(), b, {.converter = &backend()});
  return LlamaModel(b, std::move(loaded.config), std::move(loaded.weights), chunk);
}

// Ids in [3, vocab), none of them the fixture's BOS (1).
std::vector<int32_t> token_sequence(int64_t vocab, int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(3 + (i * 7919 + 5) % (vocab - 3)));
  return ids;
}

// -log softmax(logits)[target], written independently of token_nll: log of the plain sum of
// exponentials in long double (the fixture's logits are small, so nothing overflows).
double reference_nll(std::span<const float> logits, int32_t target) {
  long double total = 0.0L;
  for (const float v : logits) total += std::exp(static_cast<long double>(v));
  return static_cast<double>(std::log(total) - static_cast<long double>(logits[target]));
}

double relative_diff(double a, double b) {
  return std::fabs(a - b) / std::fabs(b);
}

TEST(NllStats, FollowLlamaCppsFormulas) {
  NllStats stats;
  for (const double v : {1.0, 2.0, 3.0, 4.0}) stats.add(v);
  EXPECT_EQ(stats.count, 4);
  EXPECT_DOUBLE_EQ(stats.mean(), 2.5);
  EXPECT_DOUBLE_EQ(stats.perplexity(), std::exp(2.5));
  // Population variance 1.25 over count - 1.
  EXPECT_DOUBLE_EQ(stats.mean_stderr(), std::sqrt(1.25 / 3.0));
  EXPECT_DOUBLE_EQ(stats.perplexity_stderr(), std::exp(2.5) * std::sqrt(1.25 / 3.0));
  NllStats split;
  split.add(1.0);
  NllStats rest;
  for (const double v : {2.0, 3.0, 4.0}) rest.add(v);
  split.merge(rest);
  EXPECT_DOUBLE_EQ(split.mean_stderr(), stats.mean_stderr());
  NllStats one;
  one.add(2.0);
  EXPECT_TRUE(std::isnan(one.mean_stderr()));
  EXPECT_TRUE(std::isnan(NllStats{}.mean()));
}

// Logits far beyond float exp's range (88.7) give the exact NLL (to float exp's ~1e-8), and a NaN
// or an infinity in the logits, or a target outside the row, is an error rather than a number.
TEST(TokenNll, StaysFiniteForLargeLogitsAndRejectsNonFinite) {
  const std::vector<float> large = {1000.0f, 999.0f, 0.0f};
  EXPECT_NEAR(token_nll(large, 1, 0), 1.0 + std::log1p(std::exp(-1.0) + std::exp(-1000.0)), 1e-7);
  EXPECT_NEAR(token_nll(large, 0, 0), std::log1p(std::exp(-1.0)), 1e-7);
  std::vector<float> row = {0.5f, -1.0f, 2.0f};
  EXPECT_NEAR(token_nll(row, 2, 0), reference_nll(row, 2), 1e-6);
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    row[1] = bad;
    EXPECT_THROW(token_nll(row, 0, 7), Error) << bad;
  }
  EXPECT_THROW(token_nll(large, 3, 0), Error);
  EXPECT_THROW(token_nll(large, -1, 0), Error);
}

// The stream's logits are transformers' at every position (the fixture's 130-token prompt, in
// chunks of 16 with a last partial chunk), and each NLL is the independent log-softmax of
// transformers' row at the next token; the last position has logits and no target.
TEST(TeacherForcing, StreamMatchesTransformersLogits) {
  std::ifstream in(kModel / "fixture.json");
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const auto& prompt = fixture["prompts"][1];
  const std::vector<int32_t> ids = prompt["ids"].get<std::vector<int32_t>>();
  const NpyArray expected = read_npy((kModel / prompt["logits"].get<std::string>()).string());
  LlamaModel model = load_model(backend(), 16);
  const int64_t vocab = model.config().vocab_size;
  const auto n = static_cast<int64_t>(ids.size());
  KvCache cache = model.make_cache(n, DType::F32);
  Generator generator(model, cache);

  double worst_logit = 0.0, worst_nll = 0.0, reference_sum = 0.0;
  int64_t rows_seen = 0, chunks = 0;
  const NllStats stats = teacher_force(generator, ids, {}, [&](const TeacherForcedChunk& chunk) {
    ++chunks;
    EXPECT_EQ(chunk.begin, rows_seen);
    EXPECT_EQ(chunk.logits_from, 0);
    EXPECT_EQ(chunk.rows(), static_cast<int64_t>(chunk.tokens.size()));
    const bool last = chunk.begin + chunk.rows() == n;
    EXPECT_EQ(static_cast<int64_t>(chunk.nll.size()), chunk.rows() - (last ? 1 : 0));
    for (int64_t r = 0; r < chunk.rows(); ++r) {
      const int64_t position = chunk.begin + r;
      const std::span<const float> want(expected.data.data() + position * vocab, vocab);
      for (int64_t v = 0; v < vocab; ++v)
        worst_logit = std::max(worst_logit, std::fabs(double{chunk.row(r)[v]} - want[v]));
      if (r < static_cast<int64_t>(chunk.nll.size())) {
        EXPECT_EQ(chunk.targets[r], ids[position + 1]);
        const double nll = reference_nll(want, ids[position + 1]);
        reference_sum += nll;
        worst_nll = std::max(worst_nll, std::fabs(chunk.nll[r] - nll));
      }
    }
    rows_seen += chunk.rows();
  });
  EXPECT_EQ(chunks, (n + 15) / 16);
  EXPECT_EQ(rows_seen, n);
  EXPECT_EQ(stats.count, n - 1);
  EXPECT_LT(worst_logit, 1e-4);
  EXPECT_LT(worst_nll, 2e-4);
  EXPECT_LT(relative_diff(stats.sum, reference_sum), 1e-5);
  EXPECT_EQ(generator.prefill_tokens(), n);
  EXPECT_EQ(cache.next_position(), n);
}

// Positions before score_from only fill the cache: no logits, no NLL; the chunk that crosses it
// starts its rows there.
TEST(TeacherForcing, ScoreFromSkipsEarlierPositions) {
  LlamaModel model = load_model(backend(), 16);
  const std::vector<int32_t> ids = token_sequence(model.config().vocab_size, 50);
  KvCache full_cache = model.make_cache(50, DType::F32);
  Generator full_generator(model, full_cache);
  std::vector<double> all_nll;
  teacher_force(full_generator, ids, {.batch = 16}, [&](const TeacherForcedChunk& chunk) {
    all_nll.insert(all_nll.end(), chunk.nll.begin(), chunk.nll.end());
  });
  ASSERT_EQ(all_nll.size(), 49u);

  KvCache cache = model.make_cache(50, DType::F32);
  Generator generator(model, cache);
  TeacherForcedStream stream(generator, ids, {.batch = 16, .score_from = 20});
  std::vector<double> scored;
  for (int chunk_index = 0; !stream.done(); ++chunk_index) {
    const TeacherForcedChunk chunk = stream.step();
    EXPECT_EQ(chunk.logits_from, std::clamp<int64_t>(20 - chunk.begin, 0, 16)) << chunk_index;
    if (chunk_index == 0) {
      EXPECT_EQ(chunk.rows(), 0);
    }
    scored.insert(scored.end(), chunk.nll.begin(), chunk.nll.end());
  }
  EXPECT_THROW(stream.step(), Error);
  ASSERT_EQ(stream.nll().count, 29);
  ASSERT_EQ(scored.size(), 29u);
  for (size_t i = 0; i < scored.size(); ++i)
    EXPECT_NEAR(scored[i], all_nll[20 + i], 1e-5) << "position " << 20 + i;

  EXPECT_THROW(TeacherForcedStream(generator, ids, {.batch = 17}), Error);
  EXPECT_THROW(TeacherForcedStream(generator, ids, {.score_from = 50}), Error);
  EXPECT_THROW(TeacherForcedStream(generator, std::span<const int32_t>(), {}), Error);
}

// The reference: every window from an empty cache, its first token replaced by BOS when asked,
// fed one token at a time through the last-position path; positions n_ctx/2 .. n_ctx-2 scored
// with the independent log-softmax. Returns the NLLs window by window.
std::vector<std::vector<double>> reference_window_nlls(LlamaModel& model,
                                                       const std::vector<int32_t>& tokens,
                                                       int64_t n_ctx, std::optional<int32_t> bos) {
  std::vector<std::vector<double>> windows;
  for (size_t start = 0; start + n_ctx <= tokens.size(); start += n_ctx) {
    std::vector<int32_t> window(tokens.begin() + start, tokens.begin() + start + n_ctx);
    if (bos) window[0] = *bos;
    KvCache cache = model.make_cache(n_ctx, DType::F32);
    std::vector<double> nlls;
    for (int64_t p = 0; p + 1 < n_ctx; ++p) {
      const auto logits = model.forward(std::span<const int32_t>(&window[p], 1), cache);
      if (p >= n_ctx / 2) nlls.push_back(reference_nll(logits, window[p + 1]));
    }
    windows.push_back(std::move(nlls));
  }
  return windows;
}

// Perplexity as llama.cpp defines it equals exp(mean NLL) of the one-token-at-a-time reference,
// window by window (running values too), with the standard error computed the two-pass way.
TEST(Perplexity, EqualsOneTokenAtATimeReference) {
  LlamaModel model = load_model(backend(), 32);
  const std::vector<int32_t> tokens = token_sequence(model.config().vocab_size, 100);
  const int64_t n_ctx = 32;
  for (const std::optional<int32_t> bos : {std::optional<int32_t>(1), std::optional<int32_t>()}) {
    SCOPED_TRACE(bos ? "with BOS" : "without BOS");
    const auto windows = reference_window_nlls(model, tokens, n_ctx, bos);
    ASSERT_EQ(windows.size(), 3u);
    KvCache cache = model.make_cache(n_ctx, DType::F32);
    std::vector<int64_t> seen;
    const PerplexityResult result =
        compute_perplexity(model, cache, tokens, {.n_ctx = n_ctx, .bos = bos},
                           [&](int64_t chunk, const PerplexityResult& so_far) {
                             seen.push_back(chunk);
                             EXPECT_EQ(so_far.chunks, chunk + 1);
                           });
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(result.chunks, 3);
    EXPECT_EQ(result.tokens_evaluated, 96);
    EXPECT_EQ(result.nll.count, 3 * perplexity_tokens_per_chunk(n_ctx));
    EXPECT_EQ(perplexity_tokens_per_chunk(n_ctx), 15);
    EXPECT_EQ(result.batch, 32);

    std::vector<double> all;
    ASSERT_EQ(result.running_perplexity.size(), 3u);
    for (size_t w = 0; w < windows.size(); ++w) {
      all.insert(all.end(), windows[w].begin(), windows[w].end());
      double mean = 0.0;
      for (const double v : all) mean += v;
      mean /= static_cast<double>(all.size());
      EXPECT_LT(relative_diff(result.running_perplexity[w], std::exp(mean)), 1e-5)
          << "window " << w;
    }
    double mean = 0.0;
    for (const double v : all) mean += v;
    mean /= static_cast<double>(all.size());
    double squares = 0.0;
    for (const double v : all) squares += (v - mean) * (v - mean);
    const double stderr_mean =
        std::sqrt(squares / static_cast<double>(all.size()) / static_cast<double>(all.size() - 1));
    EXPECT_LT(relative_diff(result.nll.perplexity(), std::exp(mean)), 1e-5);
    EXPECT_LT(relative_diff(result.nll.mean_stderr(), stderr_mean), 1e-4);
    EXPECT_LT(relative_diff(result.nll.perplexity_stderr(), std::exp(mean) * stderr_mean), 1e-4);
    EXPECT_GT(result.nll.perplexity(), 1.0);
  }
}

// The batch (tokens per forward step) changes the float summation order, not the result; a
// limit on the windows scores the first ones.
TEST(Perplexity, BatchSizeDoesNotChangeIt) {
  LlamaModel model = load_model(backend(), 32);
  const std::vector<int32_t> tokens = token_sequence(model.config().vocab_size, 100);
  KvCache cache = model.make_cache(32, DType::F32);
  const PerplexityOptions options{.n_ctx = 32, .bos = 1};
  const PerplexityResult whole = compute_perplexity(model, cache, tokens, options);
  for (const int64_t batch : {1, 5, 16, 31}) {
    PerplexityOptions batched = options;
    batched.batch = batch;
    const PerplexityResult result = compute_perplexity(model, cache, tokens, batched);
    EXPECT_EQ(result.batch, batch);
    EXPECT_EQ(result.nll.count, whole.nll.count);
    EXPECT_LT(relative_diff(result.nll.perplexity(), whole.nll.perplexity()), 1e-6)
        << "batch " << batch;
  }
  PerplexityOptions two = options;
  two.max_chunks = 2;
  const PerplexityResult limited = compute_perplexity(model, cache, tokens, two);
  EXPECT_EQ(limited.chunks, 2);
  EXPECT_DOUBLE_EQ(limited.nll.perplexity(), whole.running_perplexity[1]);
}

TEST(Perplexity, RejectsWhatItCannotScore) {
  LlamaModel model = load_model(backend(), 32);
  const std::vector<int32_t> tokens = token_sequence(model.config().vocab_size, 100);
  KvCache cache = model.make_cache(64, DType::F32);
  EXPECT_THROW(compute_perplexity(model, cache, tokens, {.n_ctx = 2}), Error);
  EXPECT_THROW(compute_perplexity(model, cache, tokens, {.n_ctx = 51}), Error);  // 100 < 102
  EXPECT_THROW(compute_perplexity(model, cache, tokens, {.n_ctx = 32, .batch = 33}), Error);
  EXPECT_THROW(compute_perplexity(model, cache, tokens, {.n_ctx = 32, .bos = 256}), Error);
  KvCache small = model.make_cache(31, DType::F32);
  EXPECT_THROW(compute_perplexity(model, small, tokens, {.n_ctx = 32}), Error);
  // The smallest context scores one token per window.
  const PerplexityResult three = compute_perplexity(model, cache, tokens, {.n_ctx = 3});
  EXPECT_EQ(three.chunks, 33);
  EXPECT_EQ(three.nll.count, 33);
}

// The reuse the eviction-quality harness needs: a full-cache stream and a stream whose cache a
// CacheManager holds to a sliding window, stepped in lockstep over the same tokens on two models
// that share one set of weights. Until the first eviction both give the same logits; after it the
// windowed stream's differ, and its cache never exceeds the window between chunks.
TEST(TeacherForcing, LockstepStreamsWithEvictionBetweenChunks) {
  LoadedModel loaded = load_llama(kModel.string(), backend());
  LlamaModel full_model(backend(), loaded.config, loaded.weights, 8);
  LlamaModel windowed_model(backend(), loaded.config, loaded.weights, 8);
  const std::vector<int32_t> ids = token_sequence(full_model.config().vocab_size, 64);
  EvictionConfig config;
  config.policy = "sliding";
  config.window = 16;
  KvCache full_cache = full_model.make_cache(64, DType::F32);
  KvCache windowed_cache = windowed_model.make_cache(24, DType::F32);
  CacheManager manager(config, make_policy(config));
  Generator full(full_model, full_cache);
  Generator windowed(windowed_model, windowed_cache, &manager);
  EXPECT_EQ(windowed.max_step(), 8);  // half the window
  TeacherForcedStream a(full, ids, {.batch = 8});
  TeacherForcedStream b(windowed, ids, {.batch = 8});
  int64_t identical_rows = 0, differing_rows = 0;
  while (!a.done()) {
    const TeacherForcedChunk x = a.step();
    const TeacherForcedChunk y = b.step();
    ASSERT_EQ(x.begin, y.begin);
    ASSERT_EQ(x.rows(), y.rows());
    EXPECT_LE(windowed_cache.size(0), 16);
    for (int64_t r = 0; r < x.rows(); ++r) {
      double worst = 0.0;
      for (int64_t v = 0; v < x.vocab; ++v)
        worst = std::max(worst, std::fabs(double{x.row(r)[v]} - y.row(r)[v]));
      const int64_t position = x.begin + r;
      if (position < 16) {
        EXPECT_LT(worst, 1e-5) << "position " << position << " before any eviction";
        ++identical_rows;
      } else if (worst > 1e-3) {
        ++differing_rows;
      }
    }
  }
  EXPECT_TRUE(b.done());
  EXPECT_EQ(identical_rows, 16);
  EXPECT_GT(differing_rows, 40);
  EXPECT_GT(manager.evictions(), 0);
  EXPECT_EQ(a.nll().count, b.nll().count);
  EXPECT_NE(a.nll().sum, b.nll().sum);
}

// OpenCL (PoCL in CI) computes the same perplexity as the CPU: float weights and cache, so the two
// differ only in float summation order (measured ~1e-7 relative); an F16 cache rounds K and V on
// both, and values that differ in their last bit can round apart (bound 1e-4).
TEST(Perplexity, OpenClMatchesCpu) {
  const std::vector<std::string> names = backend_names();
  if (std::find(names.begin(), names.end(), "opencl") == names.end()) {
    if (opencl_built() && std::getenv("EDGELM_REQUIRE_OPENCL") != nullptr)
      FAIL() << "EDGELM_REQUIRE_OPENCL is set but no OpenCL device was found";
    GTEST_SKIP() << "no OpenCL device";
  }
  std::unique_ptr<Backend> opencl = create_backend("opencl");
  LlamaModel cpu_model = load_model(backend(), 32);
  LlamaModel cl_model = load_model(*opencl, 32);
  const std::vector<int32_t> tokens = token_sequence(cpu_model.config().vocab_size, 100);
  for (const DType kv_type : {DType::F32, DType::F16}) {
    KvCache cpu_cache = cpu_model.make_cache(32, kv_type);
    KvCache cl_cache = cl_model.make_cache(32, kv_type);
    const PerplexityOptions options{.n_ctx = 32, .batch = 16, .bos = 1};
    const PerplexityResult cpu = compute_perplexity(cpu_model, cpu_cache, tokens, options);
    const PerplexityResult cl = compute_perplexity(cl_model, cl_cache, tokens, options);
    ASSERT_EQ(cl.nll.count, cpu.nll.count);
    const double tolerance = kv_type == DType::F32 ? 1e-5 : 1e-4;
    EXPECT_LT(relative_diff(cl.nll.perplexity(), cpu.nll.perplexity()), tolerance)
        << dtype_name(kv_type) << " KV: " << cl.nll.perplexity() << " vs " << cpu.nll.perplexity();
    RecordProperty(std::string("relative_diff_") + dtype_name(kv_type),
                   std::to_string(relative_diff(cl.nll.perplexity(), cpu.nll.perplexity())));
  }
}

}  // namespace
}  // namespace edgelm
