// micro_bench: Google Benchmark over the CPU kernel tables (every table this CPU can run, from
// available_kernel_tables()) at Llama-3.2-1B and 3B shapes: matmul as decode GEMV (M=1) and
// prefill GEMM (M=64, 512) for F32/F16/Q8_0/Q4_0 weights, rms_norm, softmax, silu_mul, rope and
// attention over an F16 KV cache (one decode query, and a 64-query prefill chunk under the causal
// mask), and the thread pool's own cost per dispatch. Ops run through a CpuBackend built for one
// table and thread count, so the numbers include the backend's thread split, as in the model.
// Eigen's GEMM (y = x * W^T on the same F32 matrices, one thread) runs beside ours for the dense
// F32 prefill shapes, once per SIMD level this CPU has (bin/eigen_gemm.h: "eigen" is the baseline
// build, SSE2 on x86-64; "eigen-avx2" and "eigen-avx512" are built with those instructions); its
// label names the SIMD Eigen reports.
//
// Each benchmark reports bytes/s (weights + activations read and written) and, for matmul and
// attention, FLOP/s (2 per multiply-add), as Google Benchmark rate counters. Weight matrices are
// cycled over copies filling 256 MiB, so a GEMV streams its weights from memory as decoding does
// rather than finding them in the last-level cache; decode attention cycles over copies of its
// K and V cache the same way. --hot keeps one copy instead, so the weights (and the cache) stay
// in cache and the kernel runs at its compute ceiling: the gap between the two numbers says
// whether a decode kernel is bound by memory or by its own instructions.
//
// Names: <op>/<isa>/<dtype>/<model>.<what>/<size>/t<threads> (Google Benchmark appends /real_time:
// time is wall-clock, as work is split over threads), e.g.
//   matmul/avx512/q4_0/1b.ffn_up.8192x2048/M1/t1
//   matmul/eigen-avx512/f32/1b.attn_qo.2048x2048/M512/t1
//   attention/avx2/f16/1b.h32kv8d64/slots2048/t1     rms_norm/portable/f32/1b.2048/rows64/t1
//   attention/avx2/f16/1b.h32kv8d64/q64.slots512/t1
// and for the pool pool/run/empty/t2, pool/guided/ranges64/t2.
//
// The default set is a curated slice that runs in under two minutes (1m46s on the 2-vCPU dev VM);
// --full registers the whole
// product (every table x dtype x matrix x M x threads; the portable kernels take seconds per call
// on the large shapes, so combine it with a filter). Examples:
//   micro_bench --benchmark_filter='matmul/.*/q4_0/.*/M1/'          # decode GEMV, Q4_0, all ISAs
//   micro_bench --benchmark_filter='matmul/(avx512|eigen-avx512)/f32/.*/M512'  # ours vs Eigen
//   micro_bench --full --benchmark_filter='3b\..*/M64/t2'
//   micro_bench --benchmark_format=json --benchmark_out=micro.json
#include <benchmark/benchmark.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "bin/cli_util.h"
#include "bin/eigen_gemm.h"
#include "core/buffer.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace {

using edgelm::DType;
using edgelm::Tensor;

// ---- shapes ----

struct ModelShape {
  const char* tag;  // "1b", "3b"
  int64_t hidden, intermediate, n_heads, n_kv_heads, head_dim, vocab;
};

constexpr ModelShape kLlama1B{"1b", 2048, 8192, 32, 8, 64, 128256};
constexpr ModelShape kLlama3B{"3b", 3072, 8192, 24, 8, 128, 128256};

// A weight matrix [N, K] of the model: y[M, N] = x[M, K] * W^T.
struct MatrixShape {
  std::string name;  // "attn_qo" (wq and wo), "attn_kv", "ffn_up" (gate and up), "ffn_down", ...
  int64_t N, K;
};

std::vector<MatrixShape> matrices_of(const ModelShape& m) {
  const int64_t q_dim = m.n_heads * m.head_dim;
  return {{"attn_qo", q_dim, m.hidden},
          {"attn_kv", m.n_kv_heads * m.head_dim, m.hidden},
          {"ffn_up", m.intermediate, m.hidden},
          {"ffn_down", m.hidden, m.intermediate},
          {"output", m.vocab, m.hidden}};
}

