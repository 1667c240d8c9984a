#include "eviction/system_monitor.h"

#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"

namespace edgelm {

size_t resident_set_bytes() {
  // statm: total program size, then resident pages, ...
  std::ifstream in("/proc/self/statm");
  size_t total_pages = 0, resident_pages = 0;
  if (!(in >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

LinuxSystemMonitor::LinuxSystemMonitor(std::string meminfo_path) : path_(std::move(meminfo_path)) {}

double LinuxSystemMonitor::available_mb() {
  std::ifstream in(path_);
  if (!in) EDGELM_FAIL("[monitor] ", path_, ": cannot open");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    // The kernel writes "MemAvailable:   16106232 kB": a whole number of KiB, then the unit.
    std::istringstream fields(line.substr(13));
    std::string number, unit, rest;
    fields >> number >> unit;
    uint64_t kib = 0;
    const char* end = number.data() + number.size();
    const auto parsed = std::from_chars(number.data(), end, kib);
    if (parsed.ec != std::errc() || parsed.ptr != end || unit != "kB" || fields >> rest) {
      EDGELM_FAIL("[monitor] ", path_, ": malformed MemAvailable line '", line,
                  "' (expected a number of kB)");
    }
    return static_cast<double>(kib) / 1024.0;
  }
  EDGELM_FAIL("[monitor] ", path_, ": no MemAvailable line");
}

SimulatedMonitor::SimulatedMonitor(std::vector<std::pair<int64_t, double>> curve)
    : curve_(std::move(curve)) {
  EDGELM_CHECK(!curve_.empty(), "[monitor] simulated memory curve is empty");
  for (size_t i = 1; i < curve_.size(); ++i) {
    EDGELM_CHECK(curve_[i].first > curve_[i - 1].first, "[monitor] simulated memory curve: step ",
                 curve_[i].first, " does not follow step ", curve_[i - 1].first);
  }
}

std::unique_ptr<SimulatedMonitor> SimulatedMonitor::parse(const std::string& text) {
  std::vector<std::pair<int64_t, double>> curve;
  std::stringstream stream(text);
  std::string point;
  while (std::getline(stream, point, ',')) {
    const size_t colon = point.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no colon");
      size_t used_step = 0, used_mb = 0;
      const int64_t step = std::stoll(point.substr(0, colon), &used_step);
      const double mb = std::stod(point.substr(colon + 1), &used_mb);
      if (used_step != colon || used_mb != point.size() - colon - 1 || step < 0 || mb < 0) {
        throw std::invalid_argument("trailing text");
      }
      curve.emplace_back(step, mb);
    } catch (const std::exception&) {
      EDGELM_FAIL("[monitor] simulated memory curve: '", point,
                  "' is not step:MiB (e.g. 0:4000,100:200)");
    }
  }
  return std::make_unique<SimulatedMonitor>(std::move(curve));
}

double SimulatedMonitor::available_mb() {
  double value = curve_.front().second;
  for (const auto& [step, mb] : curve_) {
    if (step <= step_) value = mb;
  }
  ++step_;
  return value;
}

}  // namespace edgelm
