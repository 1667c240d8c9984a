// test_backend: runs the op parity matrix on one or more backends and prints, per op × dtype ×
// shape, the normalised squared error against the oracle (double-precision reference math, or
// another backend) and pass/fail. Exits non-zero when any case fails. --list-skips and
// --update-skips print or rewrite the expected skips (tests/parity/skips.h) instead.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "backends/registry.h"
#include "bin/cli_util.h"
#include "core/error.h"
#include "tests/parity/parity.h"
#include "tests/parity/skips.h"

namespace {

using edgelm::parity::CaseResult;

int run(int argc, char** argv) {
  CLI::App app{"Runs the op parity matrix (ops x dtypes x shapes) on edgelm backends."};
  std::vector<std::string> backends;
  std::string oracle_name = "reference";
  std::string filter;
  int threads = 0;
  bool json = false;
  bool list = false;
  bool show_skipped = false;
  bool list_skips = false;
  std::string update_skips;
  uint64_t seed = 1234;
  // Long names only: in edgelm's tools -b is the batch size and -f a text file.
  namespace flag = edgelm::cli::flag;
  edgelm::cli::add_shared(app, flag::kBackend, backends);
  app.add_option("--oracle", oracle_name,
                 "What to compare with: 'reference' (double-precision math) or a backend name");
  app.add_option("--filter", filter, "Only cases whose name contains this, e.g. matmul/q4_0");
  edgelm::cli::add_shared(app, flag::kThreads, threads)->check(CLI::Range(0, 1024));
  edgelm::cli::add_shared(app, flag::kSeed, seed)
      ->capture_default_str()
      ->check(edgelm::cli::kUint64);
  edgelm::cli::add_shared(app, flag::kJson, json);
  app.add_flag("--show-skipped", show_skipped, "Also list skipped combinations in the table");
  edgelm::cli::add_shared(app, flag::kList, list);
  app.add_flag("--list-skips", list_skips,
               "Print the op/dtypes combinations each backend skips, in the format of "
               "tests/parity/expected_skips.txt; run nothing");
  app.add_option("--update-skips", update_skips,
                 "Rewrite this expected-skips file with the sections of the backends run here, "
                 "keeping the others; run nothing")
      ->excludes("--list-skips");
  edgelm::cli::add_note(app,
                        "--backend repeats, a backend to test each (default: every backend on this "
                        "machine); --json prints one object with every result instead of the table");
  if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;

  if (list) {
    std::cout << "backends:";
    for (const std::string& name : edgelm::backend_names()) std::cout << " " << name;
    std::cout << "\ncases:\n";
    for (const auto& op_case : edgelm::parity::all_cases())
      std::cout << "  " << op_case.name() << "\n";
    return 0;
  }
  if (backends.empty()) {
    for (const std::string& name : edgelm::backend_names()) {
      if (name != "cpu" && name != oracle_name) backends.push_back(name);
    }
  }

  const edgelm::BackendOptions options{.n_threads = threads};
  if (list_skips || !update_skips.empty()) {
    edgelm::parity::SkipTable table;
    if (!update_skips.empty() && std::filesystem::exists(update_skips))
      table = edgelm::parity::read_skip_table(update_skips);
    for (const std::string& name : backends) {
      table[name] = edgelm::parity::skipped_combinations(*edgelm::create_backend(name, options));
    }
    const std::string text = edgelm::parity::format_skip_table(table);
    if (list_skips) {
      std::cout << text;
      edgelm::cli::finish_stdout();
    } else {
      std::ofstream out(update_skips, std::ios::binary | std::ios::trunc);
      out << text;
      edgelm::cli::close_written_file(out, update_skips, "--update-skips");
      std::printf("%s: sections", update_skips.c_str());
      for (const std::string& name : backends) std::printf(" [%s]", name.c_str());
      std::printf(" rewritten\n");
    }
    return 0;
  }
  std::unique_ptr<edgelm::Backend> oracle;
  if (oracle_name != "reference") oracle = edgelm::create_backend(oracle_name, options);

  nlohmann::json rows = nlohmann::json::array();
  int passed = 0, failed = 0, skipped = 0;
  const auto start = std::chrono::steady_clock::now();
  if (!json) {
    std::printf("oracle: %s\n", oracle ? oracle->device().c_str() : "double-precision reference");
    std::printf("%-58s %-14s %12s %10s  %s\n", "case", "backend", "nmse", "tolerance", "result");
  }
  for (const std::string& name : backends) {
    const std::unique_ptr<edgelm::Backend> backend = edgelm::create_backend(name, options);
    if (!json) std::printf("# %s: %s\n", name.c_str(), backend->device().c_str());
    for (const auto& op_case : edgelm::parity::all_cases()) {
      if (!filter.empty() && op_case.name().find(filter) == std::string::npos) continue;
      const CaseResult result = edgelm::parity::run_case(op_case, *backend, oracle.get(), seed);
      switch (result.status) {
        case CaseResult::Status::Passed:
          ++passed;
          break;
        case CaseResult::Status::Failed:
          ++failed;
          break;
        case CaseResult::Status::Skipped:
          ++skipped;
          break;
      }
      const char* status = edgelm::parity::status_name(result.status);
      rows.push_back({{"case", op_case.name()},
                      {"op", edgelm::op_name(op_case.op)},
                      {"backend", name},
                      {"oracle", oracle_name},
                      {"nmse", result.nmse},
                      {"tolerance", op_case.tolerance},
                      {"result", status},
                      {"detail", result.detail}});
      if (json || (result.status == CaseResult::Status::Skipped && !show_skipped)) continue;
      std::printf("%-58s %-14s %12.3e %10.1e  %s%s%s\n", op_case.name().c_str(), name.c_str(),
                  result.nmse, op_case.tolerance, status, result.detail.empty() ? "" : "  ",
                  result.detail.c_str());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (json) {
    std::cout << nlohmann::json{{"results", rows},
                                {"passed", passed},
                                {"failed", failed},
                                {"skipped", skipped},
                                {"seconds", seconds}}
                     .dump()
              << "\n";
  } else {
    std::printf("parity: %d passed, %d failed, %d skipped (unsupported) in %.2f s\n", passed,
                failed, skipped, seconds);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("test_backend", run, argc, argv);
}
