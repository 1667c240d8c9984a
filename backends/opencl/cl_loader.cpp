#include "backends/opencl/cl_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <variant>

#include "backends/opencl/clblast_loader.h"
#include "core/error.h"

namespace edgelm::opencl {
namespace {

// Resolves `name` into `slot`; returns false when the library lacks it.
template <class Function>
bool resolve(void* library, const char* name, Function& slot) {
  slot = reinterpret_cast<Function>(dlsym(library, name));
  return slot != nullptr;
}

// Fills every entry of `api` from `library`; returns the first missing name, or null.
const char* resolve_all(void* library, ClApi& api) {
  const auto missing = [&](const char* name, auto& slot) { return !resolve(library, name, slot); };
  if (missing("clGetPlatformIDs", api.clGetPlatformIDs)) return "clGetPlatformIDs";
  if (missing("clGetPlatformInfo", api.clGetPlatformInfo)) return "clGetPlatformInfo";
  if (missing("clGetDeviceIDs", api.clGetDeviceIDs)) return "clGetDeviceIDs";
  if (missing("clGetDeviceInfo", api.clGetDeviceInfo)) return "clGetDeviceInfo";
  if (missing("clCreateContext", api.clCreateContext)) return "clCreateContext";
  if (missing("clRetainContext", api.clRetainContext)) return "clRetainContext";
  if (missing("clReleaseContext", api.clReleaseContext)) return "clReleaseContext";
  if (missing("clCreateCommandQueue", api.clCreateCommandQueue)) return "clCreateCommandQueue";
  if (missing("clRetainCommandQueue", api.clRetainCommandQueue)) return "clRetainCommandQueue";
  if (missing("clReleaseCommandQueue", api.clReleaseCommandQueue)) return "clReleaseCommandQueue";
  if (missing("clCreateBuffer", api.clCreateBuffer)) return "clCreateBuffer";
  if (missing("clRetainMemObject", api.clRetainMemObject)) return "clRetainMemObject";
  if (missing("clReleaseMemObject", api.clReleaseMemObject)) return "clReleaseMemObject";
  if (missing("clGetMemObjectInfo", api.clGetMemObjectInfo)) return "clGetMemObjectInfo";
  if (missing("clCreateProgramWithSource", api.clCreateProgramWithSource)) {
    return "clCreateProgramWithSource";
  }
  if (missing("clCreateProgramWithBinary", api.clCreateProgramWithBinary)) {
    return "clCreateProgramWithBinary";
  }
  if (missing("clBuildProgram", api.clBuildProgram)) return "clBuildProgram";
  if (missing("clGetProgramInfo", api.clGetProgramInfo)) return "clGetProgramInfo";
  if (missing("clGetProgramBuildInfo", api.clGetProgramBuildInfo)) return "clGetProgramBuildInfo";
  if (missing("clRetainProgram", api.clRetainProgram)) return "clRetainProgram";
  if (missing("clReleaseProgram", api.clReleaseProgram)) return "clReleaseProgram";
  if (missing("clCreateKernel", api.clCreateKernel)) return "clCreateKernel";
  if (missing("clSetKernelArg", api.clSetKernelArg)) return "clSetKernelArg";
  if (missing("clRetainKernel", api.clRetainKernel)) return "clRetainKernel";
  if (missing("clReleaseKernel", api.clReleaseKernel)) return "clReleaseKernel";
  if (missing("clEnqueueNDRangeKernel", api.clEnqueueNDRangeKernel)) {
    return "clEnqueueNDRangeKernel";
  }
  if (missing("clEnqueueCopyBuffer", api.clEnqueueCopyBuffer)) return "clEnqueueCopyBuffer";
  if (missing("clEnqueueMapBuffer", api.clEnqueueMapBuffer)) return "clEnqueueMapBuffer";
  if (missing("clEnqueueUnmapMemObject", api.clEnqueueUnmapMemObject)) {
    return "clEnqueueUnmapMemObject";
  }
  if (missing("clFinish", api.clFinish)) return "clFinish";
  if (missing("clWaitForEvents", api.clWaitForEvents)) return "clWaitForEvents";
  if (missing("clGetEventProfilingInfo", api.clGetEventProfilingInfo)) {
    return "clGetEventProfilingInfo";
  }
  if (missing("clRetainEvent", api.clRetainEvent)) return "clRetainEvent";
  if (missing("clReleaseEvent", api.clReleaseEvent)) return "clReleaseEvent";
  return nullptr;
}

// What a failed dlopen of `path` is worth telling: nothing for a file that is not there (the
// common case, listed by name alone), else the loader's reason (wrong architecture, missing
// dependency), which the user needs to fix it.
std::string open_failure(const std::string& path) {
  const char* reason = dlerror();
  const bool is_path = path.find('/') != std::string::npos;
  if (reason == nullptr || (is_path && access(path.c_str(), F_OK) != 0)) return "";
  if (!is_path && std::string(reason).find("No such file") != std::string::npos) return "";
  return reason;
}

// The result of the first cl() call: the library, or the error every call rethrows. Never
// destroyed (the library is never closed either): a backend held by another static object, e.g. a
// test's cache of backends, releases its OpenCL objects through this table during exit, after
// any function-local static made later than that object is gone.
const std::variant<ClLibrary, std::string>& process_library() {
  static const auto* library =
      new std::variant<ClLibrary, std::string>([]() -> std::variant<ClLibrary, std::string> {
        const char* env = std::getenv("EDGELM_OPENCL_LIB");
        const std::vector<std::string> candidates = opencl_library_candidates(env);
        try {
          return load_opencl_library(candidates, env != nullptr && *env != '\0');
        } catch (const Error& error) {
          return std::string(error.what());
        }
      }());
  return *library;
}

const ClLibrary& loaded_library() {
  const auto& library = process_library();
  if (const auto* message = std::get_if<std::string>(&library)) EDGELM_FAIL(*message);
  return std::get<ClLibrary>(library);
}

}  // namespace

std::vector<std::string> opencl_library_candidates(const char* env_value) {
  if (env_value != nullptr && *env_value != '\0') return {env_value};
  return {"libOpenCL.so.1",
          "libOpenCL.so",
          "/vendor/lib64/libOpenCL.so",
          "/system/vendor/lib64/libOpenCL.so",
          "/system/lib64/libOpenCL.so",
          "/vendor/lib64/egl/libGLES_mali.so",
          "/system/vendor/lib64/egl/libGLES_mali.so"};
}

ClLibrary load_opencl_library(const std::vector<std::string>& candidates, bool from_env) {
  std::string tried;
  for (const std::string& path : candidates) {
    if (!tried.empty()) tried += ", ";
    tried += from_env ? "$EDGELM_OPENCL_LIB=" + path : path;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const std::string reason = open_failure(path);
      if (!reason.empty()) tried += " (" + reason + ")";
      continue;
    }
    ClLibrary library{.path = path, .api = {}};
    if (const char* missing = resolve_all(handle, library.api)) {
      tried += std::string(" (has no ") + missing + ")";
      dlclose(handle);
      continue;
    }
    return library;
  }
  EDGELM_FAIL("[opencl] no OpenCL library: tried ", tried,
              " (install an OpenCL driver or set EDGELM_OPENCL_LIB)");
}

