// check_eviction_eval_json <jsonl> <csv> <cells> <window tokens> <windows>: checks what
// `eviction_eval --json --csv` wrote, for tests/cli/eviction_eval_cli.sh. Every line must be one
// cell with the fields docs/kv_cache.md lists and values consistent with each other and with the
// settings it records: the budget in bytes is the slots times the bytes of a slot; perplexity is
// exp(mean NLL); intervals hold their mean; the tokens counted are those the windows predict; no
// query attended more than the budget; retrieval counts add up, with accuracy null exactly where
// the full cache got nothing right; the cost run ends at the window plus its decoded tokens; the
// CSV has a row per line and a field per header name. The runs a line lacks are skipped.
// Prints one line per problem and exits non-zero when there is any.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

using json = nlohmann::json;

int problems = 0;

void problem(size_t line, const std::string& what) {
  std::printf("line %zu: %s\n", line, what.c_str());
  ++problems;
}

bool near(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

double num(const json& value) {
  return value.is_number() ? value.get<double>() : NAN;
}

bool is_hex_digest(const json& value) {
  if (!value.is_string() || value.get<std::string>().size() != 64) return false;
  return value.get<std::string>().find_first_not_of("0123456789abcdef") == std::string::npos;
}

void check_interval(size_t i, const json& interval, const std::string& name, double lo, double hi) {
  const double mean = num(interval["mean"]), low = num(interval["low"]),
               high = num(interval["high"]);
  if (!(mean >= lo && mean <= hi)) problem(i, name + ".mean " + interval.dump() + " out of range");
  if (!(low <= mean + 1e-12 && mean <= high + 1e-12))
    problem(i, name + ": the interval " + interval.dump() + " does not hold its mean");
}

void check_nll(size_t i, const json& nll, const std::string& name) {
  if (!near(num(nll["ppl"]), std::exp(num(nll["nll"]))))
    problem(i, name + ": ppl is not exp(nll): " + nll.dump());
  if (nll.contains("bits_per_byte") && !(num(nll["bits_per_byte"]) > 0))
    problem(i, name + ": bits_per_byte is not positive: " + nll.dump());
}

void check_line(size_t i, const json& line, int64_t window, int64_t windows) {
  for (const char* key : {"schema", "policy", "budget_slots", "budget_bytes", "budget_share",
                          "compresses_prompt", "settings", "run"}) {
    if (!line.contains(key)) problem(i, std::string("no field ") + key);
  }
  if (line["schema"] != "edgelm.eviction_eval/1") problem(i, "schema " + line["schema"].dump());
  const json& run = line["run"];
  const int64_t budget = line["budget_slots"].get<int64_t>();
  if (line["budget_bytes"].get<int64_t>() != budget * run["kv_bytes_per_slot"].get<int64_t>())
    problem(i, "budget_bytes is not budget_slots x run.kv_bytes_per_slot");
  if (line["settings"]["kv_budget"].get<int64_t>() != budget)
    problem(i, "settings.kv_budget is not the budget");
  for (const char* key : {"model", "model_sha256", "kv_type", "backend", "device", "texts",
                          "window_tokens", "windows_per_text", "evict_every", "batch",
                          "prefix_tokens", "continue_tokens", "block_tokens", "bootstrap_resamples",
                          "seed", "interval_level", "command", "commit", "date"}) {
    if (!run.contains(key)) problem(i, std::string("no field run.") + key);
  }
  if (!is_hex_digest(run["model_sha256"])) problem(i, "run.model_sha256 is not a digest");
  if (run["texts"].empty() || !is_hex_digest(run["texts"][0]["sha256"]))
    problem(i, "run.texts[0].sha256 is not a digest");
  if (run["command"].get<std::string>().find("eviction_eval") == std::string::npos)
    problem(i, "run.command does not name the tool");
  if (run["window_tokens"].get<int64_t>() != window) problem(i, "run.window_tokens");

  if (line.contains("streaming")) {
    const json& s = line["streaming"];
    const int64_t predicted = (window - 1) * windows * static_cast<int64_t>(run["texts"].size());
    if (s["all"]["tokens"].get<int64_t>() != predicted)
      problem(i, "streaming.all.tokens " + s["all"]["tokens"].dump() + ", not " +
                     std::to_string(predicted));
    if (s["paired"]["tokens"] != s["all"]["tokens"] ||
        s["paired_filled"]["tokens"] != s["filled"]["tokens"])
      problem(i, "the paired token counts are not the streamed ones");
    if (s["filled"]["tokens"].get<int64_t>() >= predicted ||
        s["filled"]["tokens"].get<int64_t>() <= 0)
      problem(i, "streaming.filled.tokens is not a part of all");
    for (const char* part : {"all", "filled", "full_all", "full_filled"})
      check_nll(i, s[part], std::string("streaming.") + part);
    if (s["max_slots"].get<int64_t>() > budget) problem(i, "streaming.max_slots above the budget");
    if (s["first_filled"].size() != static_cast<size_t>(windows) * run["texts"].size())
      problem(i, "streaming.first_filled: not one per window");
    for (const char* paired : {"paired", "paired_filled"}) {
      check_interval(i, s[paired]["kl"], std::string(paired) + ".kl", 0.0, 1e9);
      check_interval(i, s[paired]["top1"], std::string(paired) + ".top1", 0.0, 1.0);
      check_interval(i, s[paired]["delta_nll"], std::string(paired) + ".delta_nll", -1e9, 1e9);
    }
    if (!(std::fabs(num(s["paired"]["delta_nll"]["mean"]) -
                    (num(s["all"]["nll"]) - num(s["full_all"]["nll"]))) < 1e-9))
      problem(i, "streaming.paired.delta_nll is not the NLL difference");
    if (!(s["evictions"]["count"].get<int64_t>() > 0)) problem(i, "streaming: no eviction");
  }
  if (line.contains("continuation")) {
    const json& c = line["continuation"];
    const int64_t tokens = c["windows"].get<int64_t>() * run["continue_tokens"].get<int64_t>();
    if (c["paired"]["tokens"].get<int64_t>() != tokens || c["policy"]["tokens"] != tokens)
      problem(i, "continuation: tokens are not windows x continue_tokens");
    check_nll(i, c["policy"], "continuation.policy");
    check_interval(i, c["paired"]["kl"], "continuation.kl", 0.0, 1e9);
    if (!line["compresses_prompt"].get<bool>() && c["max_slots"].get<int64_t>() > budget)
      problem(i, "continuation.max_slots above the budget");
  }
  if (line.contains("retrieval") && !line["retrieval"].is_null()) {
    const json& r = line["retrieval"];
    int64_t trials = 0, scored = 0, correct = 0;
    for (const json& g : r["grid"]) {
      trials += g["trials"].get<int64_t>();
      scored += g["scored"].get<int64_t>();
      correct += g["correct"].get<int64_t>();
      if (g["full_failed"].get<bool>() != (g["full_correct"].get<int64_t>() == 0))
        problem(i, "retrieval: full_failed does not follow full_correct");
      if (g["accuracy"].is_null() != (g["scored"].get<int64_t>() == 0))
        problem(i,
                "retrieval: a grid accuracy is null where trials were scored, or not null "
                "where none were");
      if (g["answers"].size() != g["trials"].get<size_t>())
        problem(i, "retrieval: not one answer per trial");
    }
    if (trials != r["trials"] || scored != r["scored"] || correct != r["correct"] ||
        r["excluded"].get<int64_t>() != trials - scored || r["full_correct"] != scored)
      problem(i, "retrieval: the totals are not the grid's");
    if (r["accuracy"].is_null() != (scored == 0)) problem(i, "retrieval: accuracy null or not");
  }
  for (const char* part : {"cost", "full_cost"}) {
    if (!line.contains(part) || line[part].is_null()) continue;
    const json& k = line[part];
    if (k["logical_length"].get<int64_t>() != window + run["cost_tokens"].get<int64_t>())
      problem(i, std::string(part) + ".logical_length is not the window + cost_tokens");
    if (k["kv_bytes_peak"].get<int64_t>() > k["kv_bytes_allocated"].get<int64_t>())
      problem(i, std::string(part) + ": more KV bytes filled than allocated");
    if (!(num(k["decode_tok_s"]) > 0) || !(num(k["peak_rss_bytes"]) > 0))
      problem(i, std::string(part) + ": no decode speed or peak RSS");
    const json& e = k["decode_evictions"];
    if (num(e["score_seconds"]) + num(e["select_seconds"]) + num(e["compact_seconds"]) >
        num(e["seconds"]) * (1 + 1e-9) + 1e-12)
      problem(i, std::string(part) + ": the eviction time's parts exceed it");
  }
  if (line.contains("cost") && !line["cost"].is_null() &&
      line["cost"]["max_slots"].get<int64_t>() > budget && !line["compresses_prompt"].get<bool>())
    problem(i, "cost.max_slots above the budget");
}

// Fields of one CSV line, quotes honoured.
size_t csv_fields(const std::string& row) {
  size_t fields = 1;
  bool quoted = false;
  for (const char c : row) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) ++fields;
  }
  return fields;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr,
                 "usage: check_eviction_eval_json <jsonl> <csv> <cells> <window> <windows>\n");
    return 2;
  }
  const size_t cells = std::stoul(argv[3]);
  const int64_t window = std::stoll(argv[4]), windows = std::stoll(argv[5]);
  std::ifstream in(argv[1]);
  std::vector<json> lines;
  for (std::string text; std::getline(in, text);) {
    try {
      lines.push_back(json::parse(text));
    } catch (const std::exception& e) {
      problem(lines.size(), std::string("not JSON: ") + e.what());
    }
  }
  if (lines.size() != cells) problem(0, std::to_string(lines.size()) + " lines, not " + argv[3]);
  for (size_t i = 0; i < lines.size(); ++i) check_line(i, lines[i], window, windows);

  std::ifstream csv(argv[2]);
  std::vector<std::string> rows;
  for (std::string row; std::getline(csv, row);) rows.push_back(row);
  if (rows.size() != cells + 1) problem(0, "the CSV has " + std::to_string(rows.size()) + " rows");
  if (!rows.empty()) {
    const std::string& header = rows[0];
    const bool cost = !lines.empty() && lines[0].contains("cost") && !lines[0]["cost"].is_null();
    for (const char* name : {"policy", "budget_slots", "budget_bytes", "streaming.paired.kl.mean",
                             "cost.decode_tok_s", "run.model_sha256"}) {
      if (std::string(name).starts_with("cost.") && !cost) continue;
      if (("," + header + ",").find("," + std::string(name) + ",") == std::string::npos)
        problem(0, std::string("the CSV header lacks ") + name);
    }
    for (size_t r = 1; r < rows.size(); ++r) {
      if (csv_fields(rows[r]) != csv_fields(header))
        problem(r, "the CSV row's fields are not the header's");
    }
  }
  if (problems == 0) std::printf("%zu lines checked\n", lines.size());
  return problems == 0 ? 0 : 1;
}
