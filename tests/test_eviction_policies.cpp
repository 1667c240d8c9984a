// The attention-free policies and the two wrappers on planted caches, on every backend (the CPU's
// portable kernels, and OpenCL where a device is present: the cache lives in the backend's shared
// memory, is compacted by its kv_compact op and read back by the policies on the host): KeyDiff
// keeps the planted outlier keys (by the mean of the normalised keys), Expected Attention the keys
// the planted query statistics point at (GQA group average, the averaged future RoPE rotation, the
// covariance term, value norms, sinks left out of the statistics), random keeps a uniform subset of
// the history, the pyramid schedule keeps its total and shape and the manager holds each layer to
// it, and the protection wrapper never evicts a protected slot. The model hands over its queries
// before RoPE at no change to its logits, and the Generator passes every layer's to the policy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <numbers>
#include <set>

#include "backends/registry.h"
#include "core/error.h"
#include "eviction/cache_manager.h"
#include "eviction/pyramid_budget.h"
#include "eviction/random_policy.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "runtime/generator.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

Backend* backend_or_null(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Backend>> backends;
  if (!backends.contains(name)) {
    const std::vector<std::string> names = backend_names();
    backends[name] = std::find(names.begin(), names.end(), name) != names.end()
                         ? create_backend(name, {.n_threads = 2})
                         : nullptr;
  }
  return backends[name].get();
}

class OnBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = backend_or_null(GetParam());
    if (backend_ == nullptr) {
      if (GetParam() == "opencl" && opencl_built() &&
          std::getenv("EDGELM_REQUIRE_OPENCL") != nullptr) {
        FAIL() << "EDGELM_REQUIRE_OPENCL is set but no OpenCL device was found";
      }
      GTEST_SKIP() << "no " << GetParam() << " backend here";
    }
  }
  Backend& backend() { return *backend_; }

 private:
  Backend* backend_ = nullptr;
};

// A KvCache on the backend whose rows the test writes: each appended token gets, in every layer,
// key(position, kv head) and value(position, kv head) ([head_dim] each).
struct Synthetic {
  using Row = std::function<std::vector<float>(int64_t position, int64_t kv_head)>;
  Backend& backend;
  KvCache cache;
  Row key;
  Row value;

  Synthetic(Backend& b, int64_t n_layers, int64_t capacity, int64_t n_kv_heads, int64_t head_dim,
            Row key_row, Row value_row = {}, DType dtype = DType::F32)
      : backend(b),
        cache(b, n_layers, capacity, n_kv_heads, head_dim, dtype),
        key(std::move(key_row)),
        value(value_row ? std::move(value_row) : [head_dim](int64_t, int64_t) {
          return std::vector<float>(static_cast<size_t>(head_dim), 1.0f);
        }) {}

  void append(int64_t n) {
    const int64_t heads = cache.n_kv_heads(), dim = cache.head_dim();
    Tensor k = Tensor::empty(backend.memory(), DType::F32, {n, heads, dim});
    Tensor v = Tensor::empty(backend.memory(), DType::F32, {n, heads, dim});
    std::vector<int32_t> positions;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t position = cache.next_position() + t;
      positions.push_back(static_cast<int32_t>(position));
      for (int64_t g = 0; g < heads; ++g) {
        const std::vector<float> key_row = key(position, g), value_row = value(position, g);
        std::copy(key_row.begin(), key_row.end(), k.data<float>() + (t * heads + g) * dim);
        std::copy(value_row.begin(), value_row.end(), v.data<float>() + (t * heads + g) * dim);
      }
    }
    for (int64_t l = 0; l < cache.n_layers(); ++l) cache.append(l, k, v, positions);
    cache.advance(n);
    backend.synchronize();  // k and v go out of scope here
  }

  // One decode-like step: evict for one more token, then append it.
  void step(CacheManager& manager, const std::vector<int32_t>& token_ids = {}) {
    manager.maybe_evict(cache, Phase::Decode, 1);
    if (!token_ids.empty()) {
      manager.tokens().record(cache.next_position(), std::span(token_ids).subspan(0, 1));
    }
    append(1);
  }

  std::set<int32_t> kept(int64_t layer, int64_t g) const {
    std::set<int32_t> positions;
    for (int64_t s = 0; s < cache.size(layer); ++s) positions.insert(cache.position(layer, s, g));
    return positions;
  }
};