const MatrixShape& matrix_named(const std::vector<MatrixShape>& matrices, const std::string& name) {
  for (const MatrixShape& matrix : matrices) {
    if (matrix.name == name) return matrix;
  }
  EDGELM_FAIL("[micro_bench] no matrix named ", name);
}

// Q4_0x8, Q8_0x8 and F16x4 are Q4_0, Q8_0 and F16 repacked as the loader does for tables that
// prefer them (KernelTable::matmul_layout).
constexpr DType kWeightTypes[] = {DType::F32,    DType::F16,    DType::Q8_0, DType::Q4_0,
                                  DType::Q4_0x8, DType::Q8_0x8, DType::F16x4};
// The sub-block family (simd/block_matmul.h), multiplied as stored, and Q4_Kx8 and Q6_Kx8 (Q4_K and
// Q6_K repacked as for Q4_0x8): in the default set only as a one-thread decode GEMV and a 64-row
// prefill of the 1B MLP-up shape; all shapes with --full.
constexpr DType kSubBlockTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q5_1,   DType::Q4_K,
                                    DType::Q5_K, DType::Q6_K, DType::Q4_Kx8, DType::Q6_Kx8};

// ---- shared state ----

// All tensors come from one allocator that outlives every backend.
edgelm::Memory& memory() {
  static edgelm::HostMemory host;
  return host;
}

// One backend per (table, threads), made on first use and kept: making one starts threads.
edgelm::cpu::CpuBackend& backend_for(const std::string& isa, int n_threads) {
  static std::map<std::pair<std::string, int>, std::unique_ptr<edgelm::cpu::CpuBackend>> backends;
  auto& slot = backends[{isa, n_threads}];
  if (!slot) {
    // The shared allocator is not owned: a shared_ptr with a no-op deleter.
    std::shared_ptr<edgelm::Memory> shared(&memory(), [](edgelm::Memory*) {});
    slot = std::make_unique<edgelm::cpu::CpuBackend>(
        edgelm::cpu::CpuOptions{.n_threads = n_threads, .isa = isa, .memory = shared});
  }
  return *slot;
}

// Deterministic values in [-1, 1) (a 64-bit LCG); the kernels' speed does not depend on them.
void fill_random(float* values, int64_t n, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    values[i] = static_cast<float>(static_cast<int32_t>(state >> 32)) * (1.0f / 2147483648.0f);
  }
}

Tensor random_tensor(DType dtype, edgelm::Shape shape, uint64_t seed) {
  if (dtype == DType::Q4_0x8) {
    const Tensor rows = random_tensor(DType::Q4_0, shape, seed);
    Tensor packed = Tensor::empty(memory(), dtype, shape);
    edgelm::repack_q4_0_x8(static_cast<const edgelm::BlockQ4_0*>(rows.raw()),
                           static_cast<edgelm::BlockQ4_0x8*>(packed.raw()), shape[0],
                           shape[1] / edgelm::kQ4_0BlockSize);
    return packed;
  }
  if (dtype == DType::Q8_0x8) {
    const Tensor rows = random_tensor(DType::Q8_0, shape, seed);
    Tensor packed = Tensor::empty(memory(), dtype, shape);
    edgelm::repack_q8_0_x8(static_cast<const edgelm::BlockQ8_0*>(rows.raw()),
                           static_cast<edgelm::BlockQ8_0x8*>(packed.raw()), shape[0],
                           shape[1] / edgelm::kQ8_0BlockSize);
    return packed;
  }
  if (dtype == DType::F16x4) {
    const Tensor rows = random_tensor(DType::F16, shape, seed);
    Tensor packed = Tensor::empty(memory(), dtype, shape);
    edgelm::repack_f16_x4(static_cast<const uint16_t*>(rows.raw()),
                          static_cast<uint16_t*>(packed.raw()), shape[0], shape[1]);
    return packed;
  }
  if (dtype == DType::Q4_Kx8 || dtype == DType::Q6_Kx8) {
    const Tensor rows = random_tensor(edgelm::dtype_unpacked(dtype), shape, seed);
    Tensor packed = Tensor::empty(memory(), dtype, shape);
    const int64_t blocks = shape[1] / edgelm::kKQuantBlockSize;
    if (dtype == DType::Q4_Kx8) {
      edgelm::repack_q4_k_x8(static_cast<const edgelm::BlockQ4_K*>(rows.raw()),
                             static_cast<edgelm::BlockQ4_Kx8*>(packed.raw()), shape[0], blocks);
    } else {
      edgelm::repack_q6_k_x8(static_cast<const edgelm::BlockQ6_K*>(rows.raw()),
                             static_cast<edgelm::BlockQ6_Kx8*>(packed.raw()), shape[0], blocks);
    }
    return packed;
  }
  Tensor t = Tensor::empty(memory(), dtype, shape);
  const int64_t cols = shape.last();
  std::vector<float> row(static_cast<size_t>(cols));
  const edgelm::cpu::RowFromF32Fn convert =
      edgelm::cpu::portable_kernels().row_from_f32[static_cast<size_t>(dtype)];
  auto* bytes = static_cast<std::byte*>(t.raw());
  for (int64_t r = 0; r < shape.rows(); ++r) {
    fill_random(row.data(), cols, seed * 1000003 + static_cast<uint64_t>(r));
    convert(row.data(), bytes + static_cast<size_t>(r) * t.row_bytes(), cols);
  }
  return t;
}

