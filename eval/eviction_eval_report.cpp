#include "eval/eviction_eval_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "core/dtype.h"
#include "core/error.h"

namespace edgelm {
namespace {

using json = nlohmann::ordered_json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// NaN and infinities as null, so every object is valid JSON.
json number(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

json interval_json(const Interval& interval) {
  return {{"mean", number(interval.mean)},
          {"low", number(interval.low)},
          {"high", number(interval.high)}};
}

json paired_json(const PairedSummary& summary) {
  return {{"units", summary.units},
          {"tokens", summary.tokens},
          {"kl", interval_json(summary.kl)},
          {"top1", interval_json(summary.top1)},
          {"delta_nll", interval_json(summary.delta_nll)},
          {"nll_full", number(summary.nll_full)},
          {"nll_policy", number(summary.nll_policy)}};
}

json difference_json(const PairedDifference& difference) {
  return {{"units", difference.units},
          {"kl", interval_json(difference.kl)},
          {"delta_nll", interval_json(difference.delta_nll)}};
}

json totals_json(const EvictionTotals& totals) {
  return {
      {"count", totals.evictions},
      {"evicted_tokens", totals.evicted_tokens},
      {"seconds", totals.seconds},
      {"score_seconds", totals.score_seconds},
      {"select_seconds", totals.select_seconds},
      {"compact_seconds", totals.compact_seconds},
      {"ms_per_eviction",
       number(totals.evictions > 0 ? 1e3 * totals.seconds / static_cast<double>(totals.evictions)
                                   : kNaN)}};
}

double bits_per_byte(const NllStats& nll, int64_t bytes) {
  return bytes > 0 ? nll.sum / std::log(2.0) / static_cast<double>(bytes) : kNaN;
}

// NLL and perplexity of a set of predictions, and bits per byte when their text's bytes are known.
json nll_json(const NllStats& nll, std::optional<int64_t> bytes = std::nullopt) {
  json out = {{"tokens", nll.count},
              {"nll", number(nll.mean())},
              {"nll_stderr", number(nll.mean_stderr())},
              {"ppl", number(nll.perplexity())}};
  if (bytes) {
    out["bytes"] = *bytes;
    out["bits_per_byte"] = number(bits_per_byte(nll, *bytes));
  }
  return out;
}

json cost_json(const CostResult& cost) {
  if (!cost.measured) return nullptr;
  const auto per_second = [](int64_t tokens, double seconds) {
    return number(seconds > 0 ? static_cast<double>(tokens) / seconds : kNaN);
  };
  return {{"logical_length", cost.logical_length},
          {"decode_tokens", cost.decode_tokens},
          {"decode_tok_s", per_second(cost.decode_tokens, cost.decode_seconds)},
          {"decode_tok_s_with_eviction", per_second(cost.decode_tokens, cost.decode_wall_seconds)},
          {"kv_bytes_allocated", cost.kv_bytes_allocated},
          {"kv_bytes_peak", cost.kv_bytes_peak},
          {"max_slots", cost.max_slots},
          {"rss_before_bytes", cost.rss_before_bytes},
          {"peak_rss_bytes", cost.peak_rss_bytes},
          {"peak_rss_reset", cost.peak_rss_reset},
          {"prefill_evictions", totals_json(cost.prefill_evictions)},
          {"decode_evictions", totals_json(cost.decode_evictions)}};
}

// Retrieval of one cell: the trials grouped by (length, depth, placement); a trial counts only
// where the full cache answered right, and a group whose full cache never did is marked.
json retrieval_json(const std::vector<PasskeyCase>& cases, const std::vector<PasskeyTrial>& full,
                    const std::vector<PasskeyTrial>& cell, int64_t max_slots) {
  if (cases.empty()) return nullptr;
  struct Group {
    int64_t trials = 0, full_correct = 0, correct = 0, correct_all = 0;
    std::vector<std::string> answers, full_answers;
  };
  std::map<std::tuple<int64_t, double, std::string>, Group> groups;
  std::vector<std::tuple<int64_t, double, std::string>> order;
  int64_t scored = 0, correct = 0, full_correct = 0, correct_all = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto key = std::make_tuple(cases[i].length, cases[i].depth, cases[i].placement);
    if (!groups.contains(key)) order.push_back(key);
    Group& group = groups[key];
    ++group.trials;
    group.answers.push_back(cell[i].answer);
    group.full_answers.push_back(full[i].answer);
    group.correct_all += cell[i].correct ? 1 : 0;
    correct_all += cell[i].correct ? 1 : 0;
    if (full[i].correct) {
      ++group.full_correct;
      ++full_correct;
      ++scored;
      if (cell[i].correct) {
        ++group.correct;
        ++correct;
      }
    }
  }
  json grid = json::array();
  for (const auto& key : order) {
    const Group& g = groups[key];
    const auto& [length, depth, placement] = key;
    grid.push_back(
        {{"length", length},
         {"depth", depth},
         {"placement", placement},
         {"trials", g.trials},
         {"full_correct", g.full_correct},
         {"full_accuracy", static_cast<double>(g.full_correct) / static_cast<double>(g.trials)},
         {"full_failed", g.full_correct == 0},
         {"scored", g.full_correct},
         {"correct", g.correct},
         {"accuracy", number(g.full_correct > 0 ? static_cast<double>(g.correct) /
                                                      static_cast<double>(g.full_correct)
                                                : kNaN)},
         {"correct_all", g.correct_all},
         {"answers", g.answers},
         {"full_answers", g.full_answers}});
  }
  const auto total = static_cast<double>(cases.size());
  return {{"trials", static_cast<int64_t>(cases.size())},
          {"full_correct", full_correct},
          {"full_accuracy", static_cast<double>(full_correct) / total},
          {"scored", scored},
          {"excluded", static_cast<int64_t>(cases.size()) - scored},
          {"correct", correct},
          {"accuracy",
           number(scored > 0 ? static_cast<double>(correct) / static_cast<double>(scored) : kNaN)},
          {"correct_all", correct_all},
          {"accuracy_all", static_cast<double>(correct_all) / total},
          {"max_slots", max_slots},
          {"grid", grid}};
}

json run_json(const EvictionEval& eval, const EvalRunInfo& info) {
  const EvictionEvalOptions& o = eval.options();
  json texts = json::array();
  for (const EvalRunInfo::Text& t : info.texts) {
    texts.push_back(
        {{"path", t.path}, {"sha256", t.sha256}, {"bytes", t.bytes}, {"tokens", t.tokens}});
  }
  json run = {{"model", info.model_path},
              {"model_sha256", info.model_sha256},
              {"model_bytes", info.model_bytes},
              {"format", info.format},
              {"weight_types", info.weight_types},
              {"kv_type", dtype_name(o.kv_type)},
              {"backend", info.backend},
              {"device", info.device},
              {"threads", info.threads},
              {"texts", texts},
              {"add_bos", info.add_bos},
              {"window_tokens", o.window_tokens},
              {"windows_per_text", o.windows_per_text},
              {"evict_every", o.evict_every},
              {"batch", eval.batch()},
              {"prefix_tokens", o.prefix_tokens},
              {"continue_tokens", o.continue_tokens},
              {"block_tokens", o.block_tokens},
              {"bootstrap_resamples", o.bootstrap.resamples},
              {"seed", o.bootstrap.seed},
              {"interval_level", o.bootstrap.level},
              {"floor_policy", o.floor_policy},
              {"cost_tokens", o.cost_decode_tokens},
              {"kv_bytes_per_slot", kv_bytes_per_slot(eval.config(), o.kv_type)},
              {"budget_bytes_requested", info.budget_bytes ? json(*info.budget_bytes) : json()},
              {"command", info.command},
              {"commit", info.commit},
              {"date", info.date}};
  if (info.passkey) {
    const PasskeyOptions& p = *info.passkey;
    run["passkey"] = {{"lengths", p.lengths},
                      {"depths", p.depths},
                      {"placements", p.placements},
                      {"trials", p.trials},
                      {"digits", p.digits},
                      {"seed", p.seed},
                      {"haystack", p.haystack.empty() ? "built-in" : "file"},
                      {"chat_template", info.chat_template},
                      {"answer_tokens", info.answer_tokens}};
  }
  return run;
}

json settings_json(const EvictionConfig& given, const EvictionConfig& streaming,
                   const BudgetShares& shares) {
  const EvictionConfig c = with_budget_defaults(given);
  return {{"kv_budget", c.kv_budget},
          {"window", *c.window},
          {"protected_prefix", c.protected_prefix},
          {"sink_tokens", *c.sink_tokens},
          {"recent_share", shares.recent_share},
          {"snapkv_window", c.snapkv_window},
          {"snapkv_kernel", c.snapkv_kernel},
          {"snapkv_pool", c.snapkv_pool},
          {"seed", c.seed},
          {"protect", c.protect},
          {"layer_budget", c.layer_budget},
          {"pyramid_beta", c.pyramid_beta},
          {"ea_future_positions", c.ea_future_positions},
          {"ea_covariance", c.ea_covariance},
          {"streaming_kv_budget", streaming.kv_budget}};
}

const CellResult* floor_cell(const EvictionEval& eval, const CellResult& cell) {
  if (cell.policy == eval.options().floor_policy) return nullptr;
  for (const CellResult& other : eval.cells()) {
    if (other.policy == eval.options().floor_policy && other.budget == cell.budget) return &other;
  }
  return nullptr;
}

std::string fixed(double value, int digits) {
  if (!std::isfinite(value)) return "–";
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

// "0.123 [0.101, 0.150]"
std::string with_interval(const json& interval, int digits) {
  const auto get = [](const json& v) { return v.is_number() ? v.get<double>() : kNaN; };
  std::string text = fixed(get(interval["mean"]), digits);
  if (interval["low"].is_number()) {
    text += " [" + fixed(get(interval["low"]), digits) + ", " +
            fixed(get(interval["high"]), digits) + "]";
  }
  return text;
}

double value_or_nan(const json& object, const std::string& key) {
  return object.is_object() && object.contains(key) && object[key].is_number()
             ? object[key].get<double>()
             : kNaN;
}

void flatten(const json& value, const std::string& prefix, std::vector<std::string>& names,
             std::map<std::string, std::string>& row) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items())
      flatten(item, prefix.empty() ? key : prefix + "." + key, names, row);
    return;
  }
  if (value.is_array()) return;
  if (std::find(names.begin(), names.end(), prefix) == names.end()) names.push_back(prefix);
  std::string text;
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    const bool quote = s.find_first_of(",\"\n\r") != std::string::npos;
    if (quote) {
      text = "\"";
      for (const char c : s) text += c == '"' ? std::string("\"\"") : std::string(1, c);
      text += "\"";
    } else {
      text = s;
    }
  } else if (!value.is_null()) {
    text = value.dump();
  }
  row[prefix] = text;
}

}  // namespace