const ClApi& cl() {
  return loaded_library().api;
}

const std::string& opencl_library_path() {
  return loaded_library().path;
}

#if EDGELM_HAVE_CLBLAST
namespace {

struct ClblastLoad {
  std::optional<ClblastApi> api;
  std::string failure;
};

// Never destroyed, as process_library() above.
const ClblastLoad& clblast_load() {
  static const auto* load = new ClblastLoad([] {
    ClblastLoad result;
    try {
      cl();
    } catch (const Error&) {
      result.failure = "no OpenCL library (CLBlast needs one)";
      return result;
    }
    std::string tried;
    for (const char* path : {"libclblast.so.1", "libclblast.so"}) {
      if (!tried.empty()) tried += ", ";
      tried += path;
      void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const std::string reason = open_failure(path);
        if (!reason.empty()) tried += " (" + reason + ")";
        continue;
      }
      ClblastApi api;
      if (!resolve(handle, "CLBlastSgemmWithTempBuffer", api.sgemm_with_temp_buffer) ||
          !resolve(handle, "CLBlastSGemmTempBufferSize", api.sgemm_temp_buffer_size)) {
        tried += " (has no CLBlastSgemmWithTempBuffer or CLBlastSGemmTempBufferSize)";
        dlclose(handle);
        continue;
      }
      result.api = api;
      return result;
    }
    result.failure = "no CLBlast library: tried " + tried;
    return result;
  }());
  return *load;
}

}  // namespace

const ClblastApi* clblast() {
  const ClblastLoad& load = clblast_load();
  return load.api ? &*load.api : nullptr;
}

std::string clblast_unavailable_reason() {
  return clblast_load().failure;
}
#else
std::string clblast_unavailable_reason() {
  return "this build has no CLBlast (configured without its header, clblast_c.h)";
}
#endif

}  // namespace edgelm::opencl
