// The eviction-quality harness (eval/eviction_eval.h) and its sanity gates, on tiny models: the
// tests/fixtures/hf/tiny-gqa-llama3 fixture for the teacher-forced runs, and make_model's tiny
// preset (it has a tokenizer) for retrieval.
//
// Gates: a budget as long as the text changes nothing (KL exactly 0, equal NLL) for every policy
// there is; the full cache's NLL is perplexity's on the same windows and chunks; the budget holds
// during streaming, and positions before the first eviction are bit-identical; the full cache's
// passkey answers are those of answer_passkey, the function every cell answers through; a seeded
// `random` policy is deterministic and is the floor the other cells are compared with; bad
// settings are one clear line each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/sha256.h"
#include "eval/eviction_eval.h"
#include "eval/eviction_eval_report.h"
#include "eval/perplexity.h"
#include "models/chat.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "models/tokenizer.h"
#include "runtime/generator.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(EDGELM_FIXTURE_DIR) / "hf" / "tiny-gqa-llama3";

cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2, .isa = "portable"});
  return cpu;
}

const LoadedModel& fixture() {
  static const LoadedModel loaded = load_llama(kFixture.string(), backend());
  return loaded;
}

// make_model's tiny preset as a HF folder, with its tokenizer.
const std::string& tiny_model_path() {
  static const std::string path =
      make_model({.preset = "tiny",
                  .format = "hf",
                  .quant = DType::F32,
                  .seed = 3,
                  .out_dir = (fs::path(::testing::TempDir()) /
                              ("edgelm_eviction_eval_" + std::to_string(::getpid())))
                                 .string()});
  return path;
}

// Ids in [3, vocab), none of them the fixture's BOS (1).
std::vector<int32_t> token_sequence(int64_t vocab, int n, int salt = 0) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(static_cast<int32_t>(3 + (i * 7919 + 5 + salt * 131) % (vocab - 3)));
  return ids;
}

EvalText text_of(std::vector<int32_t> tokens, const std::string& name = "ids") {
  EvalText text;
  text.name = name;
  text.tokens = std::move(tokens);
  return text;
}

std::vector<std::string> evicting_policies() {
  std::vector<std::string> names;
  for (const std::string& name : policy_names())
    if (name != "none") names.push_back(name);
  return names;
}

EvictionEvalOptions small_options(std::vector<int64_t> budgets, int64_t window = 64) {
  EvictionEvalOptions options;
  options.policies = evicting_policies();
  options.budgets = std::move(budgets);
  options.window_tokens = window;
  options.prefix_tokens = 24;
  options.continue_tokens = 16;
  options.block_tokens = 8;
  options.bootstrap.resamples = 200;
  options.kv_type = DType::F32;
  options.cost = false;
  options.keep_positions = true;
  return options;
}

LlamaModel& fixture_model() {
  static LlamaModel model(backend(), fixture().config, fixture().weights);
  return model;
}

EvictionEval make_eval(const EvictionEvalOptions& options) {
  return EvictionEval(fixture_model(), options);
}

// ---- statistics ----

// KL(p || q) from the definition, in long double, for checking RowComparer.
double reference_kl(const std::vector<float>& x, const std::vector<float>& y) {
  long double zx = 0, zy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    zx += std::exp(static_cast<long double>(x[i]));
    zy += std::exp(static_cast<long double>(y[i]));
  }
  long double kl = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const long double p = std::exp(static_cast<long double>(x[i])) / zx;
    const long double q = std::exp(static_cast<long double>(y[i])) / zy;
    kl += p * std::log(p / q);
  }
  return static_cast<double>(kl);
}

