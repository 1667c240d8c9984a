#include "backends/opencl/opencl_backend.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/op_checks.h"

namespace edgelm::opencl {
namespace {

// Kernels are OpenCL C 1.2. Half values are read and written with vload_half/vstore_half, which
// need no extension; devices that report cl_khr_fp16 also get EDGELM_FP16 so that kernels may use
// half arithmetic where they choose to (the math stays float everywhere today).
std::string build_options(const Device& device) {
  std::string options = "-cl-std=CL1.2";
  if (device.info().fp16) options += " -DEDGELM_FP16=1";
  return options;
}

// Auto resolved: the environment's choice, then CLBlast when it loads. A GEMM asked for by name
// that cannot run is an error rather than a silent switch to the other one.
ClGemm choose_gemm(ClGemm requested) {
  if (requested == ClGemm::Auto) {
    if (const char* env = std::getenv("EDGELM_CL_GEMM"); env != nullptr && *env != '\0') {
      requested = parse_cl_gemm(env);
    }
  }
  if (requested == ClGemm::Own) return requested;  // CLBlast is then not even opened
  const std::string unavailable = clblast_unavailable_reason();
  if (requested == ClGemm::Clblast && !unavailable.empty()) {
    EDGELM_FAIL("[opencl] the CLBlast GEMM was asked for but is unavailable: ", unavailable);
  }
  return unavailable.empty() ? ClGemm::Clblast : ClGemm::Own;
}

std::shared_ptr<Device> open_device(const OpenClOptions& options) {
  return std::make_shared<Device>(DeviceOptions{
      .platform = options.platform, .device = options.device, .profiling = options.profile});
}

}  // namespace

const char* cl_gemm_name(ClGemm gemm) {
  switch (gemm) {
    case ClGemm::Auto:
      return "auto";
    case ClGemm::Clblast:
      return "clblast";
    case ClGemm::Own:
      return "own";
  }
  return "?";
}

ClGemm parse_cl_gemm(const std::string& text) {
  for (ClGemm gemm : {ClGemm::Auto, ClGemm::Clblast, ClGemm::Own}) {
    if (text == cl_gemm_name(gemm)) return gemm;
  }
  EDGELM_FAIL("[opencl] EDGELM_CL_GEMM='", text, "': use auto, clblast or own");
}

OpenClBackend::OpenClBackend(const OpenClOptions& options)
    : device_(open_device(options)),
      memory_(std::make_shared<SharedMemory>(device_, host_pointer_mode_from_env())),
      programs_(device_, build_options(*device_),
                options.cache_dir.value_or(ProgramCache::default_dir())),
      gemm_min_rows_(options.gemm_min_rows),
      gemm_tile_bytes_(options.gemm_tile_bytes),
      gemm_(choose_gemm(options.gemm)) {
  programs_.build_all();
}

OpenClBackend::~OpenClBackend() {
  // Buffers made from memory() may outlive the backend; they only need the device, which they
  // share. Work still queued must finish before the kernels and scratch go away.
  cl().clFinish(device_->queue());
}

std::string OpenClBackend::device() const {
  return device_->info().describe();
}

// Every weight type is multiplied as stored: each has a GEMV kernel of its own and decodes into
// the GEMM path's tiles, so nothing is converted at load.
DType OpenClBackend::matmul_weight_type(DType dtype) const {
  return dtype;
}

bool OpenClBackend::can_use(const Buffer& buffer) const {
  if (buffer.handle() == nullptr) return false;
  cl_context owner = nullptr;
  return cl().clGetMemObjectInfo(static_cast<cl_mem>(buffer.handle()), CL_MEM_CONTEXT,
                                 sizeof(owner), &owner, nullptr) == CL_SUCCESS &&
         owner == device_->context();
}

bool OpenClBackend::supports(OpKind op, std::initializer_list<DType> dtypes) const {
  const size_t n = dtypes.size();
  const DType* d = dtypes.begin();
  // The types every op that decodes or encodes weights takes (load_element, the cast_to_*
  // kernels); the K-quants are decoded (embed, matmul, cast to a float type) but not encoded.
  auto weight_type = [](DType t) {
    return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 ||
           t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1;
  };
  auto k_quant = [](DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; };
  auto float_type = [](DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; };
  auto only = [&](DType expected) { return n == 1 && d[0] == expected; };
  switch (op) {
    case OpKind::Embed:
    case OpKind::Matmul:
      return n == 1 && (weight_type(d[0]) || k_quant(d[0]));
    case OpKind::Attention:
    case OpKind::KvAppend:
      return only(DType::F32) || only(DType::F16);
    case OpKind::RmsNorm:
    case OpKind::Rope:
    case OpKind::SiluMul:
    case OpKind::Add:
    case OpKind::Softmax:
      return only(DType::F32);
    case OpKind::Cast:
      return n == 2 &&
             ((weight_type(d[0]) && weight_type(d[1])) || (k_quant(d[0]) && float_type(d[1])));
    case OpKind::KvCompact:
      return n == 1 && static_cast<int>(d[0]) < kDTypeCount && !dtype_is_quantized(d[0]);
    case OpKind::Copy:
      return n == 1 && static_cast<int>(d[0]) < kDTypeCount;
    case OpKind::Count:
      break;
  }
  return false;
}

void OpenClBackend::synchronize() {
  CL_CHECK(cl().clFinish(device_->queue()));
  collect_profile();
}

void OpenClBackend::track_event(const char* op, const char* kernel, EventHandle event) {
  pending_.push_back({op, kernel, std::move(event)});
  // Bound the list on long runs without a synchronize(): collecting waits for those kernels.
  if (pending_.size() >= 4096) collect_profile();
}

void OpenClBackend::collect_profile() {
  for (PendingEvent& pending : pending_) {
    cl_event event = pending.event.get();
    CL_CHECK(cl().clWaitForEvents(1, &event));
    cl_ulong start = 0, end = 0;
    CL_CHECK(cl().clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof(start), &start,
                                          nullptr));
    CL_CHECK(
        cl().clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr));
    OpTiming& timing = timings_[{pending.op, pending.kernel}];
    timing.op = pending.op;
    timing.kernel = pending.kernel;
    ++timing.calls;
    timing.seconds += static_cast<double>(end - start) * 1e-9;
  }
  pending_.clear();
}

