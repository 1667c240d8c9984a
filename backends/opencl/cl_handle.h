// RAII handles for every OpenCL object the backend creates (the only place clRelease* is called),
// and CL_CHECK, which turns an error code into an edgelm::Error with its symbolic name, the call,
// file and line. The OpenCL functions come from the run-time loaded library (cl_loader.h).
#pragma once

#include <utility>

#include "backends/opencl/cl_loader.h"

namespace edgelm::opencl {

// "CL_OUT_OF_RESOURCES" for -5; "CL_UNKNOWN_ERROR(<code>)" for codes it does not know.
const char* cl_error_name(cl_int code);

// Throws edgelm::Error "[opencl] <call> failed: <name> (<file>:<line>)" when code != CL_SUCCESS.
void check_cl(cl_int code, const char* call, const char* file, int line);

#define CL_CHECK(call) ::edgelm::opencl::check_cl((call), #call, __FILE__, __LINE__)

// Owns one reference to an OpenCL object; copies retain, destruction releases. Retain and Release
// are the ClApi entries for T (the library is loaded: the object came from it).
template <class T, auto ClApi::*Retain, auto ClApi::*Release>
class Handle {
 public:
  Handle() = default;
  // Takes over a reference the caller owns (what clCreate* returned).
  explicit Handle(T object) : object_(object) {}
  Handle(const Handle& other) : object_(other.object_) {
    if (object_ != nullptr) (cl().*Retain)(object_);
  }
  Handle(Handle&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  Handle& operator=(Handle other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }
  ~Handle() {
    if (object_ != nullptr) (cl().*Release)(object_);
  }

  T get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }
  // For out-parameters of clCreate*/clEnqueue* calls: releases what is held and returns the slot.
  T* reset_and_get_address() {
    *this = Handle();
    return &object_;
  }

 private:
  T object_ = nullptr;
};

using ContextHandle = Handle<cl_context, &ClApi::clRetainContext, &ClApi::clReleaseContext>;
using QueueHandle =
    Handle<cl_command_queue, &ClApi::clRetainCommandQueue, &ClApi::clReleaseCommandQueue>;
using MemHandle = Handle<cl_mem, &ClApi::clRetainMemObject, &ClApi::clReleaseMemObject>;
using ProgramHandle = Handle<cl_program, &ClApi::clRetainProgram, &ClApi::clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, &ClApi::clRetainKernel, &ClApi::clReleaseKernel>;
using EventHandle = Handle<cl_event, &ClApi::clRetainEvent, &ClApi::clReleaseEvent>;

}  // namespace edgelm::opencl