TEST(EvictionEvalStats, KlAndTopOneAgainstTheDefinition) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  RowComparer comparer;
  for (int trial = 0; trial < 5; ++trial) {
    std::vector<float> x(301), y(301);
    for (float& v : x) v = normal(rng);
    for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] + 0.3f * normal(rng);
    const RowComparison row = comparer.compare(x, y, trial);
    EXPECT_NEAR(row.kl, reference_kl(x, y), 1e-9 + 1e-6 * row.kl);
    EXPECT_GT(row.kl, 0.0);
    const bool same_top = std::max_element(x.begin(), x.end()) - x.begin() ==
                          std::max_element(y.begin(), y.end()) - y.begin();
    EXPECT_EQ(row.top1_agrees, same_top);
    // Equal rows: exactly zero, whatever their scale.
    for (float& v : y) v = 0;
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * 40.0f;
    const RowComparison same = comparer.compare(y, y, trial);
    EXPECT_EQ(same.kl, 0.0);
    EXPECT_TRUE(same.top1_agrees);
  }
  // Ties go to the first index in both rows.
  EXPECT_TRUE(
      comparer.compare(std::vector<float>{1, 3, 3}, std::vector<float>{0, 5, 5}, 0).top1_agrees);
  EXPECT_FALSE(
      comparer.compare(std::vector<float>{1, 3, 2}, std::vector<float>{0, 4, 5}, 0).top1_agrees);
  EXPECT_THROW(comparer.compare(std::vector<float>{1, 2}, std::vector<float>{1}, 0), Error);
  EXPECT_THROW(comparer.compare(std::vector<float>{1, NAN}, std::vector<float>{1, 2}, 0), Error);
}

TEST(EvictionEvalStats, QuantilesInterpolate) {
  const std::vector<double> sorted = {1.0, 2.0, 4.0, 8.0};
  EXPECT_DOUBLE_EQ(quantile_sorted(sorted, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_sorted(sorted, 1.0), 8.0);
  EXPECT_DOUBLE_EQ(quantile_sorted(sorted, 0.5), 3.0);  // between 2 and 4
  EXPECT_DOUBLE_EQ(quantile_sorted(sorted, 0.25), 1.75);
  EXPECT_TRUE(std::isnan(quantile_sorted(std::vector<double>{}, 0.5)));
}

// The bootstrap: seeded and repeatable; the interval of a mean of normal unit values is close to
// mean ± 1.96 standard errors; identical units collapse it; one unit has none; paired differences
// of a run with itself are exactly zero.
TEST(EvictionEvalStats, PairedBootstrap) {
  std::mt19937 rng(11);
  std::normal_distribution<double> normal(0.5, 0.2);
  std::vector<PairedSums> units(400);
  double mean = 0.0, squares = 0.0;
  for (PairedSums& u : units) {
    u.count = 10;
    const double kl = normal(rng);
    u.kl = 10 * kl;
    u.top1 = 7;
    u.nll_full = 20;
    u.nll_policy = 20 + 10 * kl;
    mean += kl;
    squares += kl * kl;
  }
  mean /= 400;
  const double se = std::sqrt((squares / 400 - mean * mean) / 400);
  const BootstrapOptions options{.resamples = 2000, .seed = 5};
  const PairedSummary s = summarize_paired(units, options);
  EXPECT_EQ(s.tokens, 4000);
  EXPECT_EQ(s.units, 400);
  EXPECT_NEAR(s.kl.mean, mean, 1e-12);
  EXPECT_NEAR(s.delta_nll.mean, mean, 1e-12);
  EXPECT_NEAR(s.kl.low, mean - 1.96 * se, 0.15 * se);
  EXPECT_NEAR(s.kl.high, mean + 1.96 * se, 0.15 * se);
  EXPECT_DOUBLE_EQ(s.top1.low, 0.7);
  EXPECT_DOUBLE_EQ(s.top1.high, 0.7);
  const PairedSummary again = summarize_paired(units, options);
  EXPECT_EQ(again.kl.low, s.kl.low);
  EXPECT_EQ(again.kl.high, s.kl.high);
  const PairedSummary other = summarize_paired(units, {.resamples = 2000, .seed = 6});
  EXPECT_NE(other.kl.low, s.kl.low);
  // Two units, KL 0 and 1: a resample's mean is 0, 1/2 or 1 (one chance in four for either
  // end), so the 95 % interval runs from 0 to 1; every unit must be drawn.
  const std::vector<PairedSums> two = {{.count = 1, .kl = 0.0}, {.count = 1, .kl = 1.0}};
  const PairedSummary both = summarize_paired(two, options);
  EXPECT_EQ(both.kl.low, 0.0);
  EXPECT_EQ(both.kl.high, 1.0);
  EXPECT_EQ(both.kl.mean, 0.5);
  const PairedSummary one = summarize_paired(std::span(units).first(1), options);
  EXPECT_TRUE(std::isnan(one.kl.low));
  EXPECT_FALSE(std::isnan(one.kl.mean));
  const PairedDifference none = difference_paired(units, units, options);
  EXPECT_EQ(none.kl.mean, 0.0);
  EXPECT_EQ(none.kl.low, 0.0);
  EXPECT_EQ(none.delta_nll.high, 0.0);
  std::vector<PairedSums> shifted = units;
  for (PairedSums& u : shifted) u.kl += 1.0;  // 0.1 per token
  EXPECT_NEAR(difference_paired(shifted, units, options).kl.low, 0.1, 1e-12);
  EXPECT_THROW(difference_paired(std::span(units).first(3), units, options), Error);
}

TEST(Sha256, KnownAnswers) {
  const auto hex = [](std::string_view text) {
    return sha256_hex(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  };
  // FIPS 180-4 examples, and the empty message.
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a', fed in uneven pieces.
  Sha256 hash;
  const std::string piece(997, 'a');
  size_t fed = 0;
  while (fed < 1000000) {
    const size_t n = std::min(piece.size() - (fed % 3), 1000000 - fed);
    hash.update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(piece.data()), n));
    fed += n;
  }
  const std::array<uint8_t, 32> digest = hash.finish();
  EXPECT_EQ(digest[0], 0xcd);
  EXPECT_EQ(digest[1], 0xc7);
  EXPECT_EQ(digest[31], 0xd0);
}

