// tokenize: text to token ids (printed as JSON), ids to text (--decode), and an encode benchmark
// (--bench) over a corpus file.
//
//   tokenize -m DIR_OR_GGUF -p "Hello"                         {"ids":[...],"tokens":[...]}
//   tokenize --tokenizer tokenizer.json -f f.txt --ids-only    [128000,9906]
//   tokenize --tokenizer tokenizer.json --decode 9906,1917
//   tokenize --tokenizer tokenizer.json -f corpus.jsonl --bench
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bin/cli_util.h"
#include "core/error.h"
#include "models/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// The records of a benchmark corpus: one JSON string per line for .jsonl (records may hold
// newlines), otherwise the file's lines.
std::vector<std::string> read_records(const std::string& path) {
  const std::string text = edgelm::cli::read_text_file(path, "-f/--file");
  std::vector<std::string> records;
  std::istringstream in(text);
  const bool jsonl = path.size() >= 6 && path.ends_with(".jsonl");
  size_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!jsonl) {
      records.push_back(line);
      continue;
    }
    try {
      records.push_back(json::parse(line).get<std::string>());
    } catch (const json::exception&) {
      EDGELM_FAIL("-f/--file: ", path, " line ", line_number, " is not a JSON string");
    }
  }
  return records;
}

// Encodes every record, one after the other on one thread, until at least `seconds` have passed
// (and at least three passes); prints MB/s of UTF-8 input.
void bench(const edgelm::Tokenizer& tokenizer, const std::vector<std::string>& records,
           bool add_bos, double seconds) {
  size_t bytes_per_pass = 0;
  for (const std::string& record : records) bytes_per_pass += record.size();
  // One pass first so that the word cache is as warm as the Python side's.
  size_t tokens = 0;
  for (const std::string& record : records) tokens += tokenizer.encode(record, add_bos).size();
  int passes = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (passes < 3 || elapsed < seconds) {
    for (const std::string& record : records) {
      const std::vector<int32_t> ids = tokenizer.encode(record, add_bos);
      if (ids.size() == static_cast<size_t>(-1)) std::puts("");  // keeps the call observable
    }
    ++passes;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  const double mb_per_s = static_cast<double>(bytes_per_pass) * passes / elapsed / 1e6;
  std::printf(
      "edgelm encode: %.2f MB/s (%zu records, %.3f MB, %zu tokens, %d passes, %.2f s, "
      "1 thread)\n",
      mb_per_s, records.size(), static_cast<double>(bytes_per_pass) / 1e6, tokens, passes, elapsed);
  const json summary = {{"library", "edgelm"},       {"mb_per_s", mb_per_s},
                        {"records", records.size()}, {"bytes", bytes_per_pass},
                        {"tokens", tokens},          {"passes", passes},
                        {"seconds", elapsed},        {"threads", 1}};
  std::printf("%s\n", summary.dump().c_str());
}

int run(int argc, char** argv) {
  CLI::App app{"Tokenizes text (prints JSON), decodes ids, or benchmarks encoding."};
  std::string tokenizer_path;
  std::string model_path;
  std::string text;
  std::string file;
  std::string decode_text;
  bool ids_only = false;
  bool no_bos = false;
  bool no_special = false;
  bool skip_special = false;
  bool run_bench = false;
  double bench_seconds = 3.0;
  edgelm::TokenizerOptions tokenizer_options;
  auto* tokenizer_option =
      app.add_option("--tokenizer", tokenizer_path, "tokenizer.json (or a .gguf file)");
  namespace flag = edgelm::cli::flag;
  auto* model_option = edgelm::cli::add_shared(app, flag::kModel, model_path);
  tokenizer_option->excludes(model_option);
  auto* text_option = edgelm::cli::add_shared(app, flag::kPrompt, text);
  auto* file_option = edgelm::cli::add_shared(app, flag::kFile, file);
  auto* decode_option = app.add_option("--decode", decode_text,
                                       "Ids to decode, comma-separated without spaces, e.g. 1,2,3");
  text_option->excludes(file_option)->excludes(decode_option);
  file_option->excludes(decode_option);
  app.add_flag("--ids-only", ids_only, "Print only the JSON array of ids");
  app.add_flag("--no-bos", no_bos, "Do not add BOS (the post-processor's tokens)");
  app.add_flag("--no-special", no_special,
               "Tokenize special tokens written in the text as plain text");
  app.add_flag("--skip-special", skip_special, "--decode: leave special tokens out");
  app.add_flag("--bench", run_bench,
               "Benchmark encoding of -f/--file (.jsonl: one JSON string per record; else lines)");
  app.add_option("--bench-seconds", bench_seconds, "Least time the benchmark runs")
      ->check(CLI::Range(0.0, 3600.0));
  edgelm::cli::add_shared(app, flag::kAllowUnknownPreTokenizer,
                          tokenizer_options.allow_unknown_pre_tokenizer);
  edgelm::cli::add_note(app, "-p is the text to encode, -f a file of it; -m a model folder with "
                             "tokenizer.json, or a .gguf file");
  if (!edgelm::cli::parse_flags(app, argc, argv, edgelm::cli::kTokenizeAliases)) return 0;

  if (tokenizer_path.empty() && model_path.empty()) {
    EDGELM_FAIL("give --tokenizer FILE or -m/--model DIR_OR_GGUF");
  }
  if (run_bench && file.empty()) EDGELM_FAIL("--bench needs -f/--file");
  if (!run_bench && text_option->count() == 0 && file.empty() && decode_text.empty()) {
    EDGELM_FAIL("give -p/--prompt TEXT, -f/--file FILE or --decode IDS");
  }
  const edgelm::Tokenizer tokenizer = edgelm::Tokenizer::from_model_path(
      tokenizer_path.empty() ? model_path : tokenizer_path, tokenizer_options);

  if (run_bench) {
    bench(tokenizer, read_records(file), !no_bos, bench_seconds);
    edgelm::cli::finish_stdout();
    return 0;
  }
  if (!decode_text.empty()) {
    const std::vector<int32_t> ids = edgelm::cli::parse_id_list(decode_text, "--decode");
    std::string decoded = tokenizer.decode(ids, skip_special);
    std::fwrite(decoded.data(), 1, decoded.size(), stdout);
    std::fputc('\n', stdout);
    edgelm::cli::finish_stdout();
    return 0;
  }
  const std::string input = file.empty() ? text : edgelm::cli::read_text_file(file, "-f/--file");
  const std::vector<int32_t> ids = tokenizer.encode(input, !no_bos, !no_special);
  json out;
  if (ids_only) {
    out = ids;
  } else {
    json tokens = json::array();
    for (int32_t id : ids) tokens.push_back(tokenizer.token_text(id));
    out = {{"ids", ids}, {"tokens", tokens}};
  }
  // Stored token texts of a GGUF vocabulary may hold invalid UTF-8; print those bytes as U+FFFD.
  std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  edgelm::cli::finish_stdout();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("tokenize", run, argc, argv);
}
