#include "core/process_stats.h"

#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <fstream>
#include <string>

namespace edgelm {
namespace {

// A "<key>: <n> kB" line of /proc/self/status, in bytes; -1 when absent.
int64_t proc_status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  }
  return -1;
}

}  // namespace

int64_t resident_bytes() {
  return std::max<int64_t>(0, proc_status_bytes("VmRSS"));
}

int64_t peak_resident_bytes() {
  const int64_t peak = proc_status_bytes("VmHWM");
  if (peak >= 0) return peak;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux and BSDs report KiB
}

bool reset_peak_resident() {
  // Writing 5 restarts VmHWM at the current resident size (Linux 4.0 and later).
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  return clear_refs.good();
}

bool release_free_memory() {
#if defined(__GLIBC__)
  // glibc keeps freed memory in its heaps (and raises its mmap threshold after large frees, so
  // later large blocks come from the heap too); malloc_trim returns the free pages to the system.
  malloc_trim(0);
  return true;
#else
  return false;
#endif
}

}  // namespace edgelm
