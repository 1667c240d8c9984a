// edgelm.eviction.evaluate's compiled half: eviction_eval's streaming, compress-then-continue and
// cost runs (eval/eviction_eval.h) on a loaded model, returning the same JSON objects the tool
// writes with --json (eval/eviction_eval_report.h), one per (policy, budget) cell, and its
// markdown summary.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "bin/eviction_eval_commit.h"
#include "core/error.h"
#include "core/sha256.h"
#include "eval/eviction_eval.h"
#include "eval/eviction_eval_report.h"
#include "models/tokenizer.h"
#include "python/src/bindings.h"

namespace edgelm::python {
namespace {

// A text as eviction_eval reads -f (make_eval_text).
EvalText read_text(const Tokenizer& tokenizer, const std::string& path, int64_t used_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) EDGELM_FAIL("texts: cannot read '", path, "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return make_eval_text(path, std::move(bytes), tokenizer, used_tokens, "texts");
}

py::tuple evaluate(const ModelRef& state, const std::vector<std::string>& paths,
                   const std::vector<std::string>& policies, const std::vector<int64_t>& budgets,
                   const std::vector<std::string>& runs, const py::dict& settings,
                   const std::string& command, bool progress) {
  const Runtime& runtime = state->runtime;
  const Tokenizer* tokenizer = runtime.tokenizer();
  if (tokenizer == nullptr) EDGELM_FAIL("[python] evaluate needs the model's tokenizer");
  if (paths.empty()) EDGELM_FAIL("texts: give at least one text file");
  EvictionEvalOptions options;
  options.policies = policies;
  options.budgets = budgets;
  options.kv_type = runtime.settings().kv_type;
  options.streaming = options.continuation = options.cost = false;
  for (const std::string& run : runs) {
    if (run == "streaming") {
      options.streaming = true;
    } else if (run == "continuation") {
      options.continuation = true;
    } else if (run == "cost") {
      options.cost = true;
    } else {
      EDGELM_FAIL("runs: '", run, "' is not one of streaming, continuation, cost");
    }
  }
  for (const auto& [key, value] : settings) {
    const auto name = key.cast<std::string>();
    if (name == "window_tokens") {
      options.window_tokens = value.cast<int64_t>();
    } else if (name == "windows") {
      options.windows_per_text = value.cast<int64_t>();
    } else if (name == "evict_every") {
      options.evict_every = value.cast<int64_t>();
    } else if (name == "batch") {
      options.batch = value.cast<int64_t>();
    } else if (name == "sink_tokens") {
      options.shares.sink_tokens = value.cast<int64_t>();
    } else if (name == "recent_share") {
      options.shares.recent_share = value.cast<double>();
    } else if (name == "snapkv_window") {
      options.shares.snapkv_window = value.cast<int64_t>();
    } else if (name == "snapkv_kernel") {
      options.shares.snapkv_kernel = value.cast<int64_t>();
    } else if (name == "snapkv_pool") {
      options.shares.snapkv_pool = value.cast<std::string>();
    } else if (name == "pyramid_beta") {
      options.shares.pyramid_beta = value.cast<double>();
    } else if (name == "prefix_tokens") {
      options.prefix_tokens = value.cast<int64_t>();
    } else if (name == "continue_tokens") {
      options.continue_tokens = value.cast<int64_t>();
    } else if (name == "block_tokens") {
      options.block_tokens = value.cast<int64_t>();
    } else if (name == "bootstrap") {
      options.bootstrap.resamples = value.cast<int64_t>();
    } else if (name == "seed") {
      options.bootstrap.seed = options.shares.policy_seed = value.cast<uint64_t>();
    } else if (name == "floor_policy") {
      options.floor_policy = value.cast<std::string>();
    } else if (name == "cost_tokens") {
      options.cost_decode_tokens = value.cast<int64_t>();
    } else {
      EDGELM_FAIL("[python] evaluate: unknown setting '", name, "'");
    }
  }
  const std::vector<int32_t> added = tokenizer->encode("", /*add_bos=*/true);
  if (added.size() == 1 && added[0] == tokenizer->bos_id()) options.bos = added[0];
  LlamaModel& model = runtime.model();
  check_eviction_eval_options(options, model.config());

  EvalRunInfo info;
  info.model_path = state->path;
  info.format = runtime.info().format;
  info.weight_types = runtime.info().weight_types;
  info.backend = runtime.settings().backend;
  info.device = runtime.backend().device();
  info.threads = runtime.settings().backend_options.n_threads;
  info.add_bos = options.bos.has_value();
  info.command = command;
  info.commit = kBuildCommit;
  info.date = utc_now();

  std::vector<nlohmann::ordered_json> lines;
  std::string markdown;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(state->compute);
    if (std::filesystem::is_regular_file(state->path)) {
      info.model_sha256 = sha256_file_hex(state->path);
      info.model_bytes = static_cast<int64_t>(std::filesystem::file_size(state->path));
    }
    std::vector<EvalText> texts;
    for (const std::string& path : paths) {
      texts.push_back(read_text(*tokenizer, path, options.window_tokens * options.windows_per_text));
      const EvalText& text = texts.back();
      if (static_cast<int64_t>(text.tokens.size()) < options.window_tokens) {
        EDGELM_FAIL("texts: '", path, "' tokenizes to ", text.tokens.size(),
                    " tokens, fewer than one window of ", options.window_tokens);
      }
      info.texts.push_back(
          {path, text.sha256, text.bytes, static_cast<int64_t>(text.tokens.size())});
    }
    EvictionEval eval(model, options);
    // Progress lines go to stderr as the tool prints them; between them, Ctrl-C stops the run.
    eval.set_progress([progress](std::string_view line) {
      if (progress) std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    });
    if (options.streaming) eval.run_streaming(texts);
    if (options.continuation) eval.run_continuation(texts);
    if (options.cost) eval.run_cost(texts.front());
    lines = eviction_eval_json(eval, info);
    markdown = eviction_eval_markdown(eval, info);
  }
  py::list records;
  for (const nlohmann::ordered_json& line : lines) records.append(line.dump());
  return py::make_tuple(records, markdown);
}

}  // namespace

void bind_evaluate(py::module_& m) {
  m.def("_evaluate", &evaluate, py::arg("model"), py::arg("texts"), py::arg("policies"),
        py::arg("budgets"), py::arg("runs"), py::arg("settings"), py::arg("command"),
        py::arg("progress"));
}

}  // namespace edgelm::python
