// generate's flags, declared once for the tools that take them: generate, and generate_hybrid,
// which takes every one of them (refusing the few that mean nothing for it) plus its own.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "backends/registry.h"
#include "bin/cli_util.h"
#include "eviction/cache_manager.h"
#include "models/chat.h"
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

// Declares generate's flags on `app`, storing into `f` (which must outlive the parse). Every one
// comes from the flag table (bin/flags.h), since generate_hybrid takes them too.
inline void add_generate_flags(CLI::App& app, GenerateFlags& f) {
  add_shared(app, flag::kModel, f.model_path);
  add_shared(app, flag::kPrompt, f.prompt);
  add_shared(app, flag::kFile, f.prompt_file);
  add_shared(app, flag::kPromptIds, f.prompt_ids_text);
  add_shared(app, flag::kChat, f.chat);
  add_shared(app, flag::kChatTemplate, f.chat_template_name);
  add_shared(app, flag::kListChatTemplates, f.list_chat_templates);
  add_shared(app, flag::kSystem, f.system_prompt);
  add_shared(app, flag::kNoThink, f.no_think);
  add_shared(app, flag::kInteractive, f.interactive);
  add_shared(app, flag::kPrintIds, f.print_ids);
  add_shared(app, flag::kPredict, f.n_generate)
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  add_shared(app, flag::kBackend, f.backend_name);
  add_shared(app, flag::kListDevices, f.list_devices);
  add_shared(app, flag::kClPlatform, f.cl_platform)->check(CLI::Range(-1, 1 << 20));
  add_shared(app, flag::kClDevice, f.cl_device)->check(CLI::Range(-1, 1 << 20));
  add_shared(app, flag::kProfile, f.profile);
  add_shared(app, flag::kProfileOut, f.profile_out);
  add_shared(app, flag::kThreads, f.threads)->check(CLI::Range(0, 1024));
  add_shared(app, flag::kCpus, f.cpu_list);
  add_shared(app, flag::kWeightType, f.weight_type_text);
  add_shared(app, flag::kNoRepack, f.no_repack);
  add_shared(app, flag::kKvType, f.kv_type_text);
  add_shared(app, flag::kCtxSize, f.max_seq_len)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  add_shared(app, flag::kBatchSize, f.chunk)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  f.temperature = add_shared(app, flag::kTemp, f.sampling.temperature);
  f.top_k = add_shared(app, flag::kTopK, f.sampling.top_k);
  f.top_p = add_shared(app, flag::kTopP, f.sampling.top_p);
  add_shared(app, flag::kMinP, f.sampling.min_p);
  add_shared(app, flag::kRepeatPenalty, f.sampling.repetition_penalty);
  add_shared(app, flag::kRepeatLastN, f.sampling.repetition_window);
  add_shared(app, flag::kSeed, f.sampling.seed)->capture_default_str()->check(cli::kUint64);
  add_shared(app, flag::kIgnoreEos, f.ignore_eos);
  add_shared(app, flag::kGreedy, f.greedy);
  add_shared(app, flag::kAllowUnknownPreTokenizer,
             f.tokenizer_options.allow_unknown_pre_tokenizer);
  add_shared(app, flag::kJson, f.json);
  add_shared(app, flag::kQuiet, f.quiet);
  add_shared(app, flag::kDumpLogits, f.dump_logits);
  add_shared(app, flag::kEvictionPolicy, f.eviction.policy);
  add_shared(app, flag::kEvictionWindow, f.window);
  add_shared(app, flag::kProtectedPrefix, f.eviction.protected_prefix);
  add_shared(app, flag::kSinkTokens, f.sink_tokens);
  add_shared(app, flag::kKvBudget, f.eviction.kv_budget)
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  add_shared(app, flag::kBudgetBytes, f.budget_bytes)->transform(kByteSize)->type_name("SIZE");
  add_shared(app, flag::kKvCapacity, f.kv_capacity)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  add_shared(app, flag::kDumpKvPositions, f.dump_kv_positions);
  add_shared(app, flag::kMemoryThresholdMb, f.eviction.memory_threshold_mb);
  add_shared(app, flag::kPressureFloor, f.eviction.pressure_floor)
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  add_shared(app, flag::kSnapkvWindow, f.eviction.snapkv_window);
  add_shared(app, flag::kSnapkvKernel, f.eviction.snapkv_kernel);
  add_shared(app, flag::kSnapkvPool, f.eviction.snapkv_pool);
  add_shared(app, flag::kSimulateMemory, f.simulate_memory);
  add_shared(app, flag::kEvictionSeed, f.eviction.seed)->check(cli::kUint64);
  add_shared(app, flag::kEaFuturePositions, f.eviction.ea_future_positions);
  add_shared_option(app, flag::kEaCovariance, f.eviction.ea_covariance);
  add_shared(app, flag::kEaEpsilon, f.eviction.ea_epsilon);
  add_shared(app, flag::kProtect, f.eviction.protect);
  add_shared(app, flag::kLayerBudget, f.eviction.layer_budget);
  add_shared(app, flag::kPyramidBeta, f.eviction.pyramid_beta);
  add_note(app,
           "-n is per reply (per turn with -i), with a warning when the reply cannot fit in -c; "
           "-f is the prompt's file, one trailing newline dropped.");
}

