// Two backends taking turns on one generation (runtime/hybrid.h, runtime/scheduler.h): on OpenCL
// (PoCL in CI) the whole model switched between the CPU and OpenCL backends over one set of
// weights and one KV cache: the greedy tokens of every schedule are those of a CPU-only run for
// every weight and KV type, the logits stay within the CPU<->OpenCL parity bounds, nothing is
// copied between host and device, the cache one backend wrote is what the other reads, and a
// switch during eviction keeps the positions and slots the CPU-only run keeps.
//
// Without an OpenCL device the model tests are skipped, unless EDGELM_REQUIRE_OPENCL is set.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "backends/cpu/cpu_backend.h"
#include "backends/registry.h"
#include "core/error.h"
#include "eviction/cache_manager.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "runtime/hybrid.h"
#include "runtime/session.h"
#include "tests/opencl_test_util.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;
using test::max_relative_diff;
using test::ModelCase;
using test::test_prompt;

// ---- names (no device needed) ----

TEST(HybridNames, BackendsAndWeightSharingParseOrFailInOneLine) {
  auto message = [](auto make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              parse_hybrid_side("vulkan", "--decode-backend");
            }).find("--decode-backend: 'vulkan' is not a backend"),
            std::string::npos);
  EXPECT_EQ(parse_hybrid_side("cpu:portable", "--x"), HybridSide::Cpu);
  EXPECT_NE(message([] { parse_weight_sharing("twice", "--hybrid-weights"); }).find("shared|"),
            std::string::npos);
  EXPECT_EQ(HybridModel::backend_names(), (BackendNames{"cpu", "opencl"}));
}

// ---- the model on both backends ----

struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // after the prompt, then after each decode step
  // After each logits: per layer and kv head, the positions the cache holds, and the slots filled.
  std::vector<std::vector<std::set<int32_t>>> kept;
  std::vector<int64_t> slots;
};

// Greedy generation of `n` tokens through a GenerationSession (the tools' loop), with `router` (a
// StepScheduler) choosing the backend of every step when given.
GreedyRun generate(LlamaModel& model, KvCache& cache, CacheManager* manager, StepRouter* router,
                   int64_t n, bool record_cache = false) {
  GreedyRun run;
  GenerationSettings settings;
  settings.sampling.greedy = true;
  settings.max_tokens = n;
  GenerationSession::Callbacks callbacks;
  callbacks.on_logits = [&](std::span<const float> logits) {
    run.logits.emplace_back(logits.begin(), logits.end());
    if (!record_cache) return;
    std::vector<std::set<int32_t>> kept;
    for (int64_t l = 0; l < cache.n_layers(); ++l) {
      for (int64_t g = 0; g < cache.n_kv_heads(); ++g) {
        std::set<int32_t> positions;
        for (int64_t s = 0; s < cache.size(l); ++s) positions.insert(cache.position(l, s, g));
        kept.push_back(positions);
      }
    }
    run.kept.push_back(std::move(kept));
    run.slots.push_back(cache.size(0));
  };
  GenerationSession session(model, cache, manager, settings, nullptr, std::move(callbacks));
  if (router != nullptr) session.generator().set_router(router);
  session.prefill(test_prompt(model.config().vocab_size));
  run.tokens = session.generate().tokens;
  return run;
}

// The reference: the default CPU backend alone, as `generate --backend cpu` runs.
GreedyRun cpu_run(const std::string& path, std::optional<DType> weight_type, DType kv_type,
                  int64_t n) {
  cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2});
  LoadedModel loaded = load_llama(path, cpu, {.weight_type = weight_type});
  LlamaModel model(cpu, std::move(loaded.config), std::move(loaded.weights), 16);
  KvCache cache = model.make_cache(96, kv_type);
  return generate(model, cache, nullptr, nullptr, n);
}

