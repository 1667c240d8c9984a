// The CPU kernel tables' quantized matmul: the two-step form (x quantized once, then multiplied)
// bit for bit against the one-step kernels, matmul_shared_x against one matmul per weight, the
// paired decode kernels against the table's matmul, and the profile's timings and byte counts.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"
#include "core/tensor.h"

namespace edgelm {
namespace {

// Quantized weights of `dtype` (any stored quantized type, or the interleaved layouts of Q8_0,
// Q4_0, Q4_K and Q6_K) for an N x K matrix.
std::vector<std::byte> random_quantized_weights(DType dtype, int64_t N, int64_t K,
                                                std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(N * K));
  for (float& v : values) v = normal(rng);
  if (dtype_unpacked(dtype) == dtype && dtype != DType::Q8_0 && dtype != DType::Q4_0) {
    std::vector<std::byte> bytes(dtype_row_bytes(dtype, K) * static_cast<size_t>(N));
    cpu::portable_kernels().row_from_f32[static_cast<size_t>(dtype)](values.data(), bytes.data(),
                                                                     N * K);
    return bytes;
  }
  if (dtype == DType::Q4_Kx8 || dtype == DType::Q6_Kx8) {
    const DType stored = dtype_unpacked(dtype);
    std::vector<std::byte> rows(dtype_row_bytes(stored, K) * static_cast<size_t>(N));
    cpu::portable_kernels().row_from_f32[static_cast<size_t>(stored)](values.data(), rows.data(),
                                                                      N * K);
    std::vector<std::byte> bytes(rows.size());
    if (dtype == DType::Q4_Kx8) {
      repack_q4_k_x8(reinterpret_cast<const BlockQ4_K*>(rows.data()),
                     reinterpret_cast<BlockQ4_Kx8*>(bytes.data()), N, K / kKQuantBlockSize);
    } else {
      repack_q6_k_x8(reinterpret_cast<const BlockQ6_K*>(rows.data()),
                     reinterpret_cast<BlockQ6_Kx8*>(bytes.data()), N, K / kKQuantBlockSize);
    }
    return bytes;
  }
  const int64_t blocks = K / 32;
  std::vector<BlockQ8_0> q8(static_cast<size_t>(N * blocks));
  std::vector<BlockQ4_0> q4(static_cast<size_t>(N * blocks));
  quantize_row_q8_0(values.data(), q8.data(), N * K);
  quantize_row_q4_0(values.data(), q4.data(), N * K);
  std::vector<std::byte> bytes(dtype_row_bytes(dtype, K) * static_cast<size_t>(N));
  switch (dtype) {
    case DType::Q8_0:
      std::memcpy(bytes.data(), q8.data(), bytes.size());
      break;
    case DType::Q4_0:
      std::memcpy(bytes.data(), q4.data(), bytes.size());
      break;
    case DType::Q8_0x8:
      repack_q8_0_x8(q8.data(), reinterpret_cast<BlockQ8_0x8*>(bytes.data()), N, blocks);
      break;
    case DType::Q4_0x8:
      repack_q4_0_x8(q4.data(), reinterpret_cast<BlockQ4_0x8*>(bytes.data()), N, blocks);
      break;
    default:
      ADD_FAILURE() << "no quantized weights of " << dtype_name(dtype);
  }
  return bytes;
}

// What the CPU backend runs (x quantized once, in pieces of rows, then multiplied in ranges of
// weight rows) is bit for bit what the table's one-step kernel computes. The first range holds
// three groups of the interleaved layouts, so a decode kernel that pairs the two halves of its
// range (when they are far enough apart: 1024 rows of K = 2048) pairs other groups than over the
// whole matrix, and leaves some alone.
TEST(QuantizedMatmul, TwoStepsEqualTheOneStepKernelOnEveryTable) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int checked = 0;
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (int d = 0; d < kDTypeCount; ++d) {
      const auto dtype = static_cast<DType>(d);
      const cpu::QuantizedMatmul two_step = table->quantized_matmul[static_cast<size_t>(d)];
      if (two_step.matmul == nullptr) continue;
      ASSERT_NE(two_step.quantize_x, nullptr) << table->isa << " " << dtype_name(dtype);
      struct Shape3 {
        int64_t M, K, N;
      };
      for (const auto& [M, K, N] :
           {Shape3{1, 96, 48}, {5, 288, 48}, {9, 256, 48}, {3, 768, 48}, {1, 2048, 1024}}) {
        if (K % dtype_block_size(dtype) != 0) continue;  // the K-quants: 256, 768, 2048
        SCOPED_TRACE(std::string(table->isa) + " " + dtype_name(dtype) + " M=" + std::to_string(M) +
                     " K=" + std::to_string(K) + " N=" + std::to_string(N));
        std::vector<float> x(static_cast<size_t>(M * K));
        for (float& v : x) v = normal(rng);
        const std::vector<std::byte> w = random_quantized_weights(dtype, N, K, rng);
        std::vector<float> one(static_cast<size_t>(M * N), NAN);
        table->matmul[static_cast<size_t>(d)](x.data(), w.data(), one.data(), M, N, K, 0, N);
        std::vector<std::byte> xq(cpu::quantized_x_bytes(M, K));
        two_step.quantize_x(x.data(), xq.data(), M, K, 0, M / 2);
        two_step.quantize_x(x.data(), xq.data(), M, K, M / 2, M);
        std::vector<float> two(static_cast<size_t>(M * N), NAN);
        two_step.matmul(xq.data(), w.data(), two.data(), M, N, K, 0, 24);
        two_step.matmul(xq.data(), w.data(), two.data(), M, N, K, 24, N);
        ASSERT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
        ++checked;
      }
    }
  }
