// The OpenCL backend: runs every op of the op set as OpenCL C kernels (kernels/*.cl, embedded at
// build time) on one device, over SharedMemory buffers that the CPU sees through host_ptr(). Ops
// are enqueued on one in-order queue and return at once; synchronize() waits for them. Prefill
// GEMMs go through CLBlast when it loads, else through the backend's own tiled GEMM kernel
// (OpenClOptions::gemm). One host file per op family implements the methods:
// elementwise.cpp, convert.cpp, kv.cpp, matmul.cpp, attention.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/opencl/cl_handle.h"
#include "backends/opencl/device.h"
#include "backends/opencl/program_cache.h"
#include "backends/opencl/shared_memory.h"
#include "core/backend.h"

namespace edgelm::opencl {

// Which GEMM multiplies the matmuls of the tiled path (OpenClOptions::gemm_min_rows rows or more).
enum class ClGemm {
  Auto,     // $EDGELM_CL_GEMM when set, else CLBlast when it loads, else Own
  Clblast,  // CLBlast's SGEMM; the backend refuses to start when CLBlast does not load
  Own,      // matmul_gemm_f32 of kernels/matmul.cl
};

// "auto", "clblast", "own".
const char* cl_gemm_name(ClGemm gemm);

// The value of $EDGELM_CL_GEMM ("auto", "clblast" or "own"); throws edgelm::Error naming the
// variable for any other text.
ClGemm parse_cl_gemm(const std::string& text);

struct OpenClOptions {
  int platform = -1;     // --cl-platform; -1: first platform with a GPU, else any
  int device = -1;       // --cl-device; -1: first GPU of the platform, else its first device
  bool profile = false;  // time every kernel with profiling events (op_timings())
  // Where compiled programs are cached; ProgramCache::default_dir() unless set. Empty: no cache.
  std::optional<std::filesystem::path> cache_dir;
  // Matmuls with at least this many rows of x use the tiled GEMM path (F32 weights directly,
  // tiles of dequantized weights otherwise); fewer rows use the GEMV kernels. 0: never.
  int64_t gemm_min_rows = 8;
  // Largest F32 tile of converted weight rows in the GEMM path (32 MiB: 2,048 rows of K = 4,096,
  // large enough for SGEMM to run at full efficiency, small enough for a phone's GPU heap).
  size_t gemm_tile_bytes = size_t{32} << 20;
  // The GEMM of the tiled path. Auto reads $EDGELM_CL_GEMM (for measuring one against the other
  // with any tool), then takes CLBlast when it loads; an explicit choice ignores the variable.
  ClGemm gemm = ClGemm::Auto;
};

class OpenClBackend final : public Backend {
 public:
  // Throws edgelm::Error (one line) when there is no platform/device or the indices are wrong.
  explicit OpenClBackend(const OpenClOptions& options = {});
  ~OpenClBackend() override;

