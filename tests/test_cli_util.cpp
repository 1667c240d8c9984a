// bin/cli_util.h, the parse every tool runs: the flag table's check, the pre-parse (unknown flags
// with their hints, values that look like flags, multi-letter aliases), and read_text_file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bin/cli_util.h"

namespace {

namespace flag = edgelm::cli::flag;

// parse_flags over `args` (the program name is added): "" when they parse, else the error.
std::string parse_error(CLI::App& app, std::vector<std::string> args) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  try {
    edgelm::cli::parse_flags(app, static_cast<int>(argv.size()), argv.data());
    return "";
  } catch (const edgelm::Error& e) {
    return e.what();
  }
}

// A tool with a few of the table's flags and some of its own.
struct Tool {
  CLI::App app{"tool"};
  std::string model, prompt, backend;
  int n_predict = 0;
  int platform = 0;
  float temperature = 1.0f;
  bool json = false;

  Tool() {
    edgelm::cli::add_shared(app, flag::kModel, model);
    edgelm::cli::add_shared(app, flag::kPrompt, prompt);
    edgelm::cli::add_shared(app, flag::kPredict, n_predict);
    edgelm::cli::add_shared(app, flag::kTemp, temperature);
    edgelm::cli::add_shared(app, flag::kBackend, backend);
    edgelm::cli::add_shared(app, flag::kClPlatform, platform);
    edgelm::cli::add_shared(app, flag::kJson, json);
  }
};

TEST(CliUtil, MultiLetterShortFlagIsUnknownNotAFlagAndAValue) {
  // CLI11 alone reads "-ngl 99" as "-n gl" and fails on the value "gl".
  Tool tool;
  const std::string error = parse_error(tool.app, {"-ngl", "99"});
  EXPECT_NE(error.find("unknown flag '-ngl'"), std::string::npos) << error;
  EXPECT_NE(error.find("--backend opencl"), std::string::npos) << error;  // the hint
  EXPECT_EQ(error.find("gl not"), std::string::npos) << error;
  Tool other;
  EXPECT_EQ(parse_error(other.app, {"-m", "x", "-xyz"}),
            "unknown flag '-xyz' (--help lists the flags)");
}

TEST(CliUtil, HintOnlyWhereTheToolHasTheEquivalent) {
  CLI::App app{"tokenizer-like tool"};
  std::string model;
  edgelm::cli::add_shared(app, flag::kModel, model);
  EXPECT_EQ(parse_error(app, {"-ngl", "1"}), "unknown flag '-ngl' (--help lists the flags)");
  EXPECT_EQ(parse_error(app, {"-q"}), "unknown flag '-q' (--help lists the flags)");
  EXPECT_EQ(parse_error(app, {"--no-such-flag"}),
            "unknown flag '--no-such-flag' (--help lists the flags)");
}

TEST(CliUtil, ValuesThatLookLikeFlagsStayValues) {
  Tool tool;
  EXPECT_EQ(parse_error(tool.app, {"-p", "-xyz", "--cl-platform", "-1", "--temp", "-0.5", "-n7"}),
            "");
  EXPECT_EQ(tool.prompt, "-xyz");
  EXPECT_EQ(tool.platform, -1);
  EXPECT_EQ(tool.temperature, -0.5f);
  EXPECT_EQ(tool.n_predict, 7);
  Tool attached;
  EXPECT_EQ(parse_error(attached.app, {"--n-predict=9", "--prompt=-ngl", "--json"}), "");
  EXPECT_EQ(attached.n_predict, 9);
  EXPECT_EQ(attached.prompt, "-ngl");
}

TEST(CliUtil, AliasesReachTheSameFlag) {
  Tool tool;
  EXPECT_EQ(parse_error(tool.app, {"--model-path", "a", "--temperature", "0.25"}), "");
  EXPECT_EQ(tool.model, "a");
  EXPECT_EQ(tool.temperature, 0.25f);
  Tool other;
  EXPECT_EQ(parse_error(other.app, {"--model", "b", "--temp", "0.5"}), "");
  EXPECT_EQ(other.model, "b");
  EXPECT_EQ(other.temperature, 0.5f);
}

TEST(CliUtil, MultiLetterAliasInAToolWithItsLongFlag) {
  CLI::App app{"bench-like tool"};
  std::vector<std::string> pg;
  bool no_repack = false;
  app.add_option("--pg", pg);
  edgelm::cli::add_shared(app, flag::kNoRepack, no_repack);
  EXPECT_EQ(parse_error(app, {"-pg", "8,4", "-nr", "-pg", "5,3"}), "");
  EXPECT_EQ(pg, (std::vector<std::string>{"8,4", "5,3"}));
  EXPECT_TRUE(no_repack);
  Tool tool;  // no --pg
  EXPECT_EQ(parse_error(tool.app, {"-pg", "8,4"}), "unknown flag '-pg' (--help lists the flags)");
}