std::vector<float> axis(int64_t dim, int64_t i, float length) {
  std::vector<float> row(static_cast<size_t>(dim), 0.0f);
  row[static_cast<size_t>(i)] = length;
  return row;
}

EvictionConfig budgeted(const std::string& policy, int64_t budget) {
  EvictionConfig config;
  config.policy = policy;
  config.kv_budget = budget;
  config.sink_tokens = 0;
  return config;
}

// ---- KeyDiff ----

// Ten keys per kv head: seven along e0, one far longer key along e_a and two along e_b. The mean
// of the normalised keys is (7 e0 + e_a + 2 e_b) / 10, so the least similar are the e_a key
// (cosine 1/sqrt(54)) and the two e_b keys (2/sqrt(54)). The mean of the raw keys would point
// along the long e_a key and keep the e_b keys and an e0 key instead.
TEST_P(OnBackend, KeyDiffKeepsThePlantedOutlierKeys) {
  for (const DType dtype : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::map<int64_t, std::vector<float>> head0 = {
        {3, axis(8, 1, 100.0f)}, {5, axis(8, 2, 1.0f)}, {8, axis(8, 2, 1.0f)}};
    const std::map<int64_t, std::vector<float>> head1 = {
        {2, axis(8, 3, 50.0f)}, {6, axis(8, 4, 1.0f)}, {9, axis(8, 4, 1.0f)}};
    Synthetic planted(
        backend(), 1, 16, 2, 8,
        [&](int64_t position, int64_t g) {
          const auto& plants = g == 0 ? head0 : head1;
          const auto it = plants.find(position);
          return it != plants.end() ? it->second : axis(8, 0, 1.0f);
        },
        {}, dtype);
    planted.append(10);
    const EvictionConfig config = budgeted("keydiff", 4);
    CacheManager manager(config, make_policy(config));
    ASSERT_TRUE(manager.maybe_evict(planted.cache, Phase::Decode, 1).has_value());
    EXPECT_EQ(planted.kept(0, 0), (std::set<int32_t>{3, 5, 8}));
    EXPECT_EQ(planted.kept(0, 1), (std::set<int32_t>{2, 6, 9}));
  }
}

// ---- Expected Attention ----

// Hands one layer's planted queries (rows [n, n_heads, head_dim]) to the manager's policy.
void observe_queries(CacheManager& manager, KvCache& cache, const std::vector<float>& rows,
                     int64_t n_heads, int64_t head_dim, int64_t first_position,
                     const std::vector<float>& inv_freq) {
  manager.observe(cache, Phase::Decode, {});  // prepares the policy, as the first step does
  const auto n = static_cast<int64_t>(rows.size()) / (n_heads * head_dim);
  manager.policy().observe_queries({.layer = 0,
                                    .rows = rows.data(),
                                    .n_tokens = n,
                                    .n_heads = n_heads,
                                    .head_dim = head_dim,
                                    .first_position = first_position,
                                    .inv_freq = inv_freq});
}

// Keys 4 e_p at position p (head_dim 16, so a query a e_p gives the logit a e_p · 4 e_p / 4 = a).
// Group 0: query head 0's mean splits its expected attention 55/45 between positions 1 and 4,
// head 1's 60/40 between 6 and 4; the group average ranks 4 (0.425) over 6 (0.30) and 1 (0.275),
// where the maximum over the heads would pick 6 and head 0 alone 1. Group 1's heads both point
// at 8. A first query at position 0 (a sink) points at 10 with a large weight: left out of the
// statistics, as kvpress leaves out the sinks' hidden states, it changes nothing. RoPE frequencies
// of 0 make the averaged rotation the identity.
TEST_P(OnBackend, ExpectedAttentionKeepsKeysThePlantedQueryMeanPointsAt) {
  Synthetic planted(backend(), 1, 32, 2, 16,
                    [](int64_t position, int64_t) { return axis(16, position % 16, 4.0f); });
  planted.append(12);
  EvictionConfig config = budgeted("expected_attention", 3);  // keeps the sink and one more
  config.sink_tokens = 1;
  CacheManager manager(config, make_policy(config));
  const float split = std::log(1.5f), near_split = std::log(0.55f / 0.45f);
  const std::vector<std::vector<std::pair<int, float>>> heads = {
      {{1, 20.0f}, {4, 20.0f - near_split}},
      {{6, 20.0f}, {4, 20.0f - split}},
      {{8, 20.0f}},
      {{8, 20.0f}}};
  std::vector<float> rows(4 * 4 * 16, 0.0f);  // 4 queries at positions 0..3
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t h = 0; h < 4; ++h) {
      float* row = rows.data() + (t * 4 + h) * 16;
      if (t == 0) {
        row[10] = 400.0f;  // the sink's query
        continue;
      }
      for (const auto& [position, logit] : heads[h]) row[position] = logit;
    }
  }
  observe_queries(manager, planted.cache, rows, 4, 16, 0, std::vector<float>(8, 0.0f));
  ASSERT_TRUE(manager.maybe_evict(planted.cache, Phase::Decode, 1).has_value());
  EXPECT_EQ(planted.kept(0, 0), (std::set<int32_t>{0, 4}));
  EXPECT_EQ(planted.kept(0, 1), (std::set<int32_t>{0, 8}));
}

