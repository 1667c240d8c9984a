// Which CPUs are the fast ones: the clusters of a big.LITTLE phone (or a hybrid x86 desktop) read
// from Linux's sysfs, and the thread count and CPU list the CPU backend uses when the user names
// neither. A decode step waits for its slowest thread, so by default it runs on the big cores only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace edgelm {

// Where Linux describes its CPUs; tests pass a fake tree instead.
inline constexpr const char* kSysfsCpuRoot = "/sys/devices/system/cpu";

// A cluster counts among the big cores when its speed (cpu_capacity, or else cpuinfo_max_freq) is
// at least 4/5 of the fastest cluster's. Phones' middle cores reach 0.82-0.95 of the prime core's
// maximum frequency and their little cores 0.55-0.65 (A55/A510 at 1.8-2.0 GHz beside 2.8-3.3 GHz);
// a desktop's favoured cores (Intel Turbo Boost Max 3.0, AMD preferred cores) report a few percent
// more than the others, which must not leave the others out.
inline constexpr int64_t kBigCoreShareNumerator = 4;
inline constexpr int64_t kBigCoreShareDenominator = 5;

// CPUs that share one speed: the same cpu_capacity and cpuinfo_max_freq.
struct CpuCluster {
  std::vector<int> cpus;      // ascending
  int64_t capacity = -1;      // cpu_capacity (the fastest CPU of the machine is 1024); -1: unknown
  int64_t max_freq_khz = -1;  // cpufreq/cpuinfo_max_freq; -1: unknown
};

struct CpuTopology {
  std::vector<int> online;  // online CPUs (those the caller may run on, when a set was given)
  // Fastest first (by capacity, then maximum frequency). One cluster of every online CPU when a
  // speed is unknown; empty when the online CPUs are.
  std::vector<CpuCluster> clusters;
};

// Reads `root` (kSysfsCpuRoot's layout): the `online` list ("0-3,6"), and for each online CPU N
// cpuN/cpu_capacity and cpuN/cpufreq/cpuinfo_max_freq. A speed counts only when every online CPU
// has it as a plain decimal number; a missing file or one holding anything else makes it unknown,
// and an unreadable or malformed `online` list leaves the topology empty. Never throws for the
// files' content. `allowed`, when not empty, keeps only those CPUs (the caller's affinity).
CpuTopology read_cpu_topology(const std::string& root = kSysfsCpuRoot,
                              const std::vector<int>& allowed = {});

// The CPUs the calling thread may run on (sched_getaffinity); empty when it cannot be read.
std::vector<int> calling_thread_cpus();

// This machine's topology over the CPUs the process may use, read once (on first use, before any
// pool pins its caller) and kept.
const CpuTopology& system_cpu_topology();

// The CPUs a default run keeps to, fastest cluster first: every cluster whose speed is at least
// kBigCoreShare* of the fastest's, plus the next cluster when that leaves a single CPU (one thread
// reads a fraction of the memory bandwidth a decode step needs). Empty when there is nothing to
// avoid: one cluster, unknown speeds, or every cluster big.
std::vector<int> big_cores(const CpuTopology& topology);

// How many threads the CPU backend runs and where it pins them.
struct CpuThreadPlan {
  int n_threads = 1;
  std::vector<int> cpus;   // pin thread i to cpus[i % size]; empty: no pinning
  bool big_cores = false;  // `cpus` are the big cores chosen by default, not the caller's list
};

// Resolves the user's thread count (`n_threads`, 0: unset) and CPU list (`cpus`, empty: unset):
// - a CPU list is kept as given, with one thread per listed CPU unless a count is given;
// - otherwise, on a machine with big cores (big_cores() not empty), the count defaults to the
//   number of big cores, and a count that fits on them is pinned to the first of them (a larger
//   one runs unpinned);
// - otherwise the count defaults to `hardware_threads` (at least 1) and nothing is pinned.
CpuThreadPlan plan_cpu_threads(int n_threads, std::vector<int> cpus, const CpuTopology& topology,
                               int hardware_threads);

// plan_cpu_threads over system_cpu_topology() and std::thread::hardware_concurrency().
CpuThreadPlan plan_cpu_threads(int n_threads, std::vector<int> cpus);

// "4-7 (capacity 1024, 2400 MHz), 0-3 (capacity 397, 1800 MHz)": the clusters, for logs.
std::string describe(const CpuTopology& topology);

}  // namespace edgelm
