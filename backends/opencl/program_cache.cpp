#include "backends/opencl/program_cache.h"

#include <unistd.h>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "backends/opencl/kernel_sources.h"
#include "core/error.h"
#include "core/log.h"

namespace edgelm::opencl {
namespace {

// FNV-1a, 64 bits: stable across builds and platforms (std::hash is not), so a cache written by
// one build of the binary is found by the next.
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string family_source(const std::string& family) {
  std::string common;
  std::string own;
  for (const KernelSource& source : kernel_sources()) {
    if (source.family == "common") common = source.text;
    if (source.family == family) own = source.text;
  }
  EDGELM_CHECK(!own.empty(), "[opencl] no kernel family '", family, "' in kernels/");
  return common + "\n" + own;
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  cl().clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string log(size, '\0');
  cl().clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

ProgramCache::ProgramCache(std::shared_ptr<Device> device, std::string build_options,
                           std::filesystem::path disk_dir)
    : device_(std::move(device)),
      options_(std::move(build_options)),
      disk_dir_(std::move(disk_dir)) {}

std::filesystem::path ProgramCache::default_dir() {
  if (const char* dir = std::getenv("EDGELM_CL_CACHE")) {
    const std::string value = dir;
    if (value.empty() || value == "off") return {};
    return value;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "edgelm" / "opencl";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "edgelm" / "opencl";
  }
  return {};
}

cl_kernel ProgramCache::kernel(const std::string& family, const std::string& name) {
  const std::string key = family + "/" + name;
  auto found = kernels_.find(key);
  if (found != kernels_.end()) return found->second.get();
  cl_int status = CL_SUCCESS;
  KernelHandle kernel(cl().clCreateKernel(program(family), name.c_str(), &status));
  if (status != CL_SUCCESS) {
    EDGELM_FAIL("[opencl] kernel '", name, "' of kernels/", family,
                ".cl: clCreateKernel failed: ", cl_error_name(status));
  }
  return kernels_.emplace(key, std::move(kernel)).first->second.get();
}

void ProgramCache::build_all() {
  for (const KernelSource& source : kernel_sources()) {
    if (source.family != "common") program(std::string(source.family));
  }
}

cl_program ProgramCache::program(const std::string& family) {
  auto found = programs_.find(family);
  if (found != programs_.end()) return found->second.get();
  return programs_.emplace(family, build(family, family_source(family))).first->second.get();
}

ProgramHandle ProgramCache::build(const std::string& family, const std::string& source) {
  const DeviceInfo& info = device_->info();
  cl_device_id device = device_->id();
  std::ostringstream key_text;
  key_text << info.platform_name << '\n'
           << info.device_name << '\n'
           << info.device_version << '\n'
           << info.driver_version << '\n'
           << options_ << '\n'
           << source;
  char key[17];
  std::snprintf(key, sizeof(key), "%016llx",
                static_cast<unsigned long long>(fnv1a(key_text.str())));
  const std::filesystem::path cached =
      disk_dir_.empty() ? std::filesystem::path() : disk_dir_ / (family + "-" + key + ".bin");

  cl_int status = CL_SUCCESS;
  // A cached binary first; any failure to use it falls back to the source.
  if (!cached.empty()) {
    std::ifstream in(cached, std::ios::binary);
    const std::vector<unsigned char> binary((std::istreambuf_iterator<char>(in)),
                                            std::istreambuf_iterator<char>());
    if (!binary.empty()) {
      const unsigned char* data = binary.data();
      const size_t size = binary.size();
      cl_int binary_status = CL_SUCCESS;
      ProgramHandle program(cl().clCreateProgramWithBinary(device_->context(), 1, &device, &size,
                                                           &data, &binary_status, &status));
      if (status == CL_SUCCESS && binary_status == CL_SUCCESS &&
          cl().clBuildProgram(program.get(), 1, &device, options_.c_str(), nullptr, nullptr) ==
              CL_SUCCESS) {
        ++from_disk_;
        return program;
      }
      log_warn("[opencl] ignoring unusable cached binary ", cached.string());
    }
  }

  const char* text = source.c_str();
  const size_t length = source.size();
  ProgramHandle program(
      cl().clCreateProgramWithSource(device_->context(), 1, &text, &length, &status));
  CL_CHECK(status);
  status = cl().clBuildProgram(program.get(), 1, &device, options_.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    EDGELM_FAIL("[opencl] building kernels/", family, ".cl for ", info.device_name, " failed (",
                cl_error_name(status), "):\n", build_log(program.get(), device));
  }
  ++built_;

  if (!cached.empty()) {
    size_t size = 0;
    if (cl().clGetProgramInfo(program.get(), CL_PROGRAM_BINARY_SIZES, sizeof(size), &size,
                              nullptr) == CL_SUCCESS &&
        size > 0) {
      std::vector<unsigned char> binary(size);
      unsigned char* data = binary.data();
      if (cl().clGetProgramInfo(program.get(), CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr) ==
          CL_SUCCESS) {
        // Written to a private name and renamed, so concurrent processes never read half a file.
        std::error_code error;
        std::filesystem::create_directories(disk_dir_, error);
        const std::filesystem::path partial =
            cached.string() + ".tmp" + std::to_string(static_cast<long>(getpid()));
        {
          std::ofstream out(partial, std::ios::binary);
          out.write(reinterpret_cast<const char*>(binary.data()),
                    static_cast<std::streamsize>(binary.size()));
        }
        std::filesystem::rename(partial, cached, error);
        if (error) std::filesystem::remove(partial, error);
      }
    }
  }
  return program;
}

}  // namespace edgelm::opencl
