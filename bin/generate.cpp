// generate: loads a Llama model (Hugging Face folder or GGUF file) and generates tokens with a KV
// cache, streaming them as they come, then prints load time, prefill and decode speed, KV-cache
// bytes and peak memory (and, with --json, one JSON object as the last line of stdout).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/registry.h"
#include "core/error.h"
#include "core/npy.h"
#include "eviction/cache_manager.h"
#include "models/generator.h"
#include "models/loader.h"
#include "models/sampler.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

size_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    if (item.empty() || used != item.size() || value < 0 || value > INT32_MAX) {
      EDGELM_FAIL("--prompt-ids: '", item, "' is not a token id (expected e.g. 1,2,3)");
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  if (ids.empty()) EDGELM_FAIL("--prompt-ids: no token ids given");
  return ids;
}

edgelm::DType parse_dtype(const std::string& text, const char* flag,
                          std::initializer_list<edgelm::DType> allowed) {
  const auto dtype = edgelm::dtype_from_name(text);
  std::string names;
  for (edgelm::DType d : allowed) {
    if (dtype == d) return d;
    names += names.empty() ? edgelm::dtype_name(d) : std::string("|") + edgelm::dtype_name(d);
  }
  EDGELM_FAIL(flag, ": '", text, "' is not one of ", names);
}

