// Zero heap allocations per decoded token: a counting replacement of the global operator new
// records every allocation while decode steps run (model forward through the KV cache, the
// sampler, and the generator with an idle cache manager), for every CPU kernel table; and with a
// policy that has the forward pass export its queries and keeps their statistics.
// Kernel scratch grows to the largest size seen and is then reused, so the run first warms up
// to the cache length it measures at, clears the cache and measures a whole second run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "eviction/cache_manager.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"

// The replacements below pair malloc with free on purpose; GCC's -Wmismatched-new-delete cannot
// see that and would warn at every use of delete in this file.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  return operator new(size);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  if (g_counting.load(std::memory_order_relaxed))
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = static_cast<std::size_t>(alignment);
  if (void* p = std::aligned_alloc(align, (size + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return operator new(size, alignment);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace edgelm {
namespace {

namespace fs = std::filesystem;

class ZeroAllocation : public ::testing::TestWithParam<std::string> {};

// The hook itself must see allocations, or the test below could not fail.
TEST(ZeroAllocationHook, CountsAllocations) {
  g_allocations = 0;
  g_counting = true;
  auto* values = new std::vector<int>(100);
  g_counting = false;
  delete values;
  EXPECT_EQ(g_allocations.load(), 2);  // the vector object and its storage
}

TEST_P(ZeroAllocation, DecodeStepsAllocateNothing) {
  cpu::CpuBackend backend(cpu::CpuOptions{.n_threads = 2, .isa = GetParam()});
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_zero_alloc_" + std::to_string(::getpid()));
  for (DType weights : {DType::F32, DType::Q8_0, DType::Q4_0}) {
    const std::string path = make_model(
        {.preset = "tiny", .format = "gguf", .quant = weights, .seed = 2, .out_dir = dir.string()});
    LoadedModel loaded = load_llama(path, backend);
    LlamaModel model(backend, std::move(loaded.config), std::move(loaded.weights), 16);
    KvCache cache = model.make_cache(96, DType::F16);
    EvictionConfig none;
    CacheManager manager(none, make_policy(none));
    Generator generator(model, cache, &manager);
    Sampler sampler({.temperature = 0.7f, .top_k = 20, .top_p = 0.9f, .seed = 1},
                    model.config().vocab_size);
    std::vector<int32_t> history;
    history.reserve(256);
    const std::vector<int32_t> prompt = {300, 5, 17, 42, 9, 88, 120};

    auto run = [&](int steps) {
      std::span<const float> logits = generator.prefill(prompt);
      for (int i = 0; i < steps; ++i) {
        const int32_t token = sampler.sample(logits, history);
        history.push_back(token);
        logits = generator.decode(token);
      }
    };
    run(80);  // warm-up: every scratch buffer reaches its size for up to 87 slots
    cache.clear();
    history.clear();

    std::span<const float> logits = generator.prefill(prompt);
    g_allocations = 0;
    g_counting = true;
    for (int i = 0; i < 80; ++i) {
      const int32_t token = sampler.sample(logits, history);
      history.push_back(token);
      logits = generator.decode(token);
    }
    g_counting = false;
    EXPECT_EQ(g_allocations.load(), 0) << "heap allocations during 80 decode steps with "
                                       << dtype_name(weights) << " weights on " << GetParam();
  }
}

// A policy that keeps query statistics (expected_attention, with template tokens protected, so
// every fed token is also recorded): the query export and the statistics allocate nothing per
// decoded token either, once the first steps have sized them (the budget does not bind here).
TEST(ZeroAllocationQueries, QueryExportAndStatisticsAllocateNothing) {
  cpu::CpuBackend backend(cpu::CpuOptions{.n_threads = 2});
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_zero_alloc_queries_" + std::to_string(::getpid()));
  const std::string path = make_model({.preset = "tiny",
                                       .format = "gguf",
                                       .quant = DType::F32,
                                       .seed = 2,
                                       .out_dir = dir.string()});
  LoadedModel loaded = load_llama(path, backend);
  LlamaModel model(backend, std::move(loaded.config), std::move(loaded.weights), 16);
  KvCache cache = model.make_cache(128, DType::F16);
  EvictionConfig config;
  config.policy = "expected_attention";
  config.kv_budget = 120;
  config.protect = "sinks,template";
  CacheManager manager(config, make_policy(config));
  manager.tokens().set_special_ids({5, 17, 42});
  Generator generator(model, cache, &manager);
  const std::vector<int32_t> prompt = {300, 5, 17, 42, 9, 88, 120};
  std::span<const float> logits = generator.prefill(prompt);
  auto next = [&](int i) {
    return static_cast<int32_t>(
        i % 3 == 0 ? 17 : std::max_element(logits.begin(), logits.end()) - logits.begin());
  };
  for (int i = 0; i < 4; ++i) logits = generator.decode(next(i));
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 80; ++i) logits = generator.decode(next(i));
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0)
      << "heap allocations during 80 decode steps with queries exported";
  EXPECT_EQ(manager.evictions(), 0);
}

std::vector<std::string> isas() {
  std::vector<std::string> names;
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) names.push_back(table->isa);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Isa, ZeroAllocation, ::testing::ValuesIn(isas()));

}  // namespace
}  // namespace edgelm