// The schedules every weight and KV type runs: prefill on one backend and decode on the other
// (both ways), decode alternating every step and every 3 steps, decode moving over at a KV
// threshold in the middle of the reply, and the warmup (which alternates, then picks).
struct NamedSchedule {
  const char* name;
  PhaseSchedule::Settings settings;
  int64_t warmup_tokens = 0;
};
const std::vector<NamedSchedule>& schedules() {
  static const std::vector<NamedSchedule> all = {
      {"prefill opencl, decode cpu", {.prefill = "opencl", .decode = "cpu"}},
      {"prefill cpu, decode opencl", {.prefill = "cpu", .decode = "opencl"}},
      {"every step", {.prefill = "opencl", .decode = "cpu", .switch_every = 1}},
      {"every 3 steps", {.prefill = "cpu", .decode = "opencl", .switch_every = 3}},
      {"threshold 45 slots", {.prefill = "opencl", .decode = "cpu", .switch_threshold = 45}},
      {"warmup 2 tokens", {}, 2},
  };
  return all;
}

class HybridModelTest : public ::testing::TestWithParam<ModelCase> {};

// Greedy tokens equal to the CPU-only run's under every schedule, for both weight layouts;
// logits within the CPU<->OpenCL bounds (test::logit_tolerance: float weights 1e-3; quantized
// 5e-2, for 8-bit activation rounding that tiny float differences can move by one step); no
// transfer between host and device; and the switches the schedule implies. A schedule that ran
// every step on one backend would still pass the token check, hence the switch counts.
TEST_P(HybridModelTest, EveryScheduleGivesTheCpuTokens) {
  REQUIRE_OPENCL_DEVICE();
  const ModelCase param = GetParam();
  const double tolerance = test::logit_tolerance(param.weight_type);
  const int64_t n = 10;
  for (const char* preset : {"tiny", "tiny-odd-heads"}) {
    const fs::path dir = fs::path(::testing::TempDir()) / (std::string("edgelm_hybrid_") + preset +
                                                           "_" + std::to_string(::getpid()));
    const std::string path = make_model({.preset = preset,
                                         .format = "hf",
                                         .quant = DType::F32,
                                         .seed = 11,
                                         .out_dir = dir.string()});
    const GreedyRun reference = cpu_run(path, param.weight_type, param.kv_type, n);
    for (WeightSharing sharing : {WeightSharing::Shared, WeightSharing::PerBackend}) {
      HybridModel hybrid(path, {.backend = {.n_threads = 2},
                                .weights = sharing,
                                .weight_type = param.weight_type,
                                .max_chunk = 16});
      const uint64_t copies_before = hybrid.host_device_copy_bytes();
      for (const NamedSchedule& s : schedules()) {
        const std::string label = str_cat(preset, ", ", dtype_name(param.weight_type), " weights (",
                                          weight_sharing_name(sharing), "), ",
                                          dtype_name(param.kv_type), " KV, ", s.name);
        KvCache cache = hybrid.make_cache(96, param.kv_type);
        PhaseSchedule phases(HybridModel::backend_names(), s.settings);
        WarmupSchedule warmup(HybridModel::backend_names(), "opencl", "cpu",
                              std::max<int64_t>(1, s.warmup_tokens));
        BackendSchedule& schedule =
            s.warmup_tokens > 0 ? static_cast<BackendSchedule&>(warmup) : phases;
        StepScheduler router(hybrid.backends(), cache, schedule);
        const GreedyRun run = generate(hybrid.model(HybridSide::Cpu), cache, nullptr, &router, n);
        EXPECT_EQ(run.tokens, reference.tokens) << label;
        ASSERT_EQ(run.logits.size(), reference.logits.size()) << label;
        for (size_t i = 0; i < run.logits.size(); ++i) {
          EXPECT_LT(max_relative_diff(run.logits[i], reference.logits[i]), tolerance)
              << label << ", logits " << i;
        }
        EXPECT_EQ(hybrid.host_device_copy_bytes(), copies_before) << label;
        // 3 prefill chunks (16, 16 and 8 tokens), then n - 1 = 9 decode steps.
        const BackendShare& cpu = router.share(router.index_of("cpu"));
        const BackendShare& cl = router.share(router.index_of("opencl"));
        EXPECT_EQ(cpu.prefill_tokens + cl.prefill_tokens, 40) << label;
        EXPECT_EQ(cpu.decode_steps + cl.decode_steps, n - 1) << label;
        const std::string name = s.name;
        if (name == "every step") {
          EXPECT_EQ(router.switches(), n - 1) << label;  // into decode, then at every step
        } else if (name == "every 3 steps") {
          EXPECT_EQ(router.switches(), 3) << label;  // decode on 3 opencl, 3 cpu, 3 opencl
        } else if (name == "threshold 45 slots") {
          EXPECT_EQ(router.switches(), 1) << label;
          EXPECT_EQ(cl.decode_steps, 5) << label;  // slots 40..44 before the step
        } else if (name == "warmup 2 tokens") {
          EXPECT_GE(router.switches(), 4) << label;  // prefill and decode each try both
          EXPECT_GT(cpu.decode_steps, 1) << label;
          EXPECT_GT(cl.decode_steps, 1) << label;
        } else {
          EXPECT_EQ(router.switches(), 1) << label;
          EXPECT_EQ(router.events()[0].phase, Phase::Decode) << label;
        }
      }
      if (sharing == WeightSharing::Shared) {
        EXPECT_EQ(hybrid.cpu_only_weight_bytes(), 0u);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WeightAndKvTypes, HybridModelTest, ::testing::ValuesIn(test::kModelCases),
                         test::model_case_name);

// A Q4_1 GGUF file with a Q8_0 token embedding, as SmolLM2's file is: both backends multiply the
// projections as stored (Q4_1 has no interleaved layout on the CPU), so per backend or shared,
// the CPU reads the very bytes OpenCL reads and holds no copy of its own.
TEST(HybridQuantizedFile, Q4_1FileWithQ8_0EmbeddingSwitchesLikeTheCpu) {
  REQUIRE_OPENCL_DEVICE();
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_hybrid_q4_1_" + std::to_string(::getpid()));
  const std::string path = make_model({.preset = "tiny-mha-untied",
                                       .format = "gguf",
                                       .quant = DType::Q4_1,
                                       .embedding_quant = DType::Q8_0,
                                       .seed = 13,
                                       .out_dir = dir.string()});
  const GreedyRun reference = cpu_run(path, std::nullopt, DType::F16, 10);
  for (WeightSharing sharing : {WeightSharing::Shared, WeightSharing::PerBackend}) {
    HybridModel hybrid(path, {.backend = {.n_threads = 2}, .weights = sharing, .max_chunk = 16});
    const LlamaWeights& cl = hybrid.model(HybridSide::OpenCl).weights();
    const LlamaWeights& cpu = hybrid.model(HybridSide::Cpu).weights();
    EXPECT_EQ(cl.layers[0].w_up.dtype(), DType::Q4_1);
    EXPECT_EQ(cpu.embedding.raw(), cl.embedding.raw());  // one embedding table
    for (size_t l = 0; l < cl.layers.size(); ++l) {
      EXPECT_EQ(cpu.layers[l].w_up.raw(), cl.layers[l].w_up.raw());
      EXPECT_EQ(cpu.layers[l].w_down.raw(), cl.layers[l].w_down.raw());
    }
    EXPECT_EQ(cpu.output.raw(), cl.output.raw());
    EXPECT_EQ(hybrid.cpu_only_weight_bytes(), 0u);
    KvCache cache = hybrid.make_cache(96, DType::F16);
    PhaseSchedule schedule(HybridModel::backend_names(),
                           {.prefill = "opencl", .decode = "cpu", .switch_every = 2});
    StepScheduler router(hybrid.backends(), cache, schedule);
    const GreedyRun run = generate(hybrid.model(HybridSide::Cpu), cache, nullptr, &router, 10);
    EXPECT_EQ(run.tokens, reference.tokens) << weight_sharing_name(sharing);
    for (size_t i = 0; i < run.logits.size(); ++i)
      EXPECT_LT(max_relative_diff(run.logits[i], reference.logits[i]),
                test::logit_tolerance(DType::Q4_1))
          << "step " << i;
    EXPECT_GE(router.switches(), 4);
  }
}

// The zero-copy promise across a switch: the cache OpenCL's kernels wrote during prefill is the
// cache the CPU's attention reads in decode (and the other way round), the same buffers at the
// same host addresses, handed over with no transfer; the decode after the switch gives the
// CPU-only run's logits, which it could not if the CPU read other bytes than OpenCL wrote.
TEST(HybridKvCache, OneBackendWritesWhatTheOtherReadsInPlace) {
  REQUIRE_OPENCL_DEVICE();
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_hybrid_kv_" + std::to_string(::getpid()));
  const std::string path = make_model(
      {.preset = "tiny", .format = "hf", .quant = DType::F32, .seed = 11, .out_dir = dir.string()});
  const GreedyRun reference = cpu_run(path, DType::F32, DType::F32, 2);
  HybridModel hybrid(path, {.backend = {.n_threads = 2}, .max_chunk = 16});
  for (const auto& [first, second] : {std::pair{HybridSide::OpenCl, HybridSide::Cpu},
                                      std::pair{HybridSide::Cpu, HybridSide::OpenCl}}) {
    const std::string label = str_cat(hybrid_side_name(first), " then ", hybrid_side_name(second));
    KvCache cache = hybrid.make_cache(96, DType::F32);
    const void* k_before = cache.view(0).k.raw();
    const void* mapping = cache.view(0).k.buffer()->host_ptr();
    PhaseSchedule schedule(HybridModel::backend_names(),
                           {.prefill = hybrid_side_name(first), .decode = hybrid_side_name(second)});
    StepScheduler router(hybrid.backends(), cache, schedule);
    const uint64_t copies_before = hybrid.host_device_copy_bytes();
    LlamaModel& any = hybrid.model(HybridSide::Cpu);
    GenerationSettings settings;
    settings.sampling.greedy = true;
    settings.max_tokens = 2;
    GenerationSession session(any, cache, nullptr, settings);
    session.generator().set_router(&router);
    const std::span<const float> after_prompt =
        session.prefill(test_prompt(any.config().vocab_size));
    EXPECT_EQ(&cache.backend(), &hybrid.backend(first)) << label;
    EXPECT_LT(max_relative_diff(after_prompt, reference.logits[0]), 1e-3) << label;
    const Reply reply = session.generate();  // one decode step, on `second`
    EXPECT_EQ(reply.tokens, reference.tokens) << label;
    EXPECT_EQ(&cache.backend(), &hybrid.backend(second)) << label;
    ASSERT_EQ(router.switches(), 1) << label;
    EXPECT_EQ(router.share(router.index_of(hybrid_side_name(second))).decode_steps, 1) << label;
    EXPECT_EQ(router.share(router.index_of(hybrid_side_name(first))).prefill_tokens, 40) << label;
    // The same buffer, at the same address, now holding the prompt and the decoded token.
    EXPECT_EQ(cache.view(0).k.raw(), k_before) << label;
    EXPECT_EQ(cache.view(0).k.buffer()->host_ptr(), mapping) << label;
    EXPECT_EQ(cache.size(0), 41) << label;
    EXPECT_EQ(hybrid.host_device_copy_bytes(), copies_before) << label;
    EXPECT_TRUE(hybrid.backend(HybridSide::Cpu).can_use(*cache.view(0).k.buffer()));
    EXPECT_TRUE(hybrid.backend(HybridSide::OpenCl).can_use(*cache.view(0).k.buffer()));
  }
}

// A cache in memory one backend cannot use in place is refused by name, never copied.
TEST(HybridKvCache, HandingACacheToABackendThatCannotUseItThrows) {
  REQUIRE_OPENCL_DEVICE();
  cpu::CpuBackend host(cpu::CpuOptions{.n_threads = 1});
  KvCache cache(host, 1, 8, 1, 16, DType::F32);
  const std::unique_ptr<Backend> cl = create_backend("opencl");
  try {
    cache.set_backend(*cl);
    ADD_FAILURE() << "an OpenCL backend took a cache in host memory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[kv_cache] backend opencl cannot use the cache's K"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(&cache.backend(), &host);
}

// Eviction with a switch at every decode step: evictions (compaction of K, V and positions, and
// for h2o the attention mass it scores by) happen on whichever backend runs that step, and the
// tokens, the slots filled and the positions kept in every layer and kv head after every step
// are those of the CPU-only run. Float weights and cache, as test_opencl's eviction test.
TEST(HybridEviction, SwitchingDuringEvictionKeepsPositionsAndSlots) {
  REQUIRE_OPENCL_DEVICE();
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_hybrid_eviction_" + std::to_string(::getpid()));
  const std::string path = make_model(
      {.preset = "tiny", .format = "hf", .quant = DType::F32, .seed = 3, .out_dir = dir.string()});
  auto config_for = [](const std::string& policy) {
    EvictionConfig config;
    config.policy = policy;
    config.window = 12;
    config.kv_budget = policy == "sliding" || policy == "sink" ? 0 : 24;
    config.snapkv_window = 6;
    config.snapkv_kernel = 3;
    return config;
  };
  const int64_t n = 31;
  HybridModel hybrid(path, {.backend = {.n_threads = 2}, .max_chunk = 8});
  for (const std::string policy : {"sink", "h2o", "snapkv", "tova"}) {
    const EvictionConfig config = config_for(policy);
    // The CPU alone.
    cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2});
    LoadedModel loaded = load_llama(path, cpu);
    LlamaModel cpu_model(cpu, std::move(loaded.config), std::move(loaded.weights), 8);
    CacheManager cpu_manager(config, make_policy(config));
    KvCache cpu_cache = cpu_model.make_cache(
        cpu_manager.capacity_for(128, 8, cpu_model.config().n_layers), DType::F32, 128);
    const GreedyRun reference = generate(cpu_model, cpu_cache, &cpu_manager, nullptr, n, true);
    // Switching at every step, prefill chunks included: decode alternates every step, and the
    // prefill chunks run on OpenCL.
    CacheManager manager(config, make_policy(config));
    KvCache cache =
        hybrid.make_cache(manager.capacity_for(128, 8, hybrid.config().n_layers), DType::F32, 128);
    PhaseSchedule schedule(HybridModel::backend_names(),
                           {.prefill = "opencl", .decode = "cpu", .switch_every = 1});
    StepScheduler router(hybrid.backends(), cache, schedule);
    const GreedyRun run =
        generate(hybrid.model(HybridSide::Cpu), cache, &manager, &router, n, true);
    EXPECT_EQ(run.tokens, reference.tokens) << policy;
    EXPECT_EQ(run.slots, reference.slots) << policy;
    EXPECT_EQ(run.kept, reference.kept) << policy;
    EXPECT_EQ(cache.next_position(), cpu_cache.next_position()) << policy;
    EXPECT_EQ(manager.evictions(), cpu_manager.evictions()) << policy;
    EXPECT_GT(manager.evictions(), 0) << policy;
    // Evictions ran right after switches, on both backends: an eviction before forward step k
    // (counted from 0) is the manager's step k + 1, and the router switched before that step.
    std::set<size_t> evicted_on;
    for (const EvictionEvent& event : manager.events()) {
      for (const SwitchEvent& s : router.events())
        if (s.step + 1 == event.step) evicted_on.insert(s.to);
    }
    EXPECT_EQ(evicted_on.size(), 2u) << policy << ": evictions at switches on both backends";
  }
}

}  // namespace
}  // namespace edgelm