// Weights cycled over: copies of one matrix filling at least this many bytes, 8x the 32 MiB
// last-level cache of the dev VM, so consecutive calls read their weights from memory.
constexpr size_t kRotationBytes = size_t{256} << 20;
// --hot: one copy of each matrix, read from cache.
bool g_hot_weights = false;

// --iterations N: every benchmark runs exactly N iterations (0: as many as Google Benchmark's
// timing needs). scripts/cycle_estimate runs one benchmark with two counts under QEMU, where the
// difference is the work of the iterations alone.
int64_t g_iterations = 0;

// Settings every benchmark takes: wall time (the kernels run on the backend's threads), and the
// fixed iteration count if one was asked for.
void configure(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  if (g_iterations > 0) b->Iterations(g_iterations);
}

struct WeightSet {
  DType dtype = DType::F32;
  int64_t N = 0, K = 0;
  std::vector<Tensor> copies;
};

// The weights of the benchmark running now. Benchmarks are registered grouped by weight, so one
// slot makes each matrix once and holds at most one model-sized matrix at a time.
const WeightSet& weights_for(DType dtype, int64_t N, int64_t K) {
  static std::unique_ptr<WeightSet> current;
  if (current && current->dtype == dtype && current->N == N && current->K == K) return *current;
  current.reset();
  auto set = std::make_unique<WeightSet>();
  set->dtype = dtype;
  set->N = N;
  set->K = K;
  set->copies.push_back(random_tensor(dtype, {N, K}, 7));
  const size_t bytes = set->copies[0].nbytes();
  while (!g_hot_weights && set->copies.size() * bytes < kRotationBytes) {
    Tensor copy = Tensor::empty(memory(), dtype, {N, K});
    std::memcpy(copy.raw(), set->copies[0].raw(), bytes);
    set->copies.push_back(copy);
  }
  current = std::move(set);
  return *current;
}

// Bytes/s and FLOP/s as rate counters (per iteration, divided by the time); 1000-based, so the
// printed G/s are GB/s and GFLOP/s.
void set_rates(benchmark::State& state, double bytes, double flops) {
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::OneK::kIs1000);
  if (flops > 0) {
    state.counters["FLOPs"] = benchmark::Counter(
        flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1000);
  }
}

