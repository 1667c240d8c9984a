// Speculative decoding (runtime/speculative.h) on make_model's tiny presets: the batched
// verification step against one-token decode steps on every backend, rollback, and greedy
// identity of every drafter with plain greedy decoding over many prompts.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/error.h"
#include "eval/parity.h"
#include "runtime/session.h"
#include "runtime/setup.h"
#include "runtime/speculative.h"
#include "sanitized.h"
#include "speculative_test_util.h"

namespace edgelm {
namespace {

struct WeightCase {
  const char* name;
  const char* preset;
  const char* format;
  DType quant;
};
// Every weight layout the CPU multiplies by its own kernel family: F32, F16 (repacked to F16x4),
// Q8_0 and Q4_0 (repacked to x8 layouts), Q4_1 and a K-quant.
const WeightCase kWeightCases[] = {
    {"f32", "tiny", "hf", DType::F32},     {"f16", "tiny", "hf", DType::F16},
    {"q8_0", "tiny", "gguf", DType::Q8_0}, {"q4_0", "tiny", "gguf", DType::Q4_0},
    {"q4_1", "tiny", "gguf", DType::Q4_1}, {"q4_k", "tiny-256", "gguf", DType::Q4_K},
};

// Two threads: the verification steps' rows are split between them as in generate.
Runtime load(const WeightCase& w, const std::string& backend, uint64_t seed = 7) {
  Settings settings;
  settings.model_path = test::tiny_model_path(w.preset, w.format, w.quant, seed);
  settings.backend = backend;
  settings.backend_options.n_threads = 2;
  settings.max_chunk = 16;
  settings.load_tokenizer = false;
  settings.require_tokenizer = false;
  return Runtime::load(settings);
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int32_t vocab) {
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = id(rng);
  return ids;
}

// Feeds `prompt`, then `step` (a token and its drafts) once token by token and once as one
// step with every position's logits, then one more token after each: true when every row of
// logits agrees bit for bit. max_abs gets the largest difference.
bool batched_rows_match_decode(LlamaModel& model, DType kv_type, std::span<const int32_t> prompt,
                               std::span<const int32_t> step, int32_t next, double* max_abs) {
  const int64_t vocab = model.config().vocab_size;
  KvCache one = model.make_cache(64, kv_type);
  KvCache batched = model.make_cache(64, kv_type);
  model.forward(prompt, one);
  model.forward(prompt, batched);
  std::vector<float> a;
  for (int32_t t : step) {
    const std::span<const float> row = model.forward(std::span<const int32_t>(&t, 1), one);
    a.insert(a.end(), row.begin(), row.end());
  }
  const std::span<const float> rows =
      model.forward(step, batched, {.all_logits = true, .logits_from = 0});
  std::vector<float> b(rows.begin(), rows.end());
  const std::span<const float> after_a = model.forward(std::span<const int32_t>(&next, 1), one);
  a.insert(a.end(), after_a.begin(), after_a.end());
  const std::span<const float> after_b = model.forward(std::span<const int32_t>(&next, 1), batched);
  b.insert(b.end(), after_b.begin(), after_b.end());
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(static_cast<int64_t>(a.size()), vocab * static_cast<int64_t>(step.size() + 1));
  *max_abs = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    *max_abs = std::max(*max_abs, static_cast<double>(std::abs(a[i] - b[i])));
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Speculative, BatchedVerificationRowsAgainstDecodeSteps) {
  for (const std::string& backend : backend_names()) {
    if (backend == "cpu") continue;  // the same table as one of cpu:<isa>
    for (const WeightCase& w : kWeightCases) {
      Runtime runtime = load(w, backend);
      LlamaModel& model = runtime.model();
      std::mt19937 rng(11);
      for (DType kv : {DType::F16, DType::F32}) {
        bool identical = true;
        double worst = 0.0;
        for (int trial = 0; trial < 6; ++trial) {
          const auto vocab = static_cast<int32_t>(model.config().vocab_size);
          const std::vector<int32_t> prompt = random_tokens(rng, 5 + trial * 3, vocab);
          const std::vector<int32_t> step = random_tokens(rng, 2 + trial, vocab);
          double max_abs = 0.0;
          identical &= batched_rows_match_decode(model, kv, prompt, step, 3, &max_abs);
          worst = std::max(worst, max_abs);
        }
        // The portable oracle and OpenCL run a step's rows through the same per-row arithmetic
        // as a one-token step; the AVX2 and AVX-512 tables' multi-row kernels sum in another
        // order (measured: up to ~1e-5 apart, 1e-2 for AVX-512's Q4_K), so they are only printed.
        if (backend == "cpu:portable" || backend == "opencl") {
          EXPECT_TRUE(identical) << backend << " " << w.name << " kv " << dtype_name(kv);
        }
        std::printf("[rows] %-14s %-5s kv %-3s %s (max |diff| %.3g)\n", backend.c_str(), w.name,
                    dtype_name(kv), identical ? "identical" : "DIFFERENT", worst);
      }
    }
  }
}

// Random prompts, and prompts that repeat a short random pattern (where lookup drafts long runs).
std::vector<std::vector<int32_t>> prompts(int32_t vocab) {
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 6; ++i) out.push_back(random_tokens(rng, 3 + 7 * i, vocab));
  for (int i = 0; i < 6; ++i) {
    const std::vector<int32_t> pattern = random_tokens(rng, 2 + i, vocab);
    std::vector<int32_t> prompt;
    for (int r = 0; r < 4; ++r) prompt.insert(prompt.end(), pattern.begin(), pattern.end());
    out.push_back(prompt);
  }
  return out;
}

GenerationSettings greedy_settings(int64_t max_tokens) {
  GenerationSettings settings;
  settings.sampling.greedy = true;
  settings.max_tokens = max_tokens;
  return settings;
}

// A reply with its logits and the cache after it, from a fresh cache.
struct RunResult {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // logits[i]: what token i was drawn from
  GenerationStats stats;
  std::vector<int32_t> positions;  // every layer's slot positions (kv head 0) after the reply
  std::vector<int32_t> second;     // a second reply after the first
};

RunResult run(LlamaModel& model, std::span<const int32_t> prompt, int64_t max_tokens,
              Drafter* drafter = nullptr, int64_t max_draft = 4) {
  KvCache cache = model.make_cache(256, DType::F16);
  RunResult r;
  GenerationSession::Callbacks callbacks;
  callbacks.on_logits = [&](std::span<const float> logits) {
    r.logits.emplace_back(logits.begin(), logits.end());
  };
  GenerationSession session(model, cache, nullptr, greedy_settings(max_tokens), nullptr,
                            std::move(callbacks));
  if (drafter != nullptr) session.set_drafter(drafter, max_draft);
  session.prefill(prompt);
  r.tokens = session.generate().tokens;
  r.stats = session.stats();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    for (int64_t slot = 0; slot < cache.size(l); ++slot)
      r.positions.push_back(cache.position(l, slot, 0));
  }
  r.second = session.generate().tokens;
  return r;
}

