// generate: loads a Llama model (Hugging Face folder or GGUF file) and generates with a KV cache,
// streaming text (or token ids) as it comes, then prints load time, prefill and decode speed,
// KV-cache bytes and peak memory; --json adds one JSON object as the last line of stdout.
// --chat wraps the prompt in the model's chat template (or --chat-template NAME) and stops at its
// end-of-turn tokens; --interactive is a multi-turn chat that keeps the KV cache between turns
// (only new tokens are prefilled).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "backends/registry.h"
#include "bin/cli_util.h"
#include "bin/generate_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "core/npy.h"
#include "core/process_stats.h"
#include "eviction/cache_manager.h"
#include "eviction/protect_policy.h"
#include "models/chat.h"
#include "models/loader.h"
#include "models/tokenizer.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/setup.h"
#include "runtime/speculative.h"

namespace {

// Time per op and kernel of one phase, from Backend::op_timings (--profile): device time on
// OpenCL, wall time of each op call on the CPU. `wall_s` is the phase's wall time, to show how
// much of it the ops cover (the rest: the generator's own work, sampling, and on OpenCL waits).
void print_profile(const char* phase, const std::vector<edgelm::OpTiming>& rows, double wall_s,
                   std::ofstream* csv) {
  double total = 0.0;
  for (const edgelm::OpTiming& row : rows) total += row.seconds;
  std::fprintf(stderr, "profile (%s): %.3f ms in ops, %.1f%% of the phase's %.3f ms\n", phase,
               total * 1e3, wall_s > 0 ? 100.0 * total / wall_s : 0.0, wall_s * 1e3);
  std::fprintf(stderr, "  %-12s %-40s %8s %12s %12s %7s %8s\n", "op", "kernel", "calls", "total ms",
               "mean us", "share", "GB/s");
  for (const edgelm::OpTiming& row : rows) {
    char rate[32] = "-";  // weight bytes streamed per second, where the backend counts them
    if (row.bytes > 0 && row.seconds > 0)
      std::snprintf(rate, sizeof rate, "%.1f", static_cast<double>(row.bytes) / row.seconds / 1e9);
    std::fprintf(stderr, "  %-12s %-40s %8lld %12.3f %12.2f %6.1f%% %8s\n", row.op.c_str(),
                 row.kernel.c_str(), static_cast<long long>(row.calls), row.seconds * 1e3,
                 row.calls > 0 ? row.seconds * 1e6 / static_cast<double>(row.calls) : 0.0,
                 total > 0 ? 100.0 * row.seconds / total : 0.0, rate);
    if (csv != nullptr) {
      *csv << phase << ',' << row.op << ',' << row.kernel << ',' << row.calls << ','
           << row.seconds * 1e3 << ',' << row.bytes << '\n';
    }
  }
}

// --dump-kv-positions: the logical position of every (layer, kv head, slot), -1 past a layer's
// filled slots, as float32 .npy [layers, kv heads, slots] (exact below 2^24 positions).
void write_kv_positions(const std::string& path, const edgelm::KvCache& cache) {
  int64_t slots = 1;
  for (int64_t l = 0; l < cache.n_layers(); ++l) slots = std::max(slots, cache.size(l));
  const int64_t heads = cache.n_kv_heads();
  std::vector<float> values(static_cast<size_t>(cache.n_layers() * heads * slots), -1.0f);
  cache.backend().synchronize();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const edgelm::KvCache::View view = cache.view(l);
    const auto* positions = view.kv_pos.data<int32_t>();  // [size, heads]
    for (int64_t s = 0; s < cache.size(l); ++s) {
      for (int64_t g = 0; g < heads; ++g)
        values[static_cast<size_t>((l * heads + g) * slots + s)] =
            static_cast<float>(positions[s * heads + g]);
    }
  }
  edgelm::write_npy(path, {cache.n_layers(), heads, slots}, values.data());
}