// Runs `body` with edgelm errors reported as a skipped benchmark instead of ending the run.
template <class Body>
void guarded(benchmark::State& state, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

std::string shape_label(int64_t a, int64_t b) {
  return std::to_string(a) + "x" + std::to_string(b);
}

// ---- matmul ----

const std::vector<edgelm::bench::EigenGemm>& eigen_builds() {
  static const std::vector<edgelm::bench::EigenGemm> builds =
      edgelm::bench::available_eigen_gemms();
  return builds;
}

// The Eigen build named `isa`, or null when `isa` names a kernel table.
const edgelm::bench::EigenGemm* eigen_build(const std::string& isa) {
  for (const edgelm::bench::EigenGemm& eigen : eigen_builds())
    if (isa == eigen.name) return &eigen;
  return nullptr;
}

// The default set's Eigen: the widest SIMD this CPU runs, as the best kernel table is.
std::string best_eigen() {
  return eigen_builds().back().name;
}

struct MatmulCase {
  const ModelShape* model;
  MatrixShape matrix;
  DType dtype;
  std::string isa;  // a kernel table, or one of Eigen's builds ("eigen", "eigen-avx2", ...)
  int64_t M;
  int threads;
};

void run_matmul(benchmark::State& state, const MatmulCase& c) {
  guarded(state, [&] {
    const int64_t M = c.M, N = c.matrix.N, K = c.matrix.K;
    const WeightSet& weights = weights_for(c.dtype, N, K);
    const Tensor x = random_tensor(DType::F32, {M, K}, 3);
    const Tensor y = Tensor::empty(memory(), DType::F32, {M, N});
    size_t next = 0;
    if (const edgelm::bench::EigenGemm* eigen = eigen_build(c.isa)) {
      state.SetLabel(eigen->simd());
      for (auto _ : state) {
        eigen->gemm(x.data<float>(), weights.copies[next].data<float>(), y.data<float>(), M, N, K);
        next = (next + 1) % weights.copies.size();
      }
    } else {
      edgelm::cpu::CpuBackend& backend = backend_for(c.isa, c.threads);
      for (auto _ : state) {
        backend.matmul(x, weights.copies[next], y);
        next = (next + 1) % weights.copies.size();
      }
    }
    const double weight_bytes = static_cast<double>(weights.copies[0].nbytes());
    set_rates(state, weight_bytes + 4.0 * static_cast<double>(M * K + M * N),
              2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K));
  });
}

// The curated default (under two minutes): decode GEMV on the 1B matrices that make up a decode
// step, prefill on the attention and MLP-up shapes with Eigen beside the best table, and the 3B
// MLP-up shape; the portable oracle on one small GEMV, the other tables on the shapes where they
// differ most, two threads on the best table only.
std::vector<MatmulCase> default_matmul_cases(const std::vector<std::string>& isas) {
  const std::string best = isas.back();
  std::vector<MatmulCase> cases;
  const std::vector<MatrixShape> m1 = matrices_of(kLlama1B);
  const std::vector<MatrixShape> m3 = matrices_of(kLlama3B);
  auto add = [&](const ModelShape& model, const std::vector<MatrixShape>& matrices,
                 const char* name, DType dtype, const std::string& isa, int64_t M, int threads) {
    cases.push_back({&model, matrix_named(matrices, name), dtype, isa, M, threads});
  };
  for (DType dtype : kWeightTypes) {
    for (const std::string& isa : isas) {
      if (isa == "portable") {
        add(kLlama1B, m1, "attn_qo", dtype, isa, 1, 1);
        continue;
      }
      for (const char* name : {"attn_qo", "ffn_up", "ffn_down", "output"}) {
        if (isa == best || std::strcmp(name, "ffn_down") != 0)
          add(kLlama1B, m1, name, dtype, isa, 1, 1);
      }
      if (isa != best) {
        add(kLlama1B, m1, "ffn_up", dtype, isa, 64, 1);
        continue;
      }
      for (const char* name : {"attn_qo", "ffn_up"}) {
        for (int64_t M : {64, 512}) {
          add(kLlama1B, m1, name, dtype, isa, M, 1);
          if (dtype == DType::F32) add(kLlama1B, m1, name, dtype, best_eigen(), M, 1);
        }
      }
      for (const char* name : {"ffn_up", "output"}) add(kLlama1B, m1, name, dtype, isa, 1, 2);
      add(kLlama3B, m3, "ffn_up", dtype, isa, 1, 1);
      add(kLlama3B, m3, "ffn_up", dtype, isa, 512, 1);
      if (dtype == DType::F32) add(kLlama3B, m3, "ffn_up", dtype, best_eigen(), 512, 1);
    }
  }
  for (DType dtype : kSubBlockTypes) {
    for (const std::string& isa : isas) {
      add(kLlama1B, m1, "ffn_up", dtype, isa, 1, 1);
      if (isa == best) add(kLlama1B, m1, "ffn_up", dtype, isa, 64, 1);
    }
  }
  return cases;
}