// Where the batched verification step's rows equal one-token decode steps bit for bit
// (BatchedVerificationRowsAgainstDecodeSteps): there the reply must be plain greedy's exactly.
bool rows_identical(const std::string& backend) {
  return backend == "cpu:portable";
}

// Checks a speculative run against plain greedy decoding: equal tokens where the rows are
// identical; elsewhere equal up to the first difference, which must be a near tie of the plain
// run's logits (eval/parity.h's rule: top-2 margin within twice the bound). Returns whether the
// two runs were equal.
bool expect_greedy_identity(const RunResult& plain, const RunResult& spec,
                            const std::string& backend, DType weights, const std::string& what) {
  if (rows_identical(backend)) {
    EXPECT_EQ(spec.tokens, plain.tokens) << what;
    EXPECT_EQ(spec.second, plain.second) << what;
    EXPECT_EQ(spec.positions, plain.positions) << what;
    EXPECT_EQ(spec.stats.next_position, plain.stats.next_position) << what;
    EXPECT_EQ(spec.stats.kv_slots, plain.stats.kv_slots) << what;
    return spec.tokens == plain.tokens && spec.second == plain.second;
  }
  const bool equal =
      test::equal_up_to_a_tie(plain.tokens, plain.logits, spec.tokens, weights, what);
  if (equal) {
    EXPECT_EQ(spec.positions, plain.positions) << what;
  }
  return equal;
}