// The query mean is taken to the future positions by the averaged RoPE rotation. head_dim 4 with
// the first pair (elements 0 and 2) turning by pi/2 per position: over one future position, 5
// (the next), the rotation is a quarter turn plus whole turns, which takes a mean along e0 to e2.
// So the key along e2 is kept, where the unrotated mean would keep the key along e0.
TEST_P(OnBackend, ExpectedAttentionRotatesTheMeanToTheFuturePositions) {
  const std::map<int64_t, std::vector<float>> keys = {{0, {4, 0, 0, 0}},
                                                      {1, {0, 0, 4, 0}},
                                                      {2, {-4, 0, 0, 0}},
                                                      {3, {0, 1, 0, 0}},
                                                      {4, {0, 0, 0, 1}}};
  Synthetic planted(backend(), 1, 8, 1, 4,
                    [&](int64_t position, int64_t) { return keys.at(position); });
  planted.append(5);
  EvictionConfig config = budgeted("expected_attention", 2);
  config.ea_future_positions = 1;
  CacheManager manager(config, make_policy(config));
  observe_queries(manager, planted.cache, {3, 0, 0, 0}, 1, 4, 0,
                  {std::numbers::pi_v<float> / 2, 0.0f});
  ASSERT_TRUE(manager.maybe_evict(planted.cache, Phase::Decode, 1).has_value());
  EXPECT_EQ(planted.kept(0, 0), (std::set<int32_t>{1}));
}

// Queries +-3 e1 in turn: mean 0, variance 9 along e1. With the covariance term the key along e1
// (the older one) gets the larger expected logit, kᵀ Σ k / (2 d) = 4 · 9 / 8; without it both
// logits are 0 and the manager's tie-break keeps the newer key.
TEST_P(OnBackend, ExpectedAttentionCovarianceTermFavoursKeysAlongTheQueryVariance) {
  for (const bool covariance : {true, false}) {
    SCOPED_TRACE(covariance ? "with covariance" : "without");
    Synthetic planted(backend(), 1, 8, 1, 4, [](int64_t position, int64_t) {
      return position == 0 ? std::vector<float>{0, 2, 0, 0} : std::vector<float>{0, 0, 0, 2};
    });
    planted.append(2);
    EvictionConfig config = budgeted("expected_attention", 2);
    config.ea_covariance = covariance;
    CacheManager manager(config, make_policy(config));
    observe_queries(manager, planted.cache, {0, 3, 0, 0, 0, -3, 0, 0}, 1, 4, 0, {0.0f, 0.0f});
    ASSERT_TRUE(manager.maybe_evict(planted.cache, Phase::Decode, 1).has_value());
    EXPECT_EQ(planted.kept(0, 0), (std::set<int32_t>{covariance ? 0 : 1}));
  }
}

// Before any query the expected attention is uniform, so the value norms decide: |v| = 3, 1, 2
// at positions 0, 1, 2 keep 0 and 2.
TEST_P(OnBackend, ExpectedAttentionWeighsByValueNorm) {
  Synthetic planted(
      backend(), 1, 8, 1, 4, [](int64_t position, int64_t) { return axis(4, position, 1.0f); },
      [](int64_t position, int64_t) {
        return axis(4, 0, position == 0 ? 3.0f : position == 1 ? 1.0f : 2.0f);
      });
  planted.append(3);
  const EvictionConfig config = budgeted("expected_attention", 3);
  CacheManager manager(config, make_policy(config));
  ASSERT_TRUE(manager.maybe_evict(planted.cache, Phase::Decode, 1).has_value());
  EXPECT_EQ(planted.kept(0, 0), (std::set<int32_t>{0, 2}));
}

