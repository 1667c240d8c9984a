// What a report says about the process itself: its resident memory now and at its peak (Linux
// /proc; elsewhere getrusage's lifetime peak and 0), and a steady-clock stopwatch for timing runs.
// The memory reads open a /proc file (tens of microseconds): for reports around a run, not for a
// decode step's inner loop.
#pragma once

#include <chrono>
#include <cstdint>

namespace edgelm {

// Resident memory now (VmRSS of /proc/self/status), in bytes; 0 where it cannot be read.
int64_t resident_bytes();
// The peak resident memory (VmHWM, the counter reset_peak_resident() restarts), in bytes; where
// /proc is missing, getrusage's ru_maxrss (the peak over the process's whole life).
int64_t peak_resident_bytes();
// Restarts the peak counter at the current resident memory (writes 5 to /proc/self/clear_refs,
// Linux 4.0 and later), so that a later peak_resident_bytes() covers only what came after; false
// where that is not possible.
bool reset_peak_resident();
// Returns the allocator's free memory to the system (glibc's malloc_trim), so that the resident
// memory counts live allocations only; false where the C library has no such call.
bool release_free_memory();

// Wall time on the steady clock since construction or the last restart().
class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;

  Stopwatch() : start_(Clock::now()) {}
  // Starts counting again from now.
  void restart() { start_ = Clock::now(); }
  // Seconds since the start.
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_;
};

}  // namespace edgelm
