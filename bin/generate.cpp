// generate: loads a Llama model (Hugging Face folder or GGUF file) and generates with a KV cache,
// streaming text (or token ids) as it comes, then prints load time, prefill and decode speed,
// KV-cache bytes and peak memory; --json adds one JSON object as the last line of stdout.
// --chat wraps the prompt in the model's chat template (or --chat-template NAME) and stops at its
// end-of-turn tokens; --interactive is a multi-turn chat that keeps the KV cache between turns
// (only new tokens are prefilled). The loop is the library's (runtime/conversation.h); this file
// turns the flags into its settings and prints what it reports.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/registry.h"
#include "bin/cli_util.h"
#include "bin/generate_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "core/process_stats.h"
#include "eviction/protect_policy.h"
#include "models/chat.h"
#include "runtime/conversation.h"
#include "runtime/setup.h"

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

void print_line(std::string_view text) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(text.size()), text.data());
}

int run(int argc, char** argv) {
  CLI::App app{"Generates text with a Llama model (Hugging Face folder or GGUF file)."};
  // The flags are declared in bin/generate_flags.h (generate_hybrid takes them too).
  edgelm::cli::GenerateFlags f;
  edgelm::cli::add_generate_flags(app, f);
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
  static constexpr edgelm::cli::FlagAlias kAliases[] = {{"-md", "--model-draft"}};
  if (!edgelm::cli::parse_flags(app, argc, argv, kAliases)) return 0;
  if (!edgelm::cli::apply_generate_flags(app, f)) return 0;
  // Everything that can be checked without the model, first.
  if (f.model_path.empty()) EDGELM_FAIL("-m/--model is required (a HF folder or a .gguf file)");
  if (!f.profile_out.empty()) f.profile = true;
  std::vector<int> cpus;
  if (!f.cpu_list.empty()) cpus = edgelm::cli::parse_cpu_list(f.cpu_list, "--cpus");
  if ((f.cl_platform >= 0 || f.cl_device >= 0) && f.backend_name != "opencl")
    EDGELM_FAIL("--cl-platform/--cl-device need --backend opencl");
  edgelm::cli::read_prompt_flags(app, f);
  if (f.interactive && (!f.prompt_ids_text.empty() || f.json || !f.dump_logits.empty())) {
    EDGELM_FAIL(
        "--interactive reads prompts from stdin; it does not take --prompt-ids, --json or "
        "--dump-logits");
  }
  if (!f.interactive && f.prompt.empty() && f.prompt_ids_text.empty()) {
    EDGELM_FAIL(
        "give a prompt with -p/--prompt TEXT, -f/--file FILE or --prompt-ids 1,2,3 (or use "
        "--interactive)");
  }
  if (f.chat && !f.prompt_ids_text.empty()) EDGELM_FAIL("--chat needs a text --prompt");
  const bool chat = f.chat || f.interactive;
  if ((!f.chat_template_name.empty() || !f.system_prompt.empty() || f.no_think) && !chat)
    EDGELM_FAIL("--chat-template, --system and --no-think need --chat or --interactive");
  // The chat template, before the weights load: a model without one, an unknown name or a system
  // message the template refuses ends here, at once.
  std::optional<edgelm::ChatTemplate> chat_template;
  if (chat) {
    chat_template = edgelm::ChatTemplate::from_model_path(f.model_path, f.chat_template_name);
    if (f.no_think) chat_template->set_thinking(false);
    if (!f.system_prompt.empty()) {
      const std::vector<edgelm::ChatMessage> probe = {{"system", f.system_prompt}, {"user", "-"}};
      chat_template->render(probe, true);
    }
  }
  if (lookup_ngram > 0 && !model_draft.empty())
    EDGELM_FAIL("--lookup-ngram and -md/--model-draft are exclusive: choose one drafter");
  std::vector<int32_t> prompt_ids;
  if (!f.prompt_ids_text.empty())
    prompt_ids = edgelm::cli::parse_id_list(f.prompt_ids_text, "--prompt-ids");
  const edgelm::DType kv_type = edgelm::cli::parse_dtype(f.kv_type_text, "--kv-type",
                                                         {edgelm::DType::F32, edgelm::DType::F16});
  edgelm::Settings settings{.model_path = f.model_path,
                            .backend = f.backend_name,
                            .max_chunk = f.chunk,
                            .kv_type = kv_type,
                            .context = f.max_seq_len,
                            .kv_capacity = f.kv_capacity,
                            .eviction = f.eviction,
                            .budget_bytes = f.budget_bytes,
                            .simulate_memory = f.simulate_memory};
  settings.backend_options = {.n_threads = f.threads,
                              .cpus = cpus,
                              .cl_platform = f.cl_platform,
                              .cl_device = f.cl_device,
                              .profile = f.profile,
                              .repack_weights = !f.no_repack};
  if (!f.weight_type_text.empty()) {
    settings.weight_type = edgelm::cli::parse_weight_type(f.weight_type_text);
  }
  if (app.count("--kv-budget") > 0 && f.eviction.kv_budget == 0)
    EDGELM_FAIL("--kv-budget 0 keeps nothing: give at least 1 slot (or leave the flag out)");
  if (app.count("--budget-bytes") > 0 && f.budget_bytes == 0)
    EDGELM_FAIL("--budget-bytes 0 keeps nothing: give the bytes K and V may take");
  // A setting the policy ignores is most likely a mistake (e.g. --kv-budget without a policy, which
  // runs with the whole cache); say so, but run, so that one flag set can serve every policy.
  for (const std::string& flag : edgelm::eviction_flags()) {
    if (app.count(flag) > 0 && !edgelm::policy_reads(f.eviction, flag)) {
      edgelm::log_warn("[eviction] ", flag, " has no effect with --eviction-policy ",
                       f.eviction.policy);
    }
  }
  const unsigned protect = f.eviction.policy != "none" && !f.eviction.protect.empty()
                               ? edgelm::parse_protect_classes(f.eviction.protect)
                               : 0;
  if ((protect & edgelm::kProtectSystem) != 0 && !chat) {
    EDGELM_FAIL(
        "--protect system needs --chat or --interactive (the chat template says where the "
        "system prompt lies)");
  }
  if (f.budget_bytes > 0 && !edgelm::policy_reads(f.eviction.policy, "--kv-budget")) {
    edgelm::log_warn("[eviction] --budget-bytes has no effect with --eviction-policy ",
                     f.eviction.policy);
  }
  std::ofstream profile_csv;
  if (!f.profile_out.empty()) {
    profile_csv.open(f.profile_out);
    if (!profile_csv) EDGELM_FAIL("--profile-out: cannot write ", f.profile_out);
    profile_csv << "phase,op,kernel,calls,total_ms,bytes\n";
  }
  // The tokenizer is needed for text in or out; a model without one still runs on ids.
  settings.load_tokenizer = !f.prompt.empty() || f.interactive || !f.print_ids ||
                            (protect & edgelm::kProtectTemplate) != 0;
  settings.require_tokenizer = !f.prompt.empty() || f.interactive;
  settings.tokenizer_options = f.tokenizer_options;
  edgelm::Runtime runtime = edgelm::Runtime::load(std::move(settings));
  const bool stream_text = runtime.tokenizer() != nullptr && !f.print_ids;
  edgelm::ConversationOptions options;
  options.generation.sampling = edgelm::cli::sampling_for(f, runtime.model().config());
  options.generation.max_tokens = f.n_generate;
  options.generation.ignore_eos = f.ignore_eos;
  options.chat = std::move(chat_template);
  options.system_prompt = f.system_prompt;
  options.stream_text = stream_text;
  options.dump_kv_positions = f.dump_kv_positions;
  options.dump_logits = f.dump_logits;
  options.context_given = app.count("--ctx-size") > 0;
  options.lookup_ngram = lookup_ngram;
  options.draft_model = model_draft;
  options.max_draft = max_draft;
  options.on_note = print_line;
  edgelm::Conversation conversation(runtime, std::move(options),
                                    edgelm::cli::printing_callbacks(f, stream_text));

  if (f.interactive) {
    conversation.start_chat();
    std::fprintf(
        stderr,
        "interactive chat: type a message; /reset clears the conversation, /quit or Ctrl-D ends\n");
    std::string line;
    do {
      std::fprintf(stderr, "> ");
    } while (std::getline(std::cin, line) && conversation.chat_line(line));
    // Without a newline typed at the last "> " (Ctrl-D, or input from a pipe), end that line, so
    // that what follows starts on a line of its own.
    if (std::cin.eof() || isatty(STDIN_FILENO) == 0) std::fputc('\n', stderr);
    conversation.log_eviction_summary();
    edgelm::cli::finish_stdout();
    return 0;
  }

  if (!f.prompt.empty()) prompt_ids = conversation.encode(f.prompt);
  conversation.prefill(prompt_ids);
  const edgelm::Reply reply = conversation.reply();
  conversation.finish();
  if (f.profile) {
    const edgelm::GenerationStats stats = conversation.session().stats();
    std::ofstream* csv = profile_csv.is_open() ? &profile_csv : nullptr;
    print_profile("prefill", conversation.prefill_profile(), stats.prefill_seconds, csv);
    print_profile("decode", runtime.backend().op_timings(), stats.decode_seconds, csv);
    if (csv != nullptr)
      edgelm::cli::close_written_file(profile_csv, f.profile_out, "--profile-out");
  }
  const int64_t peak = edgelm::peak_resident_bytes();
  conversation.log_eviction_summary();
  if (conversation.drafter() != nullptr) print_line(conversation.speculative_line());
  print_line(conversation.stats_line(peak, reply));
  if (f.json) edgelm::cli::print_json_line(conversation.summary(peak, reply));
  edgelm::cli::finish_stdout();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("generate", run, argc, argv);
}
