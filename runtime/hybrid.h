// Two backends taking turns on one generation: the CPU and OpenCL backends over the same weights
// and the same KV cache, all of it in OpenCL's shared buffers (the CPU reads them through their
// host mapping, OpenCL through the cl_mem). A schedule picks, before each forward step, which
// backend runs it; a switch waits for the backend that ran last to finish and hands the cache to
// the other one (KvCache::set_backend). Nothing is copied.
//
//   HybridModel hybrid(path, {.weights = WeightSharing::PerBackend});
//   KvCache cache = hybrid.make_cache(capacity, DType::F16, context);
//   PhaseSchedule schedule({.prefill = HybridSide::OpenCl, .decode = HybridSide::Cpu});
//   HybridRouter router(hybrid, cache, schedule);
//   GenerationSession session(hybrid.model(HybridSide::Cpu), cache, &manager, settings);
//   session.generator().set_router(&router);  // every step now runs where the schedule says
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/kv_cache.h"
#include "eviction/policy.h"
#include "eviction/system_monitor.h"
#include "models/llama.h"
#include "models/loader.h"
#include "runtime/generator.h"

namespace edgelm {

// One of the two backends of a hybrid run.
enum class HybridSide : uint8_t { Cpu, OpenCl };
inline constexpr int kHybridSides = 2;
// "cpu", "opencl".
const char* hybrid_side_name(HybridSide side);
// The other backend.
inline HybridSide other_side(HybridSide side) {
  return side == HybridSide::Cpu ? HybridSide::OpenCl : HybridSide::Cpu;
}
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
  // A KV cache in shared memory that both backends use in place, bound to OpenCL until a router
  // hands it over (see LlamaModel::make_cache).
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

// What a schedule knows before a step.
struct StepInfo {
  Phase phase = Phase::Prefill;
  int64_t n_tokens = 0;       // tokens the step feeds
  int64_t kv_slots = 0;       // filled slots of the cache (layer 0) before the step and its
                              // eviction: physical slots, which eviction lowers, not positions
  int64_t next_position = 0;  // logical position of the step's first token
  int64_t decode_steps = 0;   // decode steps run before this one, on either backend
};

// A schedule's pick for a step, and why (for the switch log).
struct ScheduleChoice {
  HybridSide side = HybridSide::Cpu;
  std::string reason;
};

// Decides per forward step which backend runs it.
class BackendSchedule {
 public:
  virtual ~BackendSchedule() = default;
  // One line for logs and reports: "prefill opencl, decode cpu".
  virtual std::string describe() const = 0;
  // The backend of the next step. Called once per step, in order.
  virtual ScheduleChoice choose(const StepInfo& step) = 0;
  // The step has run on `side` in `seconds` (its forward time). Default: nothing.
  virtual void observe(const StepInfo& step, HybridSide side, double seconds);
};

// Prefill on one backend, decode on the other (or the same), with two refinements of decode:
// - switch_threshold N: decode steps stay on the prefill backend while the cache holds fewer than
//   N filled slots before the step (DESIGN.md's physical slots, layer 0: what attention reads,
//   which eviction lowers; not the logical position), and run on the decode backend from N on.
//   0: decode runs on the decode backend from its first step.
// - switch_every K (> 0): decode alternates, K steps on the decode backend, then K on the other,
//   counted over all decode steps (switch_threshold must then be 0).
class PhaseSchedule final : public BackendSchedule {
 public:
  struct Settings {
    HybridSide prefill = HybridSide::OpenCl;
    HybridSide decode = HybridSide::Cpu;
    int64_t switch_threshold = 0;
    int64_t switch_every = 0;
  };
  // Throws edgelm::Error for a negative threshold or period, or both set.
  explicit PhaseSchedule(Settings settings);
  std::string describe() const override;
  ScheduleChoice choose(const StepInfo& step) override;

 private:
  Settings settings_;
};

// Measures both backends, then keeps the faster, separately for prefill and decode: the first
// steps of a phase alternate between the backends (starting with the phase's `first` side; a
// backend with fewer measured tokens goes next) until each has run at least `tokens` tokens of
// that phase; from then on the phase runs on the one with less time per token. Prefill steps are
// whole chunks, so a prompt shorter than two steps leaves prefill undecided (it stays on `first`).
class WarmupSchedule final : public BackendSchedule {
 public:
  // Throws edgelm::Error when tokens < 1.
  WarmupSchedule(HybridSide prefill_first, HybridSide decode_first, int64_t tokens);
  std::string describe() const override;
  ScheduleChoice choose(const StepInfo& step) override;
  void observe(const StepInfo& step, HybridSide side, double seconds) override;

