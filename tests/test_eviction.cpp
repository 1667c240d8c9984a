// Eviction through generation on a tiny model: every policy keeps the cache within its limit and
// keeps what it promises, is deterministic, changes nothing when the budget covers the sequence,
// keeps logical positions growing while slots shrink; the cache's allocation follows the limit;
// memory pressure triggers at the threshold and not before.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"

#include "tests/eviction_test_util.h"

namespace edgelm {
namespace {

using namespace eviction_test;

class EveryPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPolicy, StaysWithinLimitAndKeepsPromises) {
  const std::string policy = GetParam();
  generate(policy, 64, 60, config_for(policy), [&](const KvCache& cache, const std::string& v) {
    const std::string p = v.substr(0, v.find('+'));
    for (int64_t l = 0; l < cache.n_layers(); ++l) {
      ASSERT_LE(cache.size(l), limit_for(v, l)) << v << " layer " << l;
      for (int64_t g = 0; g < cache.n_kv_heads(); ++g) {
        std::set<int32_t> kept;
        for (int64_t s = 0; s < cache.size(l); ++s) kept.insert(cache.position(l, s, g));
        const int32_t next = static_cast<int32_t>(cache.next_position());
        auto expect_kept = [&](int32_t position, const char* what) {
          ASSERT_TRUE(kept.count(position)) << p << ": " << what << " position " << position
                                            << " missing in layer " << l << " head " << g;
        };
        if (p == "sliding") {
          for (int32_t q = 0; q < 3; ++q) expect_kept(q, "protected prefix");
          for (int32_t q = next - 12; q < next; ++q) expect_kept(q, "recent window");
        }
        // SnapKV's decode keeps its sinks only if its prompt compression kept them, which the
        // tiny model's attention decides: SnapKv.DecodeKeepsSinksAndTheRecentWindow plants it.
        if (p == "sink")
          for (int32_t q = next - 12; q < next; ++q) expect_kept(q, "recent window");
        if (p == "sink" || p == "expected_attention" || v.find("+protect") != std::string::npos)
          for (int32_t q = 0; q < 4; ++q) expect_kept(q, "sink");
        if (p == "h2o")
          for (int32_t q = next - 12; q < next; ++q) expect_kept(q, "recent window");
        if (p == "snapkv") expect_kept(next - 1, "newest token");
      }
    }
  });
}

TEST_P(EveryPolicy, IsDeterministic) {
  const std::string policy = GetParam();
  const GenerationRun a = generate(policy, 64, 40, config_for(policy));
  const GenerationRun b = generate(policy, 64, 40, config_for(policy));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.kept, b.kept);
}

// With a limit at least the sequence length nothing is evicted, and the logits are identical to
// running without a policy (exporting attention mass does not change the attention output).
TEST_P(EveryPolicy, BudgetCoveringTheSequenceChangesNothing) {
  const std::string policy = GetParam();
  EvictionConfig generous = config_for(policy);
  generous.window = 200;
  generous.kv_budget = generous.policy == "sliding" || generous.policy == "sink" ? 0 : 400;
  generous.snapkv_window = 6;
  generous.pyramid_beta = 1.5;  // the top layer's share, 267+ slots, still covers the sequence
  const GenerationRun with_policy = generate(policy, 1024, 30, generous);
  const GenerationRun without = generate("none", 512, 30, config_for("none"));
  EXPECT_EQ(with_policy.tokens, without.tokens);
  ASSERT_EQ(with_policy.logits.size(), without.logits.size());
  for (size_t i = 0; i < without.logits.size(); ++i) {
    EXPECT_EQ(with_policy.logits[i], without.logits[i]) << policy << " step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, EveryPolicy, ::testing::ValuesIn(every_policy_variant()),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), '+', '_');
                           return name;
                         });