// ---- random ----

// Streaming 100 tokens through a budget of 10, the 9 older slots kept are exactly the 9 highest
// scores among positions 0..98 (and the newest token is appended after the eviction): the kept
// set is the top of a fixed random ranking of the whole history, a uniform subset.
TEST_P(OnBackend, RandomKeepsTheTopOfAFixedRankingOfTheHistory) {
  Synthetic stream(backend(), 1, 16, 2, 4,
                   [](int64_t position, int64_t) { return axis(4, position % 4, 1.0f); });
  EvictionConfig config = budgeted("random", 10);
  config.seed = 11;
  CacheManager manager(config, make_policy(config));
  for (int i = 0; i < 100; ++i) stream.step(manager);
  for (int64_t g = 0; g < 2; ++g) {
    std::vector<std::pair<float, int32_t>> ranked;
    for (int32_t p = 0; p < 99; ++p) ranked.emplace_back(random_slot_score(11, 0, g, p), p);
    std::sort(ranked.rbegin(), ranked.rend());
    std::set<int32_t> expected = {99};
    for (int i = 0; i < 9; ++i) expected.insert(ranked[static_cast<size_t>(i)].second);
    EXPECT_EQ(stream.kept(0, g), expected) << "kv head " << g;
  }
  // Another seed keeps another subset; the kv heads are drawn independently.
  EXPECT_NE(stream.kept(0, 0), stream.kept(0, 1));
}

// Over 200 seeds, the slots kept from 63 streamed positions fall as often in the first half as a
// uniform choice predicts (32 of 63: 813 of 1600 expected, standard deviation 20). Evicting one
// random slot per step instead would keep few old positions (each survives a step with
// probability 8/9, so position 0 survives 55 steps with probability 0.002). A statistical property
// of the scores, so the CPU alone runs it (its 12,800 steps take seconds on PoCL); the test above
// checks the same ranking on every backend.
TEST(RandomPolicy, IsUniformOverTheHistory) {
  int64_t in_first_half = 0, kept = 0;
  Synthetic stream(*backend_or_null("cpu:portable"), 1, 16, 1, 4,
                   [](int64_t position, int64_t) { return axis(4, position % 4, 1.0f); });
  for (uint64_t seed = 0; seed < 200; ++seed) {
    stream.cache.clear();
    EvictionConfig config = budgeted("random", 9);
    config.seed = seed;
    CacheManager manager(config, make_policy(config));
    for (int i = 0; i < 64; ++i) stream.step(manager);
    for (const int32_t position : stream.kept(0, 0)) {
      if (position == 63) continue;  // the newest, appended after the last eviction
      ++kept;
      if (position < 32) ++in_first_half;
    }
  }
  ASSERT_EQ(kept, 200 * 8);
  EXPECT_NEAR(static_cast<double>(in_first_half), 1600.0 * 32.0 / 63.0, 100.0);
}

// ---- per-layer budgets ----

TEST(PyramidSchedule, SumsToTheTotalAndNeverRises) {
  for (const int64_t n_layers : {1, 2, 3, 16, 30}) {
    for (const int64_t limit : {8, 64, 100, 257}) {
      for (const int64_t floor : {0, 4, 32}) {
        for (const double beta : {1.0, 2.0, 7.5, 20.0}) {
          const std::vector<int64_t> limits = pyramid_layer_limits(n_layers, limit, floor, beta);
          SCOPED_TRACE(
              str_cat(n_layers, " layers, limit ", limit, ", floor ", floor, ", beta ", beta));
          ASSERT_EQ(static_cast<int64_t>(limits.size()), n_layers);
          int64_t total = 0;
          for (int64_t l = 0; l < n_layers; ++l) {
            total += limits[l];
            if (l > 0) {
              EXPECT_LE(limits[l], limits[l - 1]) << "layer " << l;
            }
            if (limit > floor) {
              EXPECT_GE(limits[l], floor) << "layer " << l;
            }
          }
          EXPECT_EQ(total, n_layers * limit);
          if (n_layers > 1 && limit - floor >= 8 && beta > 1.0) {
            EXPECT_GT(limits.front(), limits.back());
          }
        }
      }
    }
  }
}

