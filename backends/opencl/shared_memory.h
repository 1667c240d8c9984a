// SharedMemory: the OpenCL backend's allocator. Every buffer is an OpenCL buffer object that stays
// mapped for its whole life, so Buffer::host_ptr() is the CPU's view of the very bytes kernels
// read and write, and Buffer::handle() is the cl_mem. On unified-memory devices (Adreno, Mali,
// integrated GPUs, PoCL) nothing is ever copied: the CPU backend, the loader and the KV cache use
// the host pointer, OpenCL kernels use the cl_mem. See docs/opencl_backend.md for the rules
// (who may touch the bytes when, and why synchronize() is enough).
#pragma once

#include <memory>
#include <string>

#include "backends/opencl/device.h"
#include "core/buffer.h"

namespace edgelm::opencl {

enum class HostPointerMode {
  // CL_MEM_ALLOC_HOST_PTR: the driver allocates host-accessible memory (the zero-copy path that
  // Qualcomm and Arm document for their GPUs); the host pointer is what the mapping returns.
  AllocHostPtr,
  // CL_MEM_USE_HOST_PTR over our own page-aligned allocation; the mapping must return that same
  // pointer (checked), which is zero-copy on unified-memory devices.
  UseHostPtr,
};

// Reads EDGELM_CL_MEMORY ("alloc_host_ptr", the default, or "use_host_ptr"); throws edgelm::Error
// naming the variable for any other value.
HostPointerMode host_pointer_mode_from_env();

class SharedMemory final : public Memory {
 public:
  SharedMemory(std::shared_ptr<Device> device, HostPointerMode mode);

  std::string name() const override { return "opencl-shared"; }
  // A read-write buffer of `size` bytes (at least 64 are reserved so that a zero-byte tensor still
  // has a valid cl_mem), mapped for reading and writing until it is released.
  std::shared_ptr<Buffer> allocate(size_t size) override;

  HostPointerMode mode() const { return mode_; }

 private:
  std::shared_ptr<Device> device_;
  HostPointerMode mode_;
};

}  // namespace edgelm::opencl