std::vector<MatmulCase> full_matmul_cases(const std::vector<std::string>& isas) {
  std::vector<MatmulCase> cases;
  for (const ModelShape* model : {&kLlama1B, &kLlama3B}) {
    for (const MatrixShape& matrix : matrices_of(*model)) {
      std::vector<DType> dtypes(std::begin(kWeightTypes), std::end(kWeightTypes));
      dtypes.insert(dtypes.end(), std::begin(kSubBlockTypes), std::end(kSubBlockTypes));
      for (DType dtype : dtypes) {
        for (int64_t M : {1, 64, 512}) {
          for (const std::string& isa : isas) {
            for (int threads : {1, 2}) cases.push_back({model, matrix, dtype, isa, M, threads});
          }
          if (dtype != DType::F32 || M == 1) continue;
          for (const edgelm::bench::EigenGemm& eigen : eigen_builds())
            cases.push_back({model, matrix, dtype, eigen.name, M, 1});
        }
      }
    }
  }
  return cases;
}

// A table that multiplies `dtype` with the portable kernel itself (a layout it never chooses,
// such as F16x4 in the AVX2 table) only repeats the oracle's case, at the oracle's speed.
bool runs_portable_kernel(const std::string& isa, DType dtype) {
  if (isa == "portable" || eigen_build(isa) != nullptr) return false;
  const auto at = static_cast<size_t>(dtype);
  for (const edgelm::cpu::KernelTable* table : edgelm::cpu::available_kernel_tables()) {
    if (isa == table->isa) return table->matmul[at] == edgelm::cpu::portable_kernels().matmul[at];
  }
  return false;
}

void register_matmul(std::vector<MatmulCase> cases) {
  std::erase_if(cases, [](const MatmulCase& c) { return runs_portable_kernel(c.isa, c.dtype); });
  // Grouped by weight matrix (stable, so the order within a group stays), so weights_for makes
  // each matrix once.
  auto key = [](const MatmulCase& c) {
    return std::make_tuple(std::string(c.model->tag), c.matrix.name, static_cast<int>(c.dtype));
  };
  std::stable_sort(cases.begin(), cases.end(),
                   [&](const MatmulCase& a, const MatmulCase& b) { return key(a) < key(b); });
  for (const MatmulCase& c : cases) {
    const std::string name = edgelm::str_cat(
        "matmul/", c.isa, "/", edgelm::dtype_name(c.dtype), "/", c.model->tag, ".", c.matrix.name,
        ".", shape_label(c.matrix.N, c.matrix.K), "/M", c.M, "/t", c.threads);
    benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& state) {
      run_matmul(state, c);
    })->Apply(configure);
  }
}

// ---- row and element-wise ops ----

