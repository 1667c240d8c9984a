// Eviction over planted attention: SnapKV and H2O pick the planted tokens (GQA by group average),
// SnapKV scores each prompt by its own window and a prompt longer than its cache chunk by chunk.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"

#include "tests/eviction_test_util.h"

namespace edgelm {
namespace {

using namespace eviction_test;

// ---- planted attention ----

// SnapKV over a planted cache: a budget of 4 keeps 3 slots, the 2-query window and one more.
EvictionConfig planted_snapkv_config() {
  EvictionConfig config;
  config.policy = "snapkv";
  config.kv_budget = 4;
  config.snapkv_window = 2;
  config.snapkv_kernel = 1;
  config.sink_tokens = 1;
  return config;
}

// Head 0 of group 0 splits its attention evenly between slots 1 and 4; head 1 puts 60% on slot 6
// and 40% on slot 4. The group average ranks 4 (0.45) over 6 (0.30) and 1 (0.25); the maximum
// over heads would pick 6, head 0 alone 1 or 4, head 1 alone 6. Group 1 plants slot 8 for both.
TEST(SnapKv, KeepsPlantedTokensByGroupAverage) {
  const EvictionConfig config = planted_snapkv_config();
  CacheManager manager(config, make_policy(config));
  Planted planted;
  planted.append(12);
  manager.begin_prefill(12);
  const StepExports options = manager.forward_options(Phase::Prefill, 0, 12);
  ASSERT_TRUE(options.export_mass);
  ASSERT_EQ(options.mass_from_position, 10);
  const float split = std::log(1.5f);  // logit gap for a 60/40 split
  planted.attend(
      2, {{{1, 20.0f}, {4, 20.0f}}, {{6, 20.0f}, {4, 20.0f - split}}, {{8, 20.0f}}, {{8, 20.0f}}});
  manager.observe(planted.cache, Phase::Prefill, options);
  ASSERT_TRUE(manager.end_prefill(planted.cache).has_value());
  EXPECT_EQ(planted.kept(0), (std::set<int32_t>{4, 10, 11}));
  EXPECT_EQ(planted.kept(1), (std::set<int32_t>{8, 10, 11}));
}

// A second prompt (a chat turn) is compressed by its own window alone. Turn 1's window put all its
// attention on position 4, which survives turn 1's compression; turn 2's window splits 60/40
// between positions 13 and 4. By turn 2's attention 13 ranks first; with turn 1's attention still
// added, 4 would (1.0 + 0.4 against 0.6 per query and head).
TEST(SnapKv, EachPromptIsScoredByItsOwnWindow) {
  const EvictionConfig config = planted_snapkv_config();
  CacheManager manager(config, make_policy(config));
  Planted planted;
  planted.append(12);
  manager.begin_prefill(12);
  StepExports options = manager.forward_options(Phase::Prefill, 0, 12);
  planted.attend(2, {{{4, 20.0f}}, {{4, 20.0f}}, {{4, 20.0f}}, {{4, 20.0f}}});
  manager.observe(planted.cache, Phase::Prefill, options);
  ASSERT_TRUE(manager.end_prefill(planted.cache).has_value());
  ASSERT_EQ(planted.kept(0), (std::set<int32_t>{4, 10, 11}));

  planted.append(6);  // positions 12..17
  manager.begin_prefill(18);
  options = manager.forward_options(Phase::Prefill, 12, 6);
  ASSERT_TRUE(options.export_mass);
  ASSERT_EQ(options.mass_from_position, 16);
  const float split = std::log(1.5f);  // logit gap for a 60/40 split
  const std::vector<std::pair<int, float>> head = {{13, 20.0f}, {4, 20.0f - split}};
  planted.attend(2, {head, head, head, head});
  manager.observe(planted.cache, Phase::Prefill, options);
  ASSERT_TRUE(manager.end_prefill(planted.cache).has_value());
  EXPECT_EQ(planted.kept(0), (std::set<int32_t>{13, 16, 17}));
  EXPECT_EQ(planted.kept(1), (std::set<int32_t>{13, 16, 17}));
}

// SnapKV chooses from the whole prompt: a prompt longer than the budget is prefilled whole (in
// chunks), then compressed once from the observation window's attention. Before, the budget also
// evicted between the prefill chunks, before the window had been seen (scores all zero), so the
// prompt was cut by recency instead.
TEST(SnapKv, SeesTheWholePromptBeforeCompressingIt) {
  EvictionConfig config = config_for("snapkv");  // budget 24, window 6; the prompt has 30 tokens
  LlamaModel& model = tiny_model();
  KvCache cache = model.make_cache(128, DType::F32);
  CacheManager manager(config, make_policy(config));
  Generator generator(model, cache, &manager);
  generator.prefill(prompt(30));
  ASSERT_EQ(manager.events().size(), 1u);
  EXPECT_EQ(manager.events()[0].reason, "prefill");
  EXPECT_EQ(manager.events()[0].slots_before, 30);
  EXPECT_EQ(manager.events()[0].slots_after, 23);
  // From decode on the budget holds.
  generator.decode(1);
  generator.decode(2);
  EXPECT_LE(cache.size(0), 24);
  EXPECT_EQ(manager.events().back().reason, "policy");
}

// ---- a prompt longer than the cache (SnapKV scored chunk by chunk) ----

// A one-layer cache of 2 kv heads whose token at position p has key 8·e_p (head_dim 32: 32
// distinct positions), fed as prefill steps through the CacheManager the way Generator::prefill
// feeds them: evict, ask what to export, append, attend, observe. Query position p of every head
// puts its attention on the one position target(p).
struct PlantedStream {
  static constexpr int64_t kHeads = 4;  // 2 query heads per kv head
  static constexpr int64_t kKvHeads = 2;
  static constexpr int64_t kDim = 32;
  CacheManager& manager;
  KvCache cache;
  int64_t most_slots = 0;  // the most slots the cache held after any step

