// Which backend runs each forward step of a generation. Several backends (two or more) hold models
// over the same weights and work on one KV cache in memory all of them use in place (OpenCL's
// shared buffers, or host memory for CPU backends alone); before every step the StepScheduler asks
// its BackendSchedule which one runs it, and a switch waits for the backend that ran last and
// hands the cache to the next (KvCache::set_backend). Nothing is copied. generate_hybrid runs the
// CPU and OpenCL this way (runtime/hybrid.h loads the pair).
//
//   std::vector<ScheduledBackend> backends = {{"cpu", &cpu_model}, {"opencl", &opencl_model}};
//   PhaseSchedule schedule(names_of(backends), {.prefill = "opencl", .decode = "cpu"});
//   StepScheduler scheduler(backends, cache, schedule);
//   session.generator().set_router(&scheduler);  // every step now runs where the schedule says
//
// A schedule is made over the backends' names, in the scheduler's order, and picks one by its
// index there. Switches are logged at info level under [hybrid] with their cost.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eviction/system_monitor.h"
#include "models/llama.h"
#include "runtime/generator.h"

namespace edgelm {

// The backends a schedule chooses among, by name ("cpu", "opencl"), in the scheduler's order.
using BackendNames = std::vector<std::string>;

// What a schedule knows before a step.
struct StepInfo {
  Phase phase = Phase::Prefill;
  int64_t n_tokens = 0;       // tokens the step feeds
  int64_t kv_slots = 0;       // filled slots of the cache (layer 0) before the step and its
                              // eviction: physical slots, which eviction lowers, not positions
  int64_t next_position = 0;  // logical position of the step's first token
  int64_t decode_steps = 0;   // decode steps run before this one, on any backend
};

// A schedule's pick for a step, and why (for the switch log).
struct ScheduleChoice {
  size_t backend = 0;  // index into the schedule's backends()
  std::string reason;
};

// Decides per forward step which backend runs it.
class BackendSchedule {
 public:
  // Throws edgelm::Error for no backend, or a name given twice.
  explicit BackendSchedule(BackendNames backends);
  virtual ~BackendSchedule() = default;

  const BackendNames& backends() const { return backends_; }
  const std::string& name(size_t backend) const { return backends_.at(backend); }
  // The index of `name` among backends(); throws edgelm::Error naming `what` ("the prefill
  // backend") when it is none of them.
  size_t index_of(std::string_view name, std::string_view what) const;

  // One line for logs and reports: "prefill opencl, decode cpu".
  virtual std::string describe() const = 0;
  // The backend of the next step. Called once per step, in order.
  virtual ScheduleChoice choose(const StepInfo& step) = 0;
  // The step has run on `backend` in `seconds` (its forward time). Default: nothing.
  virtual void observe(const StepInfo& step, size_t backend, double seconds);

 private:
  BackendNames backends_;
};

// Prefill on one backend, decode on another (or the same), with two refinements of decode:
// - switch_threshold N: decode steps stay on the prefill backend while the cache holds fewer than
//   N filled slots before the step (DESIGN.md's physical slots, layer 0: what attention reads,
//   which eviction lowers; not the logical position), and run on the decode backend from N on.
//   0: decode runs on the decode backend from its first step.
// - switch_every K (> 0): decode alternates, K steps on the decode backend, then K on `alternate`
//   (default: the prefill backend), counted over all decode steps (switch_threshold must then
//   be 0).
class PhaseSchedule final : public BackendSchedule {
 public:
  struct Settings {
    std::string prefill = "opencl";
    std::string decode = "cpu";
    int64_t switch_threshold = 0;
    int64_t switch_every = 0;
    std::string alternate;  // empty: the prefill backend
  };
  // Throws edgelm::Error for a backend not in `backends`, a negative threshold or period, both
  // set, or an alternation with the decode backend itself.
  PhaseSchedule(BackendNames backends, const Settings& settings);
  std::string describe() const override;
  ScheduleChoice choose(const StepInfo& step) override;

 private:
  size_t prefill_, decode_, alternate_;
  int64_t switch_threshold_, switch_every_;
};

// Measures every backend, then keeps the fastest, separately for prefill and decode: the first
// steps of a phase go to the backend that has run the fewest tokens of it (the phase's `first`
// backend, then the others in order, on a tie) until each has run at least `tokens` tokens of that
// phase; from then on the phase runs on the one with the least time per token (the first in
// order on a tie). Prefill steps are whole chunks, so a prompt shorter than one step per backend
// leaves prefill undecided (it keeps going to the least measured).
class WarmupSchedule final : public BackendSchedule {
 public:
  // Throws edgelm::Error when tokens < 1 or a first backend is not in `backends`.
  WarmupSchedule(BackendNames backends, std::string_view prefill_first,
                 std::string_view decode_first, int64_t tokens);
  std::string describe() const override;
  ScheduleChoice choose(const StepInfo& step) override;
  void observe(const StepInfo& step, size_t backend, double seconds) override;

