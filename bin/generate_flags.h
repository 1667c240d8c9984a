// generate's flags, declared once for the tools that take them: generate, and generate_hybrid,
// which takes every one of them (refusing the few that mean nothing for it) plus its own.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bin/cli_util.h"
#include "core/process_stats.h"
#include "eviction/cache_manager.h"
#include "models/llama.h"
#include "models/tokenizer.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace edgelm::cli {

// The values of generate's flags, each named after its flag, with generate's defaults. The three
// sampling options are kept to ask whether they were given (a model's generation config supplies
// defaults only for those that were not).
struct GenerateFlags {
  std::string model_path;
  std::string prompt;
  std::string prompt_ids_text;
  std::string system_prompt;
  bool chat = false;
  std::string chat_template_name;
  bool list_chat_templates = false;
  bool no_think = false;
  bool interactive = false;
  bool print_ids = false;
  int n_generate = 128;
  std::string backend_name = "cpu";
  int threads = 0;
  std::string weight_type_text;
  std::string kv_type_text = "f16";
  int64_t max_seq_len = 2048;
  int64_t chunk = kDefaultPrefillChunk;
  SamplerConfig sampling;
  TokenizerOptions tokenizer_options;
  bool greedy = false;
  bool json = false;
  bool quiet = false;
  std::string dump_logits;
  EvictionConfig eviction;
  std::string simulate_memory;
  bool list_devices = false;
  int cl_platform = -1;
  int cl_device = -1;
  bool profile = false;
  std::string profile_out;
  std::string prompt_file;
  bool ignore_eos = false;
  std::string cpu_list;
  bool no_repack = false;
  int64_t window = 0;
  int64_t sink_tokens = 0;
  uint64_t budget_bytes = 0;
  int64_t kv_capacity = 0;
  std::string dump_kv_positions;
  CLI::Option* temperature = nullptr;
  CLI::Option* top_k = nullptr;
  CLI::Option* top_p = nullptr;
};

