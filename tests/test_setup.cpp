// Runtime::load, the one setup of every tool: the settings checked before the model loads, the
// budget in bytes resolved into slots once, the cache sized for the manager, the tokenizer
// optional or required, the description the tools print, the same weights on a second backend,
// the model run on a wrapper of the backend when one is given.
#include "runtime/setup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "eval/parity.h"
#include "models/make_model.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

// make_model's tiny preset as a GGUF file with its tokenizer, and as one without (ids only).
const std::string& model_path() {
  static const std::string path =
      make_model({.preset = "tiny",
                  .format = "gguf",
                  .quant = DType::Q8_0,
                  .seed = 0,
                  .out_dir = (fs::path(::testing::TempDir()) /
                              ("edgelm_setup_" + std::to_string(::getpid())))
                                 .string()});
  return path;
}

Settings tiny_settings() {
  Settings settings;
  settings.model_path = model_path();
  settings.backend = "cpu:portable";
  settings.backend_options.n_threads = 1;
  settings.context = 64;
  settings.max_chunk = 8;
  return settings;
}

std::string error_of(const Settings& settings) {
  try {
    Runtime::load(settings);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Runtime, LoadsTheModelItsTokenizerAndACacheForTheContext) {
  Runtime runtime = Runtime::load(tiny_settings());
  EXPECT_EQ(runtime.info().format, "gguf");
  EXPECT_EQ(runtime.info().weight_type, DType::Q8_0);
  ASSERT_NE(runtime.tokenizer(), nullptr);
  EXPECT_EQ(runtime.model().max_chunk(), 8);
  CacheManager manager = runtime.make_manager();
  EXPECT_FALSE(manager.policy().evicts());
  const KvCache cache = runtime.make_cache(manager);
  EXPECT_EQ(cache.capacity(), 64);  // no eviction: the whole context
  EXPECT_EQ(cache.max_positions(), 64);
  EXPECT_EQ(cache.dtype(), DType::F16);
}

TEST(Runtime, ResolvesABudgetInBytesIntoSlotsOnce) {
  Settings settings = tiny_settings();
  settings.eviction.policy = "h2o";
  settings.eviction.kv_budget = 16;
  Runtime probe = Runtime::load(settings);
  const LlamaConfig& config = probe.model().config();
  const size_t slot = KvCache::slot_bytes(config.n_layers, config.n_kv_heads, config.head_dim,
                                          DType::F16);
  settings.eviction.kv_budget = 0;
  settings.budget_bytes = 20 * slot + slot / 2;  // 20.5 slots: 20 fit
  Runtime runtime = Runtime::load(settings);
  EXPECT_EQ(runtime.settings().eviction.kv_budget, 20);
  CacheManager manager = runtime.make_manager();
  EXPECT_EQ(manager.config().kv_budget, 20);
  const KvCache cache = runtime.make_cache(manager);
  EXPECT_LE(cache.memory_bytes(), settings.budget_bytes);
  EXPECT_EQ(cache.capacity(), 20);
  // A second conversation builds its own policy from the same resolved settings.
  CacheManager again = runtime.make_manager();
  EXPECT_EQ(again.config().kv_budget, 20);
  EXPECT_NE(&again.policy(), &manager.policy());
}

TEST(Runtime, BadSettingsNameTheirFlagBeforeLoading) {
  Settings settings = tiny_settings();
  settings.model_path = "/nonexistent/model.gguf";  // never reached: the flag is checked first
  settings.kv_capacity = 65;
  EXPECT_NE(error_of(settings).find("--kv-capacity 65 is above -c/--ctx-size 64"),
            std::string::npos);
  settings.kv_capacity = 0;
  settings.eviction.kv_budget = 8;
  settings.budget_bytes = 1024;
  EXPECT_NE(error_of(settings).find("--kv-budget and --budget-bytes are exclusive"),
            std::string::npos);
  settings.budget_bytes = 0;
  settings.eviction.kv_budget = 0;
  settings.eviction.policy = "h2o";
  EXPECT_NE(error_of(settings).find("--kv-budget"), std::string::npos);  // h2o needs one
  settings.eviction.policy = "none";
  settings.kv_type = DType::Q8_0;
  EXPECT_NE(error_of(settings).find("--kv-type"), std::string::npos);
  settings.kv_type = DType::F16;
  settings.simulate_memory = "0:abc";
  EXPECT_NE(error_of(settings).find("simulate"), std::string::npos) << error_of(settings);
  settings.simulate_memory.clear();
  EXPECT_NE(error_of(settings).find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(Runtime, ABudgetInBytesTooSmallForOneSlotIsAnError) {
  Settings settings = tiny_settings();
  settings.eviction.policy = "h2o";
  settings.budget_bytes = 1;
  EXPECT_NE(error_of(settings).find("--budget-bytes"), std::string::npos) << error_of(settings);
}

TEST(Runtime, TheTokenizerIsOptionalWhereNotRequired) {
  // Not loaded at all when not asked for (an ids-only run).
  Settings settings = tiny_settings();
  settings.load_tokenizer = false;
  settings.require_tokenizer = false;
  Runtime runtime = Runtime::load(settings);
  EXPECT_EQ(runtime.tokenizer(), nullptr);
  EXPECT_TRUE(runtime.tokenizer_error().empty());
}

TEST(Runtime, DescribesTheModelTheBackendAndTheTokenizer) {
  const std::string text = Runtime::load(tiny_settings()).describe();
  EXPECT_TRUE(text.starts_with("model: " + model_path() + " (gguf; weights q8_0")) << text;
  EXPECT_NE(text.find("\nbackend: "), std::string::npos) << text;
  EXPECT_NE(text.find("\ntokenizer: "), std::string::npos) << text;
  EXPECT_FALSE(text.ends_with("\n"));
  Settings settings = tiny_settings();
  settings.load_tokenizer = false;
  settings.require_tokenizer = false;
  EXPECT_EQ(Runtime::load(settings).describe().find("tokenizer"), std::string::npos);
}

TEST(Runtime, TheModelOnAnotherBackendSharesTheWeightsAndGivesTheSameLogits) {
  Runtime runtime = Runtime::load(tiny_settings());
  Runtime::ModelOnBackend other = runtime.model_on({.n_threads = 2});
  ASSERT_NE(other.model, nullptr);
  EXPECT_EQ(&other.model->backend(), other.backend.get());
  EXPECT_NE(other.backend.get(), &runtime.backend());
  EXPECT_EQ(other.model->max_chunk(), 8);
  // The same bytes, not a second load.
  EXPECT_EQ(other.model->weights().layers[0].w_gate.raw(),
            runtime.model().weights().layers[0].w_gate.raw());
  const std::vector<int32_t> tokens = {5, 17, 3, 99, 42, 7, 8, 9, 10, 11};
  KvCache cache = runtime.make_cache(runtime.make_manager());
  const std::span<const float> expected = runtime.model().forward(tokens, cache);
  const std::vector<float> first(expected.begin(), expected.end());
  KvCache other_cache = other.model->make_cache(64, DType::F16);
  const std::span<const float> logits = other.model->forward(tokens, other_cache);
  // cpu:portable splits rows over the threads without changing any sum.
  EXPECT_TRUE(std::equal(logits.begin(), logits.end(), first.begin(), first.end()));
}

TEST(Runtime, TheModelRunsOnTheBackendWrapperWhenOneIsGiven) {
  const std::vector<int32_t> tokens = {5, 17, 3, 99};
  Runtime plain = Runtime::load(tiny_settings());
  KvCache plain_cache = plain.make_cache(plain.make_manager());
  const std::vector<float> expected = [&] {
    const std::span<const float> logits = plain.model().forward(tokens, plain_cache);
    return std::vector<float>(logits.begin(), logits.end());
  }();

  Settings settings = tiny_settings();
  int64_t seen_layers = 0;
  settings.wrap_backend = [&](Backend& backend, const LlamaConfig& config,
                              const LlamaWeights& weights) {
    seen_layers = config.n_layers;
    return plant_fault(backend, weights.layers[0].w_down, 0, 64.0f);
  };
  Runtime runtime = Runtime::load(settings);
  EXPECT_EQ(seen_layers, runtime.model().config().n_layers);
  EXPECT_EQ(&runtime.model().backend(), &runtime.backend());
  EXPECT_NE(runtime.backend().device().find("with a planted fault"), std::string::npos);
  KvCache cache = runtime.make_cache(runtime.make_manager());
  const std::span<const float> logits = runtime.model().forward(tokens, cache);
  ASSERT_EQ(logits.size(), expected.size());
  EXPECT_FALSE(std::equal(logits.begin(), logits.end(), expected.begin()));

  settings.wrap_backend = [](Backend&, const LlamaConfig&,
                             const LlamaWeights&) -> std::unique_ptr<Backend> {
    EDGELM_FAIL("--plant-fault: no such layer");
  };
  EXPECT_NE(error_of(settings).find("--plant-fault: no such layer"), std::string::npos);
}

}  // namespace
}  // namespace edgelm
