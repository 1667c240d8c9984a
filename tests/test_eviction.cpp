// Eviction: every policy keeps the cache within its limit and keeps what it promises, is
// deterministic, changes nothing when the budget covers the sequence, keeps logical positions
// growing while slots shrink; SnapKV and H2O pick planted tokens (GQA by group average); memory
// pressure triggers at the threshold and not before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "eviction/cache_manager.h"
#include "models/generator.h"
#include "models/loader.h"
#include "models/make_model.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2, .isa = "portable"});
  return cpu;
}

LlamaModel& tiny_model() {
  static LlamaModel model = [] {
    const fs::path dir =
        fs::path(::testing::TempDir()) / ("edgelm_eviction_tiny_" + std::to_string(::getpid()));
    const std::string path = make_model({.preset = "tiny",
                                         .format = "hf",
                                         .quant = DType::F32,
                                         .seed = 5,
                                         .out_dir = dir.string()});
    LoadedModel loaded = load_llama(path, backend());
    return LlamaModel(backend(), std::move(loaded.config), std::move(loaded.weights), 8);
  }();
  return model;
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % 300));
  return ids;
}

// A policy name, optionally with wrappers: "h2o+protect" (sinks protected), "tova+pyramid".
EvictionConfig config_for(const std::string& variant) {
  const std::string policy = variant.substr(0, variant.find('+'));
  EvictionConfig c;
  c.policy = policy;
  c.window = 12;
  c.sink_tokens = 4;
  c.protected_prefix = 3;
  c.kv_budget = policy == "sliding" || policy == "sink" ? 0 : 24;
  c.snapkv_window = 6;
  c.snapkv_kernel = 3;
  c.seed = 3;
  c.pyramid_beta = 4;  // the top layer of a 24-slot budget keeps 6 slots beyond the floor
  if (variant.find("+protect") != std::string::npos) c.protect = "sinks";
  if (variant.find("+pyramid") != std::string::npos) c.layer_budget = "pyramid";
  return c;
}

// The limit each policy promises with config_for(), in layer `layer` of the tiny model.
int64_t limit_for(const std::string& variant, int64_t layer) {
  const std::string policy = variant.substr(0, variant.find('+'));
  if (policy == "sliding") return 12 + 3;
  if (policy == "sink") return 12 + 4;
  const EvictionConfig c = config_for(variant);
  return make_policy(c)->layer_limit(layer, tiny_model().config().n_layers, 24);
}

struct GenerationRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  std::vector<std::set<int32_t>> kept;  // positions of layer 0, kv head 0 after each step
};

GenerationRun generate(const std::string& policy, int64_t capacity, int steps,
                       EvictionConfig config,
                       const std::function<void(const KvCache&, const std::string&)>& check = {}) {
  LlamaModel& model = tiny_model();
  KvCache cache = model.make_cache(capacity, DType::F32);
  CacheManager manager(config, make_policy(config));
  Generator generator(model, cache, &manager);
  GenerationRun run;
  std::span<const float> logits = generator.prefill(prompt(30));
  for (int i = 0; i < steps; ++i) {
    run.logits.emplace_back(logits.begin(), logits.end());
    const int32_t token = argmax(logits);
    run.tokens.push_back(token);
    logits = generator.decode(token);
    std::set<int32_t> kept;
    for (int64_t s = 0; s < cache.size(0); ++s) kept.insert(cache.position(0, s, 0));
    run.kept.push_back(kept);
    if (check) check(cache, policy);
  }
  return run;
}

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
        if (p == "sink" || p == "snapkv") {
          if (p == "sink")
            for (int32_t q = next - 12; q < next; ++q) expect_kept(q, "recent window");
        }
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

