// check_bench_json <file> <rows> <repetitions>: checks what `bench -o json` wrote, for
// tests/cli/bench_cli.sh. Every row must carry llama-bench's field names with values consistent
// with its own samples (the mean and standard deviation of samples_ts, samples_ns; tokens/s
// counting prompt and generated tokens, so pp<p>+tg<n> rows count both), and every
// text-generation row the bandwidth fields: one read-bandwidth measurement before each timed run
// and one after the last, each run's fraction equal to its speed over the better of the two
// measurements around it divided into the bytes a token reads, and bw_fraction their mean. Rows
// of a run without the bandwidth probe (bw_probe false) and prompt + generation rows carry no
// limit: their bandwidth fields must be null.
// Prints one line per problem and exits non-zero when there is any.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

int problems = 0;

void problem(size_t row, const std::string& what) {
  std::printf("row %zu: %s\n", row, what.c_str());
  ++problems;
}

bool near(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

std::vector<double> numbers(const nlohmann::json& value) {
  std::vector<double> out;
  if (!value.is_array()) return out;
  for (const auto& v : value) out.push_back(v.is_number() ? v.get<double>() : NAN);
  return out;
}

double mean(const std::vector<double>& v) {
  double sum = 0.0;
  for (double x : v) sum += x;
  return v.empty() ? NAN : sum / static_cast<double>(v.size());
}

double sample_stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double squares = 0.0;
  for (double x : v) squares += (x - m) * (x - m);
  return std::sqrt(squares / static_cast<double>(v.size() - 1));
}

void check_row(size_t i, const nlohmann::json& row, int repetitions) {
  const int problems_before = problems;
  for (const char* key : {"model_filename",
                          "model_type",
                          "model_size",
                          "model_n_params",
                          "backend",
                          "n_threads",
                          "type_k",
                          "type_v",
                          "n_prompt",
                          "n_gen",
                          "n_depth",
                          "n_ubatch",
                          "test",
                          "test_time",
                          "avg_ns",
                          "stddev_ns",
                          "avg_ts",
                          "stddev_ts",
                          "samples_ns",
                          "samples_ts",
                          "load_s",
                          "peak_rss_bytes",
                          "bw_probe",
                          "bw_gbs",
                          "bw_fraction",
                          "bw_limit_ts",
                          "bytes_per_token",
                          "samples_bw_gbs",
                          "samples_bw_fraction"}) {
    if (!row.contains(key)) problem(i, std::string("no field ") + key);
  }
  if (problems > problems_before) return;
  const std::vector<double> ts = numbers(row["samples_ts"]);
  const std::vector<double> ns = numbers(row["samples_ns"]);
  if (ts.size() != static_cast<size_t>(repetitions) || ns.size() != ts.size()) {
    problem(i, "samples_ts/samples_ns do not hold one value per repetition");
    return;
  }
  if (!near(row["avg_ts"].get<double>(), mean(ts)))
    problem(i, "avg_ts is not the mean of samples_ts");
  if (!near(row["stddev_ts"].get<double>(), sample_stddev(ts)))
    problem(i, "stddev_ts is not the sample standard deviation of samples_ts");
  if (!near(row["avg_ns"].get<double>(), mean(ns)))
    problem(i, "avg_ns is not the mean of samples_ns");
  const auto n_prompt = row["n_prompt"].get<int64_t>();
  const auto n_gen = row["n_gen"].get<int64_t>();
  const int64_t tokens = n_prompt + n_gen;
  for (size_t r = 0; r < ts.size(); ++r) {
    if (!(ts[r] > 0.0) || !near(ts[r], static_cast<double>(tokens) * 1e9 / ns[r]))
      problem(i, "samples_ts[" + std::to_string(r) + "] is not tokens / samples_ns");
  }
  const auto n_depth = row["n_depth"].get<int64_t>();
  const std::string pp = "pp" + std::to_string(n_prompt), tg = "tg" + std::to_string(n_gen);
  const std::string expected_test = (n_gen == 0      ? pp
                                     : n_prompt == 0 ? tg
                                                     : pp + "+" + tg) +
                                    (n_depth > 0 ? " @ d" + std::to_string(n_depth) : "");
  if (row["test"].get<std::string>() != expected_test) problem(i, "test is not " + expected_test);
  if (!(row["peak_rss_bytes"].get<double>() > 0.0)) problem(i, "peak_rss_bytes is not positive");
  const bool probed = row["bw_probe"].is_boolean() && row["bw_probe"].get<bool>();
  if (!row["bw_probe"].is_boolean()) problem(i, "bw_probe is not true or false");
  if (probed && !(row["bw_gbs"].is_number() && row["bw_gbs"].get<double>() > 0.0))
    problem(i, "bw_gbs is not positive");

  if (!probed || n_prompt > 0) {
    for (const char* key : {"bw_fraction", "bw_limit_ts", "bytes_per_token", "samples_bw_gbs",
                            "samples_bw_fraction"}) {
      if (!row[key].is_null()) problem(i, std::string(key) + " is set on a row without a limit");
    }
    if (!probed && !row["bw_gbs"].is_null()) problem(i, "bw_gbs is set without the probe");
    return;
  }
  const std::vector<double> bw = numbers(row["samples_bw_gbs"]);
  const std::vector<double> fraction = numbers(row["samples_bw_fraction"]);
  if (bw.size() != ts.size() + 1 || fraction.size() != ts.size()) {
    problem(i,
            "samples_bw_gbs/samples_bw_fraction do not hold repetitions + 1 / repetitions values");
    return;
  }
  const double bytes_per_token = row["bytes_per_token"].get<double>();
  if (!(bytes_per_token > 0.0)) problem(i, "bytes_per_token is not positive");
  std::vector<double> run_bw, run_limit;
  for (size_t r = 0; r < ts.size(); ++r) {
    if (!(bw[r] > 0.0)) problem(i, "samples_bw_gbs holds a value that is not positive");
    const double best = std::max(bw[r], bw[r + 1]);
    run_bw.push_back(best);
    run_limit.push_back(best * 1e9 / bytes_per_token);
    if (!near(fraction[r], ts[r] / run_limit.back()))
      problem(i, "samples_bw_fraction[" + std::to_string(r) + "] is not t/s over its run's limit");
  }
  if (!near(row["bw_fraction"].get<double>(), mean(fraction)))
    problem(i, "bw_fraction is not the mean of samples_bw_fraction");
  if (!near(row["bw_limit_ts"].get<double>(), mean(run_limit)))
    problem(i, "bw_limit_ts is not the mean of the runs' limits");
  if (!near(row["bw_gbs"].get<double>(), mean(run_bw)))
    problem(i, "bw_gbs is not the mean of the runs' bandwidths");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: check_bench_json <file> <rows> <repetitions>\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  nlohmann::json rows;
  try {
    rows = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    std::printf("%s: not JSON: %s\n", argv[1], e.what());
    return 1;
  }
  const auto expected_rows = static_cast<size_t>(std::stoul(argv[2]));
  if (!rows.is_array() || rows.size() != expected_rows) {
    std::printf("%s: want an array of %zu rows, got %s\n", argv[1], expected_rows,
                rows.is_array() ? std::to_string(rows.size()).c_str() : "no array");
    return 1;
  }
  for (size_t i = 0; i < rows.size(); ++i) check_row(i, rows[i], std::stoi(argv[3]));
  return problems == 0 ? 0 : 1;
}
