// eviction_bench: the cost of each eviction policy next to the cost of a decode step. For every
// policy it prefills a prompt, decodes n tokens under the given budget/window, and reports the
// mean decode step time, the number of evictions, the mean time per eviction, the time per step
// spent keeping query statistics and the KV memory each allocated (markdown table, or one JSON
// object with -o json).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bin/cli_util.h"
#include "core/error.h"
#include "eviction/cache_manager.h"
#include "models/make_model.h"
#include "runtime/generator.h"
#include "runtime/setup.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Measures time per eviction against time per decode step, for every policy."};
  std::string model_path;
  std::string policies_text;  // default: every policy
  std::string backend_name = "cpu";
  int threads = 0;
  int64_t prompt_tokens = 256;
  int64_t generate_tokens = 256;
  int64_t capacity = 1024;
  std::string output = "md";
  edgelm::EvictionConfig base;
  base.kv_budget = 192;
  int64_t chunk = 64;
  namespace flag = edgelm::cli::flag;
  edgelm::cli::add_shared(app, flag::kModel, model_path);
  edgelm::cli::add_shared(app, flag::kPolicies, policies_text)->default_str("all");
  edgelm::cli::add_shared(app, flag::kBackend, backend_name);
  edgelm::cli::add_shared(app, flag::kThreads, threads)->check(CLI::Range(0, 1024));
  edgelm::cli::add_shared(app, flag::kNPrompt, prompt_tokens)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  edgelm::cli::add_shared(app, flag::kPredict, generate_tokens)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  edgelm::cli::add_shared(app, flag::kCtxSize, capacity)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  edgelm::cli::add_shared(app, flag::kBatchSize, chunk)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  int64_t window = 128;
  edgelm::cli::add_shared(app, flag::kEvictionWindow, window)->capture_default_str();
  edgelm::cli::add_shared(app, flag::kKvBudget, base.kv_budget)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  uint64_t budget_bytes = 0;
  edgelm::cli::add_shared(app, flag::kBudgetBytes, budget_bytes)
      ->transform(edgelm::cli::kByteSize)
      ->type_name("SIZE");
  int64_t sink_tokens = 0;
  edgelm::cli::add_shared(app, flag::kSinkTokens, sink_tokens);
  edgelm::cli::add_shared(app, flag::kSnapkvWindow, base.snapkv_window)->capture_default_str();
  edgelm::cli::add_shared_option(app, flag::kEaCovariance, base.ea_covariance);
  edgelm::cli::add_shared(app, flag::kProtect, base.protect);
  edgelm::cli::add_shared(app, flag::kLayerBudget, base.layer_budget);
  edgelm::cli::add_shared(app, flag::kPyramidBeta, base.pyramid_beta);
  edgelm::cli::add_shared(app, flag::kOutput, output)
      ->capture_default_str()
      ->check(CLI::IsMember({"md", "json"}));
  edgelm::cli::add_note(app,
                        "Without -m: make_model's tiny-long preset, made in a temp folder. The "
                        "prompt is made-up ids, so --protect has only sinks to keep; the KV cache "
                        "is f16, which --budget-bytes counts in.");
  if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;
  base.window = window;
  if (app.count("--sink-tokens") > 0) base.sink_tokens = sink_tokens;
  if (app.count("--budget-bytes") > 0 && budget_bytes == 0)
    EDGELM_FAIL("--budget-bytes 0 keeps nothing: give the bytes K and V may take");
  if (prompt_tokens + generate_tokens > capacity) {
    EDGELM_FAIL("--n-prompt ", prompt_tokens, " and -n ", generate_tokens,
                " tokens pass the logical context, -c/--ctx-size ", capacity);
  }
  std::vector<std::string> policies;
  if (policies_text.empty()) {
    policies = edgelm::policy_names();
  } else {
    std::stringstream list(policies_text);
    const auto& known = edgelm::policy_names();
    for (std::string policy; std::getline(list, policy, ',');) {
      if (std::find(known.begin(), known.end(), policy) == known.end())
        EDGELM_FAIL("--policies: '", policy, "' is not one of ", edgelm::policy_list());
      policies.push_back(policy);
    }
    if (policies.empty()) EDGELM_FAIL("--policies: no policy named");
  }

  if (model_path.empty()) {
    const auto dir = std::filesystem::temp_directory_path() / "edgelm_eviction_bench";
    model_path = edgelm::make_model({.preset = "tiny-long",
                                     .format = "gguf",
                                     .quant = edgelm::DType::F32,
                                     .seed = 1,
                                     .out_dir = dir.string()});
  }
  // The model and the budget, set up as every tool does; each policy then runs on the budget in
  // slots (the windowed ones on their own limit).
  edgelm::Runtime runtime = edgelm::Runtime::load({.model_path = model_path,
                                                   .backend = backend_name,
                                                   .backend_options = {.n_threads = threads},
                                                   .max_chunk = chunk,
                                                   .require_tokenizer = false,
                                                   .kv_type = edgelm::DType::F16,
                                                   .context = capacity,
                                                   .eviction = base,
                                                   .budget_bytes = budget_bytes});
  base = runtime.settings().eviction;
  edgelm::Backend* backend = &runtime.backend();
  edgelm::LlamaModel& model = runtime.model();
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < prompt_tokens; ++i)
    prompt.push_back(static_cast<int32_t>((i * 7919 + 17) % (model.config().vocab_size - 8)));

  nlohmann::json rows = nlohmann::json::array();
  if (output == "md") {
    std::printf("model: %s | backend: %s | prompt %lld, decode %lld, window %lld, budget %lld\n\n",
                model_path.c_str(), backend->device().c_str(),
                static_cast<long long>(prompt_tokens), static_cast<long long>(generate_tokens),
                static_cast<long long>(*base.window), static_cast<long long>(base.kv_budget));
    std::printf(
        "| policy | decode ms/step | evictions | ms/eviction | eviction / step | slots at end | "
        "query statistics ms/step | KV MiB |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  }
  for (const std::string& policy : policies) {
    edgelm::EvictionConfig config = base;
    config.policy = policy;
    if (policy == "sliding" || policy == "sink") config.kv_budget = 0;
    if (!edgelm::policy_reads(config, "--layer-budget")) config.layer_budget = "uniform";
    edgelm::CacheManager manager(config, edgelm::make_policy(config));
    edgelm::KvCache cache =
        model.make_cache(manager.capacity_for(capacity, chunk, model.config().n_layers),
                         edgelm::DType::F16, capacity);
    edgelm::Generator generator(model, cache, &manager);
    double prefill_eviction_s = 0.0;
    double prefill_query_s = 0.0;
    int64_t prefill_evictions = 0;
    try {  // e.g. a cache too small for the prompt under this policy: say which policy it was
      std::span<const float> logits = generator.prefill(prompt);
      prefill_eviction_s = manager.eviction_seconds();
      prefill_query_s = manager.query_seconds();
      prefill_evictions = manager.evictions();
      for (int64_t i = 0; i < generate_tokens; ++i) {
        const auto token =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        logits = generator.decode(token);
      }
    } catch (const std::exception& e) {
      EDGELM_FAIL("policy ", policy, ": ", e.what());
    }
    const int64_t evictions = manager.evictions() - prefill_evictions;
    const double eviction_s = manager.eviction_seconds() - prefill_eviction_s;
    const double step_ms =
        1e3 * generator.decode_seconds() / static_cast<double>(generator.decode_steps());
    const double eviction_ms =
        evictions > 0 ? 1e3 * eviction_s / static_cast<double>(evictions) : 0.0;
    // Keeping query statistics (expected_attention), outside the forward step's time.
    const double query_ms = 1e3 * (manager.query_seconds() - prefill_query_s) /
                            static_cast<double>(generator.decode_steps());
    rows.push_back({{"policy", policy},
                    {"policy_name", manager.policy().name()},
                    {"decode_ms_per_step", step_ms},
                    {"evictions", evictions},
                    {"ms_per_eviction", eviction_ms},
                    {"eviction_to_step", step_ms > 0 ? eviction_ms / step_ms : 0.0},
                    {"prefill_evictions", prefill_evictions},
                    {"prefill_eviction_s", prefill_eviction_s},
                    {"prefill_s", generator.prefill_seconds()},
                    {"prefill_query_s", prefill_query_s},
                    {"query_ms_per_step", query_ms},
                    {"kv_slots", cache.size(0)},
                    {"kv_capacity", cache.capacity()},
                    {"kv_bytes", cache.memory_bytes()},
                    {"kv_resident_bytes", cache.resident_bytes()},
                    {"eviction_fallbacks", manager.fallback_count()}});
    if (output == "md") {
      std::printf("| %s | %.3f | %lld | %.4f | %.3f | %lld | %.4f | %.2f |\n", policy.c_str(),
                  step_ms, static_cast<long long>(evictions), eviction_ms,
                  step_ms > 0 ? eviction_ms / step_ms : 0.0, static_cast<long long>(cache.size(0)),
                  query_ms, static_cast<double>(cache.memory_bytes()) / 1048576.0);
    }
  }
  if (output == "json") {
    std::cout << nlohmann::json{{"model", model_path},
                                {"device", backend->device()},
                                {"kv_budget", base.kv_budget},
                                {"kv_context", capacity},
                                {"rows", rows}}
                     .dump()
              << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eviction_bench: %s\n", e.what());
    return 1;
  }
}