// What follows the parse in generate and generate_hybrid alike: the eviction settings whose own
// flags were given, then --list-devices and --list-chat-templates, which print their list to
// stdout; false when one did (the run ends there).
inline bool apply_generate_flags(const CLI::App& app, GenerateFlags& f) {
  if (app.count("--eviction-window") > 0) f.eviction.window = f.window;
  if (app.count("--sink-tokens") > 0) f.eviction.sink_tokens = f.sink_tokens;
  if (f.list_devices) {
    for (const std::string& line : opencl_device_lines()) std::printf("%s\n", line.c_str());
    return false;
  }
  if (f.list_chat_templates) {
    for (const std::string& name : chat_template_names()) std::printf("%s\n", name.c_str());
    return false;
  }
  return true;
}

// The prompt of -f/--file (its one trailing newline dropped) into f.prompt; throws edgelm::Error
// for an empty file, or where -p and -f, or a text prompt and --prompt-ids, are both given.
inline void read_prompt_flags(const CLI::App& app, GenerateFlags& f) {
  if (!f.prompt_file.empty()) {
    if (app.count("--prompt") > 0) EDGELM_FAIL("-p/--prompt and -f/--file are exclusive");
    f.prompt = read_text_file(f.prompt_file, "-f/--file");
    if (f.prompt.ends_with('\n')) f.prompt.pop_back();  // the newline an editor ends a file with
    if (f.prompt.empty()) EDGELM_FAIL("-f/--file: '", f.prompt_file, "' holds no text");
  }
  if (!f.prompt.empty() && !f.prompt_ids_text.empty())
    EDGELM_FAIL("--prompt and --prompt-ids are exclusive");
}

// The sampler's settings: the flags', with the model's generation config supplying temperature,
// top-p and top-k where their flags were not given.
inline SamplerConfig sampling_for(const GenerateFlags& f, const LlamaConfig& config) {
  SamplerConfig sampling = f.sampling;
  if (f.temperature->count() == 0 && config.default_temperature)
    sampling.temperature = *config.default_temperature;
  if (f.top_p->count() == 0 && config.default_top_p) sampling.top_p = *config.default_top_p;
  if (f.top_k->count() == 0 && config.default_top_k) sampling.top_k = *config.default_top_k;
  sampling.greedy = f.greedy;
  return sampling;
}

// The reply streamed to stdout as it comes (nothing with --quiet): each token's text, or its id
// when `stream_text` is false (--print-ids, or a model without a tokenizer); a newline at its end.
inline GenerationSession::Callbacks printing_callbacks(const GenerateFlags& f, bool stream_text) {
  GenerationSession::Callbacks callbacks;
  const bool quiet = f.quiet;
  if (!quiet) {
    callbacks.on_token = [stream_text](int32_t token, std::string_view text) {
      const std::string piece = stream_text ? std::string(text) : std::to_string(token) + " ";
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    };
  }
  callbacks.on_reply_end = [quiet](std::string_view rest) {
    if (!quiet) {
      std::fputs(std::string(rest).c_str(), stdout);
      std::printf("\n");
    }
    // Flushed, so that the stats line (stderr) starts on a line of its own when both streams go
    // to one pipe or file, where stdout is block-buffered.
    std::fflush(stdout);
  };
  return callbacks;
}

}  // namespace edgelm::cli
