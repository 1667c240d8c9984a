#include "runtime/hybrid.h"

#include <cstdio>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "core/process_stats.h"

namespace edgelm {

const char* hybrid_side_name(HybridSide side) {
  return side == HybridSide::Cpu ? "cpu" : "opencl";
}

HybridSide parse_hybrid_side(const std::string& name, const char* flag) {
  if (name == "opencl") return HybridSide::OpenCl;
  if (name == "cpu" || name.starts_with("cpu:")) return HybridSide::Cpu;
  EDGELM_FAIL(flag, ": '", name, "' is not a backend of a hybrid run (cpu, cpu:<isa> or opencl)");
}

const char* weight_sharing_name(WeightSharing sharing) {
  return sharing == WeightSharing::Shared ? "shared" : "per-backend";
}

WeightSharing parse_weight_sharing(const std::string& name, const char* flag) {
  if (name == "shared") return WeightSharing::Shared;
  if (name == "per-backend") return WeightSharing::PerBackend;
  EDGELM_FAIL(flag, ": '", name, "' is not one of shared|per-backend");
}

namespace {

// Every tensor of a model's weights, each once (a tied output is the embedding).
std::vector<const Tensor*> weight_tensors(const LlamaWeights& w) {
  std::vector<const Tensor*> all = {&w.embedding, &w.output_norm, &w.output};
  for (const LlamaLayerWeights& l : w.layers) {
    for (const Tensor* t :
         {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      all.push_back(t);
  }
  return all;
}

// Bytes of the distinct tensors of `weights` (by start address) that are not in `except`.
size_t distinct_bytes(const LlamaWeights& weights, const LlamaWeights* except) {
  std::unordered_set<const void*> skip;
  if (except != nullptr) {
    for (const Tensor* t : weight_tensors(*except)) skip.insert(t->raw());
  }
  std::unordered_set<const void*> seen;
  size_t bytes = 0;
  for (const Tensor* t : weight_tensors(weights)) {
    if (skip.contains(t->raw()) || !seen.insert(t->raw()).second) continue;
    bytes += t->nbytes();
  }
  return bytes;
}

}  // namespace

HybridModel::HybridModel(const std::string& path, const HybridOptions& options)
    : sharing_(options.weights) {
  EDGELM_CHECK(options.cpu == "cpu" || options.cpu.starts_with("cpu:"), "[hybrid] '", options.cpu,
               "' is not a CPU backend (cpu or cpu:<isa>)");
  BackendOptions backend_options = options.backend;
  backend_options.memory = nullptr;
  opencl_ = create_backend("opencl", backend_options);
  // The CPU allocates from OpenCL's shared memory: its workspace, and the matrices it repacks for
  // itself, are buffers OpenCL could use too. Not owning: opencl_ outlives cpu_ (declared first).
  backend_options.memory = std::shared_ptr<Memory>(std::shared_ptr<Memory>(), &opencl_->memory());
  cpu_ = create_backend(options.cpu, backend_options);
  LoadedModel loaded =
      load_llama(path, *opencl_, {.weight_type = options.weight_type, .converter = cpu_.get()});
  format_ = loaded.format;
  weight_type_ = loaded.weight_type;
  weight_types_ = loaded.weight_types;
  LlamaWeights cpu_weights =
      sharing_ == WeightSharing::Shared ? loaded.weights : weights_for(*cpu_, loaded.weights);
  cpu_model_ =
      std::make_unique<LlamaModel>(*cpu_, loaded.config, std::move(cpu_weights), options.max_chunk);
  opencl_model_ = std::make_unique<LlamaModel>(*opencl_, std::move(loaded.config),
                                               std::move(loaded.weights), options.max_chunk);
}

KvCache HybridModel::make_cache(int64_t capacity, DType kv_type, int64_t max_positions) const {
  return opencl_model_->make_cache(capacity, kv_type, max_positions);
}

size_t HybridModel::shared_weight_bytes() const {
  return distinct_bytes(opencl_model_->weights(), nullptr);
}

size_t HybridModel::cpu_only_weight_bytes() const {
  return distinct_bytes(cpu_model_->weights(), &opencl_model_->weights());
}

uint64_t HybridModel::host_device_copy_bytes() const {
  return cpu_->host_device_copy_bytes() + opencl_->host_device_copy_bytes();
}

// ---- schedules ----

void BackendSchedule::observe(const StepInfo&, HybridSide, double) {}

PhaseSchedule::PhaseSchedule(Settings settings) : settings_(settings) {
  EDGELM_CHECK(settings_.switch_threshold >= 0, "[hybrid] switch threshold ",
               settings_.switch_threshold, " is negative (KV slots, >= 0)");
  EDGELM_CHECK(settings_.switch_every >= 0, "[hybrid] switch period ", settings_.switch_every,
               " is negative (decode steps, >= 0; 0: off)");
  EDGELM_CHECK(settings_.switch_every == 0 || settings_.switch_threshold == 0,
               "[hybrid] a switch threshold and a switch period are exclusive");
}

std::string PhaseSchedule::describe() const {
  std::string text = str_cat("prefill ", hybrid_side_name(settings_.prefill), ", decode ",
                             hybrid_side_name(settings_.decode));
  if (settings_.switch_threshold > 0) {
    text += str_cat(" from ", settings_.switch_threshold, " KV slots (",
                    hybrid_side_name(settings_.prefill), " below)");
  }
  if (settings_.switch_every > 0) {
    text += str_cat(", alternating with ", hybrid_side_name(other_side(settings_.decode)),
                    " every ", settings_.switch_every, " decode steps");
  }
  return text;
}

ScheduleChoice PhaseSchedule::choose(const StepInfo& step) {
  if (step.phase == Phase::Prefill) return {settings_.prefill, "prefill"};
  if (step.kv_slots < settings_.switch_threshold)
    return {settings_.prefill, "decode below the switch threshold"};
  if (settings_.switch_every > 0) {
    const bool turn = (step.decode_steps / settings_.switch_every) % 2 == 1;
    return {turn ? other_side(settings_.decode) : settings_.decode, "alternation"};
  }
  return {settings_.decode, settings_.switch_threshold > 0 ? "switch threshold reached" : "decode"};
}

double WarmupSchedule::Measured::seconds_per_token(HybridSide side) const {
  const auto i = static_cast<size_t>(side);
  return tokens[i] > 0 ? seconds[i] / static_cast<double>(tokens[i]) : 0.0;
}

WarmupSchedule::WarmupSchedule(HybridSide prefill_first, HybridSide decode_first, int64_t tokens)
    : first_{prefill_first, decode_first}, tokens_(tokens) {
  EDGELM_CHECK(tokens_ >= 1, "[hybrid] warmup tokens ", tokens_, " must be at least 1");
}

std::string WarmupSchedule::describe() const {
  return str_cat("warmup: ", tokens_, " tokens of each phase on each backend (prefill from ",
                 hybrid_side_name(first_[0]), ", decode from ", hybrid_side_name(first_[1]),
                 "), then the faster");
}

const WarmupSchedule::Measured& WarmupSchedule::measured(Phase phase) const {
  return measured_[static_cast<size_t>(phase)];
}

ScheduleChoice WarmupSchedule::choose(const StepInfo& step) {
  const auto phase = static_cast<size_t>(step.phase);
  const Measured& m = measured_[phase];
  if (m.pick) return {*m.pick, "warmup pick"};
  const HybridSide first = first_[phase];
  const HybridSide second = other_side(first);
  const bool second_behind =
      m.tokens[static_cast<size_t>(second)] < m.tokens[static_cast<size_t>(first)];
  return {second_behind ? second : first, "warmup"};
}

void WarmupSchedule::observe(const StepInfo& step, HybridSide side, double seconds) {
  Measured& m = measured_[static_cast<size_t>(step.phase)];
  if (m.pick) return;
  m.tokens[static_cast<size_t>(side)] += step.n_tokens;
  m.seconds[static_cast<size_t>(side)] += seconds;
  if (m.tokens[0] < tokens_ || m.tokens[1] < tokens_) return;
  const double cpu = m.seconds_per_token(HybridSide::Cpu);
  const double opencl = m.seconds_per_token(HybridSide::OpenCl);
  m.pick = cpu <= opencl ? HybridSide::Cpu : HybridSide::OpenCl;
  char text[160];
  std::snprintf(text, sizeof text,
                "cpu %.3f ms/token over %lld tokens, opencl %.3f ms/token over %lld tokens",
                cpu * 1e3, static_cast<long long>(m.tokens[0]), opencl * 1e3,
                static_cast<long long>(m.tokens[1]));
  log_info("[hybrid] warmup of ", step.phase == Phase::Prefill ? "prefill" : "decode", ": ", text,
           ": ", hybrid_side_name(*m.pick), " runs the rest");
}

PressureSchedule::PressureSchedule(BackendSchedule& inner, std::unique_ptr<SystemMonitor> memory,
                                   double memory_threshold_mb,
                                   std::unique_ptr<SystemMonitor> gpu_busy)
    : inner_(inner),
      memory_(std::move(memory)),
      memory_threshold_mb_(memory_threshold_mb),
      gpu_busy_(std::move(gpu_busy)) {}

std::string PressureSchedule::describe() const {
  std::string signals;
  if (memory_)
    signals += str_cat("memory below ", memory_threshold_mb_, " MiB (", memory_->name(), ")");
  if (gpu_busy_)
    signals += str_cat(signals.empty() ? "" : " or ", "GPU busy (", gpu_busy_->name(), ")");
  return str_cat(inner_.describe(), "; cpu while ", signals.empty() ? "never" : signals);
}

ScheduleChoice PressureSchedule::choose(const StepInfo& step) {
  // Both polled every step, so that a scripted curve advances one point per step whatever fires.
  const bool busy = gpu_busy_ && gpu_busy_->available_mb() > 0;
  const double available =
      memory_ ? memory_->available_mb() : std::numeric_limits<double>::infinity();
  ScheduleChoice inner = inner_.choose(step);
  if (busy) {
    ++pressure_steps_;
    return {HybridSide::Cpu, "GPU busy"};
  }
  if (available < memory_threshold_mb_) {
    ++pressure_steps_;
    char text[96];
    std::snprintf(text, sizeof text, "memory pressure (%.0f MiB available, threshold %.0f)",
                  available, memory_threshold_mb_);
    return {HybridSide::Cpu, text};
  }
  return inner;
}

void PressureSchedule::observe(const StepInfo& step, HybridSide side, double seconds) {
  inner_.observe(step, side, seconds);
}

// ---- the router ----

HybridRouter::HybridRouter(HybridModel& hybrid, KvCache& cache, BackendSchedule& schedule)
    : hybrid_(hybrid),
      cache_(cache),
      schedule_(schedule),
      active_(&cache.backend() == &hybrid.backend(HybridSide::Cpu) ? HybridSide::Cpu
                                                                   : HybridSide::OpenCl) {
  EDGELM_CHECK(&cache.backend() == &hybrid.backend(HybridSide::Cpu) ||
                   &cache.backend() == &hybrid.backend(HybridSide::OpenCl),
               "[hybrid] the KV cache belongs to neither backend of the hybrid model");
}

double HybridRouter::switch_seconds() const {
  double total = 0.0;
  for (const SwitchEvent& event : events_) total += event.seconds;
  return total;
}

LlamaModel& HybridRouter::route(Phase phase, int64_t n_tokens) {
  current_ = {.phase = phase,
              .n_tokens = n_tokens,
              .kv_slots = cache_.size(0),
              .next_position = cache_.next_position(),
              .decode_steps = decode_steps_};
  ScheduleChoice choice = schedule_.choose(current_);
  if (choice.side != active_) {
    const Stopwatch stopwatch;
    cache_.set_backend(hybrid_.backend(choice.side));  // waits for the other backend first
    const double seconds = stopwatch.seconds();
    if (started_) {  // before the first step nothing ran: handing the cache over is no switch
      events_.push_back({.step = steps_,
                         .phase = phase,
                         .kv_slots = current_.kv_slots,
                         .next_position = current_.next_position,
                         .from = active_,
                         .to = choice.side,
                         .reason = std::move(choice.reason),
                         .seconds = seconds});
      const SwitchEvent& event = events_.back();
      char cost[32];
      std::snprintf(cost, sizeof cost, "%.1f us", seconds * 1e6);
      log_info("[hybrid] step ", event.step, " (", phase == Phase::Prefill ? "prefill" : "decode",
               ", ", event.kv_slots, " KV slots, position ", event.next_position,
               "): ", hybrid_side_name(event.from), " -> ", hybrid_side_name(event.to), " (",
               event.reason, "), ", cost);
    }
    active_ = choice.side;
  }
  started_ = true;
  return hybrid_.model(active_);
}

void HybridRouter::finished(Phase phase, int64_t n_tokens, double seconds) {
  BackendShare& share = shares_[static_cast<int>(active_)];
  if (phase == Phase::Prefill) {
    share.prefill_tokens += n_tokens;
    ++share.prefill_steps;
    share.prefill_seconds += seconds;
  } else {
    ++share.decode_steps;
    share.decode_seconds += seconds;
    ++decode_steps_;
  }
  schedule_.observe(current_, active_, seconds);
  ++steps_;
}

}  // namespace edgelm