// Declares generate's flags on `app`, storing into `f` (which must outlive the parse).
inline void add_generate_flags(CLI::App& app, GenerateFlags& f) {
  app.add_option(flag::kModel, f.model_path, "Hugging Face model folder or .gguf file");
  app.add_option(flag::kPrompt, f.prompt, "Prompt text");
  app.add_option(flag::kFile, f.prompt_file,
                 "Read the prompt text from this file (one trailing newline is dropped)");
  app.add_option("--prompt-ids", f.prompt_ids_text,
                 "Prompt as token ids, comma-separated decimal numbers without spaces, e.g. 1,2,3 "
                 "(bypasses the tokenizer)");
  app.add_flag("--chat", f.chat, "Wrap the prompt in the model's chat template");
  app.add_option("--chat-template", f.chat_template_name,
                 "Chat template for --chat / --interactive instead of the model's (see "
                 "--list-chat-templates)");
  app.add_flag("--list-chat-templates", f.list_chat_templates,
               "List the chat template names, then exit");
  app.add_option("--system", f.system_prompt, "System message for --chat / --interactive");
  app.add_flag("--no-think", f.no_think,
               "Answer without a reasoning block first, where the template has that switch "
               "(Qwen3's enable_thinking=false)");
  app.add_flag("-i,--interactive", f.interactive, "Multi-turn chat on stdin (/reset, /quit)");
  app.add_flag("--print-ids", f.print_ids, "Stream token ids instead of text");
  app.add_option(flag::kPredict, f.n_generate,
                 "Tokens to generate (per turn); a warning when the reply cannot fit in -c")
      ->check(CLI::Range(0, 1 << 30));
  cli::add_shared(app, flag::kBackendFlag, f.backend_name);
  app.add_flag("--list-devices", f.list_devices,
               "List the OpenCL platforms and devices, then exit");
  app.add_option("--cl-platform", f.cl_platform,
                 "OpenCL platform index (default: the first with a GPU)")
      ->check(CLI::Range(-1, 1 << 20));
  app.add_option("--cl-device", f.cl_device,
                 "OpenCL device index within the platform (default: its first GPU)")
      ->check(CLI::Range(-1, 1 << 20));
  app.add_flag("--profile", f.profile,
               "Print time per op and kernel for prefill and decode: device time on OpenCL, "
               "each op call's wall time on the CPU (with weight GB/s for matmuls)");
  app.add_option("--profile-out", f.profile_out,
                 "Also write the profile as CSV (phase,op,kernel,calls,total_ms,bytes); implies "
                 "--profile");
  cli::add_shared(app, flag::kThreadsFlag, f.threads)->check(CLI::Range(0, 1024));
  app.add_option("--cpus", f.cpu_list,
                 "Pin CPU thread i to the i-th CPU of this list, e.g. 4-7 (a phone's big cores)");
  cli::add_shared(app, flag::kWeightTypeFlag, f.weight_type_text);
  cli::add_shared(app, flag::kNoRepackFlag, f.no_repack);
  cli::add_shared(app, flag::kKvTypeFlag, f.kv_type_text);
  app.add_option(flag::kCtxSize, f.max_seq_len,
                 "Logical context in tokens (default 2048): the most positions prompt and reply "
                 "take; also the KV cache's capacity unless an eviction limit sizes it")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option(
         flag::kBatchSize, f.chunk,
         "Prompt tokens per prefill step (default " + std::to_string(kDefaultPrefillChunk) + ")")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  f.temperature =
      app.add_option(flag::kTemp, f.sampling.temperature, "Sampling temperature (0: greedy)");
  f.top_k = app.add_option("--top-k", f.sampling.top_k, "Keep the k most likely tokens (0: off)");
  f.top_p = app.add_option("--top-p", f.sampling.top_p, "Nucleus sampling threshold (1: off)");
  app.add_option("--min-p", f.sampling.min_p,
                 "Drop tokens below min-p times the top probability (0: off)");
  app.add_option("--repeat-penalty", f.sampling.repetition_penalty, "Repetition penalty (1: off)");
  app.add_option("--repeat-last-n", f.sampling.repetition_window,
                 "Tokens the repetition penalty looks back at");
  app.add_option(flag::kSeed, f.sampling.seed, "Sampling seed")->check(cli::kUint64);
  app.add_flag(flag::kIgnoreEos, f.ignore_eos,
               "Never sample an end-of-sequence or end-of-turn token, so that exactly -n tokens "
               "are generated (for benchmarks and long runs)");
  app.add_flag("--greedy", f.greedy, "Always take the most likely token");
  app.add_flag(
      "--allow-unknown-pre-tokenizer", f.tokenizer_options.allow_unknown_pre_tokenizer,
      "GGUF: use Llama 3's pre-tokenizer, with a warning, for an unknown tokenizer.ggml.pre");
  app.add_flag("--json", f.json, "Print a JSON summary as the last line of stdout");
  app.add_flag("-q,--quiet", f.quiet, "Do not stream the output");
  app.add_option("--dump-logits", f.dump_logits,
                 "Write float32 .npy [steps, vocab]: logits of the last prompt position and of "
                 "every decode step");
  app.add_option("--eviction-policy", f.eviction.policy, "KV eviction: " + policy_list());
  app.add_option("--eviction-window", f.window,
                 "Recent tokens kept (sliding, sink, h2o; default: 512, or what the budget "
                 "leaves: budget - sinks, budget - prefix, budget/2 for h2o)");
  app.add_option("--protected-prefix", f.eviction.protected_prefix,
                 "sliding: first tokens always kept");
  app.add_option("--sink-tokens", f.sink_tokens,
                 "sink/snapkv: attention-sink tokens kept (default: 4, or budget/64 in [1, 4])");
  app.add_option("--kv-budget", f.eviction.kv_budget,
                 "Most KV slots per layer and kv head (needed by snapkv, h2o, tova); the cache "
                 "allocates this, not -c")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--budget-bytes", f.budget_bytes,
                 "The KV budget in bytes of K and V over all layers (instead of --kv-budget): "
                 "rounded down to whole slots")
      ->check(cli::kUint64);
  app.add_option("--kv-capacity", f.kv_capacity,
                 "KV slots to allocate (default: the eviction limit, plus one prefill step for "
                 "snapkv; -c without a limit); a snapkv cache that holds the whole prompt "
                 "compresses it in one shot")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--dump-kv-positions", f.dump_kv_positions,
                 "Write float32 .npy [layers, kv heads, slots]: the logical position each slot "
                 "holds when prefill ends (-1: empty)");
  app.add_option("--memory-threshold-mb", f.eviction.memory_threshold_mb,
                 "Evict while available memory is below this (MiB)");
  app.add_option("--pressure-floor", f.eviction.pressure_floor,
                 "Slots memory pressure never cuts the cache below (default: what the policy "
                 "always keeps + 16 recent + one prefill step)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("--snapkv-window", f.eviction.snapkv_window,
                 "snapkv: last prompt queries that score the prompt");
  app.add_option("--snapkv-kernel", f.eviction.snapkv_kernel,
                 "snapkv: pooling kernel over slots (odd)");
  app.add_option("--snapkv-pool", f.eviction.snapkv_pool, "snapkv: max|avg pooling");
  app.add_option("--simulate-memory", f.simulate_memory,
                 "Replace /proc/meminfo with a scripted curve step:MiB,... (e.g. 0:4000,200:100)");
  app.add_option("--eviction-seed", f.eviction.seed, "random: seed of the kept subset")
      ->check(cli::kUint64);
  app.add_option("--ea-future-positions", f.eviction.ea_future_positions,
                 "expected_attention: future positions the query statistics are rotated to "
                 "(default 512)");
  app.add_option("--ea-covariance", f.eviction.ea_covariance,
                 "expected_attention: include the query covariance term (on|off, default on)");
  app.add_option("--ea-epsilon", f.eviction.ea_epsilon,
                 "expected_attention: added to the expected attention before the value-norm "
                 "weight (default 0)");
  app.add_option("--protect", f.eviction.protect,
                 "Keep these out of any policy's competition, within its limit: "
                 "sinks,system,template (the first --sink-tokens, the system prompt, special "
                 "tokens)");
  app.add_option("--layer-budget", f.eviction.layer_budget,
                 "uniform|pyramid: pyramid shares the budget out over the layers, more below "
                 "(PyramidKV)");
  app.add_option("--pyramid-beta", f.eviction.pyramid_beta,
                 "pyramid: bottom-to-top steepness (default 20; 1 is uniform)");
}