  PlantedStream(CacheManager& m, int64_t capacity)
      : manager(m), cache(backend(), 1, capacity, kKvHeads, kDim, DType::F32) {}

  // chunk_windows: ask for the window of a step before a compression (forward_options with the
  // cache); without, the manager knows only the prompt's own last window.
  void step(int64_t n, const std::function<int64_t(int64_t)>& target, bool chunk_windows = true) {
    manager.maybe_evict(cache, Phase::Prefill, n);
    const int64_t first = cache.next_position();
    const StepExports options = chunk_windows ? manager.forward_options(cache, Phase::Prefill, n)
                                              : manager.forward_options(Phase::Prefill, first, n);
    Tensor k = Tensor::empty(backend().memory(), DType::F32, {n, kKvHeads, kDim});
    Tensor v = Tensor::empty(backend().memory(), DType::F32, {n, kKvHeads, kDim});
    std::vector<int32_t> positions;
    for (int64_t t = 0; t < n; ++t) {
      positions.push_back(static_cast<int32_t>(first + t));
      for (int64_t g = 0; g < kKvHeads; ++g) {
        for (int64_t d = 0; d < kDim; ++d) {
          k.data<float>()[(t * kKvHeads + g) * kDim + d] = d == first + t ? 8.0f : 0.0f;
          v.data<float>()[(t * kKvHeads + g) * kDim + d] = 1.0f;
        }
      }
    }
    cache.append(0, k, v, positions);
    cache.advance(n);
    AttentionArgs args;
    args.q = Tensor::empty(backend().memory(), DType::F32, {n, kHeads, kDim});
    std::fill_n(args.q.data<float>(), n * kHeads * kDim, 0.0f);
    args.q_pos = Tensor::empty(backend().memory(), DType::I32, {n});
    for (int64_t i = 0; i < n; ++i) {
      args.q_pos.data<int32_t>()[i] = static_cast<int32_t>(first + i);
      // score = q·k * 0.25 = q[target] * 8 * 0.25: logit 20 on the target, 0 elsewhere.
      for (int64_t h = 0; h < kHeads; ++h)
        args.q.data<float>()[(i * kHeads + h) * kDim + target(first + i)] = 10.0f;
    }
    const KvCache::View view = cache.view(0);
    args.k = view.k;
    args.v = view.v;
    args.kv_pos = view.kv_pos;
    args.out = Tensor::empty(backend().memory(), DType::F32, {n, kHeads, kDim});
    args.scale = 0.25f;
    if (options.export_mass) {
      args.mass = cache.mass(0);
      args.mass_first_query = std::max<int64_t>(0, options.mass_from_position - first);
    }
    backend().attention(args);
    manager.observe(cache, Phase::Prefill, options);
    most_slots = std::max(most_slots, cache.size(0));
  }