// ---- budgets ----

TEST(EvictionEvalBudget, SharesTheBudgetOut) {
  const BudgetShares shares;
  EvictionConfig c = budget_config("sink", 64, shares);
  EXPECT_EQ(c.kv_budget, 64);
  EXPECT_EQ(*c.sink_tokens + *c.window, 64);
  c = budget_config("sliding", 64, shares);
  EXPECT_EQ(c.window, 64);
  EXPECT_EQ(c.protected_prefix, 0);
  c = budget_config("h2o", 64, shares);
  EXPECT_EQ(c.window, 32);
  EXPECT_EQ(c.kv_budget, 64);
  c = budget_config("snapkv", 64, shares);
  EXPECT_EQ(c.snapkv_window, 32);
  EXPECT_EQ(budget_config("snapkv", 16, shares).snapkv_window, 8);
  EXPECT_EQ(budget_config("tova", 16, shares).kv_budget, 16);
  // Wrappers: protected sinks, per-layer shares (the bottom layer holds more than the budget).
  c = budget_config("keydiff+protect+pyramid", 64, shares);
  EXPECT_EQ(c.policy, "keydiff");
  EXPECT_EQ(c.protect, "sinks");
  EXPECT_EQ(c.layer_budget, "pyramid");
  EXPECT_GT(largest_layer_limit(c, 4), 64);
  EXPECT_EQ(largest_layer_limit(budget_config("keydiff", 64, shares), 4), 64);
  EXPECT_THROW(budget_config("h2o+lru", 64, shares), Error);
  EXPECT_THROW(budget_config("tova+protect", 4, shares), Error);  // 4 sinks in 4 slots
  // SnapKV streams with room for the next chunk after each compression.
  EXPECT_EQ(streaming_budget_config(c, true, 64, 8).kv_budget, 57);
  EXPECT_EQ(streaming_budget_config(c, true, 64, 1).kv_budget, 64);
  EXPECT_EQ(streaming_budget_config(budget_config("h2o", 64, shares), false, 64, 8).kv_budget, 64);
  // SmolLM2-135M: 30 layers x 3 kv heads x 64 x K and V x 2 bytes.
  LlamaConfig smol;
  smol.n_layers = 30;
  smol.n_kv_heads = 3;
  smol.head_dim = 64;
  EXPECT_EQ(kv_bytes_per_slot(smol, DType::F16), 23040);
  EXPECT_EQ(kv_budget_from_bytes(23040 * 64 + 5, 23040), 64);
  EXPECT_THROW(kv_budget_from_bytes(23039, 23040), Error);
}