void register_row_ops(const std::vector<std::string>& isas, bool full) {
  const std::vector<const ModelShape*> models =
      full ? std::vector<const ModelShape*>{&kLlama1B, &kLlama3B}
           : std::vector<const ModelShape*>{&kLlama1B};
  const std::vector<int64_t> row_counts = {1, 64};  // a decode step, a prefill chunk
  for (const ModelShape* m : models) {
    for (const std::string& isa : isas) {
      for (int64_t rows : row_counts) {
        // y = x / rms(x) * w: reads x and w, writes y.
        const int64_t dim = m->hidden;
        benchmark::RegisterBenchmark(
            edgelm::str_cat("rms_norm/", isa, "/f32/", m->tag, ".", dim, "/rows", rows, "/t1")
                .c_str(),
            [isa, rows, dim](benchmark::State& state) {
              guarded(state, [&] {
                edgelm::cpu::CpuBackend& backend = backend_for(isa, 1);
                const Tensor x = random_tensor(DType::F32, {rows, dim}, 1);
                const Tensor w = random_tensor(DType::F32, {dim}, 2);
                const Tensor y = Tensor::empty(memory(), DType::F32, {rows, dim});
                for (auto _ : state) backend.rms_norm(x, w, 1e-5f, y);
                set_rates(state, 4.0 * static_cast<double>(2 * rows * dim + dim), 0);
                state.SetItemsProcessed(state.iterations() * rows * dim);
              });
            })
            ->Apply(configure);
        // out = silu(gate) * up over the MLP's intermediate activations.
        const int64_t n = m->intermediate;
        benchmark::RegisterBenchmark(
            edgelm::str_cat("silu_mul/", isa, "/f32/", m->tag, ".", n, "/rows", rows, "/t1")
                .c_str(),
            [isa, rows, n](benchmark::State& state) {
              guarded(state, [&] {
                edgelm::cpu::CpuBackend& backend = backend_for(isa, 1);
                const Tensor gate = random_tensor(DType::F32, {rows, n}, 1);
                const Tensor up = random_tensor(DType::F32, {rows, n}, 2);
                const Tensor out = Tensor::empty(memory(), DType::F32, {rows, n});
                for (auto _ : state) backend.silu_mul(gate, up, out);
                set_rates(state, 4.0 * static_cast<double>(3 * rows * n), 0);
                state.SetItemsProcessed(state.iterations() * rows * n);
              });
            })
            ->Apply(configure);
      }
      // Softmax over one vocabulary row, as sampling does.
      const int64_t vocab = m->vocab;
      benchmark::RegisterBenchmark(
          edgelm::str_cat("softmax/", isa, "/f32/", m->tag, ".", vocab, "/rows1/t1").c_str(),
          [isa, vocab](benchmark::State& state) {
            guarded(state, [&] {
              edgelm::cpu::CpuBackend& backend = backend_for(isa, 1);
              const Tensor x = random_tensor(DType::F32, {1, vocab}, 1);
              const Tensor y = Tensor::empty(memory(), DType::F32, {1, vocab});
              for (auto _ : state) backend.softmax(x, y);
              set_rates(state, 4.0 * static_cast<double>(2 * vocab), 0);
              state.SetItemsProcessed(state.iterations() * vocab);
            });
          })
          ->Apply(configure);
      // RoPE on the queries of a prefill chunk.
      const int64_t tokens = 64, heads = m->n_heads, head_dim = m->head_dim;
      benchmark::RegisterBenchmark(
          edgelm::str_cat("rope/", isa, "/f32/", m->tag, ".h", heads, "d", head_dim, "/tokens",
                          tokens, "/t1")
              .c_str(),
          [isa, tokens, heads, head_dim](benchmark::State& state) {
            guarded(state, [&] {
              edgelm::cpu::CpuBackend& backend = backend_for(isa, 1);
              const Tensor x = random_tensor(DType::F32, {tokens, heads, head_dim}, 1);
              const Tensor out = Tensor::empty(memory(), DType::F32, {tokens, heads, head_dim});
              const Tensor positions = Tensor::empty(memory(), DType::I32, {tokens});
              for (int64_t t = 0; t < tokens; ++t) {
                positions.data<int32_t>()[t] = static_cast<int32_t>(1000 + t);
              }
              const Tensor inv_freq = Tensor::empty(memory(), DType::F32, {head_dim / 2});
              for (int64_t i = 0; i < head_dim / 2; ++i) {
                inv_freq.data<float>()[i] = static_cast<float>(std::pow(
                    500000.0, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim)));
              }
              for (auto _ : state) backend.rope(x, positions, inv_freq, out);
              set_rates(state, 4.0 * static_cast<double>(2 * tokens * heads * head_dim), 0);
              state.SetItemsProcessed(state.iterations() * tokens * heads * head_dim);
            });
          })
          ->Apply(configure);
    }
  }
}

// ---- attention ----