// PyramidKV's shape: above the floor, a line from 2A - A/beta at the bottom layer to A/beta at
// the top, A the average share. 4 layers, limit 10, floor 2, beta 4: A = 8, so 2 + 14, 2 + 10,
// 2 + 6, 2 + 2. With 30 layers, limit 128, floor 32, beta 20 (A = 96): 219.2 at the bottom and
// 36.8 at the top, rounded to whole slots with the total kept.
TEST(PyramidSchedule, IsPyramidKvsLine) {
  EXPECT_EQ(pyramid_layer_limits(4, 10, 2, 4.0), (std::vector<int64_t>{16, 12, 8, 4}));
  const std::vector<int64_t> smollm = pyramid_layer_limits(30, 128, 32, 20.0);
  EXPECT_EQ(smollm.front(), 219);
  EXPECT_EQ(smollm.back(), 37);
  EXPECT_EQ(pyramid_layer_limits(5, 50, 0, 1.0), std::vector<int64_t>(5, 50));
  EXPECT_EQ(pyramid_layer_limits(1, 50, 0, 20.0), std::vector<int64_t>(1, 50));
}

// Through the manager on the backend: four layers holding a budget of 12 with beta 3 (layer
// limits 20, 15, 9, 4) each keep their own count, compacted layer by layer.
TEST_P(OnBackend, PyramidHoldsEachLayerToItsShare) {
  Synthetic stream(backend(), 4, 32, 2, 4,
                   [](int64_t position, int64_t g) { return axis(4, (position + g) % 4, 1.0f); });
  EvictionConfig config = budgeted("random", 12);
  config.layer_budget = "pyramid";
  config.pyramid_beta = 3;
  CacheManager manager(config, make_policy(config));
  const std::vector<int64_t> limits = pyramid_layer_limits(4, 12, 0, 3.0);
  ASSERT_EQ(limits, (std::vector<int64_t>{20, 15, 9, 4}));
  for (int i = 0; i < 40; ++i) {
    stream.step(manager);
    for (int64_t l = 0; l < 4; ++l) {
      ASSERT_LE(stream.cache.size(l), limits[l]) << "layer " << l << " step " << i;
    }
  }
  for (int64_t l = 0; l < 4; ++l) {
    EXPECT_EQ(stream.cache.size(l), limits[l]) << "layer " << l;
    for (int64_t g = 0; g < 2; ++g) {
      EXPECT_EQ(static_cast<int64_t>(stream.kept(l, g).size()), limits[l]);
      EXPECT_TRUE(stream.kept(l, g).count(39)) << "the newest token, layer " << l;
    }
  }
}

// ---- protected classes ----

constexpr int32_t kImStart = 7;  // the planted special ids
constexpr int32_t kImEnd = 8;

std::vector<int32_t> planted_tokens(int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(i % 11 == 3 ? kImStart : i % 13 == 5 ? kImEnd : 100);
  return ids;
}

// Under every budget that can hold them, no protected slot is ever evicted, whatever the wrapped
// policy scores: sinks (2), the system prompt (positions 2..8) and every special token, around
// random scores, KeyDiff, and H2O, whose recent window it promises too (that promise ranks below
// the protected slots).
TEST_P(OnBackend, ProtectionNeverEvictsAProtectedSlot) {
  const std::vector<int32_t> ids = planted_tokens(80);
  std::set<int32_t> specials;
  for (int i = 0; i < 80; ++i)
    if (ids[static_cast<size_t>(i)] != 100) specials.insert(i);
  for (const std::string policy : {"random", "keydiff", "h2o"}) {
    // 20 protected positions in all: a budget of 21 keeps them and the newest token.
    for (const int64_t budget : {21, 22, 26, 31, 40, 79, 100}) {
      SCOPED_TRACE(str_cat(policy, ", budget ", budget));
      Synthetic stream(backend(), 2, 128, 2, 4, [](int64_t position, int64_t g) {
        return std::vector<float>{std::sin(position * 1.3f + g), std::cos(position * 0.7f), 1.0f,
                                  0.1f * static_cast<float>(position % 5)};
      });
      EvictionConfig config = budgeted(policy, budget);
      config.window = 4;
      config.sink_tokens = 2;
      config.protect = "sinks,system,template";
      CacheManager manager(config, make_policy(config));
      manager.tokens().set_special_ids({kImStart, kImEnd});
      manager.tokens().set_system_prompt(2, 9);
      for (int i = 0; i < 80; ++i) {
        stream.step(manager, {ids[static_cast<size_t>(i)]});
        for (int64_t l = 0; l < 2; ++l) {
          ASSERT_LE(stream.cache.size(l), budget);
          for (int64_t g = 0; g < 2; ++g) {
            const std::set<int32_t> kept = stream.kept(l, g);
            for (int32_t p = 0; p <= i; ++p) {
              const bool protected_slot = p < 9 || specials.count(p) > 0;
              ASSERT_TRUE(!protected_slot || kept.count(p))
                  << "protected position " << p << " evicted at step " << i << ", layer " << l
                  << ", kv head " << g;
            }
          }
        }
      }
      if (budget < 80) {
        EXPECT_GT(manager.evictions(), 0);
      }
    }
  }
}

