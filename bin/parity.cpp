// parity: one model run by two configurations in lockstep (--a and --b: backends such as
// cpu:portable, cpu:avx2, opencl; weight and KV types), judged step by step with the tie rule of
// eval/parity.h: teacher-forced over a text (-f), then greedy from a prompt (-p), a's choice fed to
// both. Each divergence of the best token is explained (a near tie, within twice the bound) or a
// fault; logits further apart than the bound are a fault too. --layers compares every layer's
// output and names the first that departs. With --logits-a/--logits-b it judges two greedy runs
// from their logits (generate --dump-logits) instead. Prints the divergences and a summary line;
// --json prints one JSON line per step and the summary as the last. Exit status 1 on any fault.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "bin/cli_util.h"
#include "core/error.h"
#include "core/npy.h"
#include "eval/parity.h"
#include "models/chat.h"
#include "models/tokenizer.h"
#include "runtime/setup.h"

namespace {

using Clock = std::chrono::steady_clock;

// One side of the comparison, as its flags name it.
struct SideFlags {
  std::string backend;
  std::string weight_type;
  std::string kv_type;
};

// One side, loaded.
struct Side {
  std::string label;  // "cpu:avx2 (q4_1, f16 KV)"
  edgelm::Runtime runtime;
  edgelm::KvCache cache;
};

// --plant-fault LAYER[:ROW[:DELTA]].
struct PlantedFault {
  int64_t layer = -1;
  int64_t row = 0;
  float delta = 32.0f;
};

PlantedFault parse_fault(const std::string& text) {
  PlantedFault fault;
  const auto fail = [&] {
    EDGELM_FAIL("--plant-fault '", text, "': expected LAYER[:ROW[:DELTA]], e.g. 5 or 5:0:2.5");
  };
  try {
    size_t used = 0;
    fault.layer = std::stoll(text, &used);
    std::string rest = text.substr(used);
    if (!rest.empty()) {
      if (rest[0] != ':') fail();
      rest = rest.substr(1);
      fault.row = std::stoll(rest, &used);
      rest = rest.substr(used);
      if (!rest.empty()) {
        if (rest[0] != ':') fail();
        rest = rest.substr(1);
        fault.delta = std::stof(rest, &used);
        if (used != rest.size()) fail();
      }
    }
  } catch (const std::logic_error&) {
    fail();
  }
  if (fault.layer < 0 || fault.row < 0) fail();
  return fault;
}

// The settings of one side: its backend, weight and KV types (`kv_flag` names the flag that gave
// the KV type) and the model's steps of `batch` tokens, the tokenizer left to the caller; with
// `fault`, the fault planted around the backend once the weights are loaded. The cache's size is
// set when the texts are known.
edgelm::Settings side_settings(const SideFlags& flags, const char* kv_flag,
                               const std::string& model_path, int threads, int64_t batch,
                               const std::optional<PlantedFault>& fault) {
  edgelm::Settings settings{.model_path = model_path,
                            .backend = flags.backend,
                            .backend_options = {.n_threads = threads},
                            .max_chunk = batch,
                            .load_tokenizer = false,
                            .require_tokenizer = false,
                            .kv_type = edgelm::cli::parse_dtype(
                                flags.kv_type, kv_flag, {edgelm::DType::F32, edgelm::DType::F16})};
  if (!flags.weight_type.empty()) {
    settings.weight_type = edgelm::cli::parse_weight_type(flags.weight_type);
  }
  if (fault) {
    settings.wrap_backend = [fault = *fault](edgelm::Backend& backend,
                                             const edgelm::LlamaConfig& config,
                                             const edgelm::LlamaWeights& weights) {
      if (fault.layer >= config.n_layers) {
        EDGELM_FAIL("--plant-fault: layer ", fault.layer, " of a model of ", config.n_layers,
                    " layers");
      }
      return edgelm::plant_fault(backend, weights.layers[fault.layer].w_down, fault.row,
                                 fault.delta);
    };
  }
  return settings;
}

// Loads one side with a cache of `capacity` slots and reports it on stderr.
Side load_side(const char* name, edgelm::Settings settings, int64_t capacity,
               const std::optional<PlantedFault>& fault) {
  settings.context = capacity;
  settings.kv_capacity = capacity;
  edgelm::Runtime runtime = edgelm::Runtime::load(std::move(settings));
  std::string label = runtime.settings().backend + " (" + runtime.info().weight_types + ", " +
                      edgelm::dtype_name(runtime.settings().kv_type) + " KV)";
  if (fault) {
    label += ", fault planted in layer " + std::to_string(fault->layer) + "'s down projection";
  }
  edgelm::KvCache cache = runtime.make_cache(runtime.make_manager());
  std::fprintf(stderr, "%s: %s on %s\n", name, label.c_str(), runtime.backend().device().c_str());
  return Side{.label = std::move(label), .runtime = std::move(runtime), .cache = std::move(cache)};
}

nlohmann::json step_json(const edgelm::ParityStep& s) {
  nlohmann::json j = {{"phase", s.phase},
                      {"index", s.index},
                      {"next", s.next},
                      {"verdict", edgelm::verdict_name(s.verdict)},
                      {"max_abs", s.diff.max_abs},
                      {"max_rel", s.diff.max_rel},
                      {"kl", s.diff.kl},
                      {"top_a", s.diff.top_a},
                      {"top_b", s.diff.top_b},
                      {"margin_a", s.diff.margin_a},
                      {"margin_b", s.diff.margin_b}};
  if (!s.layers.empty()) {
    j["layers"] = s.layers;
    j["first_departing_layer"] = s.first_departing_layer;
  }
  return j;
}

nlohmann::json summary_json(const edgelm::ParitySummary& sum, const edgelm::ParityBound& bound) {
  nlohmann::json j = {
      {"steps", sum.steps},           {"agree", sum.agree},
      {"explained", sum.explained},   {"faults", sum.faults},
      {"max_abs", sum.max_abs},       {"max_rel", sum.max_rel},
      {"max_kl", sum.max_kl},         {"max_hidden", sum.max_hidden},
      {"mean_kl", sum.mean_kl()},     {"bound_logit", bound.logit},
      {"bound_hidden", bound.hidden}, {"first_departing_layer", sum.first_departing_layer}};
  j["first_divergence"] = sum.first_divergence ? step_json(*sum.first_divergence) : nullptr;
  j["first_fault"] = sum.first_fault ? step_json(*sum.first_fault) : nullptr;
  return j;
}

// A line for a step that is not a plain agreement.
void print_step(const edgelm::ParityStep& s, const edgelm::ParityBound& bound,
                const edgelm::Tokenizer* tokenizer) {
  const auto piece = [&](int32_t id) {
    return tokenizer != nullptr ? "'" + tokenizer->decode({&id, 1}) + "'" : std::string();
  };
  std::printf(
      "%s %lld: %s: a %d%s, b %d%s, top-2 margin %.4g (a) %.4g (b), max |a-b| %.4g "
      "(bound %.4g), KL %.3g",
      s.phase, static_cast<long long>(s.index), edgelm::verdict_name(s.verdict), s.diff.top_a,
      piece(s.diff.top_a).c_str(), s.diff.top_b, piece(s.diff.top_b).c_str(), s.diff.margin_a,
      s.diff.margin_b, s.diff.max_abs, bound.logit, s.diff.kl);
  if (s.first_departing_layer >= 0) {
    std::printf(", first departing layer %lld (relative difference %.3g, bound %.3g)",
                static_cast<long long>(s.first_departing_layer),
                s.layers[static_cast<size_t>(s.first_departing_layer)], bound.hidden);
  }
  std::printf("\n");
}

void print_summary(const char* what, const edgelm::ParitySummary& sum,
                   const edgelm::ParityBound& bound) {
  std::printf(
      "parity: %s: %lld steps: %lld agree, %lld explained divergences, %lld faults; "
      "max |a-b| %.4g (bound %.4g), max relative %.3g, KL mean %.3g max %.3g",
      what, static_cast<long long>(sum.steps), static_cast<long long>(sum.agree),
      static_cast<long long>(sum.explained), static_cast<long long>(sum.faults), sum.max_abs,
      bound.logit, sum.max_rel, sum.mean_kl(), sum.max_kl);
  if (sum.first_divergence) {
    std::printf("; first divergence %s %lld (%s)", sum.first_divergence->phase,
                static_cast<long long>(sum.first_divergence->index),
                edgelm::verdict_name(sum.first_divergence->verdict));
  }
  if (sum.first_fault) {
    std::printf("; first fault %s %lld (%s)", sum.first_fault->phase,
                static_cast<long long>(sum.first_fault->index),
                edgelm::verdict_name(sum.first_fault->verdict));
  }
  if (sum.first_departing_layer >= 0) {
    std::printf("; first departing layer %lld", static_cast<long long>(sum.first_departing_layer));
  }
  std::printf("\n");
}

int run(int argc, char** argv) {
  CLI::App app{
      "Runs one model on two configurations in lockstep and judges every step with the tie "
      "rule: logits within the bound, the same best token unless the top-2 margin is within "
      "twice the bound. Exit status 1 on any fault."};
  std::string model_path;
  SideFlags a{.backend = "cpu:portable", .weight_type = {}, .kv_type = "f16"};
  SideFlags b{.backend = "cpu", .weight_type = {}, .kv_type = "f16"};
  std::string weight_type;
  std::string kv_type;
  std::string file;
  int64_t max_tokens = 512;
  std::string prompt;
  bool chat = false;
  int64_t n_predict = 128;
  bool ignore_eos = false;
  int64_t batch = edgelm::kDefaultPrefillChunk;
  int threads = 0;
  bool layers = false;
  std::string fault_text;
  double bound_logit = 0.0;
  double bound_hidden = 0.0;
  std::string logits_a;
  std::string logits_b;
  bool json = false;
  bool quiet = false;
  bool list_backends = false;
  namespace flag = edgelm::cli::flag;
  edgelm::cli::add_shared(app, flag::kModel, model_path);
  app.add_option("--a", a.backend, "Backend of side a (default cpu:portable, the oracle)");
  app.add_option("--b", b.backend, "Backend of side b (default cpu, the default path)");
  edgelm::cli::add_shared(app, flag::kWeightType, weight_type);  // both sides
  app.add_option("--a-weight-type", a.weight_type, flag::kWeightType.help);
  app.add_option("--b-weight-type", b.weight_type, flag::kWeightType.help);
  edgelm::cli::add_shared(app, flag::kKvType, kv_type);  // both sides
  app.add_option("--a-kv-type", a.kv_type, "KV cache type of side a: f32|f16");
  app.add_option("--b-kv-type", b.kv_type, "KV cache type of side b: f32|f16");
  edgelm::cli::add_shared(app, flag::kFile, file);
  app.add_option("--tokens", max_tokens, "Teacher-force at most this many tokens (default 512)");
  edgelm::cli::add_shared(app, flag::kPrompt, prompt);
  edgelm::cli::add_shared(app, flag::kChat, chat);
  edgelm::cli::add_shared(app, flag::kPredict, n_predict)->capture_default_str();
  edgelm::cli::add_shared(app, flag::kIgnoreEos, ignore_eos);
  edgelm::cli::add_shared(app, flag::kBatchSize, batch)->capture_default_str();
  edgelm::cli::add_shared(app, flag::kThreads, threads)->check(CLI::Range(0, 1024));
  app.add_flag("--layers", layers,
               "Compare every layer's output too and name the first that departs");
  app.add_option("--plant-fault", fault_text,
                 "LAYER[:ROW[:DELTA]]: add DELTA (default 32) to output row ROW (default 0) of "
                 "LAYER's down projection on side b, to see a wrong kernel reported");
  app.add_option("--bound", bound_logit, "Logit bound instead of the weight types' own");
  app.add_option("--hidden-bound", bound_hidden,
                 "Relative layer-output bound instead of the weight types' own");
  app.add_option(
      "--logits-a", logits_a,
      "Judge two greedy runs from their logits instead: a's float32 .npy [steps, vocab]");
  app.add_option("--logits-b", logits_b, "b's .npy, with --logits-a");
  edgelm::cli::add_shared(app, flag::kJson, json);
  edgelm::cli::add_shared(app, flag::kQuiet, quiet);
  app.add_flag("--list-backends", list_backends,
               "Print the backend names --a and --b accept on this machine, one per line");
  edgelm::cli::add_note(
      app,
      "-f is teacher-forced through both sides; -p is continued greedily for -n steps, a's "
      "choice fed to both; -b is the teacher-forced step. --weight-type and --kv-type set both "
      "sides. --json prints a line per step, then the summary; -q only the faults and the "
      "summary.");
  if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;
  if (list_backends) {
    for (const std::string& name : edgelm::backend_names()) std::printf("%s\n", name.c_str());
    return 0;
  }

  if (!weight_type.empty()) {
    if (!a.weight_type.empty() || !b.weight_type.empty())
      EDGELM_FAIL("--weight-type sets both sides; give it or --a-weight-type/--b-weight-type");
    a.weight_type = b.weight_type = weight_type;
  }
  if (!kv_type.empty()) {
    if (app.count("--a-kv-type") > 0 || app.count("--b-kv-type") > 0)
      EDGELM_FAIL("--kv-type sets both sides; give it or --a-kv-type/--b-kv-type");
    a.kv_type = b.kv_type = kv_type;
  }
  if (bound_logit < 0.0) EDGELM_FAIL("--bound ", bound_logit, ": must be positive");
  if (bound_hidden < 0.0) EDGELM_FAIL("--hidden-bound ", bound_hidden, ": must be positive");
  const auto bound_for = [&](edgelm::DType wa, edgelm::DType wb) {
    edgelm::ParityBound bound = edgelm::parity_bound(wa, wb);
    if (bound_logit > 0.0) bound.logit = bound_logit;
    if (bound_hidden > 0.0) bound.hidden = bound_hidden;
    return bound;
  };
  edgelm::ParitySummary summary;
  const auto report = [&](const edgelm::ParityStep& s, const edgelm::ParityBound& bound,
                          const edgelm::Tokenizer* tokenizer) {
    summary.add(s);
    // Every step (a JSON line each) or every divergence (a line each); with -q, the faults alone.
    const bool shown =
        quiet ? edgelm::is_fault(s.verdict) : json || s.verdict != edgelm::StepVerdict::Agree;
    if (!shown) return;
    if (json) {
      edgelm::cli::print_json_line(step_json(s));
    } else {
      print_step(s, bound, tokenizer);
    }
  };

  // Two logit dumps: no model.
  if (!logits_a.empty() || !logits_b.empty()) {
    if (logits_a.empty() || logits_b.empty()) EDGELM_FAIL("--logits-a and --logits-b go together");
    if (!model_path.empty() || !file.empty() || !prompt.empty())
      EDGELM_FAIL("--logits-a/--logits-b judge two dumps: no -m, -f or -p with them");
    if (a.weight_type.empty() && bound_logit <= 0.0)
      EDGELM_FAIL(
          "--logits-a/--logits-b: give --weight-type (the runs' weights, for the bound) "
          "or --bound");
    const edgelm::DType wa =
        a.weight_type.empty() ? edgelm::DType::F32 : edgelm::cli::parse_weight_type(a.weight_type);
    const edgelm::DType wb =
        b.weight_type.empty() ? wa : edgelm::cli::parse_weight_type(b.weight_type);
    const edgelm::ParityBound bound = bound_for(wa, wb);
    const edgelm::NpyArray da = edgelm::read_npy(logits_a);
    const edgelm::NpyArray db = edgelm::read_npy(logits_b);
    if (da.shape.size() != 2 || db.shape.size() != 2 || da.shape[1] != db.shape[1]) {
      EDGELM_FAIL("--logits-a/--logits-b: '", logits_a, "' and '", logits_b,
                  "' must both be [steps, vocab] of one vocabulary");
    }
    for (const edgelm::ParityStep& s :
         edgelm::compare_greedy_logits(da.data, db.data, da.shape[1], bound)) {
      report(s, bound, nullptr);
    }
    print_summary((logits_a + " vs " + logits_b).c_str(), summary, bound);
    if (json) edgelm::cli::print_json_line(summary_json(summary, bound));
    return summary.faults > 0 ? 1 : 0;
  }

  if (model_path.empty()) EDGELM_FAIL("-m/--model is required (a HF folder or a .gguf file)");
  if (file.empty() && prompt.empty())
    EDGELM_FAIL("nothing to compare: give -f/--file (teacher-forced) and/or -p/--prompt (greedy)");
  if (max_tokens < 2) EDGELM_FAIL("--tokens ", max_tokens, ": must be at least 2");
  if (n_predict < 1) EDGELM_FAIL("-n/--n-predict ", n_predict, ": must be at least 1");
  if (batch < 1) EDGELM_FAIL("-b/--batch-size ", batch, ": must be at least 1");
  if (chat && prompt.empty()) EDGELM_FAIL("--chat needs -p/--prompt");
  const std::optional<PlantedFault> fault =
      fault_text.empty() ? std::nullopt : std::optional(parse_fault(fault_text));
  edgelm::Settings settings_a = side_settings(a, kv_type.empty() ? "--a-kv-type" : "--kv-type",
                                              model_path, threads, batch, std::nullopt);
  edgelm::Settings settings_b = side_settings(b, kv_type.empty() ? "--b-kv-type" : "--kv-type",
                                              model_path, threads, batch, fault);
  std::string text;
  if (!file.empty()) text = edgelm::cli::read_text_file(file, "-f/--file");

  const edgelm::Tokenizer tokenizer = edgelm::Tokenizer::from_model_path(model_path);
  std::vector<int32_t> text_ids;
  if (!file.empty()) {
    text_ids = tokenizer.encode(text, /*add_bos=*/true, /*parse_special=*/false);
    if (static_cast<int64_t>(text_ids.size()) > max_tokens) text_ids.resize(max_tokens);
    if (text_ids.size() < 2)
      EDGELM_FAIL("-f/--file: '", file, "' tokenizes to fewer than 2 tokens");
  }
  std::vector<int32_t> prompt_ids;
  std::optional<edgelm::ChatTemplate> chat_template;
  if (chat) {
    chat_template = edgelm::ChatTemplate::from_model_path(model_path);
    prompt_ids = tokenizer.encode(chat_template->render({{{"user", prompt}}}, true),
                                  /*add_bos=*/false, /*parse_special=*/true);
  } else if (!prompt.empty()) {
    prompt_ids = tokenizer.encode(prompt);
  }
  const auto capacity =
      static_cast<int64_t>(std::max(text_ids.size(), prompt_ids.size() + n_predict)) + 1;

  Side sa = load_side("a", std::move(settings_a), capacity, std::nullopt);
  Side sb = load_side("b", std::move(settings_b), capacity, fault);
  const edgelm::ParityBound bound =
      bound_for(sa.runtime.info().weight_type, sb.runtime.info().weight_type);
  std::fprintf(
      stderr,
      "bound: |a-b| <= %.4g per logit, a divergence explained at a top-2 margin "
      "<= %.4g%s\n",
      bound.logit, 2.0 * bound.logit,
      layers ? (", layer outputs within " + std::to_string(bound.hidden) + " relative").c_str()
             : "");
  edgelm::ParityRun run(sa.runtime.model(), sa.cache, sb.runtime.model(), sb.cache,
                        {.bound = bound, .layers = layers, .batch = batch});
  const auto on_step = [&](const edgelm::ParityStep& s) { report(s, bound, &tokenizer); };
  const std::string what = sa.label + " vs " + sb.label;

  if (!text_ids.empty()) {
    const auto start = Clock::now();
    run.teacher_forced(text_ids, on_step);
    std::fprintf(stderr, "teacher-forced %zu tokens in %.2f s\n", text_ids.size(),
                 std::chrono::duration<double>(Clock::now() - start).count());
    sa.cache.clear();
    sb.cache.clear();
  }
  if (!prompt_ids.empty()) {
    std::vector<int32_t> stop;
    if (!ignore_eos) {
      stop = chat_template ? edgelm::chat_stop_ids(tokenizer, *chat_template,
                                                   sa.runtime.model().config().eos_token_ids)
                           : sa.runtime.model().config().eos_token_ids;
    }
    const auto start = Clock::now();
    const std::vector<int32_t> chosen = run.greedy(prompt_ids, n_predict, on_step, stop);
    std::fprintf(stderr, "greedy %zu steps in %.2f s: %s\n", chosen.size(),
                 std::chrono::duration<double>(Clock::now() - start).count(),
                 tokenizer.decode(chosen).c_str());
  }
  print_summary(what.c_str(), summary, bound);
  if (json) {
    nlohmann::json j = summary_json(summary, bound);
    j["a"] = sa.label;
    j["b"] = sb.label;
    j["teacher_tokens"] = text_ids.size();
    edgelm::cli::print_json_line(j);
  }
  return summary.faults > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("parity", run, argc, argv);
}
