// The CPU backend: runs every op through a kernel table (portable reference or an ISA-specific
// one) and splits the work over a persistent thread pool. It reads and writes any buffer that has
// a host mapping, so tensors allocated by another backend's shared memory work too.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/kernels.h"
#include "core/backend.h"
#include "core/buffer.h"
#include "core/cpu_topology.h"
#include "core/thread_pool.h"

namespace edgelm::cpu {

struct CpuOptions {
  int n_threads = 0;      // 0: the default of plan_cpu_threads (core/cpu_topology.h)
  std::string isa;        // empty: the best available (see select_kernels)
  std::vector<int> cpus;  // pin thread i to cpus[i % size]; empty: the big cores where the machine
                          // has slower ones (plan_cpu_threads), else no
  // Let the loader repack weights into the table's faster layouts (KernelTable::matmul_layout);
  // false keeps them as stored (to compare, or to keep a GGUF's pages shared with other processes).
  bool repack_weights = true;
  // Allocator for tensors made for this backend; null: a private HostMemory. Pass another
  // backend's shared memory to make the CPU work on the same bytes.
  std::shared_ptr<Memory> memory;
  // Time every op call on the wall clock (op_timings()): the CPU backend runs ops synchronously,
  // so an op's time includes waking the pool and waiting for its slowest thread. Off: no clock
  // reads and nothing recorded.
  bool profile = false;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(CpuOptions options = {});

  std::string name() const override { return "cpu"; }
  std::string device() const override;
  Memory& memory() override { return *memory_; }
  // Weights go to SlabHostMemory (laid end to end on huge pages) unless CpuOptions::memory named
  // another allocator, which then takes them too (another backend's shared buffers).
  Memory& weight_memory() override { return *weight_memory_; }
  bool supports(OpKind op, std::initializer_list<DType> dtypes) const override;
  DType matmul_weight_type(DType dtype) const override;

  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void matmul(const Tensor& x, const Tensor& w, const Tensor& y) override;
  void matmul_shared_x(const Tensor& x, std::initializer_list<Tensor> ws,
                       std::initializer_list<Tensor> ys) override;
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

  std::vector<OpTiming> op_timings() const override;
  void reset_op_timings() override { timings_.clear(); }

  ThreadPool& pool() { return pool_; }
  const KernelTable& kernels() const { return *kernels_; }
  // Whether decode uses the table's software-prefetching kernels (decode_prefetch_wanted()).
  bool decode_prefetch() const { return decode_prefetch_; }

 private:
  std::shared_ptr<Memory> memory_;
  std::shared_ptr<Memory> weight_memory_;
  CpuThreadPlan thread_plan_;  // before pool_, which is built from it
  ThreadPool pool_;
  const KernelTable* kernels_;
  bool repack_weights_;
  bool profile_;
  // The decode kernels in use: the table's decode_pairs, or its decode_pairs_prefetch where it
  // has one and decode_prefetch_wanted() (then decode_prefetch_ is set).
  std::array<DecodePairsFn, kDTypeCount> decode_pairs_{};
  bool decode_prefetch_ = false;

  // With profile on: the clock at an op's start, and its time added to (op, kernel)'s row once the
  // op has finished (an op that throws records nothing).
  using Clock = std::chrono::steady_clock;
  // `kernel` is called for the row's label only when profiling.
  Clock::time_point op_start() const { return profile_ ? Clock::now() : Clock::time_point{}; }
  template <class Label>
  void op_end(Clock::time_point start, const char* op, const Label& kernel, uint64_t bytes = 0) {
    if (profile_) record_op(start, op, kernel(), bytes);
  }
  void record_op(Clock::time_point start, const char* op, std::string kernel, uint64_t bytes);
  OpTimingTable timings_;
};

}  // namespace edgelm::cpu
