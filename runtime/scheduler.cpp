#include "runtime/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "core/process_stats.h"

namespace edgelm {

// ---- schedules ----

BackendSchedule::BackendSchedule(BackendNames backends) : backends_(std::move(backends)) {
  EDGELM_CHECK(!backends_.empty(), "[hybrid] a schedule needs at least one backend");
  for (size_t i = 0; i < backends_.size(); ++i) {
    EDGELM_CHECK(std::find(backends_.begin() + static_cast<std::ptrdiff_t>(i) + 1, backends_.end(),
                           backends_[i]) == backends_.end(),
                 "[hybrid] backend '", backends_[i], "' is named twice");
  }
}

size_t BackendSchedule::index_of(std::string_view name, std::string_view what) const {
  const auto found = std::find(backends_.begin(), backends_.end(), name);
  if (found == backends_.end()) {
    std::string names;
    for (const std::string& n : backends_) names += (names.empty() ? "" : ", ") + n;
    EDGELM_FAIL("[hybrid] ", what, " '", name, "' is not one of the backends (", names, ")");
  }
  return static_cast<size_t>(found - backends_.begin());
}

void BackendSchedule::observe(const StepInfo&, size_t, double) {}

PhaseSchedule::PhaseSchedule(BackendNames backends, const Settings& settings)
    : BackendSchedule(std::move(backends)),
      prefill_(index_of(settings.prefill, "the prefill backend")),
      decode_(index_of(settings.decode, "the decode backend")),
      alternate_(settings.alternate.empty() ? prefill_
                                            : index_of(settings.alternate, "the alternate backend")),
      switch_threshold_(settings.switch_threshold),
      switch_every_(settings.switch_every) {
  EDGELM_CHECK(switch_threshold_ >= 0, "[hybrid] switch threshold ", switch_threshold_,
               " is negative (KV slots, >= 0)");
  EDGELM_CHECK(switch_every_ >= 0, "[hybrid] switch period ", switch_every_,
               " is negative (decode steps, >= 0; 0: off)");
  EDGELM_CHECK(switch_every_ == 0 || switch_threshold_ == 0,
               "[hybrid] a switch threshold and a switch period are exclusive");
  EDGELM_CHECK(switch_every_ == 0 || alternate_ != decode_, "[hybrid] decode alternates between ",
               name(decode_), " and itself: name another backend to alternate with");
}

std::string PhaseSchedule::describe() const {
  std::string text = str_cat("prefill ", name(prefill_), ", decode ", name(decode_));
  if (switch_threshold_ > 0) {
    text += str_cat(" from ", switch_threshold_, " KV slots (", name(prefill_), " below)");
  }
  if (switch_every_ > 0) {
    text += str_cat(", alternating with ", name(alternate_), " every ", switch_every_,
                    " decode steps");
  }
  return text;
}

ScheduleChoice PhaseSchedule::choose(const StepInfo& step) {
  if (step.phase == Phase::Prefill) return {prefill_, "prefill"};
  if (step.kv_slots < switch_threshold_) return {prefill_, "decode below the switch threshold"};
  if (switch_every_ > 0) {
    const bool turn = (step.decode_steps / switch_every_) % 2 == 1;
    return {turn ? alternate_ : decode_, "alternation"};
  }
  return {decode_, switch_threshold_ > 0 ? "switch threshold reached" : "decode"};
}

double WarmupSchedule::Measured::seconds_per_token(size_t backend) const {
  return tokens.at(backend) > 0 ? seconds[backend] / static_cast<double>(tokens[backend]) : 0.0;
}

WarmupSchedule::WarmupSchedule(BackendNames backends, std::string_view prefill_first,
                               std::string_view decode_first, int64_t tokens)
    : BackendSchedule(std::move(backends)),
      first_{index_of(prefill_first, "the first prefill backend"),
             index_of(decode_first, "the first decode backend")},
      tokens_(tokens) {
  EDGELM_CHECK(tokens_ >= 1, "[hybrid] warmup tokens ", tokens_, " must be at least 1");
  const size_t n = this->backends().size();
  measured_.assign(2, Measured{.tokens = std::vector<int64_t>(n, 0),
                               .seconds = std::vector<double>(n, 0.0),
                               .pick = std::nullopt});
}

std::string WarmupSchedule::describe() const {
  return str_cat("warmup: ", tokens_, " tokens of each phase on each backend (prefill from ",
                 name(first_[0]), ", decode from ", name(first_[1]), "), then the faster");
}

const WarmupSchedule::Measured& WarmupSchedule::measured(Phase phase) const {
  return measured_[static_cast<size_t>(phase)];
}

ScheduleChoice WarmupSchedule::choose(const StepInfo& step) {
  const auto phase = static_cast<size_t>(step.phase);
  const Measured& m = measured_[phase];
  if (m.pick) return {*m.pick, "warmup pick"};
  // The least measured backend, looking from the phase's first one on: it wins a tie.
  const size_t n = backends().size();
  size_t next = first_[phase];
  for (size_t k = 1; k < n; ++k) {
    const size_t candidate = (first_[phase] + k) % n;
    if (m.tokens[candidate] < m.tokens[next]) next = candidate;
  }
  return {next, "warmup"};
}

void WarmupSchedule::observe(const StepInfo& step, size_t backend, double seconds) {
  Measured& m = measured_[static_cast<size_t>(step.phase)];
  if (m.pick) return;
  m.tokens[backend] += step.n_tokens;
  m.seconds[backend] += seconds;
  if (std::any_of(m.tokens.begin(), m.tokens.end(), [&](int64_t t) { return t < tokens_; })) return;
  size_t pick = 0;
  std::string text;
  for (size_t b = 0; b < m.tokens.size(); ++b) {
    if (m.seconds_per_token(b) < m.seconds_per_token(pick)) pick = b;
    char line[96];
    std::snprintf(line, sizeof line, "%.3f ms/token over %lld tokens", m.seconds_per_token(b) * 1e3,
                  static_cast<long long>(m.tokens[b]));
    text += str_cat(text.empty() ? "" : ", ", name(b), " ", line);
  }
  m.pick = pick;
  log_info("[hybrid] warmup of ", step.phase == Phase::Prefill ? "prefill" : "decode", ": ", text,
           ": ", name(pick), " runs the rest");
}

PressureSchedule::PressureSchedule(BackendSchedule& inner, std::string_view fallback,
                                   std::unique_ptr<SystemMonitor> memory,
                                   double memory_threshold_mb,
                                   std::unique_ptr<SystemMonitor> gpu_busy)
    : BackendSchedule(inner.backends()),
      inner_(inner),
      fallback_(index_of(fallback, "the fallback backend")),
      memory_(std::move(memory)),
      memory_threshold_mb_(memory_threshold_mb),
      gpu_busy_(std::move(gpu_busy)) {}

std::string PressureSchedule::describe() const {
  std::string signals;
  if (memory_)
    signals += str_cat("memory below ", memory_threshold_mb_, " MiB (", memory_->name(), ")");
  if (gpu_busy_)
    signals += str_cat(signals.empty() ? "" : " or ", "GPU busy (", gpu_busy_->name(), ")");
  return str_cat(inner_.describe(), "; ", name(fallback_), " while ",
                 signals.empty() ? "never" : signals);
}

ScheduleChoice PressureSchedule::choose(const StepInfo& step) {
  // Both polled every step, so that a scripted curve advances one point per step whatever fires.
  const bool busy = gpu_busy_ && gpu_busy_->available_mb() > 0;
  const double available =
      memory_ ? memory_->available_mb() : std::numeric_limits<double>::infinity();
  ScheduleChoice inner = inner_.choose(step);
  if (busy) {
    ++pressure_steps_;
    return {fallback_, "GPU busy"};
  }
  if (available < memory_threshold_mb_) {
    ++pressure_steps_;
    char text[96];
    std::snprintf(text, sizeof text, "memory pressure (%.0f MiB available, threshold %.0f)",
                  available, memory_threshold_mb_);
    return {fallback_, text};
  }
  return inner;
}

void PressureSchedule::observe(const StepInfo& step, size_t backend, double seconds) {
  inner_.observe(step, backend, seconds);
}

// ---- the scheduler ----

BackendNames names_of(const std::vector<ScheduledBackend>& backends) {
  BackendNames names;
  for (const ScheduledBackend& b : backends) names.push_back(b.name);
  return names;
}

StepScheduler::StepScheduler(std::vector<ScheduledBackend> backends, KvCache& cache,
                             BackendSchedule& schedule)
    : backends_(std::move(backends)),
      cache_(cache),
      schedule_(schedule),
      shares_(backends_.size()) {
  EDGELM_CHECK(schedule_.backends() == names_of(backends_),
               "[hybrid] the schedule is made over other backends than the scheduler's");
  for (const ScheduledBackend& b : backends_) {
    EDGELM_CHECK(b.model != nullptr, "[hybrid] backend '", b.name, "' has no model");
  }
  const auto owner = std::find_if(backends_.begin(), backends_.end(), [&](const auto& b) {
    return &b.model->backend() == &cache.backend();
  });
  EDGELM_CHECK(owner != backends_.end(), "[hybrid] the KV cache belongs to none of the backends");
  active_ = static_cast<size_t>(owner - backends_.begin());
}

size_t StepScheduler::index_of(std::string_view name) const {
  for (size_t i = 0; i < backends_.size(); ++i) {
    if (backends_[i].name == name) return i;
  }
  EDGELM_FAIL("[hybrid] no backend '", name, "' in the scheduler");
}

double StepScheduler::switch_seconds() const {
  double total = 0.0;
  for (const SwitchEvent& event : events_) total += event.seconds;
  return total;
}

LlamaModel& StepScheduler::route(Phase phase, int64_t n_tokens) {
  current_ = {.phase = phase,
              .n_tokens = n_tokens,
              .kv_slots = cache_.size(0),
              .next_position = cache_.next_position(),
              .decode_steps = decode_steps_};
  ScheduleChoice choice = schedule_.choose(current_);
  EDGELM_CHECK(choice.backend < backends_.size(), "[hybrid] the schedule chose backend ",
               choice.backend, " of ", backends_.size());
  if (choice.backend != active_) {
    const Stopwatch stopwatch;
    // Waits for the other backend first; throws when the new one cannot use the cache in place.
    cache_.set_backend(backends_[choice.backend].model->backend());
    const double seconds = stopwatch.seconds();
    if (started_) {  // before the first step nothing ran: handing the cache over is no switch
      events_.push_back({.step = steps_,
                         .phase = phase,
                         .kv_slots = current_.kv_slots,
                         .next_position = current_.next_position,
                         .from = active_,
                         .to = choice.backend,
                         .reason = std::move(choice.reason),
                         .seconds = seconds});
      const SwitchEvent& event = events_.back();
      char cost[32];
      std::snprintf(cost, sizeof cost, "%.1f us", seconds * 1e6);
      log_info("[hybrid] step ", event.step, " (", phase == Phase::Prefill ? "prefill" : "decode",
               ", ", event.kv_slots, " KV slots, position ", event.next_position,
               "): ", name(event.from), " -> ", name(event.to), " (", event.reason, "), ", cost);
    }
    active_ = choice.backend;
  }
  started_ = true;
  return *backends_[active_].model;
}

void StepScheduler::finished(Phase phase, int64_t n_tokens, double seconds) {
  BackendShare& share = shares_[active_];
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