// After an eviction the next token's key is rotated by its logical position (start_pos), not by
// its slot: layer 0's key depends only on the token and its position, so it must equal, bit for
// bit, the key the same token gets at the same position in a run that never evicted.
TEST(EvictionPositions, NextKeyUsesLogicalPositionAfterEviction) {
  LlamaModel& model = tiny_model();
  const std::vector<int32_t> tokens = prompt(40);
  EvictionConfig config = config_for("sink");  // limit 16: evicts while the prompt runs
  KvCache evicted_cache = model.make_cache(32, DType::F32);
  CacheManager manager(config, make_policy(config));
  Generator evicting(model, evicted_cache, &manager);
  evicting.prefill(tokens);
  ASSERT_GT(manager.evictions(), 0);
  KvCache full_cache = model.make_cache(64, DType::F32);
  Generator plain(model, full_cache);
  plain.prefill(tokens);

  const int32_t next = 99;
  evicting.decode(next);
  plain.decode(next);
  const int64_t slot = evicted_cache.size(0) - 1;
  ASSERT_LT(slot, evicted_cache.next_position() - 1);  // slots shrank below positions
  EXPECT_EQ(evicted_cache.position(0, slot, 0), 40);
  EXPECT_EQ(evicted_cache.next_position(), 41);
  const int64_t row = model.config().n_kv_heads * model.config().head_dim;
  const float* evicted_key = evicted_cache.view(0).k.data<float>() + slot * row;
  const float* reference_key = full_cache.view(0).k.data<float>() + 40 * row;
  for (int64_t i = 0; i < row; ++i) ASSERT_EQ(evicted_key[i], reference_key[i]) << "element " << i;
}

TEST(EvictionPositions, RunsTenTimesPastMaxSeqLen) {
  EvictionConfig config = config_for("sink");
  config.window = 20;
  int64_t most = 0;
  const GenerationRun run =
      generate("sink", 32, 320, config, [&](const KvCache& cache, const std::string&) {
        most = std::max(most, cache.size(0));
        ASSERT_LE(cache.size(0), 24);
      });
  EXPECT_EQ(run.tokens.size(), 320u);
  EXPECT_EQ(most, 24);
}

// ---- memory follows the budget ----

// Each policy's cache holds its limit (sinks/prefix + window, or the budget), plus one prefill
// step for SnapKV, never more than the logical context; `none` holds the context. Generation runs
// to positions far past the allocation within the limit.
TEST(KvCapacity, FollowsTheLimitNotTheContext) {
  const std::map<std::string, int64_t> expected = {{"none", 512},  {"sliding", 15}, {"sink", 16},
                                                   {"snapkv", 32}, {"h2o", 24},     {"tova", 24}};
  for (const auto& [policy, slots] : expected) {
    const EvictionConfig config = config_for(policy);
    CacheManager manager(config, make_policy(config));
    const int64_t layers = tiny_model().config().n_layers;
    EXPECT_EQ(manager.capacity_for(512, 8, layers), slots) << policy;
    EXPECT_EQ(manager.capacity_for(20, 8, layers), std::min<int64_t>(20, slots)) << policy;
    if (policy == "none") continue;
    // generate() runs a 30-token prompt and 60 steps (to position 90) in that many slots.
    generate(policy, slots, 60, config, [&](const KvCache& cache, const std::string& p) {
      for (int64_t l = 0; l < cache.n_layers(); ++l) ASSERT_LE(cache.size(l), limit_for(p, l));
    });
  }
  // The limit a budget gives and the one in bytes are the same slots.
  const size_t slot = KvCache::slot_bytes(30, 3, 64, DType::F16);  // SmolLM2-135M, F16
  EXPECT_EQ(slot, 23040u);
  EXPECT_EQ(kv_budget_from_bytes(256 * slot, slot), 256);
  EXPECT_EQ(kv_budget_from_bytes(257 * slot - 1, slot), 256);  // rounded down
  try {
    kv_budget_from_bytes(slot - 1, slot);
    FAIL() << "a budget below one slot was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--budget-bytes 23039 holds no KV slot"),
              std::string::npos)
        << e.what();
  }
}

// Unset windows and sink counts are carved out of the budget; set ones stay.
TEST(BudgetDefaults, ScaleWithTheBudget) {
  auto resolved = [](const std::string& policy, int64_t budget) {
    EvictionConfig c;
    c.policy = policy;
    c.kv_budget = budget;
    return with_budget_defaults(c);
  };
  EXPECT_EQ(*resolved("sink", 0).window, 512);
  EXPECT_EQ(*resolved("sink", 0).sink_tokens, 4);
  EXPECT_EQ(*resolved("sink", 1024).sink_tokens, 4);
  EXPECT_EQ(*resolved("sink", 1024).window, 1020);
  EXPECT_EQ(*resolved("sink", 128).sink_tokens, 2);
  EXPECT_EQ(*resolved("sink", 128).window, 126);
  EXPECT_EQ(*resolved("sink", 16).sink_tokens, 1);
  EXPECT_EQ(*resolved("sink", 1).sink_tokens, 0);
  EXPECT_EQ(*resolved("sink", 1).window, 1);
  EXPECT_EQ(*resolved("h2o", 256).window, 128);
  EXPECT_EQ(*resolved("snapkv", 256).sink_tokens, 4);
  EvictionConfig sliding;
  sliding.policy = "sliding";
  sliding.kv_budget = 100;
  sliding.protected_prefix = 10;
  EXPECT_EQ(*with_budget_defaults(sliding).window, 90);
  sliding.window = 7;
  sliding.sink_tokens = 9;
  EXPECT_EQ(*with_budget_defaults(sliding).window, 7);
  EXPECT_EQ(*with_budget_defaults(sliding).sink_tokens, 9);
  // Through the policies: sink at a budget of 256 holds 4 sinks and 252 recent tokens, h2o 128
  // recent tokens.
  EvictionConfig sink;
  sink.policy = "sink";
  sink.kv_budget = 256;
  EXPECT_EQ(make_policy(sink)->own_limit(), 256);
}

