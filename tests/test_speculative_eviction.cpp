// Speculative decoding under eviction (runtime/speculative.h, docs/speculative.md): with every
// policy and every drafter the reply is plain greedy decoding's under the same policy, token for
// token, and the cache ends holding the same slots; a rollback forgets the statistics of the
// slots it drops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "eval/parity.h"
#include "eviction/cache_manager.h"
#include "eviction/policy.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "sanitized.h"
#include "speculative_test_util.h"

namespace edgelm {
namespace {

constexpr int64_t kContext = 256;
// Small beside the prompts (3 to 12 tokens) and the reply: each reply drafts while the cache
// grows to the budget, then decodes under eviction.
constexpr int64_t kBudget = 20;
constexpr int64_t kReply = 40;

struct PolicyCase {
  const char* label;
  EvictionConfig config;
};

std::vector<PolicyCase> policy_cases() {
  auto with = [](const char* policy) {
    EvictionConfig c;
    c.policy = policy;
    c.kv_budget = kBudget;
    c.snapkv_window = 8;  // of the last prompt tokens, below the budget
    return c;
  };
  std::vector<PolicyCase> cases;
  for (const char* policy :
       {"sliding", "sink", "h2o", "tova", "snapkv", "keydiff", "random", "expected_attention"}) {
    cases.push_back({policy, with(policy)});
  }
  EvictionConfig wrapped = with("tova");
  wrapped.protect = "sinks";
  wrapped.layer_budget = "pyramid";
  wrapped.pyramid_beta = 2;  // two layers: 10 % of the budget apart, not the default's 1 %
  cases.push_back({"tova+protect+pyramid", wrapped});
  return cases;
}

// One conversation's cache under a policy: the manager first, the cache sized for it.
struct EvictingCache {
  EvictingCache(const LlamaModel& model, const EvictionConfig& config)
      : manager(config, make_policy(config)),
        cache(model.make_cache(
            manager.capacity_for(kContext, model.max_chunk(), model.config().n_layers), DType::F16,
            kContext)) {}
  CacheManager manager;
  KvCache cache;
};

struct RunResult {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // logits[i]: what token i was drawn from
  GenerationStats stats;
  std::vector<int32_t> positions;  // every layer's and kv head's slot positions after the reply
  std::vector<int32_t> second;     // a second reply after the first
};

// A greedy reply under `config` from a fresh cache; with a draft model, its own cache under the
// same policy and budget.
RunResult run(LlamaModel& model, const EvictionConfig& config, std::span<const int32_t> prompt,
              Drafter* drafter = nullptr, int64_t max_draft = 4) {
  EvictingCache target(model, config);
  RunResult r;
  GenerationSession::Callbacks callbacks;
  callbacks.on_logits = [&](std::span<const float> logits) {
    r.logits.emplace_back(logits.begin(), logits.end());
  };
  GenerationSettings settings;
  settings.sampling.greedy = true;
  settings.max_tokens = kReply;
  GenerationSession session(model, target.cache, &target.manager, settings, nullptr,
                            std::move(callbacks));
  if (drafter != nullptr) session.set_drafter(drafter, max_draft);
  session.prefill(prompt);
  r.tokens = session.generate().tokens;
  r.stats = session.stats();
  const KvCache& cache = target.cache;
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    for (int64_t slot = 0; slot < cache.size(l); ++slot) {
      for (int64_t g = 0; g < cache.n_kv_heads(); ++g)
        r.positions.push_back(cache.position(l, slot, g));
    }
  }
  r.second = session.generate().tokens;
  return r;
}

// Plain greedy's reply exactly on cpu:portable, whose verification rows equal one-token steps bit
// for bit; on the other tables up to a first difference at a near tie of plain greedy's logits
// (test_speculative.cpp's rule). Returns whether the replies were equal.
bool expect_identity(const RunResult& plain, const RunResult& spec, const std::string& backend,
                     DType weights, const std::string& what) {
  if (backend == "cpu:portable") {
    EXPECT_EQ(spec.tokens, plain.tokens) << what;
    EXPECT_EQ(spec.second, plain.second) << what;
    EXPECT_EQ(spec.positions, plain.positions) << what;
    EXPECT_EQ(spec.stats.evictions, plain.stats.evictions) << what;
    EXPECT_EQ(spec.stats.evicted_tokens, plain.stats.evicted_tokens) << what;
    return spec.tokens == plain.tokens && spec.second == plain.second;
  }
  return test::equal_up_to_a_tie(plain.tokens, plain.logits, spec.tokens, weights, what);
}

struct WeightCase {
  const char* format;
  DType quant;
};
// Float weights, and 4-bit ones (another kernel family on every table).
constexpr WeightCase kWeightCases[] = {{"hf", DType::F32}, {"gguf", DType::Q4_0}};

TEST(SpeculativeEviction, EveryDrafterGivesPlainGreedyTokensUnderEveryPolicy) {
  // Under the sanitizers (about 20x slower) the portable table, float weights and three
  // prompts: the same paths, in a ctest time limit.
  const std::vector<std::string> backends =
      test::kSanitized ? std::vector<std::string>{"cpu:portable"}
                       : std::vector<std::string>{"cpu:portable", "cpu:avx2", "cpu:avx512"};
  const size_t n_weights = test::kSanitized ? 1 : std::size(kWeightCases);
  for (const std::string& backend : backends) {
    if (std::find(backend_names().begin(), backend_names().end(), backend) == backend_names().end())
      continue;
    const int n_prompts = test::kSanitized ? 3 : backend == "cpu:portable" ? 8 : 3;
    for (size_t wi = 0; wi < n_weights; ++wi) {
      const WeightCase& w = kWeightCases[wi];
      Runtime target = test::load_tiny(backend, "tiny", w.format, w.quant);
      Runtime same = test::load_tiny(backend, "tiny", w.format, w.quant);  // a draft that agrees
      Runtime other = test::load_tiny(backend, "tiny", w.format, w.quant, 9);  // one that doesn't
      LlamaModel& model = target.model();
      const std::vector<std::vector<int32_t>> prompts =
          test::short_prompts(static_cast<int32_t>(model.config().vocab_size), n_prompts);
      for (const PolicyCase& policy : policy_cases()) {
        int equal = 0;
        int total = 0;
        int64_t evictions = 0;
        int64_t accepted = 0;
        for (const std::vector<int32_t>& prompt : prompts) {
          const RunResult plain = run(model, policy.config, prompt);
          evictions += plain.stats.evictions;
          PromptLookupDrafter lookup1({.ngram_max = 3, .ngram_min = 1});
          PromptLookupDrafter lookup2({.ngram_max = 4, .ngram_min = 2});
          EvictingCache same_cache(same.model(), policy.config);
          EvictingCache other_cache(other.model(), policy.config);
          ModelDrafter same_drafter(same.model(), same_cache.cache, &same_cache.manager);
          ModelDrafter other_drafter(other.model(), other_cache.cache, &other_cache.manager);
          const std::pair<const char*, Drafter*> drafters[] = {{"lookup 1-3", &lookup1},
                                                               {"lookup 2-4", &lookup2},
                                                               {"same model", &same_drafter},
                                                               {"other model", &other_drafter}};
          for (const auto& [name, drafter] : drafters) {
            const std::string what = backend + " " + dtype_name(w.quant) + " " + policy.label +
                                     " " + name + ", prompt of " + std::to_string(prompt.size());
            const RunResult spec = run(model, policy.config, prompt, drafter, 4);
            equal += expect_identity(plain, spec, backend, w.quant, what) ? 1 : 0;
            ++total;
            accepted += spec.stats.accepted;
            EXPECT_LE(spec.stats.accepted, spec.stats.drafted) << what;
            EXPECT_GE(spec.stats.target_forwards(), 1) << what;
          }
        }
        // The runs must have drafted and evicted, or they would show nothing.
        EXPECT_GT(evictions, 0) << backend << " " << policy.label;
        EXPECT_GT(accepted, 0) << backend << " " << policy.label;
        std::printf(
            "[identity] %-12s %-4s %-21s %d of %d equal to plain greedy (%lld evictions "
            "in the plain runs, %lld drafts accepted)\n",
            backend.c_str(), dtype_name(w.quant), policy.label, equal, total,
            static_cast<long long>(evictions), static_cast<long long>(accepted));
      }
    }
  }
}

// A policy with one statistic per slot that counts the steps which saw it, and notes what each
// slot held when a step handed it over.
class CountingPolicy final : public EvictionPolicy {
 public:
  std::string name() const override { return "counting"; }
  std::optional<int64_t> own_limit() const override { return 64; }
  int64_t stat_channels() const override { return 1; }
  std::optional<int64_t> mass_from(Phase, int64_t first, int64_t, int64_t) const override {
    return first;
  }
  void observe(int64_t layer, Phase, const float*, const SlotStats& stats) override {
    if (layer != 0) return;
    seen.assign(static_cast<size_t>(stats.n_slots), 0.0f);
    for (int64_t s = 0; s < stats.n_slots; ++s) {
      seen[static_cast<size_t>(s)] = stats.at(0, s);
      stats.at(0, s) += 1.0f;
    }
  }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    std::fill(scores, scores + slots.n_kv_heads * slots.n_slots, 0.0f);
  }
  std::vector<float> seen;  // layer 0, kv head 0: each slot's count before the last step
};

