// check_generate_output <json> <model> <prompt ids or -> <logits.npy or -> [<stop>]: checks what
// `generate --json --prompt-ids <ids> [--dump-logits <npy>] -m <model>` wrote, for
// tests/cli/generate_output.sh.
//
// Every key of the --json summary is known here with its type (an unknown or missing key is a
// problem, so a new key must be added with its check), and the values agree with each other and
// with the run: the token counts with the tokens and the prompt, the speeds with the times, the
// cache's bytes with its slots, the position with what was fed, the text with the tokenizer's
// decoding of the tokens, the stop reason (when given) with the tokens. With a logits file, its
// shape is [rows, vocab] with one row after the prompt and one per decode step, and each row
// equals the logits the library computes for the same step (the model loaded here, fed the prompt
// and then the reply's tokens one at a time), and greedy runs' tokens are each row's argmax.
// Prints one line per problem and exits non-zero when there is any.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/npy.h"
#include "models/loader.h"
#include "models/tokenizer.h"

namespace {

using nlohmann::json;

int problems = 0;

void problem(const std::string& what) {
  std::printf("%s\n", what.c_str());
  ++problems;
}

enum class Kind { String, Int, NonNegativeInt, Number, IntArray, Object };

bool has_kind(const json& value, Kind kind) {
  switch (kind) {
    case Kind::String:
      return value.is_string();
    case Kind::Int:
      return value.is_number_integer();
    case Kind::NonNegativeInt:
      return value.is_number_integer() && value.get<int64_t>() >= 0;
    case Kind::Number:
      return value.is_number() && std::isfinite(value.get<double>()) && value.get<double>() >= 0;
    case Kind::IntArray:
      return value.is_array() && std::all_of(value.begin(), value.end(),
                                             [](const json& v) { return v.is_number_integer(); });
    case Kind::Object:
      return value.is_object();
  }
  return false;
}

bool near(double a, double b, double relative) {
  return std::fabs(a - b) <= relative * std::max({std::fabs(a), std::fabs(b), 1e-12});
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 6) {
    std::fprintf(stderr, "usage: %s <json> <model> <prompt ids> <logits.npy or -> [<stop>]\n",
                 argv[0]);
    return 2;
  }
  const std::string json_path = argv[1], model_path = argv[2], logits_path = argv[4];
  // "-": a text prompt, whose ids the caller does not know (its length is not checked).
  const bool prompt_known = std::string(argv[3]) != "-";
  const std::vector<int32_t> prompt = prompt_known ? parse_ids(argv[3]) : std::vector<int32_t>{};
  std::ifstream in(json_path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  json summary;
  try {
    summary = json::parse(last);
  } catch (const json::exception& e) {
    std::printf("the last line of %s is not JSON: %s\n", json_path.c_str(), e.what());
    return 1;
  }

  // ---- every key, with its type ----
  const std::map<std::string, Kind> keys = {
      {"model", Kind::String},
      {"format", Kind::String},
      {"backend", Kind::String},
      {"device", Kind::String},
      {"weight_type", Kind::String},
      {"weight_types", Kind::String},
      {"weight_layout", Kind::String},
      {"kv_type", Kind::String},
      {"load_s", Kind::Number},
      {"prompt_tokens", Kind::NonNegativeInt},
      {"generated_tokens", Kind::NonNegativeInt},
      {"prefill_s", Kind::Number},
      {"decode_s", Kind::Number},
      {"prefill_tok_s", Kind::Number},
      {"decode_tok_s", Kind::Number},
      {"kv_bytes", Kind::NonNegativeInt},
      {"kv_resident_bytes", Kind::NonNegativeInt},
      {"kv_capacity", Kind::NonNegativeInt},
      {"kv_context", Kind::NonNegativeInt},
      {"kv_budget", Kind::Int},
      {"kv_slots", Kind::NonNegativeInt},
      {"kv_used_bytes", Kind::NonNegativeInt},
      {"next_position", Kind::NonNegativeInt},
      {"eviction_policy", Kind::String},
      {"protected_system_positions", Kind::NonNegativeInt},
      {"evictions", Kind::NonNegativeInt},
      {"evicted_tokens", Kind::NonNegativeInt},
      {"eviction_s", Kind::Number},
      {"eviction_fallbacks", Kind::NonNegativeInt},
      {"eviction_fallback_kinds", Kind::Object},
      {"released_bytes", Kind::NonNegativeInt},
      {"rss_drop_bytes", Kind::NonNegativeInt},
      {"rss_bytes", Kind::NonNegativeInt},
      {"peak_rss_bytes", Kind::NonNegativeInt},
      {"weight_bytes_per_token", Kind::NonNegativeInt},
      {"weight_bytes", Kind::NonNegativeInt},
      {"host_device_copy_bytes", Kind::NonNegativeInt},
      {"host_device_copy_bytes_prefill", Kind::NonNegativeInt},
      {"host_device_copy_bytes_load", Kind::NonNegativeInt},
      {"stop", Kind::String},
      {"tokens", Kind::IntArray},
      {"text", Kind::String},                     // when the reply is streamed as text
      {"kv_budget_bytes", Kind::NonNegativeInt},  // with --kv-budget-mb
  };
  const std::set<std::string> optional = {"text", "kv_budget_bytes"};
  for (const auto& [key, value] : summary.items()) {
    const auto known = keys.find(key);
    if (known == keys.end()) {
      problem("unknown key '" + key + "' (add it and its check to check_generate_output)");
    } else if (!has_kind(value, known->second)) {
      problem("key '" + key + "' has the wrong type or sign: " + value.dump());
    }
  }
  for (const auto& [key, kind] : keys) {
    if (!summary.contains(key) && optional.count(key) == 0) problem("missing key '" + key + "'");
  }
  if (problems > 0) return 1;

  // ---- the values agree ----
  auto integer = [&](const char* key) { return summary[key].get<int64_t>(); };
  auto number = [&](const char* key) { return summary[key].get<double>(); };
  const auto tokens = summary["tokens"].get<std::vector<int32_t>>();
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  const std::string stop = summary["stop"].get<std::string>();
  if (summary["model"] != model_path) problem("model is " + summary["model"].dump());
  if (summary["format"] != "hf" && summary["format"] != "gguf")
    problem("format is " + summary["format"].dump());
  if (stop != "length" && stop != "eos" && stop != "context_full") problem("stop is " + stop);
  if (argc == 6 && stop != argv[5]) problem("stop is " + stop + ", want " + argv[5]);
  if (prompt_known && integer("prompt_tokens") != static_cast<int64_t>(prompt.size()))
    problem("prompt_tokens " + std::to_string(integer("prompt_tokens")) + " for a prompt of " +
            std::to_string(prompt.size()));
  // Held: every matrix a token reads, and the embedding unless it is the output's own bytes.
  if (integer("weight_bytes") < integer("weight_bytes_per_token") ||
      integer("weight_bytes_per_token") <= 0)
    problem("weight_bytes " + std::to_string(integer("weight_bytes")) + " below the " +
            std::to_string(integer("weight_bytes_per_token")) + " a token reads");
  if (integer("generated_tokens") != n_tokens)
    problem("generated_tokens " + std::to_string(integer("generated_tokens")) + " for " +
            std::to_string(n_tokens) + " tokens");
  // A reply's last token is fed only when something follows it: after a stop id every token was
  // fed; after a stop at the length or a full context, all but the last.
  const int64_t decode_steps = stop == "eos" ? n_tokens : std::max<int64_t>(n_tokens - 1, 0);
  if (integer("next_position") != integer("prompt_tokens") + decode_steps)
    problem("next_position " + std::to_string(integer("next_position")) + ", want prompt " +
            std::to_string(integer("prompt_tokens")) + " + " + std::to_string(decode_steps) +
            " decode steps");
  if (number("prefill_s") > 0 &&
      !near(number("prefill_tok_s"), integer("prompt_tokens") / number("prefill_s"), 1e-6))
    problem("prefill_tok_s is not prompt_tokens / prefill_s");
  if (decode_steps > 0 && number("decode_s") > 0 &&
      !near(number("decode_tok_s"), decode_steps / number("decode_s"), 1e-6))
    problem("decode_tok_s is not the decode steps / decode_s");
  if (integer("kv_slots") > integer("kv_capacity")) problem("kv_slots above kv_capacity");
  if (integer("kv_capacity") > integer("kv_context")) problem("kv_capacity above kv_context");
  if (integer("next_position") > integer("kv_context")) problem("next_position past kv_context");
  if (integer("kv_capacity") > 0 && integer("kv_used_bytes") * integer("kv_capacity") !=
                                        integer("kv_bytes") * integer("kv_slots"))
    problem("kv_used_bytes is not kv_bytes * kv_slots / kv_capacity");
  if (integer("kv_resident_bytes") > integer("kv_bytes")) problem("kv_resident_bytes > kv_bytes");
  if (stop == "context_full" && integer("next_position") != integer("kv_context") &&
      integer("kv_slots") != integer("kv_capacity"))
    problem("stop context_full with room left in the context and the cache");
  const bool evicting = summary["eviction_policy"] != "none";
  if (!evicting) {
    if (integer("kv_slots") != integer("next_position"))
      problem("kv_slots differs from next_position without eviction");
    for (const char* key : {"evictions", "evicted_tokens", "eviction_fallbacks"})
      if (integer(key) != 0) problem(std::string(key) + " is not 0 without eviction");
  } else if (integer("kv_slots") + integer("evicted_tokens") < integer("next_position")) {
    problem("kv_slots + evicted_tokens below next_position");
  }
  int64_t fallback_sum = 0;
  for (const auto& [kind, count] : summary["eviction_fallback_kinds"].items()) {
    if (!count.is_number_integer())
      problem("eviction_fallback_kinds['" + kind + "'] not an int");
    else
      fallback_sum += count.get<int64_t>();
  }
  if (fallback_sum != integer("eviction_fallbacks"))
    problem("eviction_fallback_kinds do not add up to eviction_fallbacks");
  if (integer("rss_bytes") <= 0 || integer("peak_rss_bytes") <= 0) problem("RSS of 0");
  if (integer("weight_bytes_per_token") <= 0) problem("weight_bytes_per_token of 0");
  if (summary["backend"] == "cpu") {
    for (const char* key : {"host_device_copy_bytes", "host_device_copy_bytes_prefill",
                            "host_device_copy_bytes_load"})
      if (integer(key) != 0) problem(std::string(key) + " is not 0 on the CPU");
  }

  // ---- against the model and the tokenizer ----
  edgelm::cpu::CpuBackend backend(edgelm::cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  edgelm::LoadedModel loaded = edgelm::load_llama(model_path, backend);
  if (summary["weight_types"] != loaded.weight_types)
    problem("weight_types " + summary["weight_types"].dump() + ", the model's are " +
            loaded.weight_types);
  const int64_t vocab = loaded.config.vocab_size;
  const std::vector<int32_t> eos_ids = loaded.config.eos_token_ids;
  for (int32_t id : tokens)
    if (id < 0 || id >= vocab) problem("token " + std::to_string(id) + " outside the vocabulary");
  for (int32_t id : eos_ids) {
    if (std::find(tokens.begin(), tokens.end(), id) != tokens.end())
      problem("the reply holds the stop id " + std::to_string(id));
  }
  if (summary.contains("text")) {
    const edgelm::Tokenizer tokenizer = edgelm::Tokenizer::from_model_path(model_path);
    const std::string decoded = tokenizer.decode(tokens, /*skip_special=*/true);
    if (summary["text"] != decoded)
      problem("text " + summary["text"].dump() + " is not the tokens' decoding " +
              json(decoded).dump());
  }
  if (logits_path != "-" && prompt_known) {
    const edgelm::NpyArray dumped = edgelm::read_npy(logits_path);
    // One row after the prompt, then one per decode step; after a stop id the row after the last
    // token fed is the one the stop id was sampled from.
    const int64_t rows = 1 + decode_steps;
    if (dumped.shape != std::vector<int64_t>{rows, vocab}) {
      problem("logits shape [" + std::to_string(dumped.shape.size() > 0 ? dumped.shape[0] : -1) +
              ", " + std::to_string(dumped.shape.size() > 1 ? dumped.shape[1] : -1) + "], want [" +
              std::to_string(rows) + ", " + std::to_string(vocab) + "]");
      return 1;
    }
    edgelm::LlamaModel model(backend, std::move(loaded.config), std::move(loaded.weights), 64);
    edgelm::KvCache cache = model.make_cache(integer("kv_context"), edgelm::DType::F32);
    std::vector<int32_t> feed = prompt;
    double worst = 0.0;
    for (int64_t row = 0; row < rows; ++row) {
      const std::span<const float> logits = model.forward(feed, cache);
      const float* got = dumped.data.data() + row * vocab;
      double scale = 1.0;
      for (int64_t v = 0; v < vocab; ++v) {
        worst = std::max(worst, std::fabs(double{got[v]} - logits[static_cast<size_t>(v)]));
        scale = std::max(scale, std::fabs(double{logits[static_cast<size_t>(v)]}));
      }
      // Greedy runs (the caller passes a stop reason only for those): each token is its row's
      // argmax, and after an eos stop the last row's argmax is an EOS id.
      const auto argmax = static_cast<int32_t>(std::max_element(got, got + vocab) - got);
      if (argc == 6 && row < n_tokens && argmax != tokens[static_cast<size_t>(row)])
        problem("row " + std::to_string(row) + "'s argmax " + std::to_string(argmax) +
                " is not token " + std::to_string(tokens[static_cast<size_t>(row)]));
      if (argc == 6 && row == n_tokens && stop == "eos" &&
          std::find(eos_ids.begin(), eos_ids.end(), argmax) == eos_ids.end())
        problem("the last row's argmax " + std::to_string(argmax) + " is not an EOS id");
      // The caller runs generate with an F32 KV cache on the portable kernels, as here: the same
      // steps in the same order, so the rows agree to float noise (1e-4 of the largest logit),
      // far below what a row of another step differs by.
      if (worst > 1e-4 * scale)
        problem("row " + std::to_string(row) + " differs from the library's logits by " +
                std::to_string(worst));
      if (row < n_tokens) feed = {tokens[static_cast<size_t>(row)]};
    }
    std::printf("logits: %lld rows of %lld, max |generate - library| = %.3g\n",
                static_cast<long long>(rows), static_cast<long long>(vocab), worst);
  }
  std::printf("%zu keys checked, %d problems\n", summary.size(), problems);
  return problems == 0 ? 0 : 1;
}
