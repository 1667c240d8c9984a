// Eviction settings: only the settings a policy reads change what it keeps, and bad settings
// fail with the flag named. The Linux memory monitor on planted /proc/meminfo files.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "eviction/system_monitor.h"

#include "tests/eviction_test_util.h"
#include "tests/temp_dir.h"

namespace edgelm {
namespace {

using namespace eviction_test;

// generate warns about an eviction flag the chosen policy does not read (policy_reads()). Each
// setting is changed alone, for every policy: where the policy does not read it, the kept
// positions and the tokens must not move; where it does, they must (the budget of 18 is above
// the own limits of sliding and sink, 15 and 16, so it cannot bind there).
TEST(EvictionFlags, OnlyTheSettingsAPolicyReadsChangeWhatItKeeps) {
  struct Change {
    const char* flag;
    std::function<void(EvictionConfig&)> apply;
  };
  const std::vector<Change> changes = {
      {"--eviction-window", [](EvictionConfig& c) { c.window = 9; }},
      {"--protected-prefix", [](EvictionConfig& c) { c.protected_prefix = 6; }},
      {"--sink-tokens", [](EvictionConfig& c) { c.sink_tokens = 1; }},
      {"--kv-budget", [](EvictionConfig& c) { c.kv_budget = 18; }},
      {"--snapkv-window", [](EvictionConfig& c) { c.snapkv_window = 3; }},
      {"--snapkv-kernel", [](EvictionConfig& c) { c.snapkv_kernel = 5; }},
      {"--snapkv-pool", [](EvictionConfig& c) { c.snapkv_pool = "avg"; }},
      {"--eviction-seed", [](EvictionConfig& c) { c.seed = 4; }},
      {"--ea-future-positions", [](EvictionConfig& c) { c.ea_future_positions = 8; }},
      {"--ea-covariance", [](EvictionConfig& c) { c.ea_covariance = false; }},
      {"--ea-epsilon", [](EvictionConfig& c) { c.ea_epsilon = 1.0; }},
      {"--protect", [](EvictionConfig& c) { c.protect = "sinks"; }},
      {"--layer-budget", [](EvictionConfig& c) { c.layer_budget = "pyramid"; }},
      // Read only with --layer-budget pyramid, so changed alone it must change nothing.
      {"--pyramid-beta", [](EvictionConfig& c) { c.pyramid_beta = 2; }},
  };
  // The three memory flags need a monitor and are checked in MemoryPressure; the rest are here.
  ASSERT_EQ(changes.size() + 3, eviction_flags().size());
  for (const std::string& policy : policy_names()) {
    const GenerationRun base = generate(policy, 128, 40, config_for(policy));
    for (const Change& change : changes) {
      EvictionConfig changed = config_for(policy);
      change.apply(changed);
      const GenerationRun run = generate(policy, 128, 40, changed);
      const bool reads = policy_reads(changed, change.flag);
      const std::string flag = change.flag;
      // Where the setting is read but cannot bind here: the budget above the own limits of
      // sliding and sink, and protected sinks that the policy keeps anyway (sink and
      // expected_attention by rule; here also h2o, whose heavy hitters include positions 0-3,
      // and snapkv, whose decode rule keeps 4 sinks).
      const bool cannot_bind =
          (flag == "--kv-budget" && (policy == "sliding" || policy == "sink")) ||
          (flag == "--protect" && (policy == "sink" || policy == "expected_attention" ||
                                   policy == "h2o" || policy == "snapkv"));
      if (!reads) {
        EXPECT_EQ(run.kept, base.kept) << policy << " ignores " << change.flag;
        EXPECT_EQ(run.tokens, base.tokens) << policy << " ignores " << change.flag;
      } else if (!cannot_bind) {
        EXPECT_NE(run.kept, base.kept) << policy << " reads " << change.flag;
      }
    }
  }
  EXPECT_TRUE(policy_reads("tova", "--memory-threshold-mb"));
  EXPECT_TRUE(policy_reads("sliding", "--simulate-memory"));
  EXPECT_FALSE(policy_reads("none", "--memory-threshold-mb"));
  // The wrappers' settings turn on what they read: --pyramid-beta with a pyramid, --sink-tokens
  // for any policy once sinks are protected.
  EvictionConfig pyramid = config_for("tova");
  pyramid.layer_budget = "pyramid";
  for (const double beta : {2.0, 6.0}) {
    pyramid.pyramid_beta = beta;
    EXPECT_TRUE(policy_reads(pyramid, "--pyramid-beta"));
  }
  EXPECT_NE(generate("tova", 128, 40, pyramid).kept, generate("tova", 128, 40,
                                                              [&] {
                                                                EvictionConfig steeper = pyramid;
                                                                steeper.pyramid_beta = 2.0;
                                                                return steeper;
                                                              }())
                                                         .kept);
  EvictionConfig protect = config_for("tova");
  protect.protect = "sinks";
  EXPECT_FALSE(policy_reads(config_for("tova"), "--sink-tokens"));
  EXPECT_TRUE(policy_reads(protect, "--sink-tokens"));
  EvictionConfig fewer_sinks = protect;
  fewer_sinks.sink_tokens = 1;
  EXPECT_NE(generate("tova", 128, 40, protect).kept, generate("tova", 128, 40, fewer_sinks).kept);
}

TEST(EvictionConfigErrors, NameTheFlag) {
  auto message = [](EvictionConfig c) {
    try {
      make_policy(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EvictionConfig c;
  c.policy = "lru";
  EXPECT_NE(message(c).find("--eviction-policy"), std::string::npos);
  c.policy = "h2o";
  EXPECT_NE(message(c).find("--kv-budget"), std::string::npos);
  c.kv_budget = 100;
  c.window = 200;
  EXPECT_NE(message(c).find("--eviction-window"), std::string::npos);
  c.policy = "snapkv";
  c.snapkv_kernel = 4;
  EXPECT_NE(message(c).find("--snapkv-kernel"), std::string::npos);
  // A NaN or negative threshold never compares below the available memory: it would silently
  // turn memory-pressure eviction off.
  for (const double threshold : {std::nan(""), -1.0, double{INFINITY}}) {
    EvictionConfig bad;
    bad.memory_threshold_mb = threshold;
    EXPECT_NE(message(bad).find("--memory-threshold-mb"), std::string::npos) << threshold;
  }
  EXPECT_THROW(SimulatedMonitor::parse("0:100,x"), Error);
  // What the budget must hold: the sinks or the protected prefix that are always kept.
  EvictionConfig sink;
  sink.policy = "sink";
  sink.kv_budget = 8;
  sink.sink_tokens = 8;
  EXPECT_NE(message(sink).find("sink: --sink-tokens 8 leave no room for a window in --kv-budget 8"),
            std::string::npos)
      << message(sink);
  sink.window = 4;
  EXPECT_NE(message(sink).find("--sink-tokens 8 must be below --kv-budget 8"), std::string::npos)
      << message(sink);
  EvictionConfig sliding;
  sliding.policy = "sliding";
  sliding.kv_budget = 5;
  sliding.protected_prefix = 5;
  EXPECT_NE(message(sliding).find("--protected-prefix 5 leaves no room"), std::string::npos)
      << message(sliding);
  EvictionConfig h2o;
  h2o.policy = "h2o";
  h2o.kv_budget = 1;
  EXPECT_NE(message(h2o).find("h2o: --kv-budget 1 holds no heavy hitter"), std::string::npos)
      << message(h2o);
}

// ---- the Linux memory monitor ----

// A /proc/meminfo as Linux 6.x writes it (its first lines), with MemAvailable set to `available`.
std::string meminfo_with(const std::string& available) {
  const std::string before = "MemTotal:       32768000 kB\nMemFree:         1024000 kB\n";
  const std::string after =
      "\nBuffers:          204800 kB\nCached:         12288000 kB\nSwapCached:            0 kB\n";
  return before + "MemAvailable:   " + available + after;
}

// available_mb() of a monitor reading `text` from a planted file.
double available_mb_of(const testing::TempDir& dir, const std::string& text) {
  const std::string path = dir.file("meminfo");
  testing::write_text(path, text);
  return LinuxSystemMonitor(path).available_mb();
}

// The message of the edgelm::Error that `text` makes available_mb() throw; empty when none.
std::string meminfo_error(const testing::TempDir& dir, const std::string& text) {
  try {
    available_mb_of(dir, text);
  } catch (const Error& e) {
    return e.what();
  }
  return std::string();
}

// MemAvailable's kB in MiB, whatever the other lines say (MemTotal and MemFree are not read), and
// the file read again on every call.
TEST(LinuxSystemMonitor, ReadsMemAvailableInMiB) {
  const testing::TempDir dir("edgelm_meminfo_");
  EXPECT_EQ(available_mb_of(dir, meminfo_with("2097152 kB")), 2048.0);
  EXPECT_EQ(available_mb_of(dir, meminfo_with("1536 kB")), 1.5);
  EXPECT_EQ(available_mb_of(dir, meminfo_with("0 kB")), 0.0);
  // 64 TiB: beyond 32 bits of kB.
  EXPECT_EQ(available_mb_of(dir, meminfo_with("68719476736 kB")), 67108864.0);
  // Only MemAvailable, wherever it is; a field whose name starts the same is another field.
  EXPECT_EQ(available_mb_of(dir, "MemAvailableX:  4 kB\nMemTotal: 99 kB\nMemAvailable: 512 kB\n"),
            0.5);
  // The first MemAvailable line counts, and the last line needs no newline.
  EXPECT_EQ(available_mb_of(dir, "MemAvailable: 3072 kB\nMemAvailable: 1 kB"), 3.0);

  const std::string path = dir.file("meminfo");
  testing::write_text(path, meminfo_with("1024 kB"));
  LinuxSystemMonitor monitor(path);
  EXPECT_EQ(monitor.name(), "linux");
  EXPECT_EQ(monitor.available_mb(), 1.0);
  testing::write_text(path, meminfo_with("4096 kB"));
  EXPECT_EQ(monitor.available_mb(), 4.0);
}

// A file it cannot use is one edgelm::Error naming the file and what is wrong, never a number.
TEST(LinuxSystemMonitor, MalformedFilesAreErrorsNamingTheFile) {
  const testing::TempDir dir("edgelm_meminfo_");
  const std::string path = dir.file("meminfo");
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", ": no MemAvailable line"},
      {"MemTotal:       32768000 kB\nMemFree:         1024000 kB\n", ": no MemAvailable line"},
      {meminfo_with(""), ": malformed MemAvailable line 'MemAvailable:   '"},
      {meminfo_with("lots kB"), ": malformed MemAvailable line 'MemAvailable:   lots kB'"},
      {meminfo_with("12x kB"), ": malformed MemAvailable line"},
      {meminfo_with("-1024 kB"), ": malformed MemAvailable line"},
      {meminfo_with("1.5 kB"), ": malformed MemAvailable line"},
      {meminfo_with("99999999999999999999999 kB"), ": malformed MemAvailable line"},
      // The unit is part of the format: a number without it, or in other units, is not KiB.
      {meminfo_with("1024"), ": malformed MemAvailable line"},
      {meminfo_with("1024 MB"), ": malformed MemAvailable line"},
      {meminfo_with("1024 kB extra"), ": malformed MemAvailable line"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string message = meminfo_error(dir, c.text);
    EXPECT_EQ(message.rfind("[monitor] " + path + c.message, 0), 0u) << message;
  }
  std::string missing_message;
  try {
    LinuxSystemMonitor(dir.file("absent")).available_mb();
  } catch (const Error& e) {
    missing_message = e.what();
  }
  EXPECT_EQ(missing_message, "[monitor] " + dir.file("absent") + ": cannot open");
}

#ifdef __linux__
// The default file is the kernel's, and this machine has some memory available.
TEST(LinuxSystemMonitor, ReadsTheKernelsMeminfoByDefault) {
  EXPECT_GT(LinuxSystemMonitor().available_mb(), 0.0);
}
#endif

}  // namespace
}  // namespace edgelm