TEST(SpeculativeEviction, RolledBackSlotsReadZeroWhenRefilled) {
  Runtime runtime = test::load_tiny("cpu:portable");
  LlamaModel& model = runtime.model();
  auto owned = std::make_unique<CountingPolicy>();
  CountingPolicy* policy = owned.get();
  CacheManager manager(EvictionConfig{.policy = "counting"}, std::move(owned));
  KvCache cache = model.make_cache(64, DType::F32, 64);
  Generator generator(model, cache, &manager);
  const std::vector<int32_t> prompt = {5, 6, 7, 8};
  generator.prefill(prompt);
  for (int32_t t : {9, 10, 11}) generator.decode(t);  // slots 4-6 seen once, 0-3 four times
  generator.rollback(2);                              // slots 5 and 6 go
  generator.decode(12);                               // slot 5 again
  generator.decode(13);                               // slot 6 again
  ASSERT_EQ(policy->seen.size(), 7u);
  // Before this step: slots 0-3 were seen by the prefill and four decode steps (the rolled-back
  // ones included: what the policy heard stays), slot 4 by four, slot 5 anew by one.
  EXPECT_EQ(policy->seen, (std::vector<float>{5, 5, 5, 5, 4, 1, 0}));
  // A verification step that keeps some of its tokens: under a policy that reads attention mass
  // they are fed again, and the policy hears the step's kept rows only, once.
  generator.begin_draft_step();
  generator.decode_draft(std::vector<int32_t>{14, 15, 16});
  generator.end_draft_step(2);  // 14 and 15 stay: they wait to be fed again
  EXPECT_EQ(generator.replay_tokens(), 2);
  EXPECT_EQ(cache.size(0), 7);
  generator.decode(17);  // 14, 15 and 17 in one step
  EXPECT_EQ(generator.replay_tokens(), 0);
  EXPECT_EQ(cache.size(0), 10);
  EXPECT_EQ(policy->seen, (std::vector<float>{6, 6, 6, 6, 5, 2, 1, 0, 0, 0}));
}

}  // namespace
}  // namespace edgelm
