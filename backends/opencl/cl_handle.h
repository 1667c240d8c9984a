// OpenCL headers at the 1.2 API level, RAII handles for every OpenCL object the backend creates
// (the only place clRelease* is called), and CL_CHECK, which turns an error code into an
// edgelm::Error with its symbolic name, the call, file and line.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <utility>

namespace edgelm::opencl {

// "CL_OUT_OF_RESOURCES" for -5; "CL_UNKNOWN_ERROR(<code>)" for codes it does not know.
const char* cl_error_name(cl_int code);

// Throws edgelm::Error "[opencl] <call> failed: <name> (<file>:<line>)" when code != CL_SUCCESS.
void check_cl(cl_int code, const char* call, const char* file, int line);

#define CL_CHECK(call) ::edgelm::opencl::check_cl((call), #call, __FILE__, __LINE__)

// Owns one reference to an OpenCL object; copies retain, destruction releases.
template <class T, cl_int (*Retain)(T), cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  // Takes over a reference the caller owns (what clCreate* returned).
  explicit Handle(T object) : object_(object) {}
  Handle(const Handle& other) : object_(other.object_) {
    if (object_ != nullptr) Retain(object_);
  }
  Handle(Handle&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  Handle& operator=(Handle other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }
  ~Handle() {
    if (object_ != nullptr) Release(object_);
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

using ContextHandle = Handle<cl_context, clRetainContext, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clRetainCommandQueue, clReleaseCommandQueue>;
using MemHandle = Handle<cl_mem, clRetainMemObject, clReleaseMemObject>;
using ProgramHandle = Handle<cl_program, clRetainProgram, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clRetainKernel, clReleaseKernel>;
using EventHandle = Handle<cl_event, clRetainEvent, clReleaseEvent>;

}  // namespace edgelm::opencl