#if defined(__x86_64__) || defined(__aarch64__)
  if (cpu::available_kernel_tables().size() > 1) {
    EXPECT_GT(checked, 0);
  }
#endif
}

// A weight tensor of `dtype` (as stored or in an interleaved layout) with random values.
Tensor random_weight_tensor(Memory& memory, DType dtype, int64_t N, int64_t K, std::mt19937& rng) {
  Tensor t = Tensor::empty(memory, dtype, Shape{N, K});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (dtype == DType::F32) {
    for (int64_t i = 0; i < N * K; ++i) t.data<float>()[i] = normal(rng);
  } else if (dtype == DType::F16 || dtype == DType::F16x4) {
    std::vector<uint16_t> rows(static_cast<size_t>(N * K));
    for (uint16_t& h : rows) h = f32_to_f16(normal(rng));
    if (dtype == DType::F16) {
      std::memcpy(t.raw(), rows.data(), rows.size() * sizeof(uint16_t));
    } else {
      repack_f16_x4(rows.data(), static_cast<uint16_t*>(t.raw()), N, K);
    }
  } else {
    const std::vector<std::byte> bytes = random_quantized_weights(dtype, N, K, rng);
    std::memcpy(t.raw(), bytes.data(), bytes.size());
  }
  return t;
}

