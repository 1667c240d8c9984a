#include "core/cpu_topology.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/parse_list.h"

namespace edgelm {
namespace {

// The first line of a small sysfs file without its newline; false when it cannot be read.
bool read_line(const std::string& path, std::string& line) {
  std::ifstream in(path);
  if (!in) return false;
  std::getline(in, line);
  return !in.bad();
}

// A sysfs number: decimal digits only; -1 for anything else, so that garbage never passes for a
// speed.
int64_t read_speed(const std::string& path) {
  std::string line;
  int64_t value = 0;
  constexpr int64_t kMaxSpeed = int64_t{1} << 40;  // far above any kHz or capacity value
  if (!read_line(path, line) || !detail::parse_decimal(line, kMaxSpeed, value)) return -1;
  return value;
}

// The online list, or empty when it is missing or not a CPU list.
std::vector<int> read_online(const std::string& root) {
  std::string line;
  if (!read_line(root + "/online", line)) return {};
  try {
    std::vector<int> cpus = parse_cpu_list(line, "online");
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
  } catch (const Error&) {
    return {};
  }
}

// The speed big_cores() compares: capacity when known (it folds in the core's design, which a
// frequency does not: an A55 at 2.2 GHz is far slower than an A78 at 2.8), else the frequency.
int64_t speed(const CpuCluster& cluster) {
  return cluster.capacity > 0 ? cluster.capacity : cluster.max_freq_khz;
}

}  // namespace

CpuTopology read_cpu_topology(const std::string& root, const std::vector<int>& allowed) {
  CpuTopology topology;
  for (int cpu : read_online(root)) {
    if (allowed.empty() || std::find(allowed.begin(), allowed.end(), cpu) != allowed.end())
      topology.online.push_back(cpu);
  }
  if (topology.online.empty()) return topology;

  const size_t n = topology.online.size();
  std::vector<int64_t> capacity(n), max_freq(n);
  bool all_capacity = true, all_freq = true;
  for (size_t i = 0; i < n; ++i) {
    const std::string dir = root + "/cpu" + std::to_string(topology.online[i]);
    capacity[i] = read_speed(dir + "/cpu_capacity");
    max_freq[i] = read_speed(dir + "/cpufreq/cpuinfo_max_freq");
    // A zero counts as unknown too: it would make every other cluster infinitely faster.
    all_capacity = all_capacity && capacity[i] > 0;
    all_freq = all_freq && max_freq[i] > 0;
  }
  // Fastest first: the map's keys sort ascending, so they are walked backwards.
  std::map<std::pair<int64_t, int64_t>, std::vector<int>> by_speed;
  for (size_t i = 0; i < n; ++i) {
    by_speed[{all_capacity ? capacity[i] : -1, all_freq ? max_freq[i] : -1}].push_back(
        topology.online[i]);
  }
  for (auto it = by_speed.rbegin(); it != by_speed.rend(); ++it) {
    topology.clusters.push_back(
        {.cpus = it->second, .capacity = it->first.first, .max_freq_khz = it->first.second});
  }
  return topology;
}

std::vector<int> calling_thread_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

const CpuTopology& system_cpu_topology() {
  static const CpuTopology topology = read_cpu_topology(kSysfsCpuRoot, calling_thread_cpus());
  return topology;
}

std::vector<int> big_cores(const CpuTopology& topology) {
  const std::vector<CpuCluster>& clusters = topology.clusters;
  if (clusters.size() < 2 || speed(clusters[0]) <= 0) return {};
  const int64_t fastest = speed(clusters[0]);
  size_t n_big = 0;
  while (n_big < clusters.size() &&
         speed(clusters[n_big]) * kBigCoreShareDenominator >= fastest * kBigCoreShareNumerator) {
    ++n_big;
  }
  if (n_big == 1 && clusters[0].cpus.size() == 1) n_big = 2;
  if (n_big == clusters.size()) return {};
  std::vector<int> cpus;
  for (size_t i = 0; i < n_big; ++i)
    cpus.insert(cpus.end(), clusters[i].cpus.begin(), clusters[i].cpus.end());
  return cpus;
}

CpuThreadPlan plan_cpu_threads(int n_threads, std::vector<int> cpus, const CpuTopology& topology,
                               int hardware_threads) {
  CpuThreadPlan plan;
  if (!cpus.empty()) {
    plan.n_threads = n_threads > 0 ? n_threads : static_cast<int>(cpus.size());
    plan.cpus = std::move(cpus);
    return plan;
  }
  std::vector<int> big = big_cores(topology);
  if (!big.empty()) {
    plan.n_threads = n_threads > 0 ? n_threads : static_cast<int>(big.size());
    // More threads than big cores would share them, slower than spreading onto the others.
    if (static_cast<size_t>(plan.n_threads) <= big.size()) {
      big.resize(static_cast<size_t>(plan.n_threads));
      plan.cpus = std::move(big);
      plan.big_cores = true;
    }
    return plan;
  }
  plan.n_threads = n_threads > 0 ? n_threads : std::max(1, hardware_threads);
  return plan;
}

CpuThreadPlan plan_cpu_threads(int n_threads, std::vector<int> cpus) {
  return plan_cpu_threads(n_threads, std::move(cpus), system_cpu_topology(),
                          static_cast<int>(std::thread::hardware_concurrency()));
}

std::string describe(const CpuTopology& topology) {
  std::ostringstream out;
  for (const CpuCluster& cluster : topology.clusters) {
    if (out.tellp() > 0) out << ", ";
    // Consecutive CPUs as ranges, the `online` file's syntax.
    for (size_t i = 0; i < cluster.cpus.size();) {
      size_t j = i;
      while (j + 1 < cluster.cpus.size() && cluster.cpus[j + 1] == cluster.cpus[j] + 1) ++j;
      out << (i > 0 ? "," : "") << cluster.cpus[i];
      if (j > i) out << "-" << cluster.cpus[j];
      i = j + 1;
    }
    out << " (capacity ";
    if (cluster.capacity > 0)
      out << cluster.capacity;
    else
      out << "unknown";
    out << ", ";
    if (cluster.max_freq_khz > 0)
      out << cluster.max_freq_khz / 1000 << " MHz)";
    else
      out << "maximum frequency unknown)";
  }
  return out.str();
}

}  // namespace edgelm