// When the protected slots alone exceed what a layer keeps, sinks and the system prompt stay and
// the newest template tokens fill the rest; when even the sinks and the system prompt do not fit,
// one error line names --protect.
TEST_P(OnBackend, ProtectionOverflowDropsTheOldestTemplateTokens) {
  Synthetic stream(backend(), 1, 64, 1, 4,
                   [](int64_t position, int64_t) { return axis(4, position % 4, 1.0f); });
  EvictionConfig config = budgeted("keydiff", 8);
  config.sink_tokens = 2;
  config.protect = "sinks,template";
  CacheManager manager(config, make_policy(config));
  manager.tokens().set_special_ids({kImStart});
  // Template tokens at positions 4, 6, 8, ..., 20: nine of them, with two sinks, over a layer
  // that keeps 7 before each new token.
  for (int i = 0; i < 22; ++i) stream.step(manager, {i >= 4 && i % 2 == 0 ? kImStart : 100});
  EXPECT_EQ(stream.kept(0, 0), (std::set<int32_t>{0, 1, 12, 14, 16, 18, 20, 21}));

  EvictionConfig tight = budgeted("keydiff", 6);
  tight.sink_tokens = 2;
  tight.protect = "sinks,system";
  CacheManager strict(tight, make_policy(tight));
  strict.tokens().set_system_prompt(2, 8);
  Synthetic small(backend(), 1, 64, 1, 4,
                  [](int64_t position, int64_t) { return axis(4, position % 4, 1.0f); });
  small.append(9);
  try {
    strict.maybe_evict(small.cache, Phase::Decode, 1);
    ADD_FAILURE() << "8 sink and system slots over a limit of 6 must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--protect"), std::string::npos) << e.what();
  }
}

// Prefill steps are sized to fit beside the protected sinks and system prompt: with 4 sinks
// inside a 20-token system prompt and a budget of 40, steps of (40 - 20) / 2 tokens, so each step
// can always be made room for without touching them.
TEST_P(OnBackend, ProtectionLeavesPrefillStepsRoomBesideTheSystemPrompt) {
  Synthetic stream(backend(), 1, 64, 1, 4,
                   [](int64_t position, int64_t) { return axis(4, position % 4, 1.0f); });
  EvictionConfig config = budgeted("keydiff", 40);
  config.sink_tokens = 4;
  config.protect = "sinks,system";
  CacheManager manager(config, make_policy(config));
  EXPECT_EQ(manager.max_step_tokens(stream.cache), 18);  // (40 - 4 sinks) / 2
  manager.tokens().set_system_prompt(0, 20);
  ASSERT_EQ(manager.max_step_tokens(stream.cache), 10);
  for (int step = 0; step < 8; ++step) {
    manager.maybe_evict(stream.cache, Phase::Prefill, 10);
    stream.append(10);
  }
  const std::set<int32_t> kept = stream.kept(0, 0);
  for (int32_t p = 0; p < 20; ++p) EXPECT_TRUE(kept.count(p)) << "system prompt position " << p;
}