TEST(Speculative, EveryDrafterGivesPlainGreedyTokensOnEveryCpuTable) {
  // Under the sanitizers (about 20x slower) a third of the prompts and one draft length: the
  // same code paths, in a ctest time limit. The SIMD tables, judged by the tie rule only, take
  // every other prompt; the portable oracle, exact, takes them all.
  const std::vector<int64_t> max_drafts =
      test::kSanitized ? std::vector<int64_t>{3} : std::vector<int64_t>{2, 5};
  for (const std::string backend : {"cpu:portable", "cpu:avx2", "cpu:avx512"}) {
    if (std::find(backend_names().begin(), backend_names().end(), backend) == backend_names().end())
      continue;
    for (const WeightCase& w : kWeightCases) {
      Runtime target = load(w, backend);
      Runtime same = load(w, backend);      // a draft model that agrees: full acceptance
      Runtime other = load(w, backend, 9);  // one that mostly disagrees: rollbacks
      KvCache same_cache = same.model().make_cache(512, DType::F16);
      KvCache other_cache = other.model().make_cache(512, DType::F16);
      LlamaModel& model = target.model();
      int equal = 0;
      int total = 0;
      const std::vector<std::vector<int32_t>> all_prompts =
          prompts(static_cast<int32_t>(model.config().vocab_size));
      const size_t prompt_stride = test::kSanitized ? 3 : backend == "cpu:portable" ? 1 : 2;
      for (size_t p = 0; p < all_prompts.size(); p += prompt_stride) {
        const std::vector<int32_t>& prompt = all_prompts[p];
        const RunResult plain = run(model, prompt, 24);
        PromptLookupDrafter lookup1({.ngram_max = 3, .ngram_min = 1});
        PromptLookupDrafter lookup2({.ngram_max = 4, .ngram_min = 2});
        ModelDrafter same_drafter(same.model(), same_cache);
        ModelDrafter other_drafter(other.model(), other_cache);
        const std::pair<const char*, Drafter*> drafters[] = {{"lookup 1-3", &lookup1},
                                                             {"lookup 2-4", &lookup2},
                                                             {"same model", &same_drafter},
                                                             {"other model", &other_drafter}};
        for (const auto& [name, drafter] : drafters) {
          for (int64_t max_draft : max_drafts) {
            const std::string what = backend + " " + w.name + " " + name + " draft " +
                                     std::to_string(max_draft) + ", prompt of " +
                                     std::to_string(prompt.size());
            const RunResult spec = run(model, prompt, 24, drafter, max_draft);
            equal += expect_greedy_identity(plain, spec, backend, w.quant, what) ? 1 : 0;
            ++total;
            EXPECT_EQ(spec.stats.decode_steps, plain.stats.decode_steps) << what;
            EXPECT_LE(spec.stats.accepted, spec.stats.drafted) << what;
            if (std::string(name) == "same model" && spec.tokens == plain.tokens) {
              // The same weights on the same table: every draft is greedy's own choice, as
              // long as the one-token steps of the draft match the target's batched rows.
              EXPECT_GT(spec.stats.accepted, 0) << what;
            }
          }
        }
      }
      std::printf("[identity] %-12s %-5s %d of %d speculative runs equal to plain greedy\n",
                  backend.c_str(), w.name, equal, total);
    }
  }
}

TEST(Speculative, LookupDraftsTheTokensAfterTheLatestMatch) {
  PromptLookupDrafter lookup({.ngram_max = 3, .ngram_min = 2});
  const std::vector<int32_t> context = {1, 2, 3, 9, 1, 2, 3, 4, 5, 6, 7, 2, 3};
  // The 3-gram "7 2 3" never occurred before; "2 3" last did at index 5, followed by 4 5 6 ...
  EXPECT_EQ(lookup.draft(context, 3), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(lookup.draft(context, 10), (std::vector<int32_t>{4, 5, 6, 7, 2, 3}));
  EXPECT_TRUE(lookup.draft(std::vector<int32_t>{1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(lookup.draft(std::vector<int32_t>{5}, 4).empty());
  PromptLookupDrafter unigram({.ngram_max = 2, .ngram_min = 1});
  EXPECT_EQ(unigram.draft(std::vector<int32_t>{8, 1, 5, 8}, 2), (std::vector<int32_t>{1, 5}));
  EXPECT_THROW(PromptLookupDrafter({.ngram_max = 1, .ngram_min = 2}), Error);
}

TEST(Speculative, DraftLengthShrinksOnRejectionAndGrowsOnFullAcceptance) {
  DraftLength length(4);
  EXPECT_EQ(length.current(), 4);
  length.update(4, 0);
  length.update(3, 0);
  EXPECT_EQ(length.current(), 2);
  length.update(2, 1);  // partly accepted: unchanged
  EXPECT_EQ(length.current(), 2);
  for (int i = 0; i < 5; ++i) length.update(1, 0);
  EXPECT_EQ(length.current(), 1);
  for (int i = 0; i < 9; ++i) length.update(length.current(), length.current());
  EXPECT_EQ(length.current(), 4);
  EXPECT_THROW(DraftLength(0), Error);
}

TEST(Speculative, RefusesADraftModelOfAnotherVocabulary) {
  const WeightCase& w = kWeightCases[0];
  Runtime runtime = load(w, "cpu:portable");
  const WeightCase other{"mha", "tiny-mha-untied", "hf", DType::F32};  // vocabulary 300, not 320
  Runtime draft = load(other, "cpu:portable");
  try {
    check_same_vocabulary(runtime, "target.gguf", draft, "draft.gguf");
    ADD_FAILURE() << "another vocabulary was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("target.gguf"), std::string::npos) << message;
    EXPECT_NE(message.find("draft.gguf"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(check_same_vocabulary(runtime, "a", load(w, "cpu:portable"), "b"));
}

}  // namespace
}  // namespace edgelm
