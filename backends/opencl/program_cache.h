// Programs of the embedded kernel families, built once per run for a device and a set of build
// options, with the compiled binaries kept on disk so that the next start skips the compiler.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "backends/opencl/cl_handle.h"
#include "backends/opencl/device.h"

namespace edgelm::opencl {

class ProgramCache {
 public:
  // `disk_dir` empty: no disk cache. Otherwise binaries are stored as <disk_dir>/<key>.bin, where
  // the key hashes the device, driver, build options and source text, so any change rebuilds.
  ProgramCache(std::shared_ptr<Device> device, std::string build_options,
               std::filesystem::path disk_dir);

  // The kernel `name` of family `family` (kernels/<family>.cl, with kernels/common.cl in front).
  // Builds the family's program on first use; throws edgelm::Error with the build log when the
  // compiler rejects it. The kernel object is reused by every later call (the backend is driven
  // from one thread at a time, so argument setting does not race).
  cl_kernel kernel(const std::string& family, const std::string& name);

  // Builds (or loads) every family's program now, so that compilation happens at start-up rather
  // than inside the first timed step.
  void build_all();

  // Default disk location: $EDGELM_CL_CACHE if set ("" or "off" disables), else
  // $XDG_CACHE_HOME/edgelm/opencl, else ~/.cache/edgelm/opencl; empty when none can be made.
  static std::filesystem::path default_dir();

  int programs_built() const { return built_; }          // compiled from source this run
  int programs_from_disk() const { return from_disk_; }  // loaded from cached binaries

 private:
  cl_program program(const std::string& family);
  ProgramHandle build(const std::string& family, const std::string& source);

  std::shared_ptr<Device> device_;
  std::string options_;
  std::filesystem::path disk_dir_;
  std::map<std::string, ProgramHandle> programs_;
  std::map<std::string, KernelHandle> kernels_;  // key: family + "/" + name
  int built_ = 0;
  int from_disk_ = 0;
};

}  // namespace edgelm::opencl