TEST(TokenRecord, RecordsSpecialPositionsAndForgetsARewoundTail) {
  TokenRecord record;
  record.record(0, std::vector<int32_t>{5, 7, 5});
  EXPECT_FALSE(record.special(1)) << "nothing is recorded before the special ids are known";
  record.set_special_ids({7, 9});
  record.record(0, std::vector<int32_t>{5, 7, 5, 9});
  record.record(4, std::vector<int32_t>{9, 1});
  EXPECT_TRUE(record.special(1));
  EXPECT_TRUE(record.special(3));
  EXPECT_TRUE(record.special(4));
  EXPECT_FALSE(record.special(0));
  EXPECT_FALSE(record.special(5));
  // A cleared cache starts again at position 0: what was recorded there is forgotten.
  record.record(0, std::vector<int32_t>{1, 1, 7});
  EXPECT_FALSE(record.special(1));
  EXPECT_TRUE(record.special(2));
  EXPECT_FALSE(record.special(3));
  EXPECT_FALSE(record.special(4));
  record.set_system_prompt(0, 3);
  EXPECT_TRUE(record.in_system_prompt(2));
  EXPECT_FALSE(record.in_system_prompt(3));
}

// ---- the model's queries ----

LoadedModel tiny_weights(Backend& backend) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_eviction_policies_" + std::to_string(::getpid()));
  const std::string path = make_model(
      {.preset = "tiny", .format = "hf", .quant = DType::F32, .seed = 9, .out_dir = dir.string()});
  const std::unique_ptr<Backend> converter = create_weight_converter(backend.name());
  return load_llama(path, backend, {.converter = converter.get()});
}

// Layer 0's queries before RoPE, computed on the host from the F32 weights: Wq · rms_norm(x) for
// the token's embedding row x.
std::vector<float> layer0_queries(const LlamaConfig& c, const LlamaWeights& w,
                                  const std::vector<int32_t>& tokens) {
  const float* embedding = w.embedding.data<float>();
  const float* norm = w.layers[0].attn_norm.data<float>();
  const float* wq = w.layers[0].wq.data<float>();
  std::vector<float> out;
  for (const int32_t token : tokens) {
    const float* x = embedding + token * c.hidden_size;
    double squares = 0.0;
    for (int64_t i = 0; i < c.hidden_size; ++i) squares += double{x[i]} * x[i];
    const double scale =
        1.0 / std::sqrt(squares / static_cast<double>(c.hidden_size) + c.rms_norm_eps);
    for (int64_t r = 0; r < c.q_dim(); ++r) {
      double dot = 0.0;
      for (int64_t i = 0; i < c.hidden_size; ++i)
        dot += double{wq[r * c.hidden_size + i]} * x[i] * scale * norm[i];
      out.push_back(static_cast<float>(dot));
    }
  }
  return out;
}

void expect_rows_near(const Tensor& rows, const std::vector<float>& expected) {
  ASSERT_EQ(static_cast<size_t>(rows.numel()), expected.size());
  double worst = 0.0, largest = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::fabs(double{rows.data<float>()[i]} - expected[i]));
    largest = std::max(largest, std::fabs(double{expected[i]}));
  }
  EXPECT_LT(worst, 1e-4 * largest);  // float GEMM against a double sum over hidden 64
}

// The exported queries are the projection's output before RoPE, for every row in every layer
// (the last layer runs for all of them), in prefill and decode; asking for them changes no logit.
TEST_P(OnBackend, ModelExportsItsQueriesBeforeRope) {
  LoadedModel loaded = tiny_weights(backend());
  ASSERT_EQ(loaded.weights.layers[0].wq.dtype(), DType::F32);
  ASSERT_EQ(loaded.weights.embedding.dtype(), DType::F32);
  const LlamaConfig config = loaded.config;
  const LlamaWeights weights = loaded.weights;  // the same buffers, shared
  LlamaModel model(backend(), std::move(loaded.config), std::move(loaded.weights), 16);
  const std::vector<int32_t> tokens = {3, 77, 150, 9, 31};
  auto run = [&](KvCache& cache, const std::vector<int32_t>& ids, bool export_queries) {
    const std::span<const float> logits =
        model.forward(ids, cache, {.export_queries = export_queries});
    return std::vector<float>(logits.begin(), logits.end());
  };
  KvCache plain = model.make_cache(32, DType::F32);
  KvCache exporting = model.make_cache(32, DType::F32);
  EXPECT_EQ(run(exporting, tokens, true), run(plain, tokens, false));
  expect_rows_near(model.query_rows(0), layer0_queries(config, weights, tokens));
  // The last layer, pruned to the logit row past its projections, still exports every row: the
  // same rows as a step that runs that layer whole (all logits), on a second model's buffers.
  const Tensor last = model.query_rows(config.n_layers - 1);
  ASSERT_EQ(last.dim(0), 5);
  const std::vector<float> pruned_rows(last.data<float>(), last.data<float>() + last.numel());
  LlamaModel whole(backend(), config, weights, 16);
  KvCache whole_cache = whole.make_cache(32, DType::F32);
  whole.forward(tokens, whole_cache,
                {.all_logits = true, .logits_from = 0, .export_queries = true});
  const Tensor whole_last = whole.query_rows(config.n_layers - 1);
  EXPECT_EQ(
      std::vector<float>(whole_last.data<float>(), whole_last.data<float>() + whole_last.numel()),
      pruned_rows);
  EXPECT_EQ(run(exporting, {201}, true), run(plain, {201}, false));
  expect_rows_near(model.query_rows(0), layer0_queries(config, weights, {201}));
}

