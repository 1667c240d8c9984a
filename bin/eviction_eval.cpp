// eviction_eval: the quality and cost of KV-cache eviction policies on a real model. Every
// (policy, budget) cell runs beside the full cache over the same tokens, in this process, with the
// same chunks and kernels (eval/eviction_eval.h): streaming NLL, paired KL / top-1 / ΔNLL with
// bootstrap intervals, compress-then-continue, passkey retrieval gated by the full cache's own
// answers, and the cost (KV bytes, peak RSS, time per eviction, decode tokens/s). Writes a markdown
// table on stdout, one JSON object per cell with --json FILE and a CSV table with --csv FILE;
// progress goes to stderr. docs/kv_cache.md describes the method and every field.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "bin/cli_util.h"
#include "bin/eviction_eval_commit.h"
#include "core/error.h"
#include "core/sha256.h"
#include "eval/eviction_eval.h"
#include "eval/eviction_eval_report.h"
#include "models/chat.h"
#include "models/tokenizer.h"
#include "runtime/setup.h"

namespace {

// "a,b,c" -> {"a", "b", "c"}; throws edgelm::Error naming `flag` for an empty item.
std::vector<std::string> split_list(const std::string& text, const char* flag) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    if (item.empty()) EDGELM_FAIL(flag, ": an empty item in '", text, "'");
    items.push_back(item);
  }
  if (items.empty()) EDGELM_FAIL(flag, ": nothing given");
  return items;
}

std::vector<int64_t> parse_counts(const std::string& text, const char* flag) {
  std::vector<int64_t> values;
  for (const int32_t v : edgelm::cli::parse_id_list(text, flag)) values.push_back(v);
  return values;
}

std::vector<double> parse_shares(const std::string& text, const char* flag) {
  std::vector<double> values;
  for (const std::string& item : split_list(text, flag)) {
    size_t used = 0;
    double value = 0.0;
    try {
      value = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size()) EDGELM_FAIL(flag, ": '", item, "' is not a number");
    values.push_back(value);
  }
  return values;
}

std::string shell_quoted(int argc, char** argv) {
  std::string command;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_./=,:+@%") == std::string::npos;
    std::string quoted = "'";
    for (const char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += (i > 0 ? " " : "") + (plain ? arg : quoted + "'");
  }
  return command;
}

// The paths of --file-list: one per line; empty lines and lines starting with '#' are skipped.
std::vector<std::string> read_file_list(const std::string& path) {
  std::vector<std::string> paths;
  std::stringstream lines(edgelm::cli::read_text_file(path, "--file-list"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    paths.push_back(line);
  }
  if (paths.empty()) EDGELM_FAIL("--file-list: '", path, "' names no file");
  return paths;
}

void write_file(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path, std::ios::binary);
  if (!out) EDGELM_FAIL(flag, ": cannot write '", path, "'");
  out << text;
  out.flush();
  if (!out) EDGELM_FAIL(flag, ": cannot write '", path, "'");
}