// `queries` queries (all heads) over `slots` cached keys and values: one decode step (1), or the
// last prefill chunk of a prompt of `slots` tokens (the causal mask: query j sees slots up to its
// own position).
void run_attention(benchmark::State& state, const ModelShape& m, DType kv_type, int64_t slots,
                   int64_t queries, const std::string& isa, int threads) {
  guarded(state, [&] {
    edgelm::cpu::CpuBackend& backend = backend_for(isa, threads);
    edgelm::AttentionArgs args;
    args.q = random_tensor(DType::F32, {queries, m.n_heads, m.head_dim}, 1);
    // Decode reads a cache that the token's weights have pushed out of the caches: without --hot
    // one query cycles over copies of K and V filling kRotationBytes, as the matmuls do.
    std::vector<std::pair<Tensor, Tensor>> caches;
    caches.emplace_back(random_tensor(kv_type, {slots, m.n_kv_heads, m.head_dim}, 2),
                        random_tensor(kv_type, {slots, m.n_kv_heads, m.head_dim}, 3));
    const size_t cache_bytes = caches[0].first.nbytes() + caches[0].second.nbytes();
    while (queries == 1 && !g_hot_weights && caches.size() * cache_bytes < kRotationBytes) {
      Tensor k = Tensor::empty(memory(), kv_type, {slots, m.n_kv_heads, m.head_dim});
      Tensor v = Tensor::empty(memory(), kv_type, {slots, m.n_kv_heads, m.head_dim});
      std::memcpy(k.raw(), caches[0].first.raw(), k.nbytes());
      std::memcpy(v.raw(), caches[0].second.raw(), v.nbytes());
      caches.emplace_back(k, v);
    }
    args.q_pos = Tensor::empty(memory(), DType::I32, {queries});
    const int64_t first = queries == 1 ? slots : slots - queries;
    double visible = 0.0;  // (query, slot) pairs inside the mask
    for (int64_t j = 0; j < queries; ++j) {
      args.q_pos.data<int32_t>()[j] = static_cast<int32_t>(first + j);
      visible += static_cast<double>(std::min(slots, first + j + 1));
    }
    args.kv_pos = Tensor::empty(memory(), DType::I32, {slots, m.n_kv_heads});
    for (int64_t s = 0; s < slots; ++s) {
      for (int64_t g = 0; g < m.n_kv_heads; ++g) {
        args.kv_pos.data<int32_t>()[s * m.n_kv_heads + g] = static_cast<int32_t>(s);
      }
    }
    args.out = Tensor::empty(memory(), DType::F32, {queries, m.n_heads, m.head_dim});
    args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m.head_dim)));
    size_t next = 0;
    for (auto _ : state) {
      args.k = caches[next].first;
      args.v = caches[next].second;
      next = (next + 1) % caches.size();
      backend.attention(args);
    }
    const double kv_bytes = static_cast<double>(cache_bytes);
    const double q_bytes = static_cast<double>(args.q.nbytes() + args.out.nbytes());
    // q.k and p.v: two multiply-adds per (head, visible slot, element).
    set_rates(state, kv_bytes + q_bytes,
              4.0 * static_cast<double>(m.n_heads * m.head_dim) * visible);
  });
}

void register_attention(const std::vector<std::string>& isas, bool full) {
  const std::string best = isas.back();
  const std::vector<DType> kv_types =
      full ? std::vector<DType>{DType::F16, DType::F32} : std::vector<DType>{DType::F16};
  for (const ModelShape* m : {&kLlama1B, &kLlama3B}) {
    for (DType kv_type : kv_types) {
      // 128 slots: a short chat, where the call's fixed costs count; 2048: a long one.
      for (int64_t slots : {128, 512, 2048}) {
        for (const std::string& isa : isas) {
          for (int threads : {1, 2}) {
            if (threads == 2 && !full && (isa != best || slots != 2048)) continue;
            // Decode (one query), and the last 64-token prefill chunk of a prompt of `slots`.
            for (int64_t queries : {int64_t{1}, int64_t{64}}) {
              if (queries > 1 && threads == 2 && !full) continue;
              benchmark::RegisterBenchmark(
                  edgelm::str_cat("attention/", isa, "/", edgelm::dtype_name(kv_type), "/", m->tag,
                                  ".h", m->n_heads, "kv", m->n_kv_heads, "d", m->head_dim, "/",
                                  queries > 1 ? edgelm::str_cat("q", queries, ".") : "", "slots",
                                  slots, "/t", threads)
                      .c_str(),
                  [m, kv_type, slots, queries, isa, threads](benchmark::State& state) {
                    run_attention(state, *m, kv_type, slots, queries, isa, threads);
                  })
                  ->Apply(configure);
            }
          }
        }
      }
    }
  }
}