// A bench-like tool that passes llama-bench's spellings: -p is its prompt lengths, beside the
// multi-letter -pg; --help names both.
TEST(CliUtil, ToolAliasesAreRewrittenForThatToolAlone) {
  CLI::App app{"bench-like tool"};
  std::vector<int64_t> n_prompt, n_gen;
  std::vector<std::string> pg;
  edgelm::cli::add_shared(app, flag::kNPrompt, n_prompt)->delimiter(',');
  edgelm::cli::add_shared(app, flag::kPredict, n_gen)->delimiter(',');
  app.add_option("--pg", pg);
  auto parse = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "tool");
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    try {
      edgelm::cli::parse_flags(app, static_cast<int>(argv.size()), argv.data(),
                               edgelm::cli::kLlamaBenchAliases);
      return std::string();
    } catch (const edgelm::Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(parse({"-p", "128,512", "-n", "32", "-pg", "8,4"}), "");
  EXPECT_EQ(n_prompt, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(n_gen, std::vector<int64_t>{32});
  EXPECT_EQ(pg, std::vector<std::string>{"8,4"});
  EXPECT_EQ(parse({"-p64"}), "");  // a value attached, as CLI11 takes -n7
  EXPECT_EQ(n_prompt, std::vector<int64_t>{64});
  EXPECT_NE(app.get_footer().find("-p = --n-prompt"), std::string::npos) << app.get_footer();
  EXPECT_NE(app.get_footer().find("-pg = --pg"), std::string::npos) << app.get_footer();
  // A value that spells the alias stays a value: -pg's pair is not rewritten.
  EXPECT_EQ(parse({"--pg", "-p"}), "");
  EXPECT_EQ(pg, std::vector<std::string>{"-p"});
  // Bad values name the long flag, which --help lists -p beside.
  EXPECT_NE(parse({"-p", "x"}).find("--n-prompt"), std::string::npos);
  // Without the tool's aliases, -p is the prompt text's name and refused with the hint.
  CLI::App plain{"eviction_bench-like tool"};
  std::vector<int64_t> lengths;
  edgelm::cli::add_shared(plain, flag::kNPrompt, lengths);
  EXPECT_EQ(parse_error(plain, {"-p", "8"}),
            "unknown flag '-p': -p/--prompt is the prompt text in edgelm's tools; use "
            "--n-prompt 8 for the prompt length");
}

TEST(CliUtil, PromptLengthHintNamesTheValue) {
  CLI::App app{"bench-like tool"};
  std::vector<int64_t> n_prompt;
  edgelm::cli::add_shared(app, flag::kNPrompt, n_prompt);
  EXPECT_EQ(parse_error(app, {"-p", "512"}),
            "unknown flag '-p': -p/--prompt is the prompt text in edgelm's tools; use "
            "--n-prompt 512 for the prompt length");
  EXPECT_NE(parse_error(app, {"--prompt", "x"}).find("use --n-prompt N for"), std::string::npos);
}

TEST(CliUtil, SharedFlagsHaveOneSpellingAndHelp) {
  // Registered from the table: accepted, a list of values included (bench's backends).
  CLI::App good{"tool"};
  std::string backend;
  int threads = 0;
  edgelm::cli::add_shared(good, flag::kBackend, backend);
  edgelm::cli::add_shared(good, flag::kThreads, threads)->capture_default_str();
  EXPECT_EQ(parse_error(good, {"--backend", "cpu:portable", "-t", "2"}), "");
  EXPECT_EQ(backend, "cpu:portable");
  CLI::App list{"bench-like tool"};
  std::vector<std::string> backends;
  edgelm::cli::add_shared(list, flag::kBackend, backends)->delimiter(',');
  EXPECT_EQ(parse_error(list, {"--backend", "cpu,opencl"}), "");
  EXPECT_EQ(backends, (std::vector<std::string>{"cpu", "opencl"}));
  // The same flag with a help text of its own, a list included, or without a name of the
  // entry: refused.
  CLI::App other_help{"tool"};
  other_help.add_option("--backend", backend, "Backend");
  EXPECT_NE(parse_error(other_help, {}).find(
                "[cli] flag --backend must be registered with add_shared (one spelling and help"),
            std::string::npos);
  CLI::App other_list{"tool"};
  other_list.add_option("--backend", backends, "Backends to compare");
  EXPECT_NE(parse_error(other_list, {}).find("--backend must be registered with add_shared"),
            std::string::npos);
  CLI::App other_names{"tool"};
  std::string kv;
  other_names.add_option("-k,--kv-type", kv, flag::kKvType.help);
  EXPECT_NE(parse_error(other_names, {}).find("[cli] flag --kv-type must be declared as "
                                              "'--kv-type'"),
            std::string::npos);
  // "{policies}" in a help is the policy names, in the registered help and in the check.
  CLI::App policies{"tool"};
  std::string policy;
  edgelm::cli::add_shared(policies, flag::kEvictionPolicy, policy);
  EXPECT_EQ(parse_error(policies, {"--eviction-policy", "h2o"}), "");
  EXPECT_NE(policies.get_option("--eviction-policy")->get_description().find("h2o"),
            std::string::npos);
}

TEST(CliUtil, TableNameWithAnotherMeaningIsRefused) {
  CLI::App app{"tool"};
  int64_t n_prompt = 0;
  app.add_option("-p,--n-prompt", n_prompt);
  const std::string error = parse_error(app, {});
  EXPECT_NE(error.find("[cli] flag --n-prompt must be declared as '-p,--prompt'"),
            std::string::npos)
      << error;
  CLI::App partial{"tool"};
  int64_t ctx = 0;
  partial.add_option("--max-seq-len", ctx);  // the old name alone, without -c/--ctx-size
  EXPECT_NE(parse_error(partial, {}).find("'-c,--ctx-size,--max-seq-len'"), std::string::npos);
  CLI::App extended{"tool"};
  int n_gen = 0;
  extended.add_option("-n,--n-predict,--n-gen,--gen", n_gen, flag::kPredict.help);
  EXPECT_NE(parse_error(extended, {}).find("must be declared as '-n,--n-predict,--n-gen'"),
            std::string::npos);
  // A tool's own older spelling is an alias instead, rewritten before the parse.
  CLI::App tokenize{"tokenize-like tool"};
  std::string text;
  edgelm::cli::add_shared(tokenize, flag::kPrompt, text);
  std::vector<std::string> args = {"tool", "--text=hello"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  EXPECT_TRUE(edgelm::cli::parse_flags(tokenize, 2, argv.data(), edgelm::cli::kTokenizeAliases));
  EXPECT_EQ(text, "hello");
}

TEST(CliUtil, ByteSizesAreCountsOrSizesWithAUnit) {
  EXPECT_EQ(edgelm::cli::parse_byte_size("4096", "--budget-bytes"), 4096u);
  EXPECT_EQ(edgelm::cli::parse_byte_size("4KiB", "--budget-bytes"), 4096u);
  EXPECT_EQ(edgelm::cli::parse_byte_size("1.5MiB", "--budget-bytes"), 1572864u);
  EXPECT_EQ(edgelm::cli::parse_byte_size("2MB", "--budget-bytes"), 2000000u);
  EXPECT_THROW(edgelm::cli::parse_byte_size("4 KiB", "--budget-bytes"), edgelm::Error);
  EXPECT_THROW(edgelm::cli::parse_byte_size("-1", "--budget-bytes"), edgelm::Error);
  CLI::App app{"tool"};
  uint64_t bytes = 0;
  edgelm::cli::add_shared(app, flag::kBudgetBytes, bytes)->transform(edgelm::cli::kByteSize);
  EXPECT_EQ(parse_error(app, {"--budget-bytes", "6MiB"}), "");
  EXPECT_EQ(bytes, 6291456u);
  EXPECT_NE(parse_error(app, {"--budget-bytes", "6XB"}).find("is not a size"), std::string::npos);
}

TEST(CliUtil, ExtrasPassLongFlagsOnButNotUnknownShortOnes) {
  CLI::App app{"micro_bench-like tool"};
  bool hot = false;
  app.add_flag("--hot", hot);
  app.allow_extras();
  EXPECT_EQ(parse_error(app, {"--benchmark_filter=x", "--hot"}), "");
  EXPECT_EQ(app.remaining(), std::vector<std::string>{"--benchmark_filter=x"});
  CLI::App strict{"tool"};
  strict.allow_extras();
  EXPECT_EQ(parse_error(strict, {"-xyz"}), "unknown flag '-xyz' (--help lists the flags)");
}

// The error parse_id_list throws for `text`, "" when it parses.
std::string id_list_error(const std::string& text) {
  try {
    edgelm::cli::parse_id_list(text, "--prompt-ids");
    return "";
  } catch (const edgelm::Error& e) {
    return e.what();
  }
}

TEST(CliUtil, IdListTakesCommaSeparatedDecimalIds) {
  EXPECT_EQ(edgelm::cli::parse_id_list("1,2,3", "--decode"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(edgelm::cli::parse_id_list("0", "--decode"), std::vector<int32_t>{0});
  EXPECT_EQ(edgelm::cli::parse_id_list("007,2147483647", "--decode"),
            (std::vector<int32_t>{7, 2147483647}));
}

TEST(CliUtil, IdListIsStrict) {
  // Each of these once parsed: " " as the prompt [0] (std::stoll failed, the value stayed 0), a
  // trailing comma and a sign silently, spaces around an item as the number.
  for (const char* bad : {" ", "+1", "-1", " 1", "1 ", "0x10", "1.5", "1e3", "2147483648",
                          "99999999999999999999", "1;2", "١"}) {
    const std::string error = id_list_error(bad);
    EXPECT_EQ(error, edgelm::str_cat("--prompt-ids: '", bad,
                                     "' is not a token id (comma-separated decimal ids in [0, "
                                     "2147483647], no spaces, e.g. 1,2,3)"))
        << "'" << bad << "'";
  }
  EXPECT_EQ(id_list_error("1, 2").find("--prompt-ids: ' 2' is not a token id"), 0u);
  EXPECT_EQ(id_list_error("1 ,2").find("--prompt-ids: '1 ' is not a token id"), 0u);
  EXPECT_EQ(id_list_error("1,2,").find("--prompt-ids: item 3 of '1,2,' is empty"), 0u);
  EXPECT_EQ(id_list_error(",1").find("--prompt-ids: item 1 of ',1' is empty"), 0u);
  EXPECT_EQ(id_list_error("1,,2").find("--prompt-ids: item 2 of '1,,2' is empty"), 0u);
  EXPECT_EQ(id_list_error(",").find("--prompt-ids: item 1 of ',' is empty"), 0u);
  EXPECT_EQ(id_list_error("").find("--prompt-ids: no token ids given"), 0u);
}

TEST(CliUtil, CpuListIsStrict) {
  EXPECT_EQ(edgelm::cli::parse_cpu_list("0-3,6", "--cpus"), (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(edgelm::cli::parse_cpu_list("5", "--cpus"), std::vector<int>{5});
  for (const char* bad :
       {" ", "0-3,", ",1", "+1", "1 ", "0- 3", "0-3-5", "-1", "4096", "0-4096", "a"}) {
    try {
      edgelm::cli::parse_cpu_list(bad, "--cpus");
      ADD_FAILURE() << "'" << bad << "' parsed";
    } catch (const edgelm::Error& e) {
      EXPECT_EQ(std::string(e.what()).find("--cpus: '"), 0u) << e.what();
    }
  }
  EXPECT_THROW(edgelm::cli::parse_cpu_list("3-1", "--cpus"), edgelm::Error);
  EXPECT_THROW(edgelm::cli::parse_cpu_list("", "--cpus"), edgelm::Error);
}

TEST(CliUtil, ReadTextFile) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "edgelm_cli_util";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "prompt.txt").string();
  std::ofstream(path, std::ios::binary) << "caf\xc3\xa9\n\n";
  EXPECT_EQ(edgelm::cli::read_text_file(path, "-f"), "caf\xc3\xa9\n\n");
  auto error_of = [](const std::string& p) {
    try {
      edgelm::cli::read_text_file(p, "-f/--file");
      return std::string();
    } catch (const edgelm::Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(error_of((dir / "none.txt").string()).find("-f/--file: cannot open '"),
            std::string::npos);
  EXPECT_NE(error_of(dir.string()).find("is a directory"), std::string::npos);
  // Neither may block or read forever: the kind is checked before the open (a FIFO's open waits
  // for a writer, which never comes here).
  const std::string fifo = (dir / "fifo").string();
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo),
            "-f/--file: '" + fifo + "' is not a regular file (a FIFO, device or socket)");
  EXPECT_EQ(error_of("/dev/zero"),
            "-f/--file: '/dev/zero' is not a regular file (a FIFO, device or socket)");
  std::filesystem::remove(fifo);
}

TEST(CliUtil, CloseWrittenFileReportsAFullDisk) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  std::ofstream out("/dev/full");
  ASSERT_TRUE(out.is_open());
  out << "phase,op\n";  // buffered: the failure shows only when the stream is flushed
  ASSERT_TRUE(out.good());
  try {
    edgelm::cli::close_written_file(out, "/dev/full", "--profile-out");
    ADD_FAILURE() << "a write to /dev/full passed";
  } catch (const edgelm::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--profile-out: cannot write '/dev/full' (disk full or not writable?)");
  }
  const auto path = std::filesystem::path(::testing::TempDir()) / "edgelm_cli_util_written.csv";
  std::ofstream good(path);
  good << "phase,op\n";
  EXPECT_NO_THROW(edgelm::cli::close_written_file(good, path.string(), "--profile-out"));
  std::filesystem::remove(path);
}

}  // namespace
