#include <cstdlib>

#include "backends/cpu/kernels.h"
#include "backends/cpu/portable/portable.h"
#include "core/error.h"

namespace edgelm::cpu {
namespace {

KernelTable make_portable_table() {
  KernelTable table;
  table.isa = "portable";
  auto at = [](DType dtype) { return static_cast<size_t>(dtype); };
  table.matmul[at(DType::F32)] = f32_matmul__portable;
  table.matmul[at(DType::F16)] = f16_matmul__portable;
  table.matmul[at(DType::BF16)] = bf16_matmul__portable;
  table.matmul[at(DType::Q8_0)] = q8_0_matmul__portable;
  table.matmul[at(DType::Q4_0)] = q4_0_matmul__portable;
  table.row_to_f32[at(DType::F32)] = f32_to_f32__portable;
  table.row_to_f32[at(DType::F16)] = f16_to_f32__portable;
  table.row_to_f32[at(DType::BF16)] = bf16_to_f32__portable;
  table.row_to_f32[at(DType::Q8_0)] = q8_0_to_f32__portable;
  table.row_to_f32[at(DType::Q4_0)] = q4_0_to_f32__portable;
  table.row_from_f32[at(DType::F32)] = f32_from_f32__portable;
  table.row_from_f32[at(DType::F16)] = f16_from_f32__portable;
  table.row_from_f32[at(DType::BF16)] = bf16_from_f32__portable;
  table.row_from_f32[at(DType::Q8_0)] = q8_0_from_f32__portable;
  table.row_from_f32[at(DType::Q4_0)] = q4_0_from_f32__portable;
  table.attention[at(DType::F32)] = f32_attention__portable;
  table.attention[at(DType::F16)] = f16_attention__portable;
  table.rms_norm = f32_rms_norm__portable;
  table.rope = f32_rope__portable;
  table.softmax = f32_softmax__portable;
  table.silu_mul = f32_silu_mul__portable;
  table.add = f32_add__portable;
  return table;
}

}  // namespace

const KernelTable& portable_kernels() {
  static const KernelTable table = make_portable_table();
  return table;
}

std::vector<const KernelTable*> available_kernel_tables() {
  return {&portable_kernels()};
}

const KernelTable& select_kernels(const std::string& isa) {
  std::string wanted = isa;
  if (wanted.empty()) {
    if (const char* env = std::getenv("EDGELM_CPU_ISA")) wanted = env;
  }
  const std::vector<const KernelTable*> tables = available_kernel_tables();
  if (wanted.empty()) return *tables.back();  // the most capable one is listed last
  std::string names;
  for (const KernelTable* table : tables) {
    if (wanted == table->isa) return *table;
    names += names.empty() ? table->isa : std::string(", ") + table->isa;
  }
  EDGELM_FAIL(
      "[cpu] instruction set '", wanted,
      "' (EDGELM_CPU_ISA or --isa) is not available in this build on this CPU; available: ", names);
}

}  // namespace edgelm::cpu