std::vector<OpTiming> OpenClBackend::op_timings() const {
  return sorted_by_time(timings_);
}

OpenClBackend::KernelCall OpenClBackend::call(const char* op, const char* family,
                                              const char* kernel) {
  return KernelCall(*this, op, kernel, programs_.kernel(family, kernel));
}

cl_mem OpenClBackend::mem_of(const Tensor& t, const char* op, const char* role) {
  EDGELM_CHECK(t.defined(), "[opencl] ", op, ": ", role, " tensor is undefined");
  void* handle = t.buffer()->handle();
  EDGELM_CHECK(handle != nullptr, "[opencl] ", op, ": ", role, " ", t.describe(),
               " is not in OpenCL memory (allocate it from the backend's memory())");
  return static_cast<cl_mem>(handle);
}

cl_mem OpenClBackend::scratch(int slot, size_t bytes) {
  if (scratch_.size() <= static_cast<size_t>(slot)) scratch_.resize(static_cast<size_t>(slot) + 1);
  auto& [size, mem] = scratch_[static_cast<size_t>(slot)];
  if (!mem || size < bytes) {
    // Buffers released here stay alive until queued kernels that use them finish (OpenCL keeps
    // a reference per enqueued command).
    cl_int status = CL_SUCCESS;
    const size_t grown = std::max(bytes, size + size / 2);
    mem = MemHandle(
        cl().clCreateBuffer(device_->context(), CL_MEM_READ_WRITE, grown, nullptr, &status));
    if (status != CL_SUCCESS) {
      EDGELM_FAIL("[opencl] allocating ", grown,
                  " bytes of scratch failed: ", cl_error_name(status));
    }
    size = grown;
  }
  return mem.get();
}

OpenClBackend::KernelCall& OpenClBackend::KernelCall::set(size_t size, const void* value) {
  const cl_int status = cl().clSetKernelArg(kernel_, index_, size, value);
  if (status != CL_SUCCESS) {
    EDGELM_FAIL("[opencl] ", op_, ": argument ", index_, " of kernel ", name_, ": ",
                cl_error_name(status));
  }
  ++index_;
  return *this;
}

void OpenClBackend::KernelCall::run(std::array<size_t, 3> global, std::array<size_t, 3> local) {
  cl_uint dims = 0;
  size_t rounded[3] = {1, 1, 1};
  size_t group[3] = {1, 1, 1};
  for (int i = 0; i < 3 && global[i] != 0; ++i) {
    group[i] = std::max<size_t>(1, local[i]);
    rounded[i] = (global[i] + group[i] - 1) / group[i] * group[i];
    dims = static_cast<cl_uint>(i + 1);
  }
  if (dims == 0) return;  // nothing to do (an empty tensor)
  const bool profiling = backend_.device_->profiling();
  EventHandle event;
  const cl_int status =
      cl().clEnqueueNDRangeKernel(backend_.queue(), kernel_, dims, nullptr, rounded, group, 0,
                                  nullptr, profiling ? event.reset_and_get_address() : nullptr);
  if (status != CL_SUCCESS) {
    EDGELM_FAIL("[opencl] ", op_, ": enqueueing kernel ", name_, " (global ", rounded[0], "x",
                rounded[1], "x", rounded[2], ", local ", group[0], "x", group[1], "x", group[2],
                ") failed: ", cl_error_name(status));
  }
  if (profiling) backend_.track_event(op_, name_, std::move(event));
}

void OpenClBackend::copy(const Tensor& src, const Tensor& dst) {
  op_checks::copy("opencl", src, dst);
  if (src.nbytes() == 0) return;
  cl_mem from = mem_of(src, "copy", "src");
  cl_mem to = mem_of(dst, "copy", "dst");
  if (from == to && src.byte_offset() == dst.byte_offset()) return;
  EventHandle event;
  const bool profiling = device_->profiling();
  CL_CHECK(cl().clEnqueueCopyBuffer(queue(), from, to, src.byte_offset(), dst.byte_offset(),
                                    src.nbytes(), 0, nullptr,
                                    profiling ? event.reset_and_get_address() : nullptr));
  count_transfer(src.nbytes());
  if (profiling) track_event("copy", "clEnqueueCopyBuffer", std::move(event));
}

}  // namespace edgelm::opencl