// Per-layer budgets: the limits differ per layer, so the tiny model's two layers keep different
// counts; the protection wrapper around a policy that keeps no sinks of its own.
INSTANTIATE_TEST_SUITE_P(Policies, EveryPolicy,
                         ::testing::Values("sliding", "sink", "snapkv", "h2o", "tova", "random",
                                           "keydiff", "expected_attention", "tova+protect",
                                           "keydiff+pyramid", "h2o+pyramid+protect",
                                           "expected_attention+pyramid", "snapkv+pyramid"),
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

// ---- planted attention ----

// A one-layer cache of 2 kv heads (head_dim 16) whose token at logical position p has key 8·e_p
// (p < 16), so a query a·e_p + b·e_q attends to positions p and q only, with weights set by a, b.
struct Planted {
  static constexpr int64_t kHeads = 4;  // 2 query heads per kv head
  static constexpr int64_t kKvHeads = 2;
  static constexpr int64_t kDim = 16;
  KvCache cache{backend(), 1, 32, kKvHeads, kDim, DType::F32};

  void append(int64_t n) {
    Tensor k = Tensor::empty(backend().memory(), DType::F32, {n, kKvHeads, kDim});
    Tensor v = Tensor::empty(backend().memory(), DType::F32, {n, kKvHeads, kDim});
    std::vector<int32_t> positions;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t position = cache.next_position() + t;
      positions.push_back(static_cast<int32_t>(position));
      for (int64_t g = 0; g < kKvHeads; ++g) {
        for (int64_t d = 0; d < kDim; ++d) {
          k.data<float>()[(t * kKvHeads + g) * kDim + d] = d == position % kDim ? 8.0f : 0.0f;
          v.data<float>()[(t * kKvHeads + g) * kDim + d] = 1.0f;
        }
      }
    }
    cache.append(0, k, v, positions);
    cache.advance(n);
  }

  // Runs attention for queries at the last `n_queries` positions; query head h of every query is
  // targets[h] = {{position, logit}, ...}. Exports mass into cache.mass(0).
  void attend(int64_t n_queries, const std::vector<std::vector<std::pair<int, float>>>& targets) {
    AttentionArgs args;
    args.q = Tensor::empty(backend().memory(), DType::F32, {n_queries, kHeads, kDim});
    std::fill_n(args.q.data<float>(), n_queries * kHeads * kDim, 0.0f);
    for (int64_t i = 0; i < n_queries; ++i) {
      for (int64_t h = 0; h < kHeads; ++h) {
        for (const auto& [position, logit] : targets[h]) {
          // score = q·k / sqrt(16) = q[position] * 8 / 4, so q[position] = logit / 2.
          args.q.data<float>()[(i * kHeads + h) * kDim + position % kDim] = logit / 2.0f;
        }
      }
    }
    args.q_pos = Tensor::empty(backend().memory(), DType::I32, {n_queries});
    for (int64_t i = 0; i < n_queries; ++i) {
      args.q_pos.data<int32_t>()[i] = static_cast<int32_t>(cache.next_position() - n_queries + i);
    }
    const KvCache::View view = cache.view(0);
    args.k = view.k;
    args.v = view.v;
    args.kv_pos = view.kv_pos;
    args.out = Tensor::empty(backend().memory(), DType::F32, {n_queries, kHeads, kDim});
    args.mass = cache.mass(0);
    args.scale = 0.25f;
    backend().attention(args);
  }

  std::set<int32_t> kept(int64_t g) {
    std::set<int32_t> positions;
    for (int64_t s = 0; s < cache.size(0); ++s) positions.insert(cache.position(0, s, g));
    return positions;
  }
};

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