int run(int argc, char** argv) {
  CLI::App app{
      "Measures the quality and cost of KV-cache eviction policies against the full cache, "
      "over the same tokens in one process."};
  namespace flag = edgelm::cli::flag;
  std::string model_path;
  std::vector<std::string> files;
  std::string file_list;
  std::string policies_text;
  std::string budgets_text = "64,256";
  std::string budget_bytes_text;
  std::string runs_text = "streaming,continuation,retrieval,cost";
  edgelm::EvictionEvalOptions options;
  std::string kv_type_text = "f16";
  int threads = 0;
  std::string backend_name = "cpu";
  std::string weight_type_text;
  uint64_t seed = 0;
  int64_t snapkv_window = 0;
  std::string passkey_lengths = "512,1024";
  std::string passkey_depths = "0.1,0.5,0.9";
  std::string passkey_placements = "end,both";
  edgelm::PasskeyOptions passkey;
  std::string haystack_path;
  std::string chat_mode = "auto";
  std::string chat_template_name;
  int64_t answer_tokens = 0;
  std::string json_path, csv_path;
  bool no_hash = false;
  bool list_chat_templates = false;

  edgelm::cli::add_shared(app, flag::kModel, model_path);
  edgelm::cli::add_shared(app, flag::kFile, files);
  app.add_option("--file-list", file_list, "A file naming one text per line");
  edgelm::cli::add_shared(app, flag::kPolicies, policies_text);
  app.add_option("--budgets", budgets_text,
                 "Budgets in slots per layer and kv head, comma-separated (default 64,256)");
  edgelm::cli::add_shared(app, flag::kBudgetBytes, budget_bytes_text)->type_name("SIZE,...");
  app.add_option("--runs", runs_text,
                 "Which runs: streaming,continuation,retrieval,cost (default: all)");
  edgelm::cli::add_shared(app, flag::kCtxSize, options.window_tokens)->capture_default_str();
  app.add_option("--windows", options.windows_per_text,
                 "Windows streamed per text, each from an empty cache (default 1)");
  app.add_option("--evict-every", options.evict_every,
                 "Streaming: tokens per step, evicting before each (1: every token; default 1)");
  edgelm::cli::add_shared(app, flag::kBatchSize, options.batch);
  edgelm::cli::add_shared(app, flag::kSinkTokens, options.shares.sink_tokens)->capture_default_str();
  edgelm::cli::add_shared(app, flag::kPyramidBeta, options.shares.pyramid_beta);
  app.add_option("--recent-share", options.shares.recent_share,
                 "h2o: the budget's share kept as its recent window (default 0.5)");
  edgelm::cli::add_shared(app, flag::kSnapkvWindow, snapkv_window)->default_str("min(32,budget/2)");
  edgelm::cli::add_shared(app, flag::kSnapkvKernel, options.shares.snapkv_kernel)
      ->capture_default_str();
  edgelm::cli::add_shared(app, flag::kSnapkvPool, options.shares.snapkv_pool)
      ->capture_default_str();
  app.add_option("--prefix-tokens", options.prefix_tokens,
                 "Compress-then-continue: prefilled tokens (default 512)");
  app.add_option("--continue-tokens", options.continue_tokens,
                 "Compress-then-continue: teacher-forced tokens after it (default 128)");
  app.add_option("--block-tokens", options.block_tokens,
                 "Streaming predictions per bootstrap unit (default 128)");
  app.add_option("--bootstrap", options.bootstrap.resamples,
                 "Bootstrap resamples per interval (default 1000)");
  edgelm::cli::add_shared(app, flag::kSeed, seed)
      ->capture_default_str()
      ->check(edgelm::cli::kUint64);
  app.add_option("--floor-policy", options.floor_policy,
                 "Compare every cell with this policy at the same budget, when run (random)");
  app.add_option("--cost-tokens", options.cost_decode_tokens,
                 "Cost: tokens decoded after a window, timed (default 32)");
  app.add_option("--passkey-lengths", passkey_lengths,
                 "Retrieval: document lengths in tokens (default 512,1024)");
  app.add_option("--passkey-depths", passkey_depths,
                 "Retrieval: where the key sits, shares of the document (default 0.1,0.5,0.9)");
  app.add_option("--passkey-placements", passkey_placements,
                 "Retrieval: the question at the end, or at both ends (default end,both)");
  app.add_option("--passkey-trials", passkey.trials, "Retrieval: keys per cell (default 2)");
  app.add_option("--passkey-digits", passkey.digits, "Retrieval: digits per key (default 5)");
  app.add_option("--haystack", haystack_path, "Retrieval: filler text (default: built-in)");
  edgelm::cli::add_shared(app, flag::kChat, chat_mode)
      ->type_name("auto|on|off")
      ->capture_default_str();
  edgelm::cli::add_shared(app, flag::kChatTemplate, chat_template_name);
  edgelm::cli::add_shared(app, flag::kListChatTemplates, list_chat_templates);
  app.add_option("--answer-tokens", answer_tokens,
                 "Retrieval: greedy tokens per answer (default: digits + 4)");
  edgelm::cli::add_shared(app, flag::kKvType, kv_type_text);
  edgelm::cli::add_shared(app, flag::kThreads, threads)->check(CLI::Range(0, 1024));
  edgelm::cli::add_shared(app, flag::kBackend, backend_name);
  edgelm::cli::add_shared(app, flag::kWeightType, weight_type_text);
  edgelm::cli::add_shared(app, flag::kJson, json_path)->type_name("FILE");
  app.add_option("--csv", csv_path, "Write the cells' scalar fields as CSV to this file");
  app.add_flag("--no-hash", no_hash, "Do not compute the model file's sha256");
  edgelm::cli::add_note(
      app,
      "-f repeats, a text to stream each; -c is the window each text is streamed in. --policies "
      "(default: every policy but none) may give a policy +protect (its first --sink-tokens kept "
      "out of the competition) and/or +pyramid (the budget shared out over the layers, "
      "PyramidKV). --budget-bytes is a list of budgets, like --budgets. -b is the prefill step of "
      "the continuation, retrieval and cost runs (unset: 128, or the largest step every cell "
      "makes room for: half the smallest budget, less protected sinks). --chat auto: the passkey "
      "prompts go through the model's chat template when it has one; --chat-template implies "
      "--chat on. --json writes one JSON object per cell to FILE; the markdown table goes to "
      "stdout.");
  if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;

  if (list_chat_templates) {
    for (const std::string& name : edgelm::chat_template_names()) std::printf("%s\n", name.c_str());
    return 0;
  }

  // ---- everything that can be checked without the model ----
  if (model_path.empty()) EDGELM_FAIL("-m/--model is required (a HF folder or a .gguf file)");
  if (!file_list.empty()) {
    for (const std::string& path : read_file_list(file_list)) files.push_back(path);
  }
  std::set<std::string> runs;
  for (const std::string& r : split_list(runs_text, "--runs")) {
    if (r != "streaming" && r != "continuation" && r != "retrieval" && r != "cost")
      EDGELM_FAIL("--runs: '", r, "' is not one of streaming, continuation, retrieval, cost");
    runs.insert(r);
  }
  options.streaming = runs.contains("streaming");
  options.continuation = runs.contains("continuation");
  options.cost = runs.contains("cost");
  const bool retrieval = runs.contains("retrieval");
  if (files.empty() && (options.streaming || options.continuation || options.cost))
    EDGELM_FAIL("-f/--file is required (a text to stream; or --runs retrieval)");
  if (!policies_text.empty()) {
    options.policies = split_list(policies_text, "--policies");
  } else {
    for (const std::string& name : edgelm::policy_names())
      if (name != "none") options.policies.push_back(name);
  }
  if (app.count("--snapkv-window") > 0) options.shares.snapkv_window = snapkv_window;
  options.bootstrap.seed = seed;
  options.shares.policy_seed = seed;
  passkey.seed = seed;
  if (retrieval) {
    passkey.lengths = parse_counts(passkey_lengths, "--passkey-lengths");
    passkey.depths = parse_shares(passkey_depths, "--passkey-depths");
    passkey.placements = split_list(passkey_placements, "--passkey-placements");
    if (!haystack_path.empty())
      passkey.haystack = edgelm::cli::read_text_file(haystack_path, "--haystack");
  }
  if (chat_mode != "auto" && chat_mode != "on" && chat_mode != "off")
    EDGELM_FAIL("--chat: '", chat_mode, "' is not auto, on or off");
  if (chat_mode == "off" && !chat_template_name.empty())
    EDGELM_FAIL("--chat-template with --chat off: the prompts would not use it");
  if (app.count("--answer-tokens") > 0 && answer_tokens < 1)
    EDGELM_FAIL("--answer-tokens ", answer_tokens, " must be at least 1");
  if (app.count("--budgets") > 0 && !budget_bytes_text.empty())
    EDGELM_FAIL("--budgets and --budget-bytes: give the budgets one way");
  options.kv_type =
      edgelm::cli::parse_dtype(kv_type_text, "--kv-type", {edgelm::DType::F32, edgelm::DType::F16});
  // The model is loaded as every tool loads it; the cells then run on models of their own over
  // its weights, each with its own cache and budget.
  edgelm::Settings settings{.model_path = model_path,
                            .backend = backend_name,
                            .backend_options = {.n_threads = threads},
                            .kv_type = options.kv_type};
  if (!weight_type_text.empty())
    settings.weight_type = edgelm::cli::parse_weight_type(weight_type_text);

  // The output files are opened now, so that a bad path fails before the run rather than after.
  for (const auto& [path, name] : {std::pair{json_path, "--json"}, std::pair{csv_path, "--csv"}}) {
    if (!path.empty()) write_file(path, "", name);
  }

  // ---- the model ----
  edgelm::Runtime runtime = edgelm::Runtime::load(std::move(settings));
  edgelm::LlamaModel& model = runtime.model();
  const edgelm::LlamaConfig& config = model.config();
  const edgelm::Tokenizer& tokenizer = *runtime.tokenizer();
  std::fprintf(stderr, "model: %s (%s; weights %s)\n%s\nbackend: %s\n", model_path.c_str(),
               runtime.info().format.c_str(), runtime.info().weight_types.c_str(),
               config.describe().c_str(), runtime.backend().device().c_str());
  const int64_t slot_bytes = edgelm::kv_bytes_per_slot(config, options.kv_type);
  std::optional<int64_t> budget_bytes;
  if (!budget_bytes_text.empty()) {
    for (const std::string& item : split_list(budget_bytes_text, "--budget-bytes")) {
      const auto bytes =
          static_cast<int64_t>(edgelm::cli::parse_byte_size(item, "--budget-bytes"));
      options.budgets.push_back(edgelm::kv_budget_from_bytes(static_cast<uint64_t>(bytes),
                                                             static_cast<size_t>(slot_bytes)));
      std::fprintf(stderr,
                   "--budget-bytes %s: %lld slots per layer and kv head (%lld bytes each)\n",
                   item.c_str(), static_cast<long long>(options.budgets.back()),
                   static_cast<long long>(slot_bytes));
      budget_bytes = bytes;
    }
  } else {
    options.budgets = parse_counts(budgets_text, "--budgets");
  }
  // As perplexity: BOS first in every window when the tokenizer adds it.
  const std::vector<int32_t> added = tokenizer.encode("", /*add_bos=*/true);
  if (added.size() == 1 && added[0] == tokenizer.bos_id()) options.bos = added[0];
  edgelm::check_eviction_eval_options(options, config);

  edgelm::EvalRunInfo info;
  info.model_path = model_path;
  if (!no_hash && std::filesystem::is_regular_file(model_path)) {
    info.model_sha256 = edgelm::sha256_file_hex(model_path);
    info.model_bytes = static_cast<int64_t>(std::filesystem::file_size(model_path));
  }
  info.format = runtime.info().format;
  info.weight_types = runtime.info().weight_types;
  info.backend = backend_name;
  info.device = runtime.backend().device();
  info.threads = threads;
  info.add_bos = options.bos.has_value();
  info.command = shell_quoted(argc, argv);
  info.commit = edgelm::kBuildCommit;
  info.date = edgelm::utc_now();

  // ---- the texts, tokenized as perplexity does (special-token text stays text) ----
  std::vector<edgelm::EvalText> texts;
  for (const std::string& path : files) {
    // Only the windows that run need byte offsets.
    edgelm::EvalText text = edgelm::make_eval_text(
        path, edgelm::cli::read_text_file(path, "-f/--file"), tokenizer,
        options.window_tokens * options.windows_per_text, "-f/--file");
    if (static_cast<int64_t>(text.tokens.size()) < options.window_tokens) {
      EDGELM_FAIL("-f/--file: '", path, "' tokenizes to ", text.tokens.size(),
                  " tokens, fewer than one window of -c/--ctx-size ", options.window_tokens);
    }
    info.texts.push_back({path, text.sha256, text.bytes, static_cast<int64_t>(text.tokens.size())});
    texts.push_back(std::move(text));
  }

  // ---- the passkey cases ----
  std::vector<edgelm::PasskeyCase> cases;
  edgelm::PasskeyAnswerOptions answer;
  if (retrieval) {
    std::optional<edgelm::ChatTemplate> chat;
    if (chat_mode == "on" || !chat_template_name.empty()) {
      chat = edgelm::ChatTemplate::from_model_path(model_path, chat_template_name);
    } else if (chat_mode == "auto") {
      try {
        chat = edgelm::ChatTemplate::from_model_path(model_path);
      } catch (const edgelm::Error&) {
        // No template, or one no format recognises: the prompts are plain text.
      }
    }
    cases = edgelm::make_passkey_cases(tokenizer, chat ? &*chat : nullptr, passkey);
    answer.max_tokens = answer_tokens > 0 ? answer_tokens : passkey.digits + 4;
    answer.stop_ids =
        chat ? edgelm::chat_stop_ids(tokenizer, *chat, config.eos_token_ids) : config.eos_token_ids;
    info.passkey = passkey;
    info.chat_template = chat ? std::string(chat->name()) : "";
    info.answer_tokens = answer.max_tokens;
    std::fprintf(stderr, "retrieval: %zu passkey prompts (%s)\n", cases.size(),
                 chat ? ("chat template " + std::string(chat->name())).c_str() : "plain text");
  }
  info.budget_bytes = budget_bytes;

  edgelm::EvictionEval eval(model, options);
  eval.set_progress([](std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  });
  if (options.streaming) eval.run_streaming(texts);
  if (options.continuation) eval.run_continuation(texts);
  if (retrieval) eval.run_retrieval(cases, tokenizer, answer);
  if (options.cost) eval.run_cost(texts.front());

  const std::vector<nlohmann::ordered_json> lines = edgelm::eviction_eval_json(eval, info);
  if (!json_path.empty()) {
    std::string text;
    for (const nlohmann::ordered_json& line : lines) text += line.dump() + "\n";
    write_file(json_path, text, "--json");
  }
  if (!csv_path.empty()) write_file(csv_path, edgelm::eviction_eval_csv(lines), "--csv");
  std::printf("%s", edgelm::eviction_eval_markdown(eval, info).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("eviction_eval", run, argc, argv);
}