  std::set<int32_t> kept(int64_t g) {
    std::set<int32_t> positions;
    for (int64_t s = 0; s < cache.size(0); ++s) positions.insert(cache.position(0, s, g));
    return positions;
  }
};

// A budget of 4 with a window of 2: at the end of prefill the cache keeps 3 slots, the prompt's
// last 2 positions and one more.
EvictionConfig needle_config() {
  EvictionConfig config;
  config.policy = "snapkv";
  config.kv_budget = 4;
  config.snapkv_window = 2;
  config.snapkv_kernel = 1;
  config.sink_tokens = 1;
  return config;
}

// A 24-token prompt in steps of 6 through a cache of budget + one step = 10 slots, so it is
// compressed to 4 slots before each of steps 2, 3 and 4. The needle is position 2. The last two
// queries of every step (its window) attend to the needle; in steps 2 to 4 the first four
// queries attend to two decoys of their own step, each as much as the window attends to the
// needle. Ranked by each step's window, the needle survives every compression and the question
// at the end keeps it: {2, 22, 23}. Ranked with no window (by recency), by the step's first
// queries, or by all of its queries (where the more recent decoys win the ties), it is lost.
std::function<int64_t(int64_t)> needle_and_decoys() {
  return [](int64_t p) -> int64_t {
    const int64_t first = p / 6 * 6, offset = p % 6;
    if (offset >= 4) return 2;              // the window: the needle
    if (first == 0) return p;               // the first step: itself
    return offset < 2 ? first : first + 1;  // two decoys of the step
  };
}

TEST(SnapKvChunked, KeepsAPlantedNeedleInAPromptLongerThanItsCache) {
  const EvictionConfig config = needle_config();
  CacheManager manager(config, make_policy(config));
  const int64_t capacity = manager.capacity_for(24, 6, /*n_layers=*/1);
  ASSERT_EQ(capacity, 4 + 6);
  PlantedStream stream(manager, capacity);
  manager.begin_prefill(24);
  for (int chunk = 0; chunk < 4; ++chunk) stream.step(6, needle_and_decoys());
  ASSERT_TRUE(manager.end_prefill(stream.cache).has_value());
  EXPECT_EQ(stream.kept(0), (std::set<int32_t>{2, 22, 23}));
  EXPECT_EQ(stream.kept(1), (std::set<int32_t>{2, 22, 23}));
  EXPECT_EQ(stream.most_slots, capacity);
  std::vector<std::string> reasons;
  for (const EvictionEvent& event : manager.events()) {
    reasons.push_back(event.reason);
    if (event.reason == "chunk") {
      EXPECT_EQ(event.slots_after, 4);
    }
  }
  EXPECT_EQ(reasons, (std::vector<std::string>{"chunk", "chunk", "chunk", "prefill"}));
  EXPECT_EQ(manager.fallback_count(), 0);
}

// One-shot SnapKV (a cache that holds the whole prompt) chooses the same slots on this prompt.
TEST(SnapKvChunked, AgreesWithOneShotOnThePlantedNeedle) {
  const EvictionConfig config = needle_config();
  CacheManager manager(config, make_policy(config));
  PlantedStream stream(manager, 32);
  manager.begin_prefill(24);
  for (int chunk = 0; chunk < 4; ++chunk) stream.step(6, needle_and_decoys());
  ASSERT_TRUE(manager.end_prefill(stream.cache).has_value());
  EXPECT_EQ(stream.most_slots, 24);
  ASSERT_EQ(manager.events().size(), 1u);
  EXPECT_EQ(stream.kept(0), (std::set<int32_t>{2, 22, 23}));
}

// Each compression is ranked by the latest window alone, and the last one, at the end of prefill,
// by the prompt's last window, as one-shot SnapKV ranks. Here the windows of the first three
// steps attend to positions 0 and 1, then 7, which survive while the prompt streams; the prompt's
// last window attends to its own tokens only, so the end keeps the most recent slot beside it
// (21), in a cache of budget + step as in one that holds the whole prompt. Scores added up over
// the windows would keep 7.
TEST(SnapKvChunked, TheLastWindowAloneRanksAtTheEnd) {
  const auto target = [](int64_t p) -> int64_t {
    const int64_t first = p / 6 * 6, offset = p % 6;
    if (offset < 4 || first == 18) return p;
    if (first == 0) return offset == 4 ? 0 : 1;
    return 7;
  };
  for (const int64_t capacity : {int64_t{10}, int64_t{32}}) {
    const EvictionConfig config = needle_config();
    CacheManager manager(config, make_policy(config));
    PlantedStream stream(manager, capacity);
    manager.begin_prefill(24);
    for (int chunk = 0; chunk < 4; ++chunk) stream.step(6, target);
    manager.end_prefill(stream.cache);
    EXPECT_EQ(stream.kept(0), (std::set<int32_t>{21, 22, 23})) << "capacity " << capacity;
  }
}

// A caller that does not let the manager see the cache when it asks what to export gets no chunk
// windows: each compression then ranks by older scores, says so once as a warning, and counts
// it. (Here the needle is lost, which is what the warning is for.)
TEST(SnapKvChunked, CompressingWithoutAWindowIsAFallback) {
  const EvictionConfig config = needle_config();
  CacheManager manager(config, make_policy(config));
  PlantedStream stream(manager, manager.capacity_for(24, 6, /*n_layers=*/1));
  manager.begin_prefill(24);
  for (int chunk = 0; chunk < 4; ++chunk)
    stream.step(6, needle_and_decoys(), /*chunk_windows=*/false);
  manager.end_prefill(stream.cache);
  EXPECT_EQ(manager.fallbacks().at("no-window"), 3);
  EXPECT_EQ(stream.kept(0).count(2), 0u);
}

// Through the generator on the tiny model: a 60-token prompt in steps of 8 streams through a
// cache of 24 + 8 slots, compressed as each step needs room (to the room for that step: 24
// before a step of 8, 28 before the last, of 4), then to 23 when prefill ends; the cache never
// holds more than its capacity and nothing falls back. A 30-token prompt fits in the
// same cache, which then compresses it once, exactly as a cache of 128 slots does (one-shot).
TEST(SnapKvChunked, StreamsAPromptLongerThanItsCacheThroughTheGenerator) {
  EvictionConfig config = config_for("snapkv");  // budget 24, window 6, kernel 3
  LlamaModel& model = tiny_model();
  CacheManager manager(config, make_policy(config));
  const int64_t capacity = manager.capacity_for(512, model.max_chunk(), model.config().n_layers);
  ASSERT_EQ(capacity, 24 + 8);
  KvCache cache = model.make_cache(capacity, DType::F32, 512);
  Generator generator(model, cache, &manager);
  EXPECT_EQ(generator.max_step(), 8);
  generator.prefill(prompt(60));
  ASSERT_GE(manager.events().size(), 2u);
  std::vector<int64_t> kept_slots;
  for (size_t i = 0; i + 1 < manager.events().size(); ++i) {
    EXPECT_EQ(manager.events()[i].reason, "chunk");
    EXPECT_EQ(manager.events()[i].slots_before, capacity);
    kept_slots.push_back(manager.events()[i].slots_after);
  }
  // Steps of 8 from position 0: the cache fills at 32, then every step is compressed for.
  EXPECT_EQ(kept_slots, (std::vector<int64_t>{24, 24, 24, 28}));
  EXPECT_EQ(manager.events().back().reason, "prefill");
  EXPECT_EQ(cache.size(0), 23);
  EXPECT_EQ(manager.fallback_count(), 0);
  // The prompt's last window (6 positions) is kept in every layer and kv head.
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    for (int64_t g = 0; g < cache.n_kv_heads(); ++g) {
      std::set<int32_t> kept;
      for (int64_t s = 0; s < cache.size(l); ++s) kept.insert(cache.position(l, s, g));
      for (int32_t p = 54; p < 60; ++p) EXPECT_TRUE(kept.count(p)) << l << " " << g << " " << p;
    }
  }
  for (int i = 0; i < 10; ++i) generator.decode(1);
  EXPECT_LE(cache.size(0), 24);

