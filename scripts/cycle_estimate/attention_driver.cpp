// Runs the CPU backend's attention op on a prompt's last 64-token chunk (F16 cache, the causal
// mask, one thread) a given number of times, for estimate.sh: the difference between two runs'
// block profiles is the op's own work. Usage: attention_driver CALLS SLOTS [1b|3b] [TABLE]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "core/buffer.h"
#include "core/tensor.h"

namespace {

edgelm::Memory& memory() {
  static edgelm::HostMemory host;
  return host;
}

// Values in [-1, 1) from a 64-bit LCG, converted to `dtype` by the portable row conversion.
edgelm::Tensor random_tensor(edgelm::DType dtype, edgelm::Shape shape, uint64_t seed) {
  edgelm::Tensor t = edgelm::Tensor::empty(memory(), dtype, shape);
  std::vector<float> row(static_cast<size_t>(shape.last()));
  const auto convert = edgelm::cpu::portable_kernels().row_from_f32[static_cast<size_t>(dtype)];
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t r = 0; r < shape.rows(); ++r) {
    for (float& value : row) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      value = static_cast<float>(static_cast<int32_t>(state >> 32)) * (1.0f / 2147483648.0f);
    }
    convert(row.data(), static_cast<std::byte*>(t.raw()) + r * t.row_bytes(), shape.last());
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CALLS SLOTS [1b|3b] [TABLE]\n", argv[0]);
    return 2;
  }
  const int calls = std::atoi(argv[1]);
  const int64_t slots = std::atoll(argv[2]);
  const bool llama_3b = argc > 3 && std::string(argv[3]) == "3b";
  const std::string table = argc > 4 ? argv[4] : "";
  const int64_t n_heads = llama_3b ? 24 : 32, n_kv_heads = 8, head_dim = llama_3b ? 128 : 64;
  const int64_t queries = 64;
  if (calls < 1 || slots < queries) {
    std::fprintf(stderr, "attention_driver: CALLS must be >= 1 and SLOTS >= %lld\n",
                 static_cast<long long>(queries));
    return 2;
  }
  std::shared_ptr<edgelm::Memory> shared(&memory(), [](edgelm::Memory*) {});
  edgelm::cpu::CpuBackend backend(
      edgelm::cpu::CpuOptions{.n_threads = 1, .isa = table, .memory = shared});
  edgelm::AttentionArgs args;
  args.q = random_tensor(edgelm::DType::F32, {queries, n_heads, head_dim}, 1);
  args.k = random_tensor(edgelm::DType::F16, {slots, n_kv_heads, head_dim}, 2);
  args.v = random_tensor(edgelm::DType::F16, {slots, n_kv_heads, head_dim}, 3);
  args.q_pos = edgelm::Tensor::empty(memory(), edgelm::DType::I32, {queries});
  for (int64_t j = 0; j < queries; ++j) {
    args.q_pos.data<int32_t>()[j] = static_cast<int32_t>(slots - queries + j);
  }
  args.kv_pos = edgelm::Tensor::empty(memory(), edgelm::DType::I32, {slots, n_kv_heads});
  for (int64_t s = 0; s < slots; ++s) {
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      args.kv_pos.data<int32_t>()[s * n_kv_heads + g] = static_cast<int32_t>(s);
    }
  }
  args.out = edgelm::Tensor::empty(memory(), edgelm::DType::F32, {queries, n_heads, head_dim});
  args.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int i = 0; i < calls; ++i) backend.attention(args);
  double checksum = 0.0;
  for (int64_t i = 0; i < args.out.numel(); ++i) checksum += args.out.data<float>()[i];
  std::printf("attention_driver: %s, checksum %.6f\n", backend.device().c_str(), checksum);
  return 0;
}
