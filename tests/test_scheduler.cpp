// Which backend runs each step (runtime/scheduler.h): the schedules' decisions over two backends
// and more, and a StepScheduler moving one generation over three CPU backends that share one
// model's weights and one KV cache: the tokens and logits are those of one backend alone (the same
// kernels), and every step ran where the schedule said. generate_hybrid's CPU + OpenCL runs are in
// test_hybrid.cpp.
#include "runtime/scheduler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "eviction/system_monitor.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "runtime/session.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

const BackendNames kTwo = {"cpu", "opencl"};
constexpr size_t C = 0, O = 1;

StepInfo prefill_step(int64_t n_tokens, int64_t kv_slots) {
  return {.phase = Phase::Prefill, .n_tokens = n_tokens, .kv_slots = kv_slots};
}

StepInfo decode_step(int64_t decode_steps, int64_t kv_slots) {
  return {
      .phase = Phase::Decode, .n_tokens = 1, .kv_slots = kv_slots, .decode_steps = decode_steps};
}

template <class Make>
std::string error_of(Make make) {
  try {
    make();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// ---- schedules ----

TEST(Schedule, PhasesAndThresholdInKvSlots) {
  PhaseSchedule plain(kTwo, {.prefill = "opencl", .decode = "cpu"});
  EXPECT_EQ(plain.choose(prefill_step(16, 0)).backend, O);
  EXPECT_EQ(plain.choose(decode_step(0, 40)).backend, C);
  EXPECT_EQ(plain.describe(), "prefill opencl, decode cpu");
  // Decode stays on the prefill backend below 50 filled slots, and moves from 50 on; the count
  // is of physical slots, so an eviction that empties slots moves it back.
  PhaseSchedule threshold(kTwo, {.prefill = "opencl", .decode = "cpu", .switch_threshold = 50});
  EXPECT_EQ(threshold.choose(prefill_step(16, 60)).backend, O);
  EXPECT_EQ(threshold.choose(decode_step(0, 49)).backend, O);
  EXPECT_EQ(threshold.choose(decode_step(1, 50)).backend, C);
  EXPECT_EQ(threshold.choose(decode_step(2, 51)).backend, C);
  EXPECT_EQ(threshold.choose(decode_step(3, 30)).backend, O);
}

TEST(Schedule, AlternatesEveryKDecodeSteps) {
  PhaseSchedule every(kTwo, {.prefill = "cpu", .decode = "opencl", .switch_every = 3});
  std::vector<size_t> picks;
  for (int64_t i = 0; i < 8; ++i) picks.push_back(every.choose(decode_step(i, 10 + i)).backend);
  EXPECT_EQ(picks, (std::vector<size_t>{O, O, O, C, C, C, O, O}));
  EXPECT_EQ(every.choose(prefill_step(8, 0)).backend, C);
  // Over three backends, decode alternates with the one named, not with the prefill backend.
  PhaseSchedule three({"a", "b", "c"},
                      {.prefill = "a", .decode = "b", .switch_every = 2, .alternate = "c"});
  picks.clear();
  for (int64_t i = 0; i < 6; ++i) picks.push_back(three.choose(decode_step(i, 10)).backend);
  EXPECT_EQ(picks, (std::vector<size_t>{1, 1, 2, 2, 1, 1}));
  EXPECT_EQ(three.describe(), "prefill a, decode b, alternating with c every 2 decode steps");
}

TEST(Schedule, BadSettingsThrowOneLine) {
  EXPECT_NE(error_of([] {
              PhaseSchedule(kTwo, {.switch_threshold = -1});
            }).find("threshold -1 is negative"),
            std::string::npos);
  EXPECT_NE(error_of([] { PhaseSchedule(kTwo, {.switch_every = -2}); })
                .find("period -2 is negative"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              PhaseSchedule(kTwo, {.switch_threshold = 4, .switch_every = 2});
            }).find("exclusive"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              PhaseSchedule(kTwo, {.prefill = "cpu", .decode = "cpu", .switch_every = 2});
            }).find("alternates between cpu and itself"),
            std::string::npos);
  EXPECT_NE(error_of([] { PhaseSchedule(kTwo, {.prefill = "vulkan"}); })
                .find("the prefill backend 'vulkan' is not one of the backends (cpu, opencl)"),
            std::string::npos);
  EXPECT_NE(error_of([] { WarmupSchedule(kTwo, "cpu", "cpu", 0); }).find("warmup tokens 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { PhaseSchedule({"cpu", "cpu"}, {.prefill = "cpu"}); })
                .find("'cpu' is named twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { PhaseSchedule({}, {}); }).find("at least one backend"),
            std::string::npos);
}

// The warmup goes to the least measured backend until each has run `tokens` tokens of the phase,
// then keeps the one with less time per token; prefill and decode decide apart.
TEST(Schedule, WarmupMeasuresEveryBackendThenKeepsTheFastest) {
  WarmupSchedule warmup(kTwo, "opencl", "cpu", 2);
  // Decode: cpu 3 ms per token, opencl 1 ms.
  std::vector<size_t> ran;
  for (int64_t i = 0; i < 7; ++i) {
    const StepInfo step = decode_step(i, 20 + i);
    const size_t backend = warmup.choose(step).backend;
    ran.push_back(backend);
    warmup.observe(step, backend, backend == C ? 3e-3 : 1e-3);
  }
  EXPECT_EQ(ran, (std::vector<size_t>{C, O, C, O, O, O, O}));
  ASSERT_TRUE(warmup.measured(Phase::Decode).pick.has_value());
  EXPECT_EQ(*warmup.measured(Phase::Decode).pick, O);
  EXPECT_DOUBLE_EQ(warmup.measured(Phase::Decode).seconds_per_token(C), 3e-3);
  EXPECT_FALSE(warmup.measured(Phase::Prefill).pick.has_value());
  // Prefill, measured per token over chunks: opencl 8 tokens in 4 ms, cpu 8 in 2 ms.
  StepInfo chunk = prefill_step(8, 0);
  EXPECT_EQ(warmup.choose(chunk).backend, O);
  warmup.observe(chunk, O, 4e-3);
  EXPECT_EQ(warmup.choose(chunk).backend, C);
  warmup.observe(chunk, C, 2e-3);
  EXPECT_EQ(warmup.choose(chunk).backend, C);
  EXPECT_EQ(warmup.choose(decode_step(8, 40)).backend, O);

  // Three backends: each is tried in turn from the first, and the fastest (c) is kept.
  WarmupSchedule three({"a", "b", "c"}, "b", "b", 1);
  const std::vector<double> ms_per_token = {2.0, 3.0, 1.0};
  ran.clear();
  for (int64_t i = 0; i < 5; ++i) {
    const StepInfo step = decode_step(i, 20);
    const size_t backend = three.choose(step).backend;
    ran.push_back(backend);
    three.observe(step, backend, ms_per_token[backend] * 1e-3);
  }
  EXPECT_EQ(ran, (std::vector<size_t>{1, 2, 0, 2, 2}));
}

// GPU busy (a scripted curve, > 0: busy) and memory below the threshold move steps to the
// fallback; otherwise the inner schedule decides. Both monitors advance one point per step.
TEST(Schedule, PressureMovesStepsToTheFallback) {
  PhaseSchedule inner(kTwo, {.prefill = "opencl", .decode = "opencl"});
  PressureSchedule pressure(inner, "cpu", SimulatedMonitor::parse("0:4000,4:100,6:4000"), 512.0,
                            SimulatedMonitor::parse("0:0,1:1,3:0"));
  std::vector<size_t> picks;
  std::vector<std::string> reasons;
  for (int64_t i = 0; i < 8; ++i) {
    const ScheduleChoice choice = pressure.choose(decode_step(i, 10));
    picks.push_back(choice.backend);
    reasons.push_back(choice.reason);
  }
  EXPECT_EQ(picks, (std::vector<size_t>{O, C, C, O, C, C, O, O}));
  EXPECT_EQ(reasons[1], "GPU busy");
  EXPECT_NE(reasons[4].find("memory pressure (100 MiB available"), std::string::npos) << reasons[4];
  EXPECT_EQ(pressure.pressure_steps(), 4);
  EXPECT_NE(pressure.describe().find("; cpu while memory below 512 MiB"), std::string::npos)
      << pressure.describe();
}

// ---- the scheduler over three backends ----

// make_model's tiny preset, float weights.
const std::string& tiny_model_path() {
  static const std::string path =
      make_model({.preset = "tiny",
                  .format = "hf",
                  .quant = DType::F32,
                  .seed = 5,
                  .out_dir = (fs::path(::testing::TempDir()) /
                              ("edgelm_scheduler_" + std::to_string(::getpid())))
                                 .string()});
  return path;
}

struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

Greedy greedy(LlamaModel& model, KvCache& cache, StepRouter* router, int64_t n) {
  Greedy run;
  GenerationSettings settings;
  settings.sampling.greedy = true;
  settings.max_tokens = n;
  GenerationSession::Callbacks callbacks;
  callbacks.on_logits = [&](std::span<const float> logits) {
    run.logits.emplace_back(logits.begin(), logits.end());
  };
  GenerationSession session(model, cache, nullptr, settings, nullptr, std::move(callbacks));
  if (router != nullptr) session.generator().set_router(router);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 20; ++i) prompt.push_back(3 + (i * 37) % (model.config().vocab_size - 3));
  session.prefill(prompt);
  run.tokens = session.generate().tokens;
  return run;
}

// Three CPU backends with the same kernels (so the numbers are the same bit for bit), each with a
// model over one set of weights: prefill on a, decode alternating between b and c every 2 steps.
// The tokens and logits are one backend's alone; every step ran where the schedule said, and the
// cache went to each backend in turn.
TEST(StepScheduler, ThreeBackendsTakeTurnsOverOneCache) {
  std::vector<std::unique_ptr<cpu::CpuBackend>> cpus;
  for (int i = 0; i < 3; ++i) {
    cpus.push_back(
        std::make_unique<cpu::CpuBackend>(cpu::CpuOptions{.n_threads = 1, .isa = "portable"}));
  }
  LoadedModel loaded = load_llama(tiny_model_path(), *cpus[0]);
  std::vector<std::unique_ptr<LlamaModel>> models;
  for (const auto& backend : cpus)
    models.push_back(std::make_unique<LlamaModel>(*backend, loaded.config, loaded.weights, 8));
  const int64_t n = 9;

  KvCache alone_cache = models[0]->make_cache(64, DType::F32);
  const Greedy alone = greedy(*models[0], alone_cache, nullptr, n);

  const std::vector<ScheduledBackend> backends = {
      {"a", models[0].get()}, {"b", models[1].get()}, {"c", models[2].get()}};
  PhaseSchedule schedule(names_of(backends),
                         {.prefill = "a", .decode = "b", .switch_every = 2, .alternate = "c"});
  KvCache cache = models[0]->make_cache(64, DType::F32);
  StepScheduler scheduler(backends, cache, schedule);
  const Greedy run = greedy(*models[0], cache, &scheduler, n);
  EXPECT_EQ(run.tokens, alone.tokens);
  EXPECT_EQ(run.logits, alone.logits);

  // 20 prompt tokens in 3 chunks on a; n - 1 = 8 decode steps: b b c c b b c c.
  EXPECT_EQ(scheduler.share(0).prefill_tokens, 20);
  EXPECT_EQ(scheduler.share(0).prefill_steps, 3);
  EXPECT_EQ(scheduler.share(0).decode_steps, 0);
  EXPECT_EQ(scheduler.share(1).decode_steps, 4);
  EXPECT_EQ(scheduler.share(2).decode_steps, 4);
  EXPECT_EQ(scheduler.steps(), 11);
  ASSERT_EQ(scheduler.switches(), 4);
  std::vector<std::string> moves;
  for (const SwitchEvent& event : scheduler.events())
    moves.push_back(scheduler.name(event.from) + ">" + scheduler.name(event.to));
  EXPECT_EQ(moves, (std::vector<std::string>{"a>b", "b>c", "c>b", "b>c"}));
  EXPECT_EQ(scheduler.events()[0].step, 3);
  EXPECT_EQ(scheduler.active(), 2u);
  EXPECT_EQ(&cache.backend(), cpus[2].get());
  EXPECT_EQ(scheduler.index_of("c"), 2u);
}

TEST(StepScheduler, RefusesAScheduleOrACacheOfOtherBackends) {
  cpu::CpuBackend one(cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  cpu::CpuBackend two(cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  cpu::CpuBackend other(cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  LoadedModel loaded = load_llama(tiny_model_path(), one);
  LlamaModel model_one(one, loaded.config, loaded.weights, 8);
  LlamaModel model_two(two, loaded.config, loaded.weights, 8);
  const std::vector<ScheduledBackend> backends = {{"one", &model_one}, {"two", &model_two}};
  KvCache cache = model_one.make_cache(16, DType::F32);
  PhaseSchedule elsewhere({"one", "three"}, {.prefill = "one", .decode = "three"});
  EXPECT_NE(error_of([&] { StepScheduler(backends, cache, elsewhere); })
                .find("made over other backends"),
            std::string::npos);
  PhaseSchedule fine(names_of(backends), {.prefill = "one", .decode = "two"});
  KvCache foreign(other, loaded.config.n_layers, 16, loaded.config.n_kv_heads,
                  loaded.config.head_dim, DType::F32);
  EXPECT_NE(error_of([&] { StepScheduler(backends, foreign, fine); }).find("none of the backends"),
            std::string::npos);
  StepScheduler scheduler(backends, cache, fine);
  EXPECT_NE(error_of([&] { scheduler.index_of("three"); }).find("no backend 'three'"),
            std::string::npos);
}

}  // namespace
}  // namespace edgelm
