// The OpenCL library, opened at run time (dlopen) instead of linked, so that one binary starts on a
// machine without an OpenCL driver and its CPU backend works there; only --backend opencl then
// fails, with one line saying which libraries were tried. cl() resolves every OpenCL entry point
// edgelm calls into a table at first use; the backend calls through it (cl().clFinish(queue)).
// CLBlast, optional, is opened the same way (clblast_loader.h) when the build found its C header.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>
#include <vector>

namespace edgelm::opencl {

// Every OpenCL function the backend calls, as pointers into the opened library. The types are the
// header's own prototypes: decltype names them without referencing the symbols, so nothing links
// libOpenCL. A function missing here is a compile error at its call site.
struct ClApi {
  decltype(&::clGetPlatformIDs) clGetPlatformIDs = nullptr;
  decltype(&::clGetPlatformInfo) clGetPlatformInfo = nullptr;
  decltype(&::clGetDeviceIDs) clGetDeviceIDs = nullptr;
  decltype(&::clGetDeviceInfo) clGetDeviceInfo = nullptr;
  decltype(&::clCreateContext) clCreateContext = nullptr;
  decltype(&::clRetainContext) clRetainContext = nullptr;
  decltype(&::clReleaseContext) clReleaseContext = nullptr;
  decltype(&::clCreateCommandQueue) clCreateCommandQueue = nullptr;
  decltype(&::clRetainCommandQueue) clRetainCommandQueue = nullptr;
  decltype(&::clReleaseCommandQueue) clReleaseCommandQueue = nullptr;
  decltype(&::clCreateBuffer) clCreateBuffer = nullptr;
  decltype(&::clRetainMemObject) clRetainMemObject = nullptr;
  decltype(&::clReleaseMemObject) clReleaseMemObject = nullptr;
  decltype(&::clGetMemObjectInfo) clGetMemObjectInfo = nullptr;
  decltype(&::clCreateProgramWithSource) clCreateProgramWithSource = nullptr;
  decltype(&::clCreateProgramWithBinary) clCreateProgramWithBinary = nullptr;
  decltype(&::clBuildProgram) clBuildProgram = nullptr;
  decltype(&::clGetProgramInfo) clGetProgramInfo = nullptr;
  decltype(&::clGetProgramBuildInfo) clGetProgramBuildInfo = nullptr;
  decltype(&::clRetainProgram) clRetainProgram = nullptr;
  decltype(&::clReleaseProgram) clReleaseProgram = nullptr;
  decltype(&::clCreateKernel) clCreateKernel = nullptr;
  decltype(&::clSetKernelArg) clSetKernelArg = nullptr;
  decltype(&::clRetainKernel) clRetainKernel = nullptr;
  decltype(&::clReleaseKernel) clReleaseKernel = nullptr;
  decltype(&::clEnqueueNDRangeKernel) clEnqueueNDRangeKernel = nullptr;
  decltype(&::clEnqueueCopyBuffer) clEnqueueCopyBuffer = nullptr;
  decltype(&::clEnqueueMapBuffer) clEnqueueMapBuffer = nullptr;
  decltype(&::clEnqueueUnmapMemObject) clEnqueueUnmapMemObject = nullptr;
  decltype(&::clFinish) clFinish = nullptr;
  decltype(&::clWaitForEvents) clWaitForEvents = nullptr;
  decltype(&::clGetEventProfilingInfo) clGetEventProfilingInfo = nullptr;
  decltype(&::clRetainEvent) clRetainEvent = nullptr;
  decltype(&::clReleaseEvent) clReleaseEvent = nullptr;
};

// Where the OpenCL library is looked for, in order. `env_value` is $EDGELM_OPENCL_LIB: when set
// and not empty it is the only candidate (a user who names a library wants that one, not a
// fallback). Otherwise the ICD loader by its soname and its development link, then the vendor
// paths of Android phones: Adreno's /vendor/lib64/libOpenCL.so (and its older /system/vendor
// location), and Mali's driver, which exports the OpenCL API from libGLES_mali.so.
std::vector<std::string> opencl_library_candidates(const char* env_value);

// An opened library and its table. Never closed: the OpenCL objects of the process live until exit.
struct ClLibrary {
  std::string path;  // the candidate that opened
  ClApi api;
};

// Opens the first of `candidates` that loads and exports every function of ClApi. Throws
// edgelm::Error, one line, naming each candidate tried and why a loadable one was refused:
// "[opencl] no OpenCL library: tried libOpenCL.so.1, ... (install an OpenCL driver or set
// EDGELM_OPENCL_LIB)". `from_env` writes the single candidate as $EDGELM_OPENCL_LIB=<path>.
ClLibrary load_opencl_library(const std::vector<std::string>& candidates, bool from_env);

// The process's OpenCL table, opened at the first call from $EDGELM_OPENCL_LIB or the default
// candidates (thread-safe). Throws the loader's error, on this and every later call, when no
// library loads.
const ClApi& cl();

// The path cl() opened; throws as cl() does.
const std::string& opencl_library_path();

// Why CLBlast cannot be used (clblast_loader.h), one line without a component prefix, for quoting
// in an error: "this build has no CLBlast (...)" or "no CLBlast library: tried ...". Empty when it
// loaded.
std::string clblast_unavailable_reason();

}  // namespace edgelm::opencl