// matmul_shared_x (a layer's K, V and Q in one dispatch: x quantized once, the rows of all three
// weights split over the threads as one sequence) gives bit for bit what three matmul calls
// give, on every table, for every weight layout a table multiplies, with the decode split
// (M <= 4, and a decode step in K slices) and the prefill split, on one, two and three threads
// (uneven ranges that cross the weights' boundaries).
TEST(MatmulSharedX, EqualsOneMatmulPerWeightOnEveryTable) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int checked = 0;
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (const int threads : {1, 2, 3}) {
      cpu::CpuBackend backend({.n_threads = threads, .isa = table->isa});
      Memory& memory = backend.memory();
      for (const DType stored :
           {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
        for (const DType dtype : {stored, backend.matmul_weight_type(stored)}) {
          if (!backend.supports(OpKind::Matmul, {dtype})) continue;
          // K = 4160 decodes Q4_0x8 in two K slices (six parts) and Q8_0x8 and F16x4 in three
          // (nine: one matmul per weight); K = 4352 Q4_Kx8 and Q6_Kx8 in three (nine).
          for (const auto& [M, K] : {std::pair<int64_t, int64_t>{1, 96},
                                     {3, 288},
                                     {9, 256},
                                     {1, 4160},
                                     {2, 512},
                                     {1, 4352}}) {
            if (K % dtype_block_size(dtype) != 0) continue;
            SCOPED_TRACE(std::string(table->isa) + " t" + std::to_string(threads) + " " +
                         dtype_name(dtype) + " M=" + std::to_string(M) + " K=" + std::to_string(K));
            Tensor x = Tensor::empty(memory, DType::F32, Shape{M, K});
            for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = normal(rng);
            const int64_t sizes[] = {16, 40, 24};
            std::vector<Tensor> w, fused, alone;
            for (const int64_t N : sizes) {
              w.push_back(random_weight_tensor(memory, dtype, N, K, rng));
              fused.push_back(Tensor::empty(memory, DType::F32, Shape{M, N}));
              alone.push_back(Tensor::empty(memory, DType::F32, Shape{M, N}));
            }
            backend.matmul_shared_x(x, {w[0], w[1], w[2]}, {fused[0], fused[1], fused[2]});
            for (size_t i = 0; i < w.size(); ++i) backend.matmul(x, w[i], alone[i]);
            for (size_t i = 0; i < w.size(); ++i) {
              ASSERT_EQ(std::memcmp(fused[i].raw(), alone[i].raw(), fused[i].nbytes()), 0)
                  << "weight " << i;
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// KernelTable::decode_pairs and decode_pairs_prefetch: rows [a, a + rows) beside rows [b, b + rows)
// (or the first range alone) give, bit for bit, the table's own decode matmul's rows, and write no
// other row of y; for whole halves, pieces of them, and K past one segment.
TEST(DecodePairs, EqualTheTablesMatmulRowForRow) {
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  cpu::CpuBackend host({.n_threads = 1, .isa = "portable"});
  int checked = 0;
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (int d = 0; d < 2 * kDTypeCount; ++d) {
      const bool prefetch = d >= kDTypeCount;
      const auto& kernels = prefetch ? table->decode_pairs_prefetch : table->decode_pairs;
      const cpu::DecodePairsFn pairs = kernels[static_cast<size_t>(d % kDTypeCount)];
      if (pairs == nullptr) continue;
      const auto dtype = static_cast<DType>(d % kDTypeCount);
      const cpu::QuantizedMatmul quantized = table->quantized_matmul[static_cast<size_t>(dtype)];
      for (const int64_t K : {2048, 4160, 4352}) {
        if (K % dtype_block_size(dtype) != 0) continue;
        constexpr int64_t N = 64;
        SCOPED_TRACE(std::string(table->isa) + " " + dtype_name(dtype) +
                     (prefetch ? " (prefetch)" : "") + " K=" + std::to_string(K));
        const Tensor w = random_weight_tensor(host.memory(), dtype, N, K, rng);
        std::vector<float> x(static_cast<size_t>(K));
        for (float& v : x) v = normal(rng);
        std::vector<std::byte> xq(cpu::quantized_x_bytes(1, K));
        std::vector<float> expected(N, NAN);
        const void* x_row = x.data();
        if (quantized.matmul != nullptr) {
          quantized.quantize_x(x.data(), xq.data(), 1, K, 0, 1);
          quantized.matmul(xq.data(), w.raw(), expected.data(), 1, N, K, 0, N);
          x_row = xq.data();
        } else {
          table->matmul[static_cast<size_t>(dtype)](x.data(), w.raw(), expected.data(), 1, N, K, 0,
                                                    N);
        }
        struct Call {
          int64_t a, b, rows;
        };
        const std::vector<std::vector<Call>> cases = {
            {{0, 32, 32}},                           // the two halves
            {{0, 32, 8}, {8, 40, 24}},               // halves in two pieces
            {{0, -1, 64}},                           // one stream
            {{16, 48, 8}},                           // a piece alone: only its rows
            {{0, 56, 8}, {8, 24, 16}, {40, -1, 16}}  // unequal distances, a single range
        };
        for (const std::vector<Call>& calls : cases) {
          std::vector<float> y(N, NAN);
          std::vector<bool> written(N, false);
          for (const Call& c : calls) {
            pairs(x_row, w.raw(), y.data(), N, K, c.a, c.b, c.rows);
            for (int64_t r = 0; r < c.rows; ++r) {
              written[static_cast<size_t>(c.a + r)] = true;
              if (c.b >= 0) written[static_cast<size_t>(c.b + r)] = true;
            }
          }
          for (int64_t n = 0; n < N; ++n) {
            if (written[static_cast<size_t>(n)]) {
              ASSERT_EQ(std::memcmp(&y[n], &expected[n], sizeof(float)), 0) << "row " << n;
            } else {
              ASSERT_TRUE(std::isnan(y[n])) << "row " << n << " written";
            }
          }
          ++checked;
        }
      }
    }
  }
#if defined(__x86_64__)
  if (cpu::available_kernel_tables().size() > 1) {
    EXPECT_GT(checked, 0);
  }
#endif
}

// EDGELM_CPU_PREFETCH chooses the decode kernels (on|off; unset: on for Intel CPUs) where the table
// has prefetching ones, and the backend's device() says when they are in use; another value is an
// error naming the variable.
TEST(DecodePairs, PrefetchIsChosenByTheEnvironmentOrTheVendor) {
  const char* saved = std::getenv("EDGELM_CPU_PREFETCH");
  const std::string saved_value = saved != nullptr ? saved : "";
  auto has_prefetch_kernels = [](const cpu::KernelTable& table) {
    for (const cpu::DecodePairsFn kernel : table.decode_pairs_prefetch)
      if (kernel != nullptr) return true;
    return false;
  };
  for (const cpu::KernelTable* table : cpu::available_kernel_tables()) {
    for (const std::string value : {"on", "off"}) {
      ::setenv("EDGELM_CPU_PREFETCH", value.c_str(), 1);
      const cpu::CpuBackend backend({.n_threads = 1, .isa = table->isa});
      const bool expected = value == "on" && has_prefetch_kernels(*table);
      EXPECT_EQ(backend.decode_prefetch(), expected) << table->isa << " " << value;
      EXPECT_EQ(backend.device().find("with decode prefetch") != std::string::npos, expected)
          << backend.device();
    }
  }
  ::setenv("EDGELM_CPU_PREFETCH", "yes", 1);
  try {
    const cpu::CpuBackend backend({.n_threads = 1});
    ADD_FAILURE() << "EDGELM_CPU_PREFETCH=yes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("EDGELM_CPU_PREFETCH='yes': expected on or off"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("EDGELM_CPU_PREFETCH");
  const cpu::CpuBackend backend({.n_threads = 1});
#if defined(__x86_64__)
  const bool intel = __builtin_cpu_is("intel");
#else
  const bool intel = false;
#endif
  EXPECT_EQ(backend.decode_prefetch(), intel && has_prefetch_kernels(backend.kernels()));
  if (saved != nullptr) ::setenv("EDGELM_CPU_PREFETCH", saved_value.c_str(), 1);
}

TEST(MatmulSharedX, MixedWeightTypesAndBadArgumentsOnTheCpu) {
  std::mt19937 rng(12);
  cpu::CpuBackend backend({.n_threads = 2});
  Memory& memory = backend.memory();
  constexpr int64_t M = 2, K = 64;
  Tensor x = Tensor::empty(memory, DType::F32, Shape{M, K});
  for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = 0.01f * static_cast<float>(i % 37);
  const Tensor a = random_weight_tensor(memory, DType::F32, 8, K, rng);
  const Tensor b = random_weight_tensor(memory, DType::Q8_0, 16, K, rng);
  Tensor ya = Tensor::empty(memory, DType::F32, Shape{M, 8});
  Tensor yb = Tensor::empty(memory, DType::F32, Shape{M, 16});
  Tensor ya_alone = Tensor::empty(memory, DType::F32, Shape{M, 8});
  Tensor yb_alone = Tensor::empty(memory, DType::F32, Shape{M, 16});
  // Different weight types: one matmul each, same results.
  backend.matmul_shared_x(x, {a, b}, {ya, yb});
  backend.matmul(x, a, ya_alone);
  backend.matmul(x, b, yb_alone);
  EXPECT_EQ(std::memcmp(ya.raw(), ya_alone.raw(), ya.nbytes()), 0);
  EXPECT_EQ(std::memcmp(yb.raw(), yb_alone.raw(), yb.nbytes()), 0);
  // One output per weight, each of the right shape.
  EXPECT_THROW(backend.matmul_shared_x(x, {a, a}, {ya}), Error);
  EXPECT_THROW(backend.matmul_shared_x(x, {a, a}, {ya, yb}), Error);
  EXPECT_THROW(backend.matmul_shared_x(x, {a, Tensor()}, {ya, ya_alone}), Error);
}

// With profile on, the CPU backend records every op call under (op, kernel): a matmul's row names
// the table, weight type, gemv/gemm and [N, K], and counts the weight bytes read; an op that throws
// records nothing; without profile nothing is recorded.
TEST(CpuProfile, TimesEveryOpCallAndCountsMatmulWeightBytes) {
  std::mt19937 rng(13);
  for (const bool profile : {false, true}) {
    cpu::CpuBackend backend({.n_threads = 2, .isa = "portable", .profile = profile});
    Memory& memory = backend.memory();
    constexpr int64_t K = 64;
    Tensor x = Tensor::empty(memory, DType::F32, Shape{1, K});
    for (int64_t i = 0; i < K; ++i) x.data<float>()[i] = 0.02f * static_cast<float>(i % 11);
    const Tensor w = random_weight_tensor(memory, DType::Q8_0, 16, K, rng);
    const Tensor w2 = random_weight_tensor(memory, DType::Q8_0, 8, K, rng);
    Tensor y = Tensor::empty(memory, DType::F32, Shape{1, 16});
    Tensor y2 = Tensor::empty(memory, DType::F32, Shape{1, 8});
    backend.matmul(x, w, y);
    backend.matmul(x, w, y);
    backend.matmul_shared_x(x, {w, w2}, {y, y2});
    backend.add(y, y, y);
    EXPECT_THROW(backend.add(y, y2, y), Error);
    const std::vector<OpTiming> rows = backend.op_timings();
    if (!profile) {
      EXPECT_TRUE(rows.empty());
      continue;
    }
    ASSERT_EQ(rows.size(), 3u);
    auto find = [&](const std::string& kernel) -> const OpTiming* {
      for (const OpTiming& row : rows)
        if (row.kernel == kernel) return &row;
      ADD_FAILURE() << "no row " << kernel;
      return nullptr;
    };
    const OpTiming* single = find("portable q8_0 gemv 16x64");
    const OpTiming* shared = find("portable q8_0 gemv 24x64 (2 weights)");
    const OpTiming* add = find("portable");
    ASSERT_TRUE(single && shared && add);
    EXPECT_EQ(single->op, "matmul");
    EXPECT_EQ(single->calls, 2);
    EXPECT_EQ(single->bytes, 2 * w.nbytes());
    EXPECT_EQ(shared->calls, 1);
    EXPECT_EQ(shared->bytes, w.nbytes() + w2.nbytes());
    EXPECT_EQ(add->op, "add");
    EXPECT_EQ(add->calls, 1);
    EXPECT_EQ(add->bytes, 0u);
    for (const OpTiming& row : rows) EXPECT_GT(row.seconds, 0.0) << row.kernel;
    for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].seconds, rows[i].seconds);
    backend.reset_op_timings();
    EXPECT_TRUE(backend.op_timings().empty());
  }
}

}  // namespace
}  // namespace edgelm