std::vector<json> eviction_eval_json(const EvictionEval& eval, const EvalRunInfo& info) {
  const EvictionEvalOptions& o = eval.options();
  const FullCacheResult& full = eval.full();
  const int64_t slot_bytes = kv_bytes_per_slot(eval.config(), o.kv_type);
  const json run = run_json(eval, info);
  std::vector<json> lines;
  for (const CellResult& cell : eval.cells()) {
    json line = {
        {"schema", kEvictionEvalSchema},
        {"policy", cell.policy},
        {"budget_slots", cell.budget},
        {"budget_bytes", cell.budget * slot_bytes},
        {"budget_share", static_cast<double>(cell.budget) / static_cast<double>(o.window_tokens)},
        {"compresses_prompt", cell.compresses_prompt},
        {"settings", settings_json(cell.config, cell.streaming_config, o.shares)}};
    const CellResult* floor = floor_cell(eval, cell);
    const StreamingCell& s = cell.streaming;
    if (!s.units_all.empty()) {
      line["streaming"] = {
          {"all", nll_json(s.policy_all, s.bytes_all)},
          {"filled", nll_json(s.policy_filled, s.bytes_filled)},
          {"full_all", nll_json(full.streaming, full.streaming_bytes)},
          {"full_filled", nll_json(s.full_filled, s.bytes_filled)},
          {"first_filled", s.first_filled},
          {"max_slots", s.max_slots},
          {"paired", paired_json(summarize_paired(s.units_all, o.bootstrap))},
          {"paired_filled", paired_json(summarize_paired(s.units_filled, o.bootstrap))},
          {"evictions", totals_json(s.evictions)},
          {"vs_floor", floor != nullptr ? difference_json(difference_paired(
                                              s.units_all, floor->streaming.units_all, o.bootstrap))
                                        : json()}};
    }
    const ContinuationCell& c = cell.continuation;
    if (!c.units.empty()) {
      line["continuation"] = {
          {"windows", static_cast<int64_t>(c.units.size())},
          {"policy", nll_json(c.policy)},
          {"full", nll_json(c.full)},
          {"paired", paired_json(summarize_paired(c.units, o.bootstrap))},
          {"max_slots", c.max_slots},
          {"evictions", totals_json(c.evictions)},
          {"vs_floor", floor != nullptr ? difference_json(difference_paired(
                                              c.units, floor->continuation.units, o.bootstrap))
                                        : json()}};
    }
    line["retrieval"] = retrieval_json(eval.retrieval_cases(), full.retrieval, cell.retrieval,
                                       cell.retrieval_max_slots);
    line["cost"] = cost_json(cell.cost);
    line["full_cost"] = cost_json(full.cost);
    line["run"] = run;
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string eviction_eval_markdown(const EvictionEval& eval, const EvalRunInfo& info) {
  const std::vector<json> lines = eviction_eval_json(eval, info);
  const EvictionEvalOptions& o = eval.options();
  std::ostringstream out;
  out << "model: " << info.model_path << " (" << info.weight_types << "), " << dtype_name(o.kv_type)
      << " KV cache, " << info.device << "\n";
  out << "streaming: " << info.texts.size() << " text(s), windows of " << o.window_tokens
      << " tokens, eviction every " << o.evict_every
      << " token(s); intervals: " << o.bootstrap.resamples
      << " paired bootstrap resamples over blocks of " << o.block_tokens
      << " predictions (continuation: over windows), seed " << o.bootstrap.seed << "\n\n";
  const FullCacheResult& full = eval.full();
  out << "| policy | budget | KV MiB | ppl | ppl after fill | ΔNLL after fill | KL after fill | "
         "top-1 after fill | cont. ΔNLL | cont. KL |\n";
  out << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  if (full.streaming.count > 0 || full.continuation.count > 0) {
    out << "| full cache | " << o.window_tokens << " | "
        << fixed(
               static_cast<double>(o.window_tokens * kv_bytes_per_slot(eval.config(), o.kv_type)) /
                   (1024.0 * 1024.0),
               2)
        << " | " << fixed(full.streaming.perplexity(), 3) << " | | | | | | |\n";
  }
  for (const json& line : lines) {
    std::string row = "| " + line["policy"].get<std::string>() + " | " +
                      std::to_string(line["budget_slots"].get<int64_t>()) + " | " +
                      fixed(line["budget_bytes"].get<double>() / (1024.0 * 1024.0), 2) + " | ";
    if (line.contains("streaming")) {
      const json& s = line["streaming"];
      row += fixed(value_or_nan(s["all"], "ppl"), 3) + " | " +
             fixed(value_or_nan(s["filled"], "ppl"), 3) + " (" +
             fixed(value_or_nan(s["full_filled"], "ppl"), 3) + ") | " +
             with_interval(s["paired_filled"]["delta_nll"], 4) + " | " +
             with_interval(s["paired_filled"]["kl"], 4) + " | " +
             with_interval(s["paired_filled"]["top1"], 3) + " | ";
    } else {
      row += "| | | | | ";
    }
    if (line.contains("continuation")) {
      const json& c = line["continuation"];
      row += with_interval(c["paired"]["delta_nll"], 4) + " | " +
             with_interval(c["paired"]["kl"], 4) + " |";
    } else {
      row += "| |";
    }
    out << row << "\n";
  }
  const bool retrieval = !eval.retrieval_cases().empty();
  const bool cost = full.cost.measured;
  if (retrieval || cost) {
    out << "\n| policy | budget | passkey accuracy (full) | excluded | KV bytes peak | peak RSS "
           "MiB "
           "| ms/eviction (score/select/compact) | decode tok/s (full) |\n";
    out << "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (const json& line : lines) {
      std::string row = "| " + line["policy"].get<std::string>() + " | " +
                        std::to_string(line["budget_slots"].get<int64_t>()) + " | ";
      if (line["retrieval"].is_object()) {
        const json& r = line["retrieval"];
        row += fixed(value_or_nan(r, "accuracy"), 2) + " (" +
               fixed(value_or_nan(r, "full_accuracy"), 2) + ") | " +
               std::to_string(r["excluded"].get<int64_t>()) + " | ";
      } else {
        row += "| | ";
      }
      if (line["cost"].is_object()) {
        const json& k = line["cost"];
        const json& e = k["decode_evictions"];
        const double count = value_or_nan(e, "count");
        const auto ms = [&](const char* key) {
          return fixed(count > 0 ? 1e3 * value_or_nan(e, key) / count : kNaN, 3);
        };
        row += std::to_string(k["kv_bytes_peak"].get<int64_t>()) + " | " +
               fixed(value_or_nan(k, "peak_rss_bytes") / (1024.0 * 1024.0), 1) + " | " +
               ms("seconds") + " (" + ms("score_seconds") + "/" + ms("select_seconds") + "/" +
               ms("compact_seconds") + ") | " + fixed(value_or_nan(k, "decode_tok_s"), 1) + " (" +
               fixed(value_or_nan(line["full_cost"], "decode_tok_s"), 1) + ") |";
      } else {
        row += "| | | |";
      }
      out << row << "\n";
    }
  }
  return out.str();
}

std::string eviction_eval_csv(const std::vector<json>& cells) {
  std::vector<std::string> names;
  std::vector<std::map<std::string, std::string>> rows;
  for (const json& cell : cells) {
    rows.emplace_back();
    flatten(cell, "", names, rows.back());
  }
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i > 0 ? "," : "") + names[i];
  out += "\n";
  for (const auto& row : rows) {
    for (size_t i = 0; i < names.size(); ++i) {
      const auto it = row.find(names[i]);
      out += (i > 0 ? "," : "") + (it != row.end() ? it->second : std::string());
    }
    out += "\n";
  }
  return out;
}

}  // namespace edgelm