// One line for the whole run, in place of the line per eviction (debug level: EDGELM_LOG=debug).
void log_eviction_summary(edgelm::CacheManager& manager) {
  if (!manager.policy().evicts() && manager.evictions() == 0) return;
  char time[32];
  std::snprintf(time, sizeof time, "%.3f ms", manager.eviction_seconds() * 1e3);
  const int64_t fallbacks = manager.fallback_count();
  edgelm::log_info("[eviction] ", manager.policy().name(), ": ", manager.evictions(),
                   " evictions, ", manager.evicted_tokens(), " tokens evicted, ", time,
                   manager.released_bytes() > 0
                       ? edgelm::str_cat(", ", manager.released_bytes(), " bytes given back")
                       : std::string(),
                   fallbacks > 0 ? edgelm::str_cat(", fallbacks: ", fallbacks) : std::string());
}

int run(int argc, char** argv) {
  CLI::App app{"Generates text with a Llama model (Hugging Face folder or GGUF file)."};
  // The flags are declared in bin/generate_flags.h (generate_hybrid takes them too).
  edgelm::cli::GenerateFlags flags;
  edgelm::cli::add_generate_flags(app, flags);
  int64_t max_draft = 4;  // docs/speculative.md: 2-4 suit a CPU; the length adapts below it
  int64_t lookup_ngram = 0;
  std::string model_draft;
  app.add_option("--draft", max_draft,
                 "Speculative decoding: the most draft tokens per target step (default 4)")
      ->check(CLI::Range(1, 64));
  app.add_option("--lookup-ngram", lookup_ngram,
                 "Speculative decoding with prompt lookup: draft what followed the latest earlier "
                 "match of the last N..2 tokens")
      ->check(CLI::Range(2, 64));
  app.add_option("--model-draft", model_draft,
                 "Speculative decoding with this draft model (same vocabulary)");
  std::string& model_path = flags.model_path;
  std::string& prompt = flags.prompt;
  std::string& prompt_ids_text = flags.prompt_ids_text;
  std::string& system_prompt = flags.system_prompt;
  bool& chat = flags.chat;
  std::string& chat_template_name = flags.chat_template_name;
  bool& list_chat_templates = flags.list_chat_templates;
  bool& interactive = flags.interactive;
  bool& print_ids = flags.print_ids;
  int& n_generate = flags.n_generate;
  std::string& backend_name = flags.backend_name;
  int& threads = flags.threads;
  std::string& weight_type_text = flags.weight_type_text;
  std::string& kv_type_text = flags.kv_type_text;
  int64_t& max_seq_len = flags.max_seq_len;
  int64_t& chunk = flags.chunk;
  edgelm::SamplerConfig& sampling = flags.sampling;
  edgelm::TokenizerOptions& tokenizer_options = flags.tokenizer_options;
  bool& greedy = flags.greedy;
  bool& json = flags.json;
  bool& quiet = flags.quiet;
  std::string& dump_logits = flags.dump_logits;
  edgelm::EvictionConfig& eviction = flags.eviction;
  std::string& simulate_memory = flags.simulate_memory;
  bool& list_devices = flags.list_devices;
  int& cl_platform = flags.cl_platform;
  int& cl_device = flags.cl_device;
  bool& profile = flags.profile;
  std::string& profile_out = flags.profile_out;
  std::string& prompt_file = flags.prompt_file;
  bool& ignore_eos = flags.ignore_eos;
  std::string& cpu_list = flags.cpu_list;
  bool& no_repack = flags.no_repack;
  int64_t& window = flags.window;
  int64_t& sink_tokens = flags.sink_tokens;
  uint64_t& budget_bytes = flags.budget_bytes;
  int64_t& kv_capacity = flags.kv_capacity;
  std::string& dump_kv_positions = flags.dump_kv_positions;
  CLI::Option* const temperature = flags.temperature;
  CLI::Option* const top_k = flags.top_k;
  CLI::Option* const top_p = flags.top_p;
  static constexpr edgelm::cli::FlagAlias kAliases[] = {{"-md", "--model-draft"}};
  if (!edgelm::cli::parse_flags(app, argc, argv, kAliases)) return 0;
  if (app.count("--eviction-window") > 0) eviction.window = window;
  if (app.count("--sink-tokens") > 0) eviction.sink_tokens = sink_tokens;

  if (list_devices) {
    for (const std::string& line : edgelm::opencl_device_lines()) std::printf("%s\n", line.c_str());
    return 0;
  }
  if (list_chat_templates) {
    for (const std::string& name : edgelm::chat_template_names()) std::printf("%s\n", name.c_str());
    return 0;
  }
  // Everything that can be checked without the model, first.
  if (model_path.empty()) EDGELM_FAIL("-m/--model is required (a HF folder or a .gguf file)");
  if (!profile_out.empty()) profile = true;
  std::vector<int> cpus;
  if (!cpu_list.empty()) cpus = edgelm::cli::parse_cpu_list(cpu_list, "--cpus");
  if ((cl_platform >= 0 || cl_device >= 0) && backend_name != "opencl")
    EDGELM_FAIL("--cl-platform/--cl-device need --backend opencl");
  if (!prompt_file.empty()) {
    if (app.count("--prompt") > 0) EDGELM_FAIL("-p/--prompt and -f/--file are exclusive");
    prompt = edgelm::cli::read_text_file(prompt_file, "-f/--file");
    if (prompt.ends_with('\n')) prompt.pop_back();  // the newline an editor ends a file with
    if (prompt.empty()) EDGELM_FAIL("-f/--file: '", prompt_file, "' holds no text");
  }
  if (!prompt.empty() && !prompt_ids_text.empty())
    EDGELM_FAIL("--prompt and --prompt-ids are exclusive");
  if (interactive && (!prompt_ids_text.empty() || json || !dump_logits.empty())) {
    EDGELM_FAIL(
        "--interactive reads prompts from stdin; it does not take --prompt-ids, --json or "
        "--dump-logits");
  }
  if (!interactive && prompt.empty() && prompt_ids_text.empty()) {
    EDGELM_FAIL(
        "give a prompt with -p/--prompt TEXT, -f/--file FILE or --prompt-ids 1,2,3 (or use "
        "--interactive)");
  }
  if (chat && !prompt_ids_text.empty()) EDGELM_FAIL("--chat needs a text --prompt");
  if ((!chat_template_name.empty() || !system_prompt.empty() || flags.no_think) && !chat &&
      !interactive)
    EDGELM_FAIL("--chat-template, --system and --no-think need --chat or --interactive");
  // The chat template, before the weights load: a model without one, an unknown name or a system
  // message the template refuses ends here, at once.
  std::optional<edgelm::ChatTemplate> chat_template;
  if (chat || interactive) {
    chat_template = edgelm::ChatTemplate::from_model_path(model_path, chat_template_name);
    if (flags.no_think) chat_template->set_thinking(false);
    if (!system_prompt.empty()) {
      const std::vector<edgelm::ChatMessage> probe = {{"system", system_prompt}, {"user", "-"}};
      chat_template->render(probe, true);
    }
  }
  if (lookup_ngram > 0 && !model_draft.empty())
    EDGELM_FAIL("--lookup-ngram and -md/--model-draft are exclusive: choose one drafter");
  std::vector<int32_t> prompt_ids;
  if (!prompt_ids_text.empty())
    prompt_ids = edgelm::cli::parse_id_list(prompt_ids_text, "--prompt-ids");
  edgelm::Settings settings_in{
      .model_path = model_path,
      .backend = backend_name,
      .backend_options = {.n_threads = threads,
                          .cpus = cpus,
                          .cl_platform = cl_platform,
                          .cl_device = cl_device,
                          .profile = profile,
                          .repack_weights = !no_repack},
      .max_chunk = chunk,
      .kv_type = edgelm::cli::parse_dtype(kv_type_text, "--kv-type",
                                          {edgelm::DType::F32, edgelm::DType::F16}),
      .context = max_seq_len,
      .kv_capacity = kv_capacity,
      .eviction = eviction,
      .budget_bytes = budget_bytes,
      .simulate_memory = simulate_memory};
  if (!weight_type_text.empty()) {
    settings_in.weight_type = edgelm::cli::parse_weight_type(weight_type_text);
  }
  if (app.count("--kv-budget") > 0 && eviction.kv_budget == 0)
    EDGELM_FAIL("--kv-budget 0 keeps nothing: give at least 1 slot (or leave the flag out)");
  if (app.count("--budget-bytes") > 0 && budget_bytes == 0)
    EDGELM_FAIL("--budget-bytes 0 keeps nothing: give the bytes K and V may take");
  // A setting the policy ignores is most likely a mistake (e.g. --kv-budget without a policy, which
  // runs with the whole cache); say so, but run, so that one flag set can serve every policy.
  for (const std::string& flag : edgelm::eviction_flags()) {
    if (app.count(flag) > 0 && !edgelm::policy_reads(eviction, flag)) {
      edgelm::log_warn("[eviction] ", flag, " has no effect with --eviction-policy ",
                       eviction.policy);
    }
  }
  const unsigned protect = eviction.policy != "none" && !eviction.protect.empty()
                               ? edgelm::parse_protect_classes(eviction.protect)
                               : 0;
  if ((protect & edgelm::kProtectSystem) != 0 && !chat && !interactive) {
    EDGELM_FAIL(
        "--protect system needs --chat or --interactive (the chat template says where the "
        "system prompt lies)");
  }
  if (budget_bytes > 0 && !edgelm::policy_reads(eviction.policy, "--kv-budget")) {
    edgelm::log_warn("[eviction] --budget-bytes has no effect with --eviction-policy ",
                     eviction.policy);
  }
  std::ofstream profile_csv;
  if (!profile_out.empty()) {
    profile_csv.open(profile_out);
    if (!profile_csv) EDGELM_FAIL("--profile-out: cannot write ", profile_out);
    profile_csv << "phase,op,kernel,calls,total_ms,bytes\n";
  }
  // The tokenizer is needed for text in or out; a model without one still runs on ids.
  const bool protect_template = (protect & edgelm::kProtectTemplate) != 0;
  settings_in.load_tokenizer = !prompt.empty() || interactive || !print_ids || protect_template;
  settings_in.require_tokenizer = !prompt.empty() || interactive;
  settings_in.tokenizer_options = tokenizer_options;
  edgelm::Settings draft_settings = settings_in;
  edgelm::Runtime runtime = edgelm::Runtime::load(std::move(settings_in));
  if (protect_template && runtime.tokenizer() == nullptr) {
    EDGELM_FAIL(
        "--protect template needs the model's tokenizer, which knows the special "
        "tokens: ",
        runtime.tokenizer_error());
  }
  const edgelm::Settings& resolved = runtime.settings();
  eviction = resolved.eviction;  // the budget in slots, where it was given in bytes
  const edgelm::DType kv_type = resolved.kv_type;
  edgelm::Backend* backend = &runtime.backend();
  edgelm::LlamaModel& model = runtime.model();
  const edgelm::ModelInfo& info = runtime.info();
  const edgelm::DType weight_type = info.weight_type;
  const edgelm::DType weight_layout = info.weight_layout;
  const std::string& format = info.format;
  const std::string& weight_types = info.weight_types;
  edgelm::CacheManager manager = runtime.make_manager();
  const bool can_evict = manager.policy().evicts();
  if (can_evict && eviction.kv_budget >= max_seq_len) {
    edgelm::log_warn("[eviction] --kv-budget ", eviction.kv_budget, " is not below -c/--ctx-size ",
                     max_seq_len, ": the context never fills it");
  }
  edgelm::KvCache cache = runtime.make_cache(manager);
  std::optional<edgelm::Tokenizer> tokenizer;
  if (runtime.tokenizer() != nullptr) {
    tokenizer = *runtime.tokenizer();
  } else if (!runtime.tokenizer_error().empty()) {
    std::fprintf(stderr, "note: no tokenizer (%s); printing token ids\n",
                 runtime.tokenizer_error().c_str());
  }
  const double load_s = info.load_seconds;
  // Transfers are counted per phase; on a zero-copy backend all of them stay at 0.
  const uint64_t copy_bytes_load = backend->host_device_copy_bytes();
  backend->reset_op_timings();
  const edgelm::LlamaConfig& config = model.config();
  std::fprintf(stderr, "model: %s (%s; weights %s)\n%s\nbackend: %s\n", model_path.c_str(),
               format.c_str(), weight_types.c_str(), config.describe().c_str(),
               backend->device().c_str());
  if (tokenizer) std::fprintf(stderr, "tokenizer: %s\n", tokenizer->describe().c_str());
  // Positions past the length the model was trained for run, but may give poor text.
  if (app.count("--ctx-size") > 0 && max_seq_len > config.max_position_embeddings) {
    edgelm::log_warn("-c/--ctx-size ", max_seq_len, " is past the model's context of ",
                     config.max_position_embeddings,
                     " positions (the length it was trained for); the text may degrade past it");
  }
  // A reply of n tokens takes n - 1 positions after its prompt's: an -n that the logical context
  // cannot hold stops early, so say so before the wait rather than after it.
  auto warn_reply_room = [&](int64_t prompt_tokens) {
    const int64_t room = max_seq_len - prompt_tokens + 1;
    if (n_generate <= room) return;
    edgelm::log_warn("-n/--n-predict ", n_generate, " is more than the ", room,
                     " tokens a reply can take after a ", prompt_tokens,
                     "-token prompt in -c/--ctx-size ", max_seq_len, " (model context ",
                     config.max_position_embeddings, "); the reply stops when the context is full");
  };

  if (temperature->count() == 0 && config.default_temperature)
    sampling.temperature = *config.default_temperature;
  if (top_p->count() == 0 && config.default_top_p) sampling.top_p = *config.default_top_p;
  if (top_k->count() == 0 && config.default_top_k) sampling.top_k = *config.default_top_k;
  sampling.greedy = greedy;
  edgelm::GenerationSettings settings{.sampling = sampling,
                                      .max_tokens = n_generate,
                                      .stop_ids = config.eos_token_ids,
                                      .ignore_eos = ignore_eos};
  if (chat_template)
    settings.stop_ids = edgelm::chat_stop_ids(*tokenizer, *chat_template, config.eos_token_ids);

  // The reply streams to stdout as it comes: each token's text, or its id (--print-ids, or a
  // model without a tokenizer).
  const bool stream_text = tokenizer && !print_ids;
  std::vector<float> logit_rows;     // --dump-logits: [steps, vocab]
  std::vector<int32_t> special_ids;  // --protect template
  edgelm::GenerationSession::Callbacks callbacks;
  if (!quiet) {
    callbacks.on_token = [&](int32_t token, std::string_view text) {
      const std::string piece = stream_text ? std::string(text) : std::to_string(token) + " ";
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    };
  }
  callbacks.on_reply_end = [&](std::string_view rest) {
    if (!quiet) {
      std::fputs(std::string(rest).c_str(), stdout);
      std::printf("\n");
    }
    // Flushed, so that the stats line (stderr) starts on a line of its own when both streams go
    // to one pipe or file, where stdout is block-buffered.
    std::fflush(stdout);
  };
  if (!dump_logits.empty()) {
    callbacks.on_logits = [&](std::span<const float> logits) {
      logit_rows.insert(logit_rows.end(), logits.begin(), logits.end());
    };
  }
  // -md: the draft model, its cache under the same policy and budget in slots as the target's.
  std::optional<edgelm::Runtime> draft_runtime;
  std::optional<edgelm::CacheManager> draft_manager;
  callbacks.on_reset = [&] {  // a new conversation: the policy starts over too
    manager = runtime.make_manager();
    if (protect_template) manager.tokens().set_special_ids(special_ids);
    if (draft_manager) {
      *draft_manager = draft_runtime->make_manager();
      if (protect_template) draft_manager->tokens().set_special_ids(special_ids);
    }
  };
  edgelm::GenerationSession session(model, cache, &manager, std::move(settings),
                                    stream_text ? &*tokenizer : nullptr, std::move(callbacks));
  std::optional<edgelm::KvCache> draft_cache;
  std::unique_ptr<edgelm::Drafter> drafter;
  if (lookup_ngram > 0) {
    drafter = std::make_unique<edgelm::PromptLookupDrafter>(
        edgelm::PromptLookupDrafter::Options{.ngram_max = lookup_ngram});
  } else if (!model_draft.empty()) {
    draft_settings.model_path = model_draft;
    draft_settings.require_tokenizer = false;
    draft_settings.eviction = eviction;  // the budget in slots, as the target's resolved it
    draft_settings.budget_bytes = 0;
    draft_runtime = edgelm::Runtime::load(std::move(draft_settings));
    edgelm::check_same_vocabulary(runtime, model_path, *draft_runtime, model_draft);
    draft_manager = draft_runtime->make_manager();
    draft_cache = draft_runtime->make_cache(*draft_manager);
    // Drafts drawn as the target samples, from a seed of their own.
    edgelm::SamplerConfig draft_sampling = sampling;
    draft_sampling.seed = sampling.seed ^ 0x9E3779B97F4A7C15ull;
    drafter = std::make_unique<edgelm::ModelDrafter>(draft_runtime->model(), *draft_cache,
                                                     &*draft_manager, draft_sampling);
  }
  if (drafter) session.set_drafter(drafter.get(), max_draft);
  if (chat_template) {
    std::fprintf(stderr, "chat template: %s%s\n", std::string(chat_template->name()).c_str(),
                 chat_template->has_thinking_switch()
                     ? (chat_template->thinking() ? " (thinking on; --no-think turns it off)"
                                                  : " (thinking off)")
                     : "");
    for (const std::string& text : chat_template->end_of_turn_texts()) {
      if (!tokenizer->token_id(text)) {
        edgelm::log_warn("[chat] the template ends turns with '", text,
                         "', which is not a token of this model; it stops on its EOS ids only");
      }
    }
  }

  // --protect template: every special token of the vocabulary (the chat template's boundaries).
  if (protect_template) {
    for (int32_t id = 0; id < static_cast<int32_t>(tokenizer->vocab_size()); ++id) {
      if (tokenizer->is_special(id)) special_ids.push_back(id);
    }
    if (special_ids.empty()) {
      edgelm::log_warn("[eviction] --protect template: the tokenizer has no special tokens");
    }
  }
  if (protect_template) manager.tokens().set_special_ids(special_ids);
  if (protect_template && draft_manager) draft_manager->tokens().set_special_ids(special_ids);
  // --protect system: the tokens the first feed of a conversation shares with the rendering of its
  // system message alone.
  std::string system_prefix;
  if ((protect & edgelm::kProtectSystem) != 0) {
    system_prefix = edgelm::ChatSession(*chat_template, system_prompt).system_prefix();
    if (system_prefix.empty()) {
      edgelm::log_warn(
          "[eviction] --protect system: the conversation has no system message that "
          "the ",
          std::string(chat_template->name()),
          " template renders first; no position is protected as the system prompt");
    }
  }
  auto declare_system_prompt = [&](std::span<const int32_t> ids) {
    if (system_prefix.empty()) return;
    const std::vector<int32_t> prefix_ids = tokenizer->encode(system_prefix, /*add_bos=*/false);
    size_t n = 0;
    while (n < prefix_ids.size() && n < ids.size() && prefix_ids[n] == ids[n]) ++n;
    const int64_t start = cache.next_position();
    manager.tokens().set_system_prompt(start, start + static_cast<int64_t>(n));
    if (draft_manager)
      draft_manager->tokens().set_system_prompt(start, start + static_cast<int64_t>(n));
  };
  auto context_used_up = [&] { return cache.next_position() >= cache.max_positions(); };
  // The prompt's checks, with the flags to change: the session checks the same, in its own words.
  auto check_prompt = [&](std::span<const int32_t> ids) {
    for (int32_t id : ids) {
      if (id >= config.vocab_size)
        EDGELM_FAIL("prompt: token id ", id, " is outside the vocabulary of ", config.vocab_size);
    }
    // A reply cut at -n leaves its last token for the next feed.
    const int64_t n = static_cast<int64_t>(ids.size()) + session.pending_tokens();
    if (!can_evict && n > cache.free_slots()) {
      EDGELM_FAIL("prompt: ", n, " tokens do not fit: -c/--ctx-size ", max_seq_len, " leaves ",
                  cache.free_slots(), " free slots (raise it or use --eviction-policy)");
    }
    const int64_t positions_left = max_seq_len - cache.next_position();
    if (n > positions_left) {
      EDGELM_FAIL("prompt: ", n, " tokens do not fit: the logical context, -c/--ctx-size ",
                  max_seq_len, ", leaves ", positions_left, " positions (raise it)");
    }
  };

  if (interactive) {
    edgelm::ChatSession chat_session(*chat_template, system_prompt);
    warn_reply_room(1);
    std::fprintf(
        stderr,
        "interactive chat: type a message; /reset clears the conversation, /quit or Ctrl-D ends\n");
    std::string line;
    while (true) {
      std::fprintf(stderr, "> ");
      if (!std::getline(std::cin, line) || line == "/quit" || line == "/exit") break;
      if (line == "/reset") {
        session.reset();
        chat_session.clear();
        std::fprintf(stderr, "(conversation cleared)\n");
        continue;
      }
      if (line.empty()) continue;
      // Only what the cache lacks; the whole conversation again where the template renders the
      // earlier turns differently now (ChatSession says so). A message that does not fit is not
      // fed: the conversation stays as it was, and the user chooses what to do.
      const edgelm::Reply reply = session.chat_turn(
          chat_session, *tokenizer, line, [&](std::span<const int32_t> ids, bool from_scratch) {
            if (from_scratch) {
              std::fprintf(stderr, "(%s renders the conversation anew: prefilling all of it)\n",
                           std::string(chat_template->name()).c_str());
            }
            if (session.history().empty()) declare_system_prompt(ids);  // a conversation's first
          });
      const long long positions_left = max_seq_len - cache.next_position();
      if (reply.stop == edgelm::StopReason::NoRoom) {
        std::fprintf(stderr,
                     "(the message needs %lld positions and the context has %lld of %lld left: "
                     "/reset starts a new conversation%s)\n",
                     static_cast<long long>(reply.prompt_tokens), positions_left,
                     static_cast<long long>(max_seq_len),
                     can_evict ? "" : ", or restart with a larger -c/--ctx-size");
        continue;
      }
      // How full the context is, after each turn: what a chat user needs to see coming.
      const long long used = cache.next_position();
      std::fprintf(stderr, "[%zu tokens, %s; context %lld of %lld positions used (%lld%%)",
                   reply.tokens.size(), std::string(edgelm::stop_reason_name(reply.stop)).c_str(),
                   used, static_cast<long long>(max_seq_len), used * 100 / max_seq_len);
      if (can_evict || cache.capacity() < max_seq_len) {
        std::fprintf(stderr, "; cache %lld of %lld slots", static_cast<long long>(cache.size(0)),
                     static_cast<long long>(cache.capacity()));
      }
      std::fprintf(stderr, "]\n");
      if (reply.stop == edgelm::StopReason::ContextFull) {
        std::fprintf(stderr, "(%s: /reset starts a new conversation%s)\n",
                     context_used_up() ? "the context is full" : "the KV cache is full",
                     can_evict ? "" : ", or restart with a larger -c/--ctx-size");
      }
    }
    // Without a newline typed at the last "> " (Ctrl-D, or input from a pipe), end that line, so
    // that what follows starts on a line of its own.
    if (std::cin.eof() || isatty(STDIN_FILENO) == 0) std::fputc('\n', stderr);
    log_eviction_summary(manager);
    edgelm::cli::finish_stdout();
    return 0;
  }

  if (!prompt.empty()) {
    if (chat) {
      std::vector<edgelm::ChatMessage> messages;
      if (!system_prompt.empty()) messages.push_back({"system", system_prompt});
      messages.push_back({"user", prompt});
      prompt_ids = tokenizer->encode(chat_template->render(messages, true), /*add_bos=*/false);
    } else {
      prompt_ids = tokenizer->encode(prompt);
    }
  }
  check_prompt(prompt_ids);
  warn_reply_room(static_cast<int64_t>(prompt_ids.size()));
  if (chat) declare_system_prompt(prompt_ids);
  session.prefill(prompt_ids);
  if (!dump_kv_positions.empty()) write_kv_positions(dump_kv_positions, cache);
  const uint64_t copy_bytes_after_prefill = backend->host_device_copy_bytes();
  const std::vector<edgelm::OpTiming> prefill_profile = backend->op_timings();
  backend->reset_op_timings();
  const edgelm::Reply reply = session.generate();
  const std::string stop(edgelm::stop_reason_name(reply.stop));
  if (reply.stop == edgelm::StopReason::ContextFull && context_used_up()) {
    std::fprintf(stderr,
                 "stopped: the logical context of %lld positions is used up; raise -c/--ctx-size\n",
                 static_cast<long long>(max_seq_len));
  } else if (reply.stop == edgelm::StopReason::ContextFull) {
    std::fprintf(stderr,
                 "stopped: the KV cache is full (%lld slots); raise -c/--ctx-size or use "
                 "--eviction-policy\n",
                 static_cast<long long>(cache.capacity()));
  }
  if (!dump_logits.empty()) {
    const auto rows =
        static_cast<int64_t>(logit_rows.size() / static_cast<size_t>(config.vocab_size));
    edgelm::write_npy(dump_logits, {rows, config.vocab_size}, logit_rows.data());
  }

  backend->synchronize();
  const uint64_t copy_bytes_decode = backend->host_device_copy_bytes() - copy_bytes_after_prefill;
  const edgelm::GenerationStats stats = session.stats();
  if (profile) {
    std::ofstream* csv = profile_csv.is_open() ? &profile_csv : nullptr;
    print_profile("prefill", prefill_profile, stats.prefill_seconds, csv);
    print_profile("decode", backend->op_timings(), stats.decode_seconds, csv);
    if (csv != nullptr) edgelm::cli::close_written_file(profile_csv, profile_out, "--profile-out");
  }
  const int64_t peak = edgelm::peak_resident_bytes();
  log_eviction_summary(manager);
  if (drafter) {
    std::fprintf(stderr,
                 "speculative (%s): drafted %lld, accepted %lld (%.1f %%), %.2f tokens per target "
                 "step\n",
                 drafter->name().c_str(), static_cast<long long>(stats.drafted),
                 static_cast<long long>(stats.accepted), 100.0 * stats.acceptance_rate(),
                 stats.tokens_per_target_forward());
  }
  std::fprintf(stderr,
               "load %.3f s | prefill %lld tokens, %.2f tok/s | decode %lld steps, %.2f tok/s | "
               "weights %.2f MiB (%s) | KV cache %.2f MiB (%s, %lld slots, context %lld) | "
               "evictions %lld (%.3f s) | peak RSS %.1f MiB | stop: %s\n",
               load_s, static_cast<long long>(stats.prompt_tokens), stats.prefill_tok_s(),
               static_cast<long long>(stats.decode_steps), stats.decode_tok_s(),
               static_cast<double>(model.weight_bytes()) / 1048576.0, weight_types.c_str(),
               static_cast<double>(stats.kv_bytes) / 1048576.0, edgelm::dtype_name(kv_type),
               static_cast<long long>(stats.kv_capacity), static_cast<long long>(stats.kv_context),
               static_cast<long long>(stats.evictions), stats.eviction_seconds,
               static_cast<double>(peak) / 1048576.0, stop.c_str());
  if (json) {
    nlohmann::json summary = edgelm::cli::session_summary(
        model_path, format, kv_type, load_s, stats, manager,
        {copy_bytes_load, copy_bytes_after_prefill, copy_bytes_after_prefill + copy_bytes_decode},
        peak, stop, reply);
    summary.update({
        {"backend", backend_name},
        {"device", backend->device()},
        {"weight_type", edgelm::dtype_name(weight_type)},
        {"weight_types", weight_types},
        {"weight_layout", edgelm::dtype_name(weight_layout)},
        {"kv_resident_bytes", stats.kv_resident_bytes},
        {"kv_budget", manager.config().kv_budget},
        {"kv_used_bytes", stats.kv_used_bytes},
        {"protected_system_positions",
         manager.tokens().system_end() - manager.tokens().system_begin()},
        {"eviction_fallbacks", stats.eviction_fallbacks},
        {"eviction_fallback_kinds", manager.fallbacks()},
        {"released_bytes", stats.released_bytes},
        {"rss_drop_bytes", stats.rss_drop_bytes},
        {"weight_bytes_per_token", model.weight_bytes_per_token()},
        {"weight_bytes", model.weight_bytes()},
    });
    if (budget_bytes > 0) summary["kv_budget_bytes"] = budget_bytes;
    if (drafter) {
      summary.update({{"drafter", drafter->name()},
                      {"drafted", stats.drafted},
                      {"accepted", stats.accepted},
                      {"acceptance_rate", stats.acceptance_rate()},
                      {"target_forwards", stats.target_forwards()},
                      {"tokens_per_target_forward", stats.tokens_per_target_forward()},
                      {"draft_seconds", stats.draft_seconds}});
    }
    if (stream_text) summary["text"] = reply.text;
    edgelm::cli::print_json_line(summary);
  }
  edgelm::cli::finish_stdout();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("generate", run, argc, argv);
}
