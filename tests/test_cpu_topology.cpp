// Core clusters read from fake sysfs trees, the big cores chosen from them, and the default thread
// count and CPU list that follow; then the CPU backend running the plan it is given.
#include "core/cpu_topology.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "temp_dir.h"

namespace edgelm {
namespace {

using testing::TempDir;
using testing::write_text;

// One CPU of a fake tree; -1 leaves its file out.
struct FakeCpu {
  int64_t capacity = -1;
  int64_t max_freq_khz = -1;
};

// Writes <root>/online and, for CPU i, cpu<i>/cpu_capacity and cpu<i>/cpufreq/cpuinfo_max_freq, in
// sysfs's format (the number and a newline).
class FakeSysfs {
 public:
  FakeSysfs() : dir_("edgelm_cpu_topology_") {}

  void write(const std::string& online, const std::vector<FakeCpu>& cpus) {
    write_text(dir_.file("online"), online + "\n");
    for (size_t i = 0; i < cpus.size(); ++i) {
      const std::filesystem::path cpu = dir_.path() / ("cpu" + std::to_string(i));
      std::filesystem::create_directories(cpu / "cpufreq");
      if (cpus[i].capacity >= 0)
        write_text((cpu / "cpu_capacity").string(), std::to_string(cpus[i].capacity) + "\n");
      if (cpus[i].max_freq_khz >= 0) {
        write_text((cpu / "cpufreq" / "cpuinfo_max_freq").string(),
                   std::to_string(cpus[i].max_freq_khz) + "\n");
      }
    }
  }
  // Overwrites one file under the root with `text`, as is.
  void put(const std::string& relative, const std::string& text) {
    std::filesystem::create_directories((dir_.path() / relative).parent_path());
    write_text(dir_.file(relative), text);
  }
  std::string root() const { return dir_.path().string(); }
  CpuTopology read(const std::vector<int>& allowed = {}) const {
    return read_cpu_topology(root(), allowed);
  }