int run(int argc, char** argv) {
  CLI::App app{"Generates text with a Llama model (Hugging Face folder or GGUF file)."};
  std::string model_path;
  std::string prompt;
  std::string prompt_ids_text;
  int n_generate = 32;
  std::string backend_name = "cpu";
  int threads = 0;
  std::string weight_type_text;
  std::string kv_type_text = "f16";
  int64_t max_seq_len = 2048;
  int64_t chunk = 64;
  edgelm::SamplerConfig sampling;
  bool greedy = false;
  bool json = false;
  bool quiet = false;
  std::string dump_logits;
  edgelm::EvictionConfig eviction;
  std::string simulate_memory;
  app.add_option("-m,--model-path", model_path, "Hugging Face model folder or .gguf file")
      ->required();
  app.add_option("-p,--prompt", prompt, "Prompt text (needs a tokenizer)");
  app.add_option("--prompt-ids", prompt_ids_text, "Prompt as token ids, e.g. 1,2,3 (no tokenizer)");
  app.add_option("-n,--n-predict", n_generate, "Tokens to generate")->check(CLI::Range(0, 1 << 30));
  app.add_option("--backend", backend_name, "Backend: cpu, cpu:<isa>, opencl");
  app.add_option("-t,--threads", threads, "CPU threads (0: one per hardware thread)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--weight-type", weight_type_text,
                 "Convert weights on load: f32|f16|q8_0|q4_0 (default: the file's)");
  app.add_option("--kv-type", kv_type_text, "KV cache type: f32|f16");
  app.add_option("--max-seq-len", max_seq_len, "KV cache capacity in tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--chunk", chunk, "Prefill chunk size (tokens per forward step)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  auto* temperature =
      app.add_option("--temperature", sampling.temperature, "Sampling temperature (0: greedy)");
  auto* top_k = app.add_option("--top-k", sampling.top_k, "Keep the k most likely tokens (0: off)");
  auto* top_p = app.add_option("--top-p", sampling.top_p, "Nucleus sampling threshold (1: off)");
  app.add_option("--min-p", sampling.min_p,
                 "Drop tokens below min-p times the top probability (0: off)");
  app.add_option("--repeat-penalty", sampling.repetition_penalty, "Repetition penalty (1: off)");
  app.add_option("--repeat-last-n", sampling.repetition_window,
                 "Tokens the repetition penalty looks back at");
  app.add_option("--seed", sampling.seed, "Sampling seed");
  app.add_flag("--greedy", greedy, "Always take the most likely token");
  app.add_flag("--json", json, "Print a JSON summary as the last line of stdout");
  app.add_flag("-q,--quiet", quiet, "Do not stream tokens");
  app.add_option("--dump-logits", dump_logits,
                 "Write float32 .npy [steps, vocab]: logits of the last prompt position and of "
                 "every decode step");
  app.add_option("--eviction-policy", eviction.policy,
                 "KV eviction: none|sliding|sink|snapkv|h2o|tova");
  app.add_option("--eviction-window", eviction.window,
                 "Recent tokens kept (sliding, sink, h2o; snapkv in decode)");
  app.add_option("--protected-prefix", eviction.protected_prefix,
                 "sliding: first tokens always kept");
  app.add_option("--sink-tokens", eviction.sink_tokens, "sink/snapkv: attention-sink tokens kept");
  app.add_option("--kv-budget", eviction.kv_budget,
                 "Most KV slots per layer (0: no budget; needed by snapkv, h2o, tova)");
  app.add_option("--memory-threshold-mb", eviction.memory_threshold_mb,
                 "Evict while available memory is below this (MiB)");
  app.add_option("--snapkv-window", eviction.snapkv_window,
                 "snapkv: last prompt queries that score the prompt");
  app.add_option("--snapkv-kernel", eviction.snapkv_kernel,
                 "snapkv: pooling kernel over slots (odd)");
  app.add_option("--snapkv-pool", eviction.snapkv_pool, "snapkv: max|avg pooling");
  app.add_option("--simulate-memory", simulate_memory,
                 "Replace /proc/meminfo with a scripted curve step:MiB,... (e.g. 0:4000,200:100)");
  CLI11_PARSE(app, argc, argv);

  if (!prompt.empty() && !prompt_ids_text.empty())
    EDGELM_FAIL("--prompt and --prompt-ids are exclusive");
  if (!prompt.empty()) {
    EDGELM_FAIL(
        "--prompt: text prompts need the tokenizer, which this build does not have yet; "
        "pass token ids with --prompt-ids");
  }
  if (prompt_ids_text.empty()) EDGELM_FAIL("give a prompt with --prompt-ids 1,2,3");
  const std::vector<int32_t> prompt_ids = parse_ids(prompt_ids_text);
  const edgelm::DType kv_type =
      parse_dtype(kv_type_text, "--kv-type", {edgelm::DType::F32, edgelm::DType::F16});
  edgelm::LoadOptions load_options;
  if (!weight_type_text.empty()) {
    load_options.weight_type = parse_dtype(
        weight_type_text, "--weight-type",
        {edgelm::DType::F32, edgelm::DType::F16, edgelm::DType::Q8_0, edgelm::DType::Q4_0});
  }
  if (eviction.policy == "none" && static_cast<int64_t>(prompt_ids.size()) > max_seq_len) {
    EDGELM_FAIL("--prompt-ids: the prompt has ", prompt_ids.size(),
                " tokens, more than --max-seq-len ", max_seq_len);
  }

  auto backend = edgelm::create_backend(backend_name, {.n_threads = threads});
  const auto load_start = Clock::now();
  edgelm::LoadedModel loaded = edgelm::load_llama(model_path, *backend, load_options);
  const edgelm::DType weight_type = loaded.weight_type;
  edgelm::LlamaModel model(*backend, std::move(loaded.config), std::move(loaded.weights), chunk);
  edgelm::KvCache cache = model.make_cache(max_seq_len, kv_type);
  const double load_s = seconds_since(load_start);
  const edgelm::LlamaConfig& config = model.config();
  for (int32_t id : prompt_ids) {
    if (id >= config.vocab_size) {
      EDGELM_FAIL("--prompt-ids: token id ", id, " is outside the vocabulary of ",
                  config.vocab_size);
    }
  }
  std::fprintf(stderr, "model: %s (%s, %s weights)\n%s\nbackend: %s\n", model_path.c_str(),
               loaded.format.c_str(), edgelm::dtype_name(weight_type), config.describe().c_str(),
               backend->device().c_str());

  // Sampling defaults: the checkpoint's generation_config.json unless given on the command line.
  if (temperature->count() == 0 && config.default_temperature)
    sampling.temperature = *config.default_temperature;
  if (top_p->count() == 0 && config.default_top_p) sampling.top_p = *config.default_top_p;
  if (top_k->count() == 0 && config.default_top_k) sampling.top_k = *config.default_top_k;
  sampling.greedy = greedy;
  edgelm::Sampler sampler(sampling, config.vocab_size);

  std::unique_ptr<edgelm::SystemMonitor> monitor;
  if (!simulate_memory.empty()) {
    monitor = edgelm::SimulatedMonitor::parse(simulate_memory);
  } else if (eviction.policy != "none") {
    monitor = std::make_unique<edgelm::LinuxSystemMonitor>();
  }
  edgelm::CacheManager manager(eviction, edgelm::make_policy(eviction), std::move(monitor));
  edgelm::Generator generator(model, cache, &manager);

  std::vector<float> logit_rows;
  auto record = [&](std::span<const float> logits) {
    if (!dump_logits.empty()) logit_rows.insert(logit_rows.end(), logits.begin(), logits.end());
  };

  std::span<const float> logits = generator.prefill(prompt_ids);
  record(logits);

  std::vector<int32_t> history = prompt_ids;
  std::vector<int32_t> generated;
  std::string stop_reason = "length";
  for (int i = 0; i < n_generate; ++i) {
    const int32_t token = sampler.sample(logits, history);
    generated.push_back(token);
    history.push_back(token);
    if (!quiet) {
      std::printf("%d ", token);
      std::fflush(stdout);
    }
    if (std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), token) !=
        config.eos_token_ids.end()) {
      stop_reason = "eos";
      break;
    }
    if (i + 1 == n_generate) break;
    if (!manager.policy().evicts() && cache.free_slots() == 0) {
      stop_reason = "context_full";
      break;
    }
    logits = generator.decode(token);
    record(logits);
  }
  const double prefill_s = generator.prefill_seconds();
  const double decode_s = generator.decode_seconds();
  const int64_t decode_steps = generator.decode_steps();
  if (!quiet) std::printf("\n");
  if (stop_reason == "context_full") {
    std::fprintf(stderr,
                 "stopped: the KV cache is full (%lld slots); raise --max-seq-len or use "
                 "--eviction-policy\n",
                 static_cast<long long>(cache.capacity()));
  }

  if (!dump_logits.empty()) {
    const auto rows =
        static_cast<int64_t>(logit_rows.size() / static_cast<size_t>(config.vocab_size));
    edgelm::write_npy(dump_logits, {rows, config.vocab_size}, logit_rows.data());
  }

  const double prefill_tok_s = prefill_s > 0 ? prompt_ids.size() / prefill_s : 0.0;
  const double decode_tok_s =
      decode_s > 0 && decode_steps > 0 ? static_cast<double>(decode_steps) / decode_s : 0.0;
  const size_t peak = peak_rss_bytes();
  std::fprintf(stderr,
               "load %.3f s | prefill %zu tokens, %.2f tok/s | decode %lld steps, %.2f tok/s | "
               "KV cache %.2f MiB (%s, %lld slots) | peak RSS %.1f MiB | stop: %s\n",
               load_s, prompt_ids.size(), prefill_tok_s, static_cast<long long>(decode_steps),
               decode_tok_s, cache.memory_bytes() / 1048576.0, edgelm::dtype_name(kv_type),
               static_cast<long long>(cache.capacity()), peak / 1048576.0, stop_reason.c_str());
  if (json) {
    nlohmann::json summary = {
        {"model", model_path},
        {"format", loaded.format},
        {"backend", backend_name},
        {"device", backend->device()},
        {"weight_type", edgelm::dtype_name(weight_type)},
        {"kv_type", edgelm::dtype_name(kv_type)},
        {"load_s", load_s},
        {"prompt_tokens", prompt_ids.size()},
        {"generated_tokens", generated.size()},
        {"prefill_s", prefill_s},
        {"decode_s", decode_s},
        {"prefill_tok_s", prefill_tok_s},
        {"decode_tok_s", decode_tok_s},
        {"kv_bytes", cache.memory_bytes()},
        {"kv_slots", cache.size(0)},
        {"kv_used_bytes", cache.used_bytes()},
        {"eviction_policy", manager.policy().name()},
        {"evictions", manager.evictions()},
        {"evicted_tokens", manager.evicted_tokens()},
        {"eviction_s", manager.eviction_seconds()},
        {"next_position", cache.next_position()},
        {"peak_rss_bytes", peak},
        {"weight_bytes_per_token", model.weight_bytes_per_token()},
        {"stop", stop_reason},
        {"tokens", generated},
    };
    std::printf("%s\n", summary.dump().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "generate: %s\n", e.what());
    return 1;
  }
}