// The simulated monitor reports 1000 MiB until step 30, then 100 MiB: with a 256 MiB threshold
// the first eviction happens at step 30 (the 31st check) and none before.
TEST(MemoryPressure, EvictsAtThresholdAndNotBefore) {
  EvictionConfig config = config_for("sink");
  config.window = 500;  // the policy's own limit never fires here
  config.memory_threshold_mb = 256;
  config.pressure_floor = 1;  // the cap is half the cache, whatever it holds
  LlamaModel& model = tiny_model();
  KvCache cache = model.make_cache(600, DType::F32);
  auto monitor = SimulatedMonitor::parse("0:1000,30:100");
  CacheManager manager(config, make_policy(config), std::move(monitor));
  Generator generator(model, cache, &manager);
  std::span<const float> logits = generator.prefill(prompt(8));  // one check (a single chunk)
  int64_t slots_before = 0;
  for (int step = 1; step <= 40; ++step) {
    if (step == 30) slots_before = cache.size(0);
    logits = generator.decode(argmax(logits));
    if (step < 30) {
      ASSERT_EQ(manager.evictions(), 0)
          << "evicted at step " << step << " with memory above the threshold";
    }
  }
  ASSERT_GE(manager.evictions(), 1);
  const EvictionEvent& first = manager.events().front();
  EXPECT_EQ(first.reason, "memory");
  EXPECT_EQ(first.step, 31);
  EXPECT_EQ(first.slots_before + 1, slots_before + 1);
  EXPECT_LE(first.slots_after, slots_before / 2);
  // While memory stays low the cap holds like a budget: later evictions keep the cache at it.
  for (const EvictionEvent& event : manager.events()) EXPECT_EQ(event.reason, "memory");
  EXPECT_LE(cache.size(0), first.slots_after + 1);
}

// Memory pressure gives the freed pages back: a sink cache of 8192 slots (4 MiB of K and V, all
// resident from the start) capped at half of its 37 slots when pressure begins returns the pages
// past the cap at once, and the resident set of the process drops; while the cap holds nothing
// more is released, the cache keeps working, and the cap below the policy's limit (its window
// of 500) is a fallback, warned about once.
TEST(MemoryPressure, GivesFreedPagesBackToTheSystem) {
  EvictionConfig config = config_for("sink");
  config.window = 8000;
  config.pressure_floor = 10;  // below half of the 37 slots held when pressure begins
  LlamaModel& model = tiny_model();
  KvCache cache = model.make_cache(8192, DType::F32);
  ASSERT_EQ(cache.memory_bytes(), 4u << 20);
  ASSERT_EQ(cache.resident_bytes(), cache.memory_bytes());
  CacheManager manager(config, make_policy(config), SimulatedMonitor::parse("0:1000,30:100"));
  Generator generator(model, cache, &manager);
  std::span<const float> logits = generator.prefill(prompt(8));
  for (int step = 1; step <= 40; ++step) logits = generator.decode(argmax(logits));
  ASSERT_GE(manager.events().size(), 2u);
  const EvictionEvent& first = manager.events().front();
  ASSERT_EQ(first.reason, "memory");
  EXPECT_EQ(first.slots_after, 18 - 1);
  const size_t past_cap = cache.memory_bytes() - 18 * cache.memory_bytes() / 8192;
  EXPECT_GE(first.released_bytes, past_cap - 4 * 4 * 4096);  // but a page at each end of 4 tensors
  EXPECT_GE(first.rss_before_bytes, first.rss_after_bytes + first.released_bytes / 2);
  EXPECT_LE(cache.resident_bytes(), cache.memory_bytes() - first.released_bytes);
  for (size_t i = 1; i < manager.events().size(); ++i)
    EXPECT_EQ(manager.events()[i].released_bytes, 0u) << "event " << i;
  EXPECT_EQ(manager.released_bytes(), first.released_bytes);
  EXPECT_EQ(manager.fallbacks(), (std::map<std::string, int64_t>{{"pressure", 1}}));
  EXPECT_EQ(cache.size(0), 18);
  EXPECT_EQ(cache.next_position(), 8 + 40);
}

