// Sources of "how much memory is left", polled by the CacheManager after each forward step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace edgelm {

// The resident set of this process now, in bytes (/proc/self/statm); 0 where it cannot be read.
// For reports of what eviction gave back; a few microseconds per call.
size_t resident_set_bytes();

class SystemMonitor {
 public:
  virtual ~SystemMonitor() = default;
  virtual std::string name() const = 0;
  // Memory available to this process now, in MiB. Called once per forward step.
  virtual double available_mb() = 0;
};

// Reads MemAvailable from /proc/meminfo (the kernel's estimate of memory usable without swapping),
// or from another file of the same shape (tests plant one).
class LinuxSystemMonitor final : public SystemMonitor {
 public:
  explicit LinuxSystemMonitor(std::string meminfo_path = "/proc/meminfo");
  std::string name() const override { return "linux"; }
  // The first MemAvailable line's kB / 1024; no other line is read. Throws edgelm::Error naming
  // the file when it cannot be opened, has no MemAvailable line, or that line is not a whole
  // number followed by "kB" (a kernel before 3.14, which has no MemAvailable, is refused).
  double available_mb() override;

 private:
  std::string path_;
};

// Plays a scripted curve: each call to available_mb() is one step. The curve is a list of
// (step, MiB) points; the value of a point holds from its step until the next point.
class SimulatedMonitor final : public SystemMonitor {
 public:
  explicit SimulatedMonitor(std::vector<std::pair<int64_t, double>> curve);
  // Parses "0:4000,120:200,300:4000" (step:MiB, steps increasing). Throws edgelm::Error on
  // malformed text.
  static std::unique_ptr<SimulatedMonitor> parse(const std::string& text);
  std::string name() const override { return "simulated"; }
  double available_mb() override;
  int64_t steps() const { return step_; }

 private:
  std::vector<std::pair<int64_t, double>> curve_;
  int64_t step_ = 0;
};

}  // namespace edgelm