// ---- thread pool ----

// The pool's own cost per dispatch, which every op of a decoded token pays: an empty fork/join
// (`run`), and a guided split of 64 ranges with nothing in them (the claims and steals of a decode
// matmul without its work). One time per dispatch; between two cores of one cache domain this is a
// fraction of a microsecond, across domains (the VM's fast bandwidth phase, a phone's clusters)
// several times that (docs/performance.md).
void register_pool() {
  std::vector<int> counts = {2};
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  if (hardware > 2) counts.push_back(hardware);
  for (const int threads : counts) {
    benchmark::RegisterBenchmark(edgelm::str_cat("pool/run/empty/t", threads).c_str(),
                                 [threads](benchmark::State& state) {
                                   guarded(state, [&] {
                                     edgelm::ThreadPool pool(threads);
                                     for (auto _ : state) pool.run([](int) {});
                                   });
                                 })
        ->Apply(configure);
    benchmark::RegisterBenchmark(
        edgelm::str_cat("pool/guided/ranges64/t", threads).c_str(),
        [threads](benchmark::State& state) {
          guarded(state, [&] {
            edgelm::ThreadPool pool(threads);
            for (auto _ : state) {
              pool.parallel_for_guided(
                  64, [](int64_t begin, int64_t end) { benchmark::DoNotOptimize(begin + end); }, 1);
            }
          });
        })
        ->Apply(configure);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{
        "Google Benchmark over the CPU kernel tables at Llama 3.2 1B/3B shapes: bytes/s and "
        "FLOP/s per op x dtype x table x shape."};
    bool full = false;
    app.add_flag("--full", full,
                 "Register every table x dtype x shape x M x threads (long; use a filter)");
    app.add_flag("--hot", g_hot_weights,
                 "One copy of each weight matrix, read from cache (the kernels' compute ceiling), "
                 "instead of copies cycled over 256 MiB (memory-bound, as in decoding)");
    app.add_option("--iterations", g_iterations, "Run every benchmark exactly N times")
        ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
    // Google Benchmark reads its own flags from what is left.
    app.allow_extras();
    app.footer(
        "Google Benchmark's flags pass through, e.g. --benchmark_filter=REGEX, "
        "--benchmark_list_tests=true, --benchmark_format=json, --benchmark_out=FILE, "
        "--benchmark_repetitions=N, --benchmark_min_time=0.5s.");
    if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;
    std::vector<std::string> rest = app.remaining();
    std::vector<char*> bench_argv = {argv[0]};
    for (std::string& arg : rest) bench_argv.push_back(arg.data());
    int bench_argc = static_cast<int>(bench_argv.size());
    std::vector<std::string> isas;
    for (const edgelm::cpu::KernelTable* table : edgelm::cpu::available_kernel_tables()) {
      isas.emplace_back(table->isa);
    }
    register_matmul(full ? full_matmul_cases(isas) : default_matmul_cases(isas));
    register_attention(isas, full);
    register_row_ops(isas, full);
    register_pool();
    benchmark::Initialize(&bench_argc, bench_argv.data());
    if (benchmark::ReportUnrecognizedArguments(bench_argc, bench_argv.data())) return 1;
    const size_t matched = benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    // Google Benchmark exits 0 when the filter matches nothing; a mistyped filter should fail.
    if (matched == 0) {
      std::fprintf(stderr,
                   "micro_bench: --benchmark_filter matches no benchmark "
                   "(--benchmark_list_tests=true lists them)\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "micro_bench: %s\n", e.what());
    return 1;
  }
}