  // The measurements of one phase: tokens and seconds per backend, and the pick once made.
  struct Measured {
    std::vector<int64_t> tokens;
    std::vector<double> seconds;
    std::optional<size_t> pick;
    double seconds_per_token(size_t backend) const;
  };
  const Measured& measured(Phase phase) const;

 private:
  std::vector<size_t> first_;  // by Phase
  int64_t tokens_;
  std::vector<Measured> measured_;  // by Phase
};

// Moves every step to the `fallback` backend (the CPU) while a pressure signal is up, and leaves
// the choice to `inner` otherwise: the GPU is busy (a monitor whose available_mb() reads above 0
// means busy: a scripted SimulatedMonitor, or a source of the device's GPU load), or the memory
// monitor reports less than `memory_threshold_mb` available. Each monitor is polled once per step.
// Moving to the CPU frees no memory by itself (OpenCL's scratch stays allocated); it keeps the
// GPU's queue free for whoever needs it and pairs with eviction (--memory-threshold-mb), which
// shrinks the cache.
class PressureSchedule final : public BackendSchedule {
 public:
  // Over inner's backends. Either monitor may be null (that signal never fires); neither may be
  // owned by another poller. Throws edgelm::Error when `fallback` is not one of the backends.
  PressureSchedule(BackendSchedule& inner, std::string_view fallback,
                   std::unique_ptr<SystemMonitor> memory, double memory_threshold_mb,
                   std::unique_ptr<SystemMonitor> gpu_busy);
  std::string describe() const override;
  ScheduleChoice choose(const StepInfo& step) override;
  void observe(const StepInfo& step, size_t backend, double seconds) override;
  // Steps the signal moved to the fallback.
  int64_t pressure_steps() const { return pressure_steps_; }

 private:
  BackendSchedule& inner_;
  size_t fallback_;
  std::unique_ptr<SystemMonitor> memory_;
  double memory_threshold_mb_;
  std::unique_ptr<SystemMonitor> gpu_busy_;
  int64_t pressure_steps_ = 0;
};

// One backend a StepScheduler may run a step on.
struct ScheduledBackend {
  std::string name;    // "cpu", "opencl", "cpu:avx2": for schedules, logs and reports
  LlamaModel* model;   // the model on that backend; it must outlive the scheduler
};
// The names of `backends`, in order: what their schedule is made over.
BackendNames names_of(const std::vector<ScheduledBackend>& backends);

// One switch: before step `step` (counted from 0 over prefill chunks and decode steps).
struct SwitchEvent {
  int64_t step = 0;
  Phase phase = Phase::Prefill;
  int64_t kv_slots = 0;
  int64_t next_position = 0;
  size_t from = 0;  // backend indices
  size_t to = 0;
  std::string reason;
  double seconds = 0.0;  // waiting for `from` to finish, and handing over the cache
};

// What one backend ran.
struct BackendShare {
  int64_t prefill_tokens = 0;
  int64_t prefill_steps = 0;
  int64_t decode_steps = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

// The StepRouter of a run over several backends: asks the schedule before each step, switches
// when it picks another backend than the last step's (logged at info level with its cost), and
// counts what ran where.
class StepScheduler final : public StepRouter {
 public:
  // The schedule must be made over these backends' names, in this order; the cache must belong
  // to one of their backends now (the first step hands it over at no count). The models, the cache
  // and the schedule must outlive the scheduler. Throws edgelm::Error otherwise.
  StepScheduler(std::vector<ScheduledBackend> backends, KvCache& cache, BackendSchedule& schedule);

  LlamaModel& route(Phase phase, int64_t n_tokens) override;
  void finished(Phase phase, int64_t n_tokens, double seconds) override;

  size_t size() const { return backends_.size(); }
  const std::string& name(size_t backend) const { return backends_.at(backend).name; }
  // The index of the backend named `name`; throws edgelm::Error when there is none.
  size_t index_of(std::string_view name) const;
  // The backend of the last step (before any: the cache's).
  size_t active() const { return active_; }
  int64_t switches() const { return static_cast<int64_t>(events_.size()); }
  double switch_seconds() const;
  const std::vector<SwitchEvent>& events() const { return events_; }
  const BackendShare& share(size_t backend) const { return shares_.at(backend); }
  int64_t steps() const { return steps_; }

 private:
  std::vector<ScheduledBackend> backends_;
  KvCache& cache_;
  BackendSchedule& schedule_;
  size_t active_ = 0;
  bool started_ = false;
  StepInfo current_;
  int64_t steps_ = 0;
  int64_t decode_steps_ = 0;
  std::vector<SwitchEvent> events_;
  std::vector<BackendShare> shares_;
};

}  // namespace edgelm