  // The measurements of one phase: tokens and seconds per backend, and the pick once made.
  struct Measured {
    std::array<int64_t, kHybridSides> tokens{};
    std::array<double, kHybridSides> seconds{};
    std::optional<HybridSide> pick;
    double seconds_per_token(HybridSide side) const;
  };
  const Measured& measured(Phase phase) const;

 private:
  std::array<HybridSide, 2> first_;  // by Phase
  int64_t tokens_;
  std::array<Measured, 2> measured_;  // by Phase
};

// Moves every step to the CPU while a pressure signal is up, and leaves the choice to `inner`
// otherwise: the GPU is busy (a monitor whose available_mb() reads above 0 means busy: a scripted
// SimulatedMonitor, or a source of the device's GPU load), or the memory monitor reports less
// than `memory_threshold_mb` available. Each monitor is polled once per step. Moving to the CPU
// frees no memory by itself (OpenCL's scratch stays allocated); it keeps the GPU's queue free for
// whoever needs it and pairs with eviction (--memory-threshold-mb), which shrinks the cache.
class PressureSchedule final : public BackendSchedule {
 public:
  // Either monitor may be null (that signal never fires); neither may be owned by another poller.
  PressureSchedule(BackendSchedule& inner, std::unique_ptr<SystemMonitor> memory,
                   double memory_threshold_mb, std::unique_ptr<SystemMonitor> gpu_busy);
  std::string describe() const override;
  ScheduleChoice choose(const StepInfo& step) override;
  void observe(const StepInfo& step, HybridSide side, double seconds) override;
  // Steps the signal moved to the CPU.
  int64_t pressure_steps() const { return pressure_steps_; }

 private:
  BackendSchedule& inner_;
  std::unique_ptr<SystemMonitor> memory_;
  double memory_threshold_mb_;
  std::unique_ptr<SystemMonitor> gpu_busy_;
  int64_t pressure_steps_ = 0;
};

// One switch: before step `step` (counted from 0 over prefill chunks and decode steps).
struct SwitchEvent {
  int64_t step = 0;
  Phase phase = Phase::Prefill;
  int64_t kv_slots = 0;
  int64_t next_position = 0;
  HybridSide from = HybridSide::Cpu;
  HybridSide to = HybridSide::Cpu;
  std::string reason;
  double seconds = 0.0;  // waiting for `from` to finish, and handing over the cache
};

// What each backend ran.
struct BackendShare {
  int64_t prefill_tokens = 0;
  int64_t prefill_steps = 0;
  int64_t decode_steps = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

// The StepRouter of a hybrid run: asks the schedule before each step, switches when it picks the
// other backend (logged at info level with its cost), and counts what ran where.
class HybridRouter final : public StepRouter {
 public:
  // All three must outlive the router. The cache must come from hybrid.make_cache.
  HybridRouter(HybridModel& hybrid, KvCache& cache, BackendSchedule& schedule);

  LlamaModel& route(Phase phase, int64_t n_tokens) override;
  void finished(Phase phase, int64_t n_tokens, double seconds) override;

  // The backend of the last step (before any: none has run, and this is the cache's).
  HybridSide active() const { return active_; }
  int64_t switches() const { return static_cast<int64_t>(events_.size()); }
  double switch_seconds() const;
  const std::vector<SwitchEvent>& events() const { return events_; }
  const BackendShare& share(HybridSide side) const { return shares_[static_cast<int>(side)]; }
  int64_t steps() const { return steps_; }

 private:
  HybridModel& hybrid_;
  KvCache& cache_;
  BackendSchedule& schedule_;
  HybridSide active_;
  bool started_ = false;
  StepInfo current_;
  int64_t steps_ = 0;
  int64_t decode_steps_ = 0;
  std::vector<SwitchEvent> events_;
  std::array<BackendShare, kHybridSides> shares_{};
};

}  // namespace edgelm