 private:
  TempDir dir_;
};

std::vector<std::vector<int>> cluster_cpus(const CpuTopology& topology) {
  std::vector<std::vector<int>> out;
  for (const CpuCluster& cluster : topology.clusters) out.push_back(cluster.cpus);
  return out;
}

std::vector<FakeCpu> repeat(int n, FakeCpu cpu) {
  return std::vector<FakeCpu>(static_cast<size_t>(n), cpu);
}

std::vector<FakeCpu> join(std::initializer_list<std::vector<FakeCpu>> parts) {
  std::vector<FakeCpu> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// 4 Cortex-A55 at 1.8 GHz (CPUs 0-3) and 4 Cortex-A76 at 2.4 GHz (CPUs 4-7), an RK3588's layout;
// capacities as Linux scales the device tree's capacity-dmips-mhz by the maximum frequency.
TEST(CpuTopologyTest, FourPlusFourPhone) {
  FakeSysfs sysfs;
  sysfs.write("0-7", join({repeat(4, {397, 1800000}), repeat(4, {1024, 2400000})}));
  const CpuTopology topology = sysfs.read();
  EXPECT_EQ(topology.online, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(cluster_cpus(topology), (std::vector<std::vector<int>>{{4, 5, 6, 7}, {0, 1, 2, 3}}));
  EXPECT_EQ(topology.clusters[0].capacity, 1024);
  EXPECT_EQ(topology.clusters[0].max_freq_khz, 2400000);
  EXPECT_EQ(topology.clusters[1].capacity, 397);
  EXPECT_EQ(describe(topology), "4-7 (capacity 1024, 2400 MHz), 0-3 (capacity 397, 1800 MHz)");
  EXPECT_EQ(big_cores(topology), (std::vector<int>{4, 5, 6, 7}));

  const CpuThreadPlan plan = plan_cpu_threads(0, {}, topology, 8);
  EXPECT_EQ(plan.n_threads, 4);
  EXPECT_EQ(plan.cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(plan.big_cores);
}

// 1 prime + 3 big + 4 little (Snapdragon 888's 1 X1 at 2.84 GHz, 3 A78 at 2.42, 4 A55 at 1.8):
// the prime and the big cores are the default, prime first; the little ones are left out.
TEST(CpuTopologyTest, OnePlusThreePlusFourPhone) {
  FakeSysfs sysfs;
  sysfs.write("0-7", join({repeat(4, {284, 1804800}), repeat(3, {873, 2419200}),
                           repeat(1, {1024, 2841600})}));
  const CpuTopology topology = sysfs.read();
  ASSERT_EQ(cluster_cpus(topology), (std::vector<std::vector<int>>{{7}, {4, 5, 6}, {0, 1, 2, 3}}));
  EXPECT_EQ(big_cores(topology), (std::vector<int>{7, 4, 5, 6}));
  const CpuThreadPlan plan = plan_cpu_threads(0, {}, topology, 8);
  EXPECT_EQ(plan.n_threads, 4);
  EXPECT_EQ(plan.cpus, (std::vector<int>{7, 4, 5, 6}));

  // -t overrides the count: two threads go to the two fastest big cores; more threads than big
  // cores run unpinned.
  EXPECT_EQ(plan_cpu_threads(2, {}, topology, 8).cpus, (std::vector<int>{7, 4}));
  const CpuThreadPlan all = plan_cpu_threads(8, {}, topology, 8);
  EXPECT_EQ(all.n_threads, 8);
  EXPECT_TRUE(all.cpus.empty());
  EXPECT_FALSE(all.big_cores);
  // --cpus overrides the list, and without -t sets the count.
  const CpuThreadPlan listed = plan_cpu_threads(0, {0, 1}, topology, 8);
  EXPECT_EQ(listed.n_threads, 2);
  EXPECT_EQ(listed.cpus, (std::vector<int>{0, 1}));
  EXPECT_FALSE(listed.big_cores);
  EXPECT_EQ(plan_cpu_threads(3, {0, 1}, topology, 8).n_threads, 3);
}

// 1 + 4 + 3 with the four middle cores in two clusters of one frequency but different
// capacities (Snapdragon 8 Gen 2: X3 at 3.19 GHz, 2 A715 and 2 A710 at 2.8, 3 A510 at 2.0; the
// capacities are illustrative), and
// the same phone with frequencies only (a kernel without cpu_capacity).
TEST(CpuTopologyTest, TwoMiddleClusters) {
  FakeSysfs sysfs;
  sysfs.write("0-7", join({repeat(3, {411, 2016000}), repeat(2, {918, 2803200}),
                           repeat(2, {884, 2803200}), repeat(1, {1024, 3187200})}));
  const CpuTopology topology = sysfs.read();
  ASSERT_EQ(cluster_cpus(topology),
            (std::vector<std::vector<int>>{{7}, {3, 4}, {5, 6}, {0, 1, 2}}));
  EXPECT_EQ(big_cores(topology), (std::vector<int>{7, 3, 4, 5, 6}));
  EXPECT_EQ(plan_cpu_threads(0, {}, topology, 8).n_threads, 5);

  FakeSysfs freq_only;
  freq_only.write(
      "0-7", join({repeat(3, {-1, 2016000}), repeat(4, {-1, 2803200}), repeat(1, {-1, 3187200})}));
  const CpuTopology by_freq = freq_only.read();
  ASSERT_EQ(cluster_cpus(by_freq), (std::vector<std::vector<int>>{{7}, {3, 4, 5, 6}, {0, 1, 2}}));
  EXPECT_EQ(by_freq.clusters[0].capacity, -1);
  EXPECT_EQ(big_cores(by_freq), (std::vector<int>{7, 3, 4, 5, 6}));
}

// A lone prime core over middle cores below 4/5 of its capacity takes the next cluster along: one
// thread alone would leave most of the memory bandwidth unused.
TEST(CpuTopologyTest, LonePrimeCoreTakesTheNextCluster) {
  FakeSysfs sysfs;
  sysfs.write("0-7", join({repeat(4, {250, 1800000}), repeat(3, {700, 2500000}),
                           repeat(1, {1024, 3000000})}));
  EXPECT_EQ(big_cores(sysfs.read()), (std::vector<int>{7, 4, 5, 6}));
  // Two clusters where the prime core and the next would be all of them: nothing to avoid.
  FakeSysfs two;
  two.write("0-3", join({repeat(3, {700, 2500000}), repeat(1, {1024, 3000000})}));
  EXPECT_TRUE(big_cores(two.read()).empty());
}

// Without cpufreq or cpu_capacity (an x86 VM), with equal cores (a server), or with favoured cores
// a few percent faster (a desktop's turbo cores): one cluster or all of them big, so the default
// is what it always was, one thread per hardware thread and no pinning.
TEST(CpuTopologyTest, MachinesWithoutSlowerCoresKeepTheOldDefault) {
  FakeSysfs vm;
  vm.write("0-1", repeat(2, {}));
  const CpuTopology topology = vm.read();
  ASSERT_EQ(cluster_cpus(topology), (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(describe(topology), "0-1 (capacity unknown, maximum frequency unknown)");
  EXPECT_TRUE(big_cores(topology).empty());
  const CpuThreadPlan plan = plan_cpu_threads(0, {}, topology, 2);
  EXPECT_EQ(plan.n_threads, 2);
  EXPECT_TRUE(plan.cpus.empty());
  EXPECT_EQ(plan_cpu_threads(0, {}, topology, 0).n_threads, 1);  // count unknown

  FakeSysfs server;
  server.write("0-15", repeat(16, {-1, 3700000}));
  EXPECT_EQ(server.read().clusters.size(), 1u);
  EXPECT_TRUE(plan_cpu_threads(0, {}, server.read(), 16).cpus.empty());

  FakeSysfs desktop;
  desktop.write("0-7", join({repeat(2, {-1, 5800000}), repeat(6, {-1, 5500000})}));
  EXPECT_EQ(desktop.read().clusters.size(), 2u);
  EXPECT_TRUE(big_cores(desktop.read()).empty());
  EXPECT_EQ(plan_cpu_threads(0, {}, desktop.read(), 8).n_threads, 8);

  // No sysfs at all: no CPUs known, the old default.
  const CpuTopology none = read_cpu_topology(vm.root() + "/missing");
  EXPECT_TRUE(none.online.empty());
  EXPECT_TRUE(none.clusters.empty());
  EXPECT_EQ(plan_cpu_threads(0, {}, none, 4).n_threads, 4);
}

// Offline CPUs (a phone's hotplug, e.g. online "0-3,6-7") are left out even though their files are
// still there; so are CPUs outside the caller's affinity.
TEST(CpuTopologyTest, OfflineAndDisallowedCpusAreLeftOut) {
  FakeSysfs sysfs;
  sysfs.write("0-3,6-7", join({repeat(4, {397, 1800000}), repeat(4, {1024, 2400000})}));
  CpuTopology topology = sysfs.read();
  EXPECT_EQ(topology.online, (std::vector<int>{0, 1, 2, 3, 6, 7}));
  ASSERT_EQ(cluster_cpus(topology), (std::vector<std::vector<int>>{{6, 7}, {0, 1, 2, 3}}));
  EXPECT_EQ(plan_cpu_threads(0, {}, topology, 6).cpus, (std::vector<int>{6, 7}));

  // A process restricted to the little cores (taskset 0-3) sees one cluster: no pinning, which
  // the kernel would refuse anyway.
  topology = sysfs.read({0, 1, 2, 3});
  EXPECT_EQ(cluster_cpus(topology), (std::vector<std::vector<int>>{{0, 1, 2, 3}}));
  EXPECT_TRUE(plan_cpu_threads(0, {}, topology, 8).cpus.empty());
}

// A present file with anything but a positive decimal number makes that speed unknown for every
// CPU (the other speed still groups them); a malformed online list leaves no CPUs known. Nothing
// throws.
TEST(CpuTopologyTest, GarbageFilesAreUnknownNotFatal) {
  const std::vector<FakeCpu> phone = join({repeat(4, {397, 1800000}), repeat(4, {1024, 2400000})});
  const std::vector<std::string> garbage_values = {"",
                                                   "abc\n",
                                                   "-5\n",
                                                   "1e9\n",
                                                   " 1024\n",
                                                   "0\n",
                                                   "99999999999999999999\n",
                                                   std::string("10\0"
                                                               "24\n",
                                                               5)};
  for (const std::string& garbage : garbage_values) {
    SCOPED_TRACE("'" + garbage + "'");
    FakeSysfs sysfs;
    sysfs.write("0-7", phone);
    sysfs.put("cpu5/cpu_capacity", garbage);
    CpuTopology topology;
    ASSERT_NO_THROW(topology = sysfs.read());
    ASSERT_EQ(cluster_cpus(topology), (std::vector<std::vector<int>>{{4, 5, 6, 7}, {0, 1, 2, 3}}));
    EXPECT_EQ(topology.clusters[0].capacity, -1) << "capacity kept with one CPU's unreadable";
    EXPECT_EQ(topology.clusters[0].max_freq_khz, 2400000);

    sysfs.put("cpu2/cpufreq/cpuinfo_max_freq", garbage);
    ASSERT_NO_THROW(topology = sysfs.read());
    EXPECT_EQ(cluster_cpus(topology), (std::vector<std::vector<int>>{{0, 1, 2, 3, 4, 5, 6, 7}}));
    EXPECT_TRUE(plan_cpu_threads(0, {}, topology, 8).cpus.empty());
  }
  for (const char* online : {"", "0-", "3-1", "a-b", "0,,1", "0 - 7", "99999"}) {
    SCOPED_TRACE(std::string("online '") + online + "'");
    FakeSysfs sysfs;
    sysfs.write(online, phone);
    CpuTopology topology;
    ASSERT_NO_THROW(topology = sysfs.read());
    EXPECT_TRUE(topology.online.empty());
    EXPECT_TRUE(topology.clusters.empty());
  }
}

// The CPU backend runs the plan: with no count or list it uses plan_cpu_threads' default (on this
// machine's own topology), and a list pins its pool's threads there, one thread per CPU.
TEST(CpuTopologyTest, CpuBackendRunsThePlan) {
  const CpuThreadPlan plan = plan_cpu_threads(0, {});
  cpu::CpuBackend backend;
  EXPECT_EQ(backend.pool().size(), plan.n_threads);
  EXPECT_EQ(backend.pool().cpus(), plan.cpus);

  const std::vector<int> allowed = calling_thread_cpus();
  ASSERT_FALSE(allowed.empty());
  cpu::CpuBackend pinned({.cpus = {allowed.back()}});
  EXPECT_EQ(pinned.pool().size(), 1);
  int seen = -1;
  pinned.pool().run([&](int) {
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof(mine), &mine) == 0 && CPU_COUNT(&mine) == 1 &&
        CPU_ISSET(allowed.back(), &mine))
      seen = allowed.back();
  });
  EXPECT_EQ(seen, allowed.back());
  EXPECT_NE(pinned.device().find("1 threads, pinned to CPUs " + std::to_string(allowed.back())),
            std::string::npos)
      << pinned.device();
}

}  // namespace
}  // namespace edgelm