// One line naming the setting, for each bad setting; nothing runs.
TEST(EvictionEvalBudget, BadSettingsAreOneClearLine) {
  const auto message = [](const EvictionEvalOptions& options) -> std::string {
    try {
      check_eviction_eval_options(options, fixture().config);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const auto expect = [&](const EvictionEvalOptions& options, const std::string& wanted) {
    const std::string got = message(options);
    EXPECT_NE(got.find(wanted), std::string::npos) << "got: " << got << "\nwanted: " << wanted;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    EXPECT_EQ(got.rfind("[eviction_eval] ", 0), 0u) << got;
  };
  EXPECT_EQ(message(small_options({16, 32})), "");
  expect(small_options({0}), "budget 0: a budget is at least 1 slot");
  EvictionEvalOptions sinks = small_options({4});
  sinks.evict_every = 1;
  sinks.batch = 1;
  sinks.shares.sink_tokens = 4;
  expect(sinks, "--sink-tokens 4 must be below the budget of 4 slots");
  expect(small_options({128}, 64),
         "-c/--ctx-size 64: a text window shorter than the budget of 128");
  EvictionEvalOptions unknown = small_options({16});
  unknown.policies = {"sliding", "lru"};
  expect(unknown, "--policies: 'lru' is not one of");
  unknown.policies = {"none"};
  expect(unknown, "'none' is the full cache");
  unknown.policies = {"sink", "sink"};
  expect(unknown, "'sink' is listed twice");
  EvictionEvalOptions chunk = small_options({16});
  chunk.evict_every = 9;
  expect(chunk, "--evict-every 9 is more than half the budget of 16 slots");
  chunk.evict_every = 1;
  chunk.batch = 9;
  expect(chunk, "-b/--batch-size 9 is more than half the budget of 16 slots");
  EvictionEvalOptions continuation = small_options({16});
  continuation.prefix_tokens = 60;
  expect(continuation,
         "--prefix-tokens 60 + --continue-tokens 16 + 1 is longer than a text window");
  EvictionEvalOptions share = small_options({16});
  share.shares.recent_share = 1.0;
  share.policies = {"h2o"};
  expect(share, "--recent-share 1 must be in (0, 1)");
  EvictionEvalOptions snap = small_options({16});
  snap.policies = {"snapkv"};
  snap.shares.snapkv_window = 16;
  expect(snap, "--snapkv-window 16) must be in [1, 16)");
  // The harness itself refuses a text shorter than a window.
  EvictionEval eval = make_eval(small_options({16}));
  const std::vector<EvalText> short_text = {text_of(token_sequence(256, 40), "short.txt")};
  try {
    eval.run_streaming(short_text);
    ADD_FAILURE() << "a 40-token text streamed in windows of 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("text 'short.txt' has 40 tokens, fewer than one window"),
              std::string::npos)
        << e.what();
  }
}

// ---- gates ----

// A budget as long as the text: no policy evicts, so every position's logits are the full
// cache's bit for bit (KL exactly 0, top-1 always, ΔNLL exactly 0), streamed by single tokens or
// chunks, and continued after a prefix.
TEST(EvictionEvalGates, BudgetCoveringTheTextChangesNothing) {
  for (const int64_t evict_every : {1, 8}) {
    SCOPED_TRACE("evict_every " + std::to_string(evict_every));
    EvictionEvalOptions options = small_options({64});
    options.evict_every = evict_every;
    EvictionEval eval = make_eval(options);
    const std::vector<EvalText> texts = {text_of(token_sequence(256, 64))};
    eval.run_streaming(texts);
    eval.run_continuation(texts);
    ASSERT_EQ(eval.cells().size(), evicting_policies().size());
    for (const CellResult& cell : eval.cells()) {
      SCOPED_TRACE(cell.policy);
      const StreamingCell& s = cell.streaming;
      EXPECT_EQ(s.evictions.evictions, 0);
      EXPECT_EQ(s.first_filled, std::vector<int64_t>{-1});
      ASSERT_EQ(s.positions.size(), 1u);
      ASSERT_EQ(s.positions[0].size(), 63u);
      for (const PositionRecord& p : s.positions[0]) {
        EXPECT_EQ(p.kl, 0.0);
        EXPECT_TRUE(p.top1_agrees);
        EXPECT_EQ(p.nll_policy, p.nll_full);
      }
      EXPECT_EQ(s.policy_all.sum, eval.full().streaming.sum);
      const PairedSummary paired = summarize_paired(s.units_all, options.bootstrap);
      EXPECT_EQ(paired.kl.mean, 0.0);
      EXPECT_EQ(paired.kl.high, 0.0);
      EXPECT_EQ(paired.delta_nll.mean, 0.0);
      EXPECT_EQ(paired.top1.mean, 1.0);
      const PairedSummary continued = summarize_paired(cell.continuation.units, options.bootstrap);
      EXPECT_EQ(continued.tokens, 16);
      EXPECT_EQ(continued.kl.mean, 0.0);
      EXPECT_EQ(continued.delta_nll.mean, 0.0);
      EXPECT_EQ(cell.continuation.evictions.evictions, 0);
    }
  }
}

// Under a budget of 16 slots, no query attends more than 16 slots, whatever the policy and the
// chunk; until the first eviction every position equals the full cache's bit for bit, after it
// the distributions differ; the eviction time is split into its parts.
TEST(EvictionEvalGates, StreamingHoldsTheBudget) {
  for (const int64_t evict_every : {1, 4}) {
    SCOPED_TRACE("evict_every " + std::to_string(evict_every));
    EvictionEvalOptions options = small_options({16});
    options.evict_every = evict_every;
    EvictionEval eval = make_eval(options);
    const std::vector<EvalText> texts = {text_of(token_sequence(256, 64)),
                                         text_of(token_sequence(256, 64, 1))};
    eval.run_streaming(texts);
    for (const CellResult& cell : eval.cells()) {
      SCOPED_TRACE(cell.policy);
      const StreamingCell& s = cell.streaming;
      EXPECT_EQ(s.max_slots, 16);
      EXPECT_GT(s.evictions.evictions, 0);
      ASSERT_EQ(s.first_filled.size(), 2u);
      ASSERT_EQ(s.positions.size(), 2u);
      for (size_t w = 0; w < 2; ++w) {
        // The first eviction makes room for the chunk that would take the cache past 16.
        EXPECT_EQ(s.first_filled[w], 16);
        double kl_after = 0.0;
        for (size_t p = 0; p < s.positions[w].size(); ++p) {
          const PositionRecord& record = s.positions[w][p];
          if (static_cast<int64_t>(p) < s.first_filled[w]) {
            EXPECT_EQ(record.kl, 0.0) << "position " << p;
            EXPECT_EQ(record.nll_policy, record.nll_full) << "position " << p;
          } else {
            kl_after += record.kl;
          }
        }
        EXPECT_GT(kl_after, 1e-3);
      }
      EXPECT_EQ(s.policy_filled.count, 2 * (63 - 16));
      EXPECT_EQ(s.units_all.size(), 16u);  // 2 windows x 8 blocks of 8 predictions
      const EvictionTotals& e = s.evictions;
      EXPECT_GT(e.compact_seconds, 0.0);
      EXPECT_LE(e.score_seconds + e.select_seconds + e.compact_seconds, e.seconds * (1 + 1e-9));
    }
  }
}

// The full cache's NLL over each window's second half is perplexity's, computed by
// compute_perplexity on the same tokens, windows (BOS first) and chunks.
TEST(EvictionEvalGates, FullCacheNllIsPerplexitys) {
  const std::vector<int32_t> tokens = token_sequence(256, 100);
  const int64_t n_ctx = 32;
  for (const int64_t batch : {1, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    EvictionEvalOptions options = small_options({16}, n_ctx);
    options.policies = {"sliding"};
    options.windows_per_text = 5;  // as many as fit: 3
    options.bos = 1;
    options.evict_every = batch;
    options.continuation = false;
    EvictionEval eval = make_eval(options);
    eval.run_streaming(std::vector<EvalText>{text_of(tokens)});
    const StreamingCell& s = eval.cells()[0].streaming;
    ASSERT_EQ(s.positions.size(), 3u);
    NllStats second_halves;
    for (const auto& window : s.positions) {
      for (int64_t p = n_ctx / 2; p < n_ctx - 1; ++p) second_halves.add(window[p].nll_full);
    }
    LlamaModel model(backend(), fixture().config, fixture().weights, batch);
    KvCache cache = model.make_cache(n_ctx, DType::F32);
    const PerplexityResult reference =
        compute_perplexity(model, cache, tokens, {.n_ctx = n_ctx, .batch = batch, .bos = 1});
    ASSERT_EQ(second_halves.count, reference.nll.count);
    // The same NLLs; perplexity adds them window by window, so the sums may differ in the last
    // bit of a double (measured 2e-16 relative).
    EXPECT_NEAR(second_halves.sum, reference.nll.sum, 1e-12 * reference.nll.sum);
    EXPECT_EQ(eval.full().streaming.count, 3 * (n_ctx - 1));
  }
}

// `random` (when the policy exists): the same seed gives the same cells, and every other policy is
// compared with it at the same budget. That the scored policies lose less than it needs a trained
// model: test_eviction_real_model.cpp.
TEST(EvictionEvalGates, RandomPolicyIsTheSeededFloor) {
  const auto& names = policy_names();
  if (std::find(names.begin(), names.end(), "random") == names.end())
    GTEST_SKIP() << "no `random` policy in this build";
  EvictionEvalOptions options = small_options({16});
  options.policies = {"random", "sink"};
  const std::vector<EvalText> texts = {text_of(token_sequence(256, 64))};
  EvictionEval first = make_eval(options);
  first.run_streaming(texts);
  EvictionEval second = make_eval(options);
  second.run_streaming(texts);
  EXPECT_EQ(first.cells()[0].streaming.policy_all.sum, second.cells()[0].streaming.policy_all.sum);
  EXPECT_GT(first.cells()[0].streaming.evictions.evictions, 0);
  const std::vector<nlohmann::ordered_json> lines = eviction_eval_json(first, {});
  EXPECT_TRUE(lines[0]["streaming"]["vs_floor"].is_null());
  EXPECT_TRUE(lines[1]["streaming"]["vs_floor"]["kl"]["mean"].is_number());
}

// The comparison with a floor policy, with one that exists today: each other cell at the same
// budget gets the paired difference, equal to the difference of the two cells' own means.
TEST(EvictionEvalGates, CellsAreComparedWithTheFloorPolicy) {
  EvictionEvalOptions options = small_options({16, 32});
  options.policies = {"sliding", "sink", "tova"};
  options.floor_policy = "sliding";
  EvictionEval eval = make_eval(options);
  const std::vector<EvalText> texts = {text_of(token_sequence(256, 64))};
  eval.run_streaming(texts);
  eval.run_continuation(texts);
  const std::vector<nlohmann::ordered_json> lines = eviction_eval_json(eval, {});
  ASSERT_EQ(lines.size(), 6u);
  for (const auto& line : lines) {
    SCOPED_TRACE(line["policy"].get<std::string>() + " at " + line["budget_slots"].dump());
    if (line["policy"] == "sliding") {
      EXPECT_TRUE(line["streaming"]["vs_floor"].is_null());
      continue;
    }
    const auto* floor = &lines[0];
    for (const auto& other : lines) {
      if (other["policy"] == "sliding" && other["budget_slots"] == line["budget_slots"])
        floor = &other;
    }
    for (const char* run : {"streaming", "continuation"}) {
      const auto& mine = line[run]["paired"];
      const auto& theirs = (*floor)[run]["paired"];
      EXPECT_NEAR(line[run]["vs_floor"]["kl"]["mean"].get<double>(),
                  mine["kl"]["mean"].get<double>() - theirs["kl"]["mean"].get<double>(), 1e-12);
      EXPECT_NEAR(
          line[run]["vs_floor"]["delta_nll"]["mean"].get<double>(),
          mine["delta_nll"]["mean"].get<double>() - theirs["delta_nll"]["mean"].get<double>(),
          1e-12);
    }
  }
}

// ---- retrieval ----

TEST(Passkey, AnswerMatching) {
  EXPECT_TRUE(passkey_answer_matches(" 58213.", "58213"));
  EXPECT_TRUE(passkey_answer_matches("is 58213, and 7", "58213"));
  EXPECT_FALSE(passkey_answer_matches(" 5821", "58213"));
  EXPECT_FALSE(passkey_answer_matches(" 582130", "58213"));
  EXPECT_FALSE(passkey_answer_matches(" 1 58213", "58213"));
  EXPECT_FALSE(passkey_answer_matches("", "58213"));
  EXPECT_FALSE(passkey_answer_matches("no digits", ""));
}

// The documents: the key once, after the share of sentences its depth asks for; the question at
// the end, and with `both` also before the document; lengths reached; the same keys for both
// placements; the chat form ends in the answer cue after the template's assistant header.
TEST(Passkey, CasesAreBuiltAsAsked) {
  const Tokenizer tokenizer = Tokenizer::from_model_path(tiny_model_path());
  PasskeyOptions options;
  options.lengths = {64, 400};
  options.depths = {0.0, 0.5, 1.0};
  options.trials = 2;
  options.seed = 9;
  const std::vector<PasskeyCase> cases = make_passkey_cases(tokenizer, nullptr, options);
  ASSERT_EQ(cases.size(), 2u * 3u * 2u * 2u);
  int64_t sentence_tokens = 0;  // the most one filler sentence adds
  for (const std::string& sentence : kPasskeyFiller) {
    sentence_tokens = std::max<int64_t>(
        sentence_tokens, static_cast<int64_t>(tokenizer.encode(" " + sentence, false).size()));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const PasskeyCase& c = cases[i];
    SCOPED_TRACE(std::to_string(i));
    EXPECT_EQ(c.key.size(), 5u);
    EXPECT_GE(c.document_tokens, c.length);
    EXPECT_LE(c.document_tokens, c.length + sentence_tokens + 1);  // the fewest sentences
    const std::string text = tokenizer.decode(c.prompt);
    const std::string needle =
        "The pass key is " + c.key + ". Remember it. " + c.key + " is the pass key.";
    const size_t at = text.find(needle);
    ASSERT_NE(at, std::string::npos);
    EXPECT_EQ(text.find(needle, at + 1), std::string::npos);
    const size_t question = text.find("What is the pass key?");
    EXPECT_EQ(question < at, c.placement == "both");
    EXPECT_TRUE(text.ends_with("What is the pass key? The pass key is")) << text;
    const size_t start = text.find("\n\n") + 2, end = text.rfind("\n\n");
    const double share =
        static_cast<double>(at - start) / static_cast<double>(end - start - needle.size());
    // The key goes between sentences: within one sentence of its depth.
    size_t longest = 0;
    for (const std::string& sentence : kPasskeyFiller) longest = std::max(longest, sentence.size());
    EXPECT_NEAR(
        share, c.depth,
        static_cast<double>(longest + 1) / static_cast<double>(end - start - needle.size()));
    if (c.placement == "both") {
      EXPECT_EQ(c.key, cases[i - 1].key);
    }
  }
  EXPECT_NE(cases[0].key, cases[2].key);  // trials draw new keys

  const ChatTemplate chat = ChatTemplate::by_name("chatml", "<|begin_of_text|>", "<|eot_id|>");
  options.lengths = {64};
  options.depths = {0.5};
  options.trials = 1;
  const std::vector<PasskeyCase> chatted = make_passkey_cases(tokenizer, &chat, options);
  const std::string text = tokenizer.decode(chatted[0].prompt);
  EXPECT_TRUE(text.starts_with("<|im_start|>user\nThere is a pass key")) << text;
  EXPECT_TRUE(
      text.ends_with("What is the pass key?<|im_end|>\n<|im_start|>assistant\nThe pass "
                     "key is"))
      << text;

  PasskeyOptions bad = options;
  bad.depths = {1.5};
  EXPECT_THROW(make_passkey_cases(tokenizer, nullptr, bad), Error);
  bad = options;
  bad.placements = {"start"};
  EXPECT_THROW(make_passkey_cases(tokenizer, nullptr, bad), Error);
}

// The harness's full-cache answers are answer_passkey's on a fresh generator (the function every
// cell answers through); with a budget covering the prompt every cell answers as the full cache
// does; with a small one the cache stays within it; a key the model writes is scored right.
TEST(Passkey, FullCacheAnswersAreTheCellsFunction) {
  const std::string path = tiny_model_path();
  const LoadedModel loaded = load_llama(path, backend());
  const Tokenizer tokenizer = Tokenizer::from_model_path(path);
  PasskeyOptions passkey;
  passkey.lengths = {24};
  passkey.depths = {0.5};
  passkey.placements = {"end", "both"};
  passkey.trials = 1;
  const std::vector<PasskeyCase> cases = make_passkey_cases(tokenizer, nullptr, passkey);
  int64_t longest = 0;
  for (const PasskeyCase& c : cases) longest = std::max<int64_t>(longest, c.prompt.size());
  const PasskeyAnswerOptions answer{.max_tokens = 6, .stop_ids = loaded.config.eos_token_ids};
  EvictionEvalOptions options;
  options.policies = evicting_policies();
  options.budgets = {longest + answer.max_tokens, 32};
  options.streaming = options.continuation = options.cost = false;
  options.batch = 8;
  options.kv_type = DType::F32;
  LlamaModel tiny(backend(), loaded.config, loaded.weights);
  EvictionEval eval(tiny, options);
  eval.run_retrieval(cases, tokenizer, answer);
  ASSERT_EQ(eval.full().retrieval.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    LlamaModel model(backend(), loaded.config, loaded.weights, eval.batch());
    KvCache cache = model.make_cache(longest + answer.max_tokens, DType::F32);
    Generator generator(model, cache);
    const PasskeyTrial expected = answer_passkey(generator, tokenizer, cases[i], answer);
    const PasskeyTrial& got = eval.full().retrieval[i];
    EXPECT_EQ(got.answer, expected.answer);
    EXPECT_EQ(got.correct, passkey_answer_matches(got.answer, cases[i].key));
    EXPECT_FALSE(got.answer.empty());
    for (const CellResult& cell : eval.cells()) {
      ASSERT_EQ(cell.retrieval.size(), cases.size());
      if (cell.budget >= longest + answer.max_tokens) {
        EXPECT_EQ(cell.retrieval[i].answer, got.answer) << cell.policy;
      } else if (!cell.compresses_prompt) {
        EXPECT_LE(cell.retrieval[i].max_slots, 32) << cell.policy;
      } else {  // the whole prompt, held until prefill ends
        EXPECT_GE(cell.retrieval[i].max_slots, static_cast<int64_t>(cases[i].prompt.size()))
            << cell.policy;
      }
    }
  }
  // The scoring the cells share: a case whose key the answer holds is right.
  PasskeyCase planted = cases[0];
  planted.key = "7";
  EXPECT_EQ(passkey_answer_matches(" 7.", planted.key), true);
}

// ---- outputs ----

TEST(EvictionEvalReport, JsonMarkdownAndCsvCarryEveryCell) {
  EvictionEvalOptions options = small_options({16});
  options.policies = {"sink", "h2o"};
  options.cost = true;
  options.cost_decode_tokens = 4;
  EvictionEval eval = make_eval(options);
  const std::vector<EvalText> texts = {text_of(token_sequence(256, 64))};
  eval.run_streaming(texts);
  eval.run_continuation(texts);
  eval.run_cost(texts[0]);
  EvalRunInfo info;
  info.model_path = "fixture";
  info.texts = {{"ids", "", 0, 64}};
  const std::vector<nlohmann::ordered_json> lines = eviction_eval_json(eval, info);
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& line : lines) {
    EXPECT_EQ(line["schema"], kEvictionEvalSchema);
    for (const char* key : {"policy", "budget_slots", "budget_bytes", "settings", "streaming",
                            "continuation", "cost", "full_cost", "run"})
      EXPECT_TRUE(line.contains(key)) << key;
    EXPECT_EQ(line["budget_bytes"], 16 * kv_bytes_per_slot(fixture().config, DType::F32));
    EXPECT_EQ(line["cost"]["logical_length"], 64 + 4);
    EXPECT_EQ(line["cost"]["max_slots"], 16);
    EXPECT_GT(line["full_cost"]["kv_bytes_allocated"].get<int64_t>(),
              line["cost"]["kv_bytes_allocated"].get<int64_t>());
    EXPECT_EQ(line["run"]["window_tokens"], 64);
    EXPECT_EQ(line["run"]["bootstrap_resamples"], 200);
    EXPECT_TRUE(line["streaming"]["paired_filled"]["kl"]["low"].is_number());
  }
  EXPECT_EQ(lines[1]["settings"]["window"], 8);  // h2o: half the budget recent
  const std::string markdown = eviction_eval_markdown(eval, info);
  EXPECT_NE(markdown.find("| sink | 16 |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| h2o | 16 |"), std::string::npos) << markdown;
  const std::string csv = eviction_eval_csv(lines);
  const std::string header = csv.substr(0, csv.find('\n'));
  EXPECT_TRUE(header.starts_with("schema,policy,budget_slots,")) << header;
  EXPECT_NE(header.find("streaming.paired.kl.mean"), std::string::npos);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
}

TEST(EvictionEvalText, ByteEndsAddUpToTheText) {
  const Tokenizer tokenizer = Tokenizer::from_model_path(tiny_model_path());
  const std::string text = "Grüße, the fox — ünïcødé and plain words.";
  const std::vector<int32_t> ids = tokenizer.encode(text, /*add_bos=*/false);
  const std::vector<int64_t> ends = token_byte_ends(tokenizer, ids);
  ASSERT_EQ(ends.size(), ids.size());
  EXPECT_EQ(ends.back(), static_cast<int64_t>(text.size()));
  // Every byte-level token brings at least one byte, counted with the token that brought it
  // (also the first byte of a character that a later token completes).
  EXPECT_GT(ends.front(), 0);
  EXPECT_TRUE(std::adjacent_find(ends.begin(), ends.end(), std::greater_equal<int64_t>()) ==
              ends.end());
}

}  // namespace
}  // namespace edgelm