// More always-kept slots than a limit leaves (here 16 sinks under a memory cap of 13, a floor
// given below them) is a fallback too: the oldest go, with one warning, counted each time.
TEST(MemoryPressure, CapBelowTheProtectedSlotsIsAFallback) {
  EvictionConfig config = config_for("sink");
  config.window = 500;
  config.sink_tokens = 16;
  config.pressure_floor = 13;
  LlamaModel& model = tiny_model();
  KvCache cache = model.make_cache(600, DType::F32);
  CacheManager manager(config, make_policy(config), SimulatedMonitor::parse("0:1000,20:100"));
  Generator generator(model, cache, &manager);
  std::span<const float> logits = generator.prefill(prompt(8));
  for (int step = 1; step <= 25; ++step) logits = generator.decode(argmax(logits));
  EXPECT_EQ(manager.fallbacks().at("pressure"), 1);
  EXPECT_GE(manager.fallbacks().at("protected"), 1);
  EXPECT_LE(cache.size(0), 13);
}

// Memory that stays below the threshold from the first step on: every policy keeps generating,
// its cache held at the floor (what it always keeps + 16 recent slots + the step) instead of
// being halved to nothing; the floor is a fallback, warned about once and counted at each step.
// Without a floor the cap was 1 slot (half of an empty cache) and the first step stopped with
// "cannot free 8 slots under a limit of 1".
TEST(MemoryPressure, SustainedPressureHoldsTheCacheAtItsFloor) {
  for (const std::string variant : {"sliding", "sink", "h2o", "tova", "snapkv", "random", "keydiff",
                                    "expected_attention", "h2o+protect"}) {
    SCOPED_TRACE(variant);
    EvictionConfig config = config_for(variant);
    config.kv_budget = 0;  // only memory pressure bounds the cache
    config.window = 200;
    if (variant == "h2o" || variant == "h2o+protect") config.window = 12;
    if (config.policy != "sliding" && config.policy != "sink") config.kv_budget = 100;
    LlamaModel& model = tiny_model();
    KvCache cache = model.make_cache(256, DType::F32);
    CacheManager manager(config, make_policy(config), SimulatedMonitor::parse("0:100"));
    Generator generator(model, cache, &manager);
    std::span<const float> logits = generator.prefill(prompt(30));
    for (int step = 0; step < 120; ++step) logits = generator.decode(argmax(logits));
    EXPECT_EQ(cache.next_position(), 150);
    ASSERT_TRUE(manager.fallbacks().contains("floor"));
    EXPECT_GE(manager.fallbacks().at("floor"), 100);
    // Sinks (4) or the protected prefix (3) + 16 recent + the largest step (a prefill step).
    const int64_t kept = config.policy == "sliding"              ? 3
                         : policy_reads(config, "--sink-tokens") ? 4
                                                                 : 0;
    EXPECT_EQ(cache.size(0), kept + CacheManager::kPressureFloorWindow + generator.max_step());
    for (const EvictionEvent& event : manager.events()) EXPECT_GE(event.slots_after, 0);
  }
}

// An explicit floor is kept as given (but never below the coming step).
TEST(MemoryPressure, ExplicitFloor) {
  EvictionConfig config = config_for("sink");
  config.window = 200;
  config.pressure_floor = 40;
  LlamaModel& model = tiny_model();
  KvCache cache = model.make_cache(256, DType::F32);
  CacheManager manager(config, make_policy(config), SimulatedMonitor::parse("0:100"));
  Generator generator(model, cache, &manager);
  std::span<const float> logits = generator.prefill(prompt(30));
  for (int step = 0; step < 60; ++step) logits = generator.decode(argmax(logits));
  EXPECT_EQ(cache.size(0), 40);
  EXPECT_EQ(cache.next_position(), 90);
  config.pressure_floor = -1;
  EXPECT_THROW(make_policy(config), Error);
}

}  // namespace
}  // namespace edgelm