// generate warns about an eviction flag the chosen policy does not read (policy_reads()). Each
// setting is changed alone, for every policy: where the policy does not read it, the kept
// positions and the tokens must not move; where it does, they must (the budget of 18 is above
// the own limits of sliding and sink, 15 and 16, so it cannot bind there).
TEST(EvictionFlags, OnlyTheSettingsAPolicyReadsChangeWhatItKeeps) {
  struct Change {
    const char* flag;
    std::function<void(EvictionConfig&)> apply;
  };
  const std::vector<Change> changes = {
      {"--eviction-window", [](EvictionConfig& c) { c.window = 9; }},
      {"--protected-prefix", [](EvictionConfig& c) { c.protected_prefix = 6; }},
      {"--sink-tokens", [](EvictionConfig& c) { c.sink_tokens = 1; }},
      {"--kv-budget", [](EvictionConfig& c) { c.kv_budget = 18; }},
      {"--snapkv-window", [](EvictionConfig& c) { c.snapkv_window = 3; }},
      {"--snapkv-kernel", [](EvictionConfig& c) { c.snapkv_kernel = 5; }},
      {"--snapkv-pool", [](EvictionConfig& c) { c.snapkv_pool = "avg"; }},
      {"--eviction-seed", [](EvictionConfig& c) { c.seed = 4; }},
      {"--ea-future-positions", [](EvictionConfig& c) { c.ea_future_positions = 8; }},
      {"--ea-covariance", [](EvictionConfig& c) { c.ea_covariance = false; }},
      {"--ea-epsilon", [](EvictionConfig& c) { c.ea_epsilon = 1.0; }},
      {"--protect", [](EvictionConfig& c) { c.protect = "sinks"; }},
      {"--layer-budget", [](EvictionConfig& c) { c.layer_budget = "pyramid"; }},
      // Read only with --layer-budget pyramid, so changed alone it must change nothing.
      {"--pyramid-beta", [](EvictionConfig& c) { c.pyramid_beta = 2; }},
  };
  // The three memory flags need a monitor and are checked in MemoryPressure; the rest are here.
  ASSERT_EQ(changes.size() + 3, eviction_flags().size());
  for (const std::string& policy : policy_names()) {
    const GenerationRun base = generate(policy, 128, 40, config_for(policy));
    for (const Change& change : changes) {
      EvictionConfig changed = config_for(policy);
      change.apply(changed);
      const GenerationRun run = generate(policy, 128, 40, changed);
      const bool reads = policy_reads(changed, change.flag);
      const std::string flag = change.flag;
      // Where the setting is read but cannot bind here: the budget above the own limits of
      // sliding and sink, and protected sinks that the policy keeps anyway (sink and
      // expected_attention by rule; here also h2o, whose heavy hitters include positions 0-3,
      // and snapkv, whose decode rule keeps 4 sinks).
      const bool cannot_bind =
          (flag == "--kv-budget" && (policy == "sliding" || policy == "sink")) ||
          (flag == "--protect" && (policy == "sink" || policy == "expected_attention" ||
                                   policy == "h2o" || policy == "snapkv"));
      if (!reads) {
        EXPECT_EQ(run.kept, base.kept) << policy << " ignores " << change.flag;
        EXPECT_EQ(run.tokens, base.tokens) << policy << " ignores " << change.flag;
      } else if (!cannot_bind) {
        EXPECT_NE(run.kept, base.kept) << policy << " reads " << change.flag;
      }
    }
  }
  EXPECT_TRUE(policy_reads("tova", "--memory-threshold-mb"));
  EXPECT_TRUE(policy_reads("sliding", "--simulate-memory"));
  EXPECT_FALSE(policy_reads("none", "--memory-threshold-mb"));
  // The wrappers' settings turn on what they read: --pyramid-beta with a pyramid, --sink-tokens
  // for any policy once sinks are protected.
  EvictionConfig pyramid = config_for("tova");
  pyramid.layer_budget = "pyramid";
  for (const double beta : {2.0, 6.0}) {
    pyramid.pyramid_beta = beta;
    EXPECT_TRUE(policy_reads(pyramid, "--pyramid-beta"));
  }
  EXPECT_NE(generate("tova", 128, 40, pyramid).kept, generate("tova", 128, 40,
                                                              [&] {
                                                                EvictionConfig steeper = pyramid;
                                                                steeper.pyramid_beta = 2.0;
                                                                return steeper;
                                                              }())
                                                         .kept);
  EvictionConfig protect = config_for("tova");
  protect.protect = "sinks";
  EXPECT_FALSE(policy_reads(config_for("tova"), "--sink-tokens"));
  EXPECT_TRUE(policy_reads(protect, "--sink-tokens"));
  EvictionConfig fewer_sinks = protect;
  fewer_sinks.sink_tokens = 1;
  EXPECT_NE(generate("tova", 128, 40, protect).kept, generate("tova", 128, 40, fewer_sinks).kept);
}

TEST(EvictionConfigErrors, NameTheFlag) {
  auto message = [](EvictionConfig c) {
    try {
      make_policy(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EvictionConfig c;
  c.policy = "lru";
  EXPECT_NE(message(c).find("--eviction-policy"), std::string::npos);
  c.policy = "h2o";
  EXPECT_NE(message(c).find("--kv-budget"), std::string::npos);
  c.kv_budget = 100;
  c.window = 200;
  EXPECT_NE(message(c).find("--eviction-window"), std::string::npos);
  c.policy = "snapkv";
  c.snapkv_kernel = 4;
  EXPECT_NE(message(c).find("--snapkv-kernel"), std::string::npos);
  // A NaN or negative threshold never compares below the available memory: it would silently
  // turn memory-pressure eviction off.
  for (const double threshold : {std::nan(""), -1.0, double{INFINITY}}) {
    EvictionConfig bad;
    bad.memory_threshold_mb = threshold;
    EXPECT_NE(message(bad).find("--memory-threshold-mb"), std::string::npos) << threshold;
  }
  EXPECT_THROW(SimulatedMonitor::parse("0:100,x"), Error);
  // What the budget must hold: the sinks or the protected prefix that are always kept.
  EvictionConfig sink;
  sink.policy = "sink";
  sink.kv_budget = 8;
  sink.sink_tokens = 8;
  EXPECT_NE(message(sink).find("sink: --sink-tokens 8 leave no room for a window in --kv-budget 8"),
            std::string::npos)
      << message(sink);
  sink.window = 4;
  EXPECT_NE(message(sink).find("--sink-tokens 8 must be below --kv-budget 8"), std::string::npos)
      << message(sink);
  EvictionConfig sliding;
  sliding.policy = "sliding";
  sliding.kv_budget = 5;
  sliding.protected_prefix = 5;
  EXPECT_NE(message(sliding).find("--protected-prefix 5 leaves no room"), std::string::npos)
      << message(sliding);
  EvictionConfig h2o;
  h2o.policy = "h2o";
  h2o.kv_budget = 1;
  EXPECT_NE(message(h2o).find("h2o: --kv-budget 1 holds no heavy hitter"), std::string::npos)
      << message(h2o);
}

}  // namespace
}  // namespace edgelm