  auto kept_after_prefill = [&](int64_t slots) {
    CacheManager fresh(config, make_policy(config));
    KvCache one = model.make_cache(slots, DType::F32, 512);
    Generator g(model, one, &fresh);
    g.prefill(prompt(30));
    EXPECT_EQ(fresh.events().size(), 1u);
    std::vector<std::set<int32_t>> kept;
    for (int64_t l = 0; l < one.n_layers(); ++l) {
      for (int64_t h = 0; h < one.n_kv_heads(); ++h) {
        std::set<int32_t> positions;
        for (int64_t s = 0; s < one.size(l); ++s) positions.insert(one.position(l, s, h));
        kept.push_back(positions);
      }
    }
    return kept;
  };
  EXPECT_EQ(kept_after_prefill(capacity), kept_after_prefill(128));
}

// H2O accumulates attention over decode steps: slots 2 and 5 are attended by every query, so
// with a budget of recent window + 2 they survive while everything else old is dropped.
TEST(H2o, KeepsPlantedHeavyHitters) {
  EvictionConfig config;
  config.policy = "h2o";
  config.window = 3;
  config.kv_budget = 5;
  CacheManager manager(config, make_policy(config));
  Planted planted;
  planted.append(6);
  for (int step = 0; step < 10; ++step) {
    manager.maybe_evict(planted.cache, Phase::Decode, 1);
    planted.append(1);
    const StepExports options =
        manager.forward_options(Phase::Decode, planted.cache.next_position() - 1, 1);
    ASSERT_TRUE(options.export_mass);
    // Every query head of both groups attends to positions 2 and 5 (their slots move as others
    // are evicted; their keys do not).
    std::vector<std::vector<std::pair<int, float>>> targets(Planted::kHeads,
                                                            {{2, 12.0f}, {5, 12.0f}});
    planted.attend(1, targets);
    manager.observe(planted.cache, Phase::Decode, options);
    ASSERT_LE(planted.cache.size(0), 5);
  }
  const int32_t next = static_cast<int32_t>(planted.cache.next_position());
  for (int64_t g = 0; g < Planted::kKvHeads; ++g) {
    EXPECT_EQ(planted.kept(g), (std::set<int32_t>{2, 5, next - 3, next - 2, next - 1}));
  }
}

// A cache emptied under the same manager (a chat started over) starts its statistics afresh: the
// first sequence's queries all attend to position 0, the second's split 25/75 between positions 1
// and 3, so the second keeps 1 and 3 as heavy hitters (position 3's 3.0 beats the 2.0 the new
// position 0 got from its own query, at the eviction before position 5). Had the slot that held
// position 0 kept its accumulated mass, the new position 0 in that slot would stay instead.
TEST(H2o, StatisticsStartAfreshWhenTheCacheIsCleared) {
  EvictionConfig config;
  config.policy = "h2o";
  config.window = 2;
  config.kv_budget = 4;
  CacheManager manager(config, make_policy(config));
  Planted planted;
  auto run = [&](const std::vector<std::pair<int, float>>& head) {
    for (int step = 0; step < 10; ++step) {
      manager.maybe_evict(planted.cache, Phase::Decode, 1);
      planted.append(1);
      const StepExports options =
          manager.forward_options(Phase::Decode, planted.cache.next_position() - 1, 1);
      ASSERT_TRUE(options.export_mass);
      planted.attend(1, std::vector(Planted::kHeads, head));
      manager.observe(planted.cache, Phase::Decode, options);
    }
  };
  run({{0, 12.0f}});
  for (int64_t g = 0; g < Planted::kKvHeads; ++g)
    ASSERT_EQ(planted.kept(g), (std::set<int32_t>{0, 1, 8, 9})) << "kv head " << g;
  planted.cache.clear();
  run({{1, 12.0f}, {3, 12.0f + std::log(3.0f)}});
  for (int64_t g = 0; g < Planted::kKvHeads; ++g)
    EXPECT_EQ(planted.kept(g), (std::set<int32_t>{1, 3, 8, 9})) << "kv head " << g;
}

// TOVA ranks by the newest query alone. Budget 4 (3 slots kept before each token is appended):
// the queries at positions 0..5 attend to positions 0, 1 and 2, those from 6 on to 1 and 2 only.
// By the newest query 1 and 2 rank first, then the most recent slot (the others tie at almost
// nothing), so the cache ends with {1, 2, next - 2, next - 1}. Ranked by recency it would hold
// the newest four; by attention accumulated over every query (H2O's rule) it would keep 0.
TEST(Tova, KeepsWhatTheNewestQueryAttendsTo) {
  EvictionConfig config;
  config.policy = "tova";
  config.kv_budget = 4;
  CacheManager manager(config, make_policy(config));
  Planted planted;
  for (int step = 0; step < 12; ++step) {  // positions 0..11: keys 8 e_p stay distinct
    manager.maybe_evict(planted.cache, Phase::Decode, 1);
    planted.append(1);
    const StepExports options =
        manager.forward_options(Phase::Decode, planted.cache.next_position() - 1, 1);
    ASSERT_TRUE(options.export_mass);
    ASSERT_EQ(options.mass_from_position, planted.cache.next_position() - 1);
    std::vector<std::pair<int, float>> head = {{1, 12.0f}, {2, 12.0f}};
    if (step < 6) head.emplace_back(0, 12.0f);
    planted.attend(1, std::vector(Planted::kHeads, head));
    manager.observe(planted.cache, Phase::Decode, options);
    ASSERT_LE(planted.cache.size(0), 4);
  }
  const int32_t next = static_cast<int32_t>(planted.cache.next_position());
  for (int64_t g = 0; g < Planted::kKvHeads; ++g)
    EXPECT_EQ(planted.kept(g), (std::set<int32_t>{1, 2, next - 2, next - 1})) << "kv head " << g;
}

// SnapKV's decode phase: after the prompt is compressed by its window's attention, decode keeps
// the sinks and the most recent tokens, whatever the prompt's window attended to, and exports no
// attention. Budget 5, window 2, 1 sink: the window attends to positions 0 and 4, so prefill keeps
// {0, 4, 10, 11}; four decode tokens (12..15) then push out 4, 10 and 11 but never the sink 0.
// Ranked by recency alone the sink would go ({11, ..., 15}); ranked by the prompt's scores, 4
// would stay.
TEST(SnapKv, DecodeKeepsSinksAndTheRecentWindow) {
  EvictionConfig config = planted_snapkv_config();
  config.kv_budget = 5;
  CacheManager manager(config, make_policy(config));
  Planted planted;
  planted.append(12);
  manager.begin_prefill(12);
  const StepExports prefill = manager.forward_options(Phase::Prefill, 0, 12);
  ASSERT_TRUE(prefill.export_mass);
  const std::vector<std::pair<int, float>> head = {{0, 20.0f}, {4, 20.0f}};
  planted.attend(2, std::vector(Planted::kHeads, head));
  manager.observe(planted.cache, Phase::Prefill, prefill);
  ASSERT_TRUE(manager.end_prefill(planted.cache).has_value());
  for (int64_t g = 0; g < Planted::kKvHeads; ++g)
    ASSERT_EQ(planted.kept(g), (std::set<int32_t>{0, 4, 10, 11})) << "kv head " << g;
  for (int step = 0; step < 4; ++step) {
    manager.maybe_evict(planted.cache, Phase::Decode, 1);
    planted.append(1);
    EXPECT_FALSE(
        manager.forward_options(Phase::Decode, planted.cache.next_position() - 1, 1).export_mass);
    ASSERT_LE(planted.cache.size(0), 5);
  }
  for (int64_t g = 0; g < Planted::kKvHeads; ++g)
    EXPECT_EQ(planted.kept(g), (std::set<int32_t>{0, 12, 13, 14, 15})) << "kv head " << g;
}

}  // namespace
}  // namespace edgelm
