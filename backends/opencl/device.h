// OpenCL platforms and devices: enumeration (for --list-devices and the backend registry) and the
// Device object the backend runs on: one context, one in-order queue, and what the device reports
// about itself (version, extensions, limits).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/opencl/cl_handle.h"

namespace edgelm::opencl {

struct DeviceInfo {
  int platform = 0;  // index in clGetPlatformIDs order
  int device = 0;    // index within the platform
  std::string platform_name;
  std::string device_name;
  std::string device_version;  // "OpenCL 3.0 PoCL ..."
  std::string driver_version;
  std::string c_version;  // "OpenCL C 1.2 ..."
  std::string type;       // "gpu", "cpu", "accelerator", "other"
  std::string extensions;
  uint64_t global_memory = 0;
  uint64_t max_allocation = 0;
  size_t max_work_group = 0;
  uint32_t compute_units = 0;
  bool unified_memory = false;  // CL_DEVICE_HOST_UNIFIED_MEMORY
  bool fp16 = false;            // cl_khr_fp16 reported

  // "0:0 Qualcomm Adreno(TM) 740 (gpu, OpenCL 3.0 Adreno(TM) 740, 8 compute units, 11.4 GiB)"
  std::string describe() const;
};

// Every device of every platform. Empty when the OpenCL library loads but has no platform (no ICD
// installed) — never throws for that; throws edgelm::Error when no OpenCL library loads (the
// loader's line, cl_loader.h) and for other failures of the queries.
std::vector<DeviceInfo> list_devices();

// True when at least one OpenCL device is present; false, without throwing, when no OpenCL
// library loads.
bool any_device();

struct DeviceOptions {
  int platform = -1;       // -1: choose (first platform with a GPU, else the first with any device)
  int device = -1;         // -1: the first GPU of the platform, else its first device
  bool profiling = false;  // queue with CL_QUEUE_PROFILING_ENABLE
};

// A chosen device with its context and in-order queue. Shared (by the backend, its memory and
// every buffer) so that buffers released last can still unmap through the queue.
class Device {
 public:
  // Throws edgelm::Error with one line naming the problem: no OpenCL library, no platform, index
  // out of range (listing what exists), or a failed context/queue creation.
  explicit Device(const DeviceOptions& options);

  const DeviceInfo& info() const { return info_; }
  cl_device_id id() const { return device_; }
  cl_context context() const { return context_.get(); }
  cl_command_queue queue() const { return queue_.get(); }
  bool profiling() const { return profiling_; }
  bool has_extension(const std::string& name) const;

 private:
  DeviceInfo info_;
  cl_device_id device_ = nullptr;
  ContextHandle context_;
  QueueHandle queue_;
  bool profiling_ = false;
};

}  // namespace edgelm::opencl