// Copies what observe_queries hands over, layer by layer; never evicts on its own.
class QueryRecorder final : public EvictionPolicy {
 public:
  struct Step {
    std::vector<QueryRows> layers;           // rows pointers cleared: valid during the call only
    std::vector<std::vector<float>> values;  // each layer's rows
  };
  std::string name() const override { return "query_recorder"; }
  bool wants_queries() const override { return true; }
  void score(const LayerSlots&, Phase, float*) override {}
  void observe_queries(const QueryRows& queries) override {
    if (queries.layer == 0) steps.emplace_back();
    const int64_t count = queries.n_tokens * queries.n_heads * queries.head_dim;
    steps.back().values.emplace_back(queries.rows, queries.rows + count);
    steps.back().layers.push_back(queries);
    steps.back().layers.back().rows = nullptr;
  }
  std::vector<Step> steps;
};

// The Generator hands the cache manager every layer's queries as the model exported them (the
// model keeps each layer's rows max_chunk rows apart, wider than a short step), with the step's
// first position and the model's RoPE frequencies, in prefill and decode.
TEST_P(OnBackend, GeneratorHandsTheModelsQueriesOfEveryLayerToThePolicy) {
  LoadedModel loaded = tiny_weights(backend());
  LlamaModel model(backend(), std::move(loaded.config), std::move(loaded.weights), 16);
  ASSERT_GE(model.config().n_layers, 2);
  KvCache cache = model.make_cache(32, DType::F32);
  auto recorder = std::make_unique<QueryRecorder>();
  QueryRecorder& recorded = *recorder;
  CacheManager manager(EvictionConfig{}, std::move(recorder));
  Generator generator(model, cache, &manager);
  auto expect_step = [&](const QueryRecorder::Step& step, int64_t n_tokens, int64_t first) {
    ASSERT_EQ(static_cast<int64_t>(step.layers.size()), model.config().n_layers);
    for (int64_t l = 0; l < model.config().n_layers; ++l) {
      SCOPED_TRACE("layer " + std::to_string(l));
      const QueryRows& rows = step.layers[static_cast<size_t>(l)];
      EXPECT_EQ(rows.layer, l);
      EXPECT_EQ(rows.n_tokens, n_tokens);
      EXPECT_EQ(rows.n_heads, model.config().n_heads);
      EXPECT_EQ(rows.head_dim, model.config().head_dim);
      EXPECT_EQ(rows.first_position, first);
      EXPECT_EQ(rows.inv_freq.data(), model.rope_inv_freq().data());
      EXPECT_EQ(rows.inv_freq.size(), model.rope_inv_freq().size());
      const Tensor exported = model.query_rows(l);
      EXPECT_EQ(
          step.values[static_cast<size_t>(l)],
          std::vector<float>(exported.data<float>(), exported.data<float>() + exported.numel()));
    }
  };
  const std::vector<int32_t> prompt = {3, 77, 150, 9, 31};
  generator.prefill(prompt);
  ASSERT_EQ(recorded.steps.size(), 1u);
  expect_step(recorded.steps[0], 5, 0);
  generator.decode(201);
  ASSERT_EQ(recorded.steps.size(), 2u);
  expect_step(recorded.steps[1], 1, 5);
}

INSTANTIATE_TEST_SUITE_P(Backends, OnBackend, ::testing::Values("cpu:portable", "opencl"),
                         [](const auto& param_info) {
                           return param_info.param == "opencl" ? std::string("opencl")
                                                               : std::string("cpu_portable");
                         });

}  // namespace
}  // namespace edgelm
