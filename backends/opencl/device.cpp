#include "backends/opencl/device.h"

#include <sstream>

#include "core/error.h"

namespace edgelm::opencl {
namespace {

std::vector<cl_platform_id> platform_ids() {
  cl_uint count = 0;
  const cl_int status = cl().clGetPlatformIDs(0, nullptr, &count);
  // The ICD loader reports "no platform" as CL_PLATFORM_NOT_FOUND_KHR (-1001) or as success with
  // zero platforms, depending on the loader.
  if (status == -1001 || count == 0) return {};
  CL_CHECK(status);
  std::vector<cl_platform_id> ids(count);
  CL_CHECK(cl().clGetPlatformIDs(count, ids.data(), nullptr));
  return ids;
}

std::vector<cl_device_id> device_ids(cl_platform_id platform) {
  cl_uint count = 0;
  const cl_int status = cl().clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count);
  if (status == CL_DEVICE_NOT_FOUND || count == 0) return {};
  CL_CHECK(status);
  std::vector<cl_device_id> ids(count);
  CL_CHECK(cl().clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr));
  return ids;
}

std::string platform_string(cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  CL_CHECK(cl().clGetPlatformInfo(platform, what, 0, nullptr, &size));
  std::string text(size, '\0');
  CL_CHECK(cl().clGetPlatformInfo(platform, what, size, text.data(), nullptr));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

std::string device_string(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  CL_CHECK(cl().clGetDeviceInfo(device, what, 0, nullptr, &size));
  std::string text(size, '\0');
  CL_CHECK(cl().clGetDeviceInfo(device, what, size, text.data(), nullptr));
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

template <class T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  CL_CHECK(cl().clGetDeviceInfo(device, what, sizeof(T), &value, nullptr));
  return value;
}

DeviceInfo describe_device(int platform_index, cl_platform_id platform, int device_index,
                           cl_device_id device) {
  DeviceInfo info;
  info.platform = platform_index;
  info.device = device_index;
  info.platform_name = platform_string(platform, CL_PLATFORM_NAME);
  info.device_name = device_string(device, CL_DEVICE_NAME);
  info.device_version = device_string(device, CL_DEVICE_VERSION);
  info.driver_version = device_string(device, CL_DRIVER_VERSION);
  info.c_version = device_string(device, CL_DEVICE_OPENCL_C_VERSION);
  info.extensions = device_string(device, CL_DEVICE_EXTENSIONS);
  const auto type = device_value<cl_device_type>(device, CL_DEVICE_TYPE);
  info.type = (type & CL_DEVICE_TYPE_GPU)           ? "gpu"
              : (type & CL_DEVICE_TYPE_CPU)         ? "cpu"
              : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                                                    : "other";
  info.global_memory = device_value<cl_ulong>(device, CL_DEVICE_GLOBAL_MEM_SIZE);
  info.max_allocation = device_value<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  info.max_work_group = device_value<size_t>(device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  info.compute_units = device_value<cl_uint>(device, CL_DEVICE_MAX_COMPUTE_UNITS);
  info.unified_memory = device_value<cl_bool>(device, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
  info.fp16 = (" " + info.extensions + " ").find(" cl_khr_fp16 ") != std::string::npos;
  return info;
}

}  // namespace

std::string DeviceInfo::describe() const {
  std::ostringstream out;
  out.precision(3);
  out << platform << ":" << device << " " << device_name << " (" << type << ", " << platform_name
      << ", " << device_version << ", " << compute_units << " compute units, "
      << static_cast<double>(global_memory) / (1024.0 * 1024.0 * 1024.0) << " GiB"
      << (unified_memory ? ", unified memory" : "") << (fp16 ? ", fp16" : "") << ")";
  return out.str();
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> devices;
  const std::vector<cl_platform_id> platforms = platform_ids();
  for (size_t p = 0; p < platforms.size(); ++p) {
    const std::vector<cl_device_id> ids = device_ids(platforms[p]);
    for (size_t d = 0; d < ids.size(); ++d) {
      devices.push_back(
          describe_device(static_cast<int>(p), platforms[p], static_cast<int>(d), ids[d]));
    }
  }
  return devices;
}

bool any_device() {
  try {
    return !list_devices().empty();
  } catch (const Error&) {
    return false;
  }
}

Device::Device(const DeviceOptions& options) : profiling_(options.profiling) {
  const std::vector<cl_platform_id> platforms = platform_ids();
  if (platforms.empty()) {
    EDGELM_FAIL("[opencl] no OpenCL platform found (no ICD installed; on Debian install ",
                "pocl-opencl-icd, on Android use the vendor's libOpenCL.so)");
  }
  int platform = options.platform;
  int device = options.device;
  if (platform < 0) {
    // The first platform with a GPU, else the first with any device.
    for (size_t p = 0; p < platforms.size() && platform < 0; ++p) {
      cl_uint gpus = 0;
      if (cl().clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_GPU, 0, nullptr, &gpus) == CL_SUCCESS &&
          gpus > 0) {
        platform = static_cast<int>(p);
      }
    }
    for (size_t p = 0; p < platforms.size() && platform < 0; ++p) {
      if (!device_ids(platforms[p]).empty()) platform = static_cast<int>(p);
    }
    if (platform < 0) {
      EDGELM_FAIL("[opencl] ", platforms.size(), " OpenCL platform(s) found but no device");
    }
  }
  if (platform >= static_cast<int>(platforms.size())) {
    EDGELM_FAIL("[opencl] --cl-platform ", platform, " out of range: ", platforms.size(),
                " platform(s) (see --list-devices)");
  }
  const std::vector<cl_device_id> ids = device_ids(platforms[platform]);
  if (ids.empty()) EDGELM_FAIL("[opencl] platform ", platform, " has no device");
  if (device < 0) {
    device = 0;
    for (size_t d = 0; d < ids.size(); ++d) {
      if (device_value<cl_device_type>(ids[d], CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) {
        device = static_cast<int>(d);
        break;
      }
    }
  }
  if (device >= static_cast<int>(ids.size())) {
    EDGELM_FAIL("[opencl] --cl-device ", device, " out of range: platform ", platform, " has ",
                ids.size(), " device(s) (see --list-devices)");
  }
  device_ = ids[device];
  info_ = describe_device(platform, platforms[platform], device, device_);

  cl_int status = CL_SUCCESS;
  const cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platforms[platform]), 0};
  context_ =
      ContextHandle(cl().clCreateContext(properties, 1, &device_, nullptr, nullptr, &status));
  CL_CHECK(status);
  const cl_command_queue_properties queue_properties =
      options.profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
  queue_ =
      QueueHandle(cl().clCreateCommandQueue(context_.get(), device_, queue_properties, &status));
  CL_CHECK(status);
}

bool Device::has_extension(const std::string& name) const {
  return (" " + info_.extensions + " ").find(" " + name + " ") != std::string::npos;
}

}  // namespace edgelm::opencl