// Bytes moved between host and device, as the backend's counter read after loading, after the
// prompt and at the end.
struct CopyBytes {
  uint64_t load = 0;
  uint64_t after_prefill = 0;
  uint64_t at_end = 0;
};

// The --json fields that generate and generate_hybrid share: the session's counts and times, the
// cache and its eviction, memory, the host-device transfers of each phase, how the reply stopped
// and its token ids. Each tool adds its own (backend, weights, switches, ...).
inline nlohmann::json session_summary(const std::string& model_path, const std::string& format,
                                      DType kv_type, double load_s, const GenerationStats& stats,
                                      CacheManager& manager, const CopyBytes& copies,
                                      int64_t peak_rss_bytes, const std::string& stop,
                                      const Reply& reply) {
  return {
      {"model", model_path},
      {"format", format},
      {"kv_type", dtype_name(kv_type)},
      {"load_s", load_s},
      {"prompt_tokens", stats.prompt_tokens},
      {"generated_tokens", stats.generated_tokens},
      {"prefill_s", stats.prefill_seconds},
      {"decode_s", stats.decode_seconds},
      {"prefill_tok_s", stats.prefill_tok_s()},
      {"decode_tok_s", stats.decode_tok_s()},
      {"kv_bytes", stats.kv_bytes},
      {"kv_capacity", stats.kv_capacity},
      {"kv_context", stats.kv_context},
      {"kv_slots", stats.kv_slots},
      {"next_position", stats.next_position},
      {"eviction_policy", manager.policy().name()},
      {"evictions", stats.evictions},
      {"evicted_tokens", stats.evicted_tokens},
      {"eviction_s", stats.eviction_seconds},
      {"rss_bytes", resident_bytes()},
      {"peak_rss_bytes", peak_rss_bytes},
      {"host_device_copy_bytes", copies.at_end - copies.after_prefill},
      {"host_device_copy_bytes_prefill", copies.after_prefill - copies.load},
      {"host_device_copy_bytes_load", copies.load},
      {"stop", stop},
      {"tokens", reply.tokens},
  };
}

}  // namespace edgelm::cli
