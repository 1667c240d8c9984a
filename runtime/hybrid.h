// The CPU and OpenCL backends over the same weights and the same KV cache, all of it in OpenCL's
// shared buffers (the CPU reads them through their host mapping, OpenCL through the cl_mem): the
// pair generate_hybrid runs, taking turns by a schedule (runtime/scheduler.h), which picks before
// each forward step which backend runs it. Nothing is copied.
//
//   HybridModel hybrid(path, {.weights = WeightSharing::PerBackend});
//   KvCache cache = hybrid.make_cache(capacity, DType::F16, context);
//   PhaseSchedule schedule(HybridModel::backend_names(), {.prefill = "opencl", .decode = "cpu"});
//   StepScheduler scheduler(hybrid.backends(), cache, schedule);
//   GenerationSession session(hybrid.model(HybridSide::Cpu), cache, &manager, settings);
//   session.generator().set_router(&scheduler);  // every step now runs where the schedule says
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/kv_cache.h"
#include "models/llama.h"
#include "models/loader.h"
#include "runtime/scheduler.h"

namespace edgelm {

// One of the two backends of a hybrid run.
enum class HybridSide : uint8_t { Cpu, OpenCl };
// "cpu", "opencl": the backend's name in the scheduler.
const char* hybrid_side_name(HybridSide side);
// "cpu", "cpu:<isa>" -> Cpu; "opencl" -> OpenCl. Throws edgelm::Error naming `flag` otherwise.
HybridSide parse_hybrid_side(const std::string& name, const char* flag);

// How the matrices are held for two backends whose fastest layouts differ (the CPU repacks Q4_0,
// Q8_0 and F16 into interleaved layouts that OpenCL does not read).
enum class WeightSharing : uint8_t {
  // One copy, in OpenCL's layouts, which the CPU also multiplies (with its kernels for the plain
  // layouts): no memory on top, some CPU speed lost where it would have repacked.
  Shared,
  // The CPU also keeps its own repacked copy of every matrix whose layout differs: each backend
  // runs at its best, for up to the matrices' bytes again. The norms, the embedding and the KV
  // cache stay shared.
  PerBackend,
};
// "shared", "per-backend"; parse throws edgelm::Error naming `flag` for another name.
const char* weight_sharing_name(WeightSharing sharing);
WeightSharing parse_weight_sharing(const std::string& name, const char* flag);

struct HybridOptions {
  std::string cpu = "cpu";  // the CPU backend: "cpu" or "cpu:<isa>"
  // Threads, pinning, the OpenCL device, profiling and repacking of both; `memory` is ignored (the
  // CPU backend always allocates from OpenCL's shared memory).
  BackendOptions backend;
  WeightSharing weights = WeightSharing::PerBackend;
  std::optional<DType> weight_type;  // LoadOptions::weight_type
  int64_t max_chunk = kDefaultPrefillChunk;
};

// The model loaded once onto OpenCL's shared memory, with a LlamaModel for each backend over those
// weights (each with its own small workspace, also in shared memory).
class HybridModel {
 public:
  // Creates the OpenCL backend (throws edgelm::Error with one line when this build or machine has
  // none) and the CPU backend over its memory, loads `path` (the CPU converts on the host) and
  // lays the weights out per options.weights.
  HybridModel(const std::string& path, const HybridOptions& options);

  Backend& backend(HybridSide side) { return side == HybridSide::Cpu ? *cpu_ : *opencl_; }
  LlamaModel& model(HybridSide side) {
    return side == HybridSide::Cpu ? *cpu_model_ : *opencl_model_;
  }
  const LlamaConfig& config() const { return opencl_model_->config(); }
  // The two for a StepScheduler: {"cpu", the CPU's model}, {"opencl", OpenCL's}; and their names,
  // in that order, for a schedule over them.
  std::vector<ScheduledBackend> backends();
  static BackendNames backend_names();
  // A KV cache in shared memory that both backends use in place, bound to OpenCL until a
  // scheduler hands it over (see LlamaModel::make_cache).
  KvCache make_cache(int64_t capacity, DType kv_type, int64_t max_positions = 0) const;

  WeightSharing weight_sharing() const { return sharing_; }
  // Bytes of the weights both backends read (every tensor of OpenCL's model).
  size_t shared_weight_bytes() const;
  // Bytes of the matrices the CPU holds for itself (WeightSharing::PerBackend); 0 when shared.
  size_t cpu_only_weight_bytes() const;
  // Bytes both backends moved with explicit host<->device transfers since they were made (0 on
  // the model path: see Backend::host_device_copy_bytes).
  uint64_t host_device_copy_bytes() const;
  // What load_llama reported: "gguf"/"hf", the matrices' type and their types in words.
  const std::string& format() const { return format_; }
  DType weight_type() const { return weight_type_; }
  const std::string& weight_types() const { return weight_types_; }

 private:
  std::unique_ptr<Backend> opencl_;  // first: the CPU backend allocates from its memory
  std::unique_ptr<Backend> cpu_;
  WeightSharing sharing_;
  std::string format_;
  DType weight_type_ = DType::F32;
  std::string weight_types_;
  std::unique_ptr<LlamaModel> opencl_model_;
  std::unique_ptr<LlamaModel> cpu_model_;
};

}  // namespace edgelm
