#include "backends/opencl/shared_memory.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace edgelm::opencl {
namespace {

// Page alignment for CL_MEM_USE_HOST_PTR: drivers that share the pages (Mali, Adreno, Intel) want
// at least a page; it is also a multiple of kBufferAlignment.
constexpr size_t kHostPageAlignment = 4096;

}  // namespace

HostPointerMode host_pointer_mode_from_env() {
  const char* value = std::getenv("EDGELM_CL_MEMORY");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "alloc_host_ptr") == 0) {
    return HostPointerMode::AllocHostPtr;
  }
  if (std::strcmp(value, "use_host_ptr") == 0) return HostPointerMode::UseHostPtr;
  EDGELM_FAIL("[opencl] EDGELM_CL_MEMORY='", value, "' is not one of alloc_host_ptr, use_host_ptr");
}

SharedMemory::SharedMemory(std::shared_ptr<Device> device, HostPointerMode mode)
    : device_(std::move(device)), mode_(mode) {}

std::shared_ptr<Buffer> SharedMemory::allocate(size_t size) {
  const size_t reserved = std::max<size_t>(
      (size + kHostPageAlignment - 1) / kHostPageAlignment * kHostPageAlignment, kBufferAlignment);
  void* own_pages = nullptr;
  cl_mem_flags flags = CL_MEM_READ_WRITE;
  if (mode_ == HostPointerMode::UseHostPtr) {
    own_pages = std::aligned_alloc(kHostPageAlignment, reserved);
    if (own_pages == nullptr) EDGELM_FAIL("[opencl] host allocation of ", size, " bytes failed");
    flags |= CL_MEM_USE_HOST_PTR;
  } else {
    flags |= CL_MEM_ALLOC_HOST_PTR;
  }
  cl_int status = CL_SUCCESS;
  MemHandle mem(cl().clCreateBuffer(device_->context(), flags, reserved, own_pages, &status));
  if (status != CL_SUCCESS) {
    std::free(own_pages);
    EDGELM_FAIL("[opencl] allocating a shared buffer of ", size,
                " bytes failed: ", cl_error_name(status), " (device memory ",
                device_->info().global_memory, " bytes, largest allocation ",
                device_->info().max_allocation, ")");
  }
  // Mapped once, for good: the blocking map makes the pointer valid at return.
  void* host =
      cl().clEnqueueMapBuffer(device_->queue(), mem.get(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                              reserved, 0, nullptr, nullptr, &status);
  if (status != CL_SUCCESS) {
    std::free(own_pages);
    EDGELM_FAIL("[opencl] mapping a shared buffer of ", size,
                " bytes failed: ", cl_error_name(status));
  }
  if (own_pages != nullptr && host != own_pages) {
    cl().clEnqueueUnmapMemObject(device_->queue(), mem.get(), host, 0, nullptr, nullptr);
    cl().clFinish(device_->queue());
    mem = MemHandle();
    std::free(own_pages);
    EDGELM_FAIL("[opencl] the driver mapped a CL_MEM_USE_HOST_PTR buffer to a different address ",
                "(it copies instead of sharing); use EDGELM_CL_MEMORY=alloc_host_ptr");
  }
  auto untrack = track(size);
  cl_mem handle = mem.get();
  return std::make_shared<Buffer>(host, size, handle,
                                  [device = device_, mem = std::move(mem), host, own_pages,
                                   untrack = std::move(untrack)]() mutable {
                                    // Kernels that used the buffer must be done before its memory
                                    // goes away.
                                    cl().clFinish(device->queue());
                                    cl().clEnqueueUnmapMemObject(device->queue(), mem.get(), host,
                                                                 0, nullptr, nullptr);
                                    cl().clFinish(device->queue());
                                    // Release the object before freeing the pages it was created
                                    // over.
                                    mem = MemHandle();
                                    std::free(own_pages);
                                    untrack();
                                  });
}

}  // namespace edgelm::opencl