  std::string name() const override { return "opencl"; }
  std::string device() const override;
  Memory& memory() override { return *memory_; }
  bool can_use(const Buffer& buffer) const override;
  DType matmul_weight_type(DType dtype) const override;
  bool supports(OpKind op, std::initializer_list<DType> dtypes) const override;
  void synchronize() override;
  uint64_t host_device_copy_bytes() const override { return copy_bytes_; }
  std::vector<OpTiming> op_timings() const override;
  void reset_op_timings() override { timings_.clear(); }

  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor& y) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override;
  void rope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
            const Tensor& out) override;
  void attention(const AttentionArgs& args) override;
  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void softmax(const Tensor& x, const Tensor& y) override;
  void cast(const Tensor& src, const Tensor& dst) override;
  void kv_append(const Tensor& src, const Tensor& slots, const Tensor& cache) override;
  void kv_compact(const Tensor& cache, const Tensor& keep) override;
  void copy(const Tensor& src, const Tensor& dst) override;

  const DeviceInfo& device_info() const { return device_->info(); }
  const ProgramCache& programs() const { return programs_; }

  // ---- For the op files (backends/opencl/*.cpp) ----

  // Sets a kernel's arguments in order and enqueues it; see KernelCall below. `op` and `kernel`
  // must be string literals: profiling keeps the pointers.
  class KernelCall;
  KernelCall call(const char* op, const char* family, const char* kernel);

  // The cl_mem under a tensor; throws naming the op and role when the tensor is not in OpenCL
  // memory (e.g. a host-only buffer).
  static cl_mem mem_of(const Tensor& t, const char* op, const char* role);

  // Device-only scratch of at least `bytes`, one per `slot` (grows, never shrinks). Contents are
  // not preserved across calls that grow it.
  cl_mem scratch(int slot, size_t bytes);

  // Counts bytes of an explicit transfer (enqueue write/read/copy).
  void count_transfer(size_t bytes) { copy_bytes_ += bytes; }
  // Records a profiling event for `op` / `kernel` (no-op without profiling).
  void track_event(const char* op, const char* kernel, EventHandle event);
  cl_command_queue queue() const { return device_->queue(); }
  // True when kernels are timed (OpenClOptions::profile): op files then pass events to track_event.
  bool profiling() const { return device_->profiling(); }
  cl_context context() const { return device_->context(); }
  int64_t gemm_min_rows() const { return gemm_min_rows_; }
  size_t gemm_tile_bytes() const { return gemm_tile_bytes_; }
  // The GEMM the tiled path uses: Clblast or Own, never Auto.
  ClGemm gemm() const { return gemm_; }

 private:
  struct PendingEvent {
    const char* op;
    const char* kernel;
    EventHandle event;
  };
  void collect_profile();

  std::shared_ptr<Device> device_;
  std::shared_ptr<SharedMemory> memory_;
  ProgramCache programs_;
  int64_t gemm_min_rows_;
  size_t gemm_tile_bytes_;
  ClGemm gemm_;
  uint64_t copy_bytes_ = 0;
  std::vector<std::pair<size_t, MemHandle>> scratch_;  // by slot: size, buffer
  std::vector<PendingEvent> pending_;
  OpTimingTable timings_;
};

class OpenClBackend::KernelCall {
 public:
  KernelCall(OpenClBackend& backend, const char* op, const char* kernel_name, cl_kernel kernel)
      : backend_(backend), op_(op), name_(kernel_name), kernel_(kernel) {}

  // A tensor argument is two kernel parameters: the buffer and the byte offset of the tensor in
  // it (global const uchar* base, ulong offset), because views start anywhere in a buffer and
  // sub-buffers would need device-aligned offsets.
  KernelCall& tensor(const Tensor& t, const char* role = "operand") {
    cl_mem mem = mem_of(t, op_, role);
    set(sizeof(cl_mem), &mem);
    const cl_ulong offset = t.byte_offset();
    return set(sizeof(offset), &offset);
  }
  KernelCall& buffer(cl_mem mem) { return set(sizeof(cl_mem), &mem); }
  KernelCall& i32(int64_t value) {
    const cl_int v = static_cast<cl_int>(value);
    return set(sizeof(v), &v);
  }
  KernelCall& f32(float value) { return set(sizeof(value), &value); }
  KernelCall& u64(uint64_t value) {
    const cl_ulong v = value;
    return set(sizeof(v), &v);
  }
  // A __local array of `bytes`.
  KernelCall& local(size_t bytes) { return set(bytes, nullptr); }

  // Enqueues over `global` work-items in groups of `local` (each global size is rounded up to a
  // multiple of the local size; kernels check their bounds). dims = number of non-zero entries.
  void run(std::array<size_t, 3> global, std::array<size_t, 3> local);

 private:
  KernelCall& set(size_t size, const void* value);

  OpenClBackend& backend_;
  const char* op_;
  const char* name_;
  cl_kernel kernel_;
  cl_uint index_ = 0;
};

}  // namespace edgelm::opencl
