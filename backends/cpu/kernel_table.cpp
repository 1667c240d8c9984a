#include <cstdlib>
#include <new>

#include "backends/cpu/attention_view.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/portable/portable.h"
#include "core/error.h"
#include "core/quant.h"

#if defined(EDGELM_HAVE_X86_KERNELS)
#include <cpuid.h>
#include <xmmintrin.h>  // _mm_prefetch: SSE, part of every x86-64 baseline

#include "backends/cpu/x86/x86.h"
#endif
#if defined(EDGELM_HAVE_ARM_KERNELS)
#include "backends/cpu/arm/arm.h"
#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

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
  table.matmul[at(DType::Q4_1)] = q4_1_matmul__portable;
  table.matmul[at(DType::Q5_0)] = q5_0_matmul__portable;
  table.matmul[at(DType::Q5_1)] = q5_1_matmul__portable;
  table.matmul[at(DType::Q4_K)] = q4_k_matmul__portable;
  table.matmul[at(DType::Q5_K)] = q5_k_matmul__portable;
  table.matmul[at(DType::Q6_K)] = q6_k_matmul__portable;
  table.matmul[at(DType::Q4_0x8)] = q4_0x8_matmul__portable;
  table.matmul[at(DType::Q8_0x8)] = q8_0x8_matmul__portable;
  table.matmul[at(DType::F16x4)] = f16x4_matmul__portable;
  table.matmul[at(DType::Q4_Kx8)] = q4_kx8_matmul__portable;
  table.matmul[at(DType::Q6_Kx8)] = q6_kx8_matmul__portable;
  table.row_to_f32[at(DType::F32)] = f32_to_f32__portable;
  table.row_to_f32[at(DType::F16)] = f16_to_f32__portable;
  table.row_to_f32[at(DType::BF16)] = bf16_to_f32__portable;
  table.row_to_f32[at(DType::Q8_0)] = q8_0_to_f32__portable;
  table.row_to_f32[at(DType::Q4_0)] = q4_0_to_f32__portable;
  table.row_to_f32[at(DType::Q4_1)] = q4_1_to_f32__portable;
  table.row_to_f32[at(DType::Q5_0)] = q5_0_to_f32__portable;
  table.row_to_f32[at(DType::Q5_1)] = q5_1_to_f32__portable;
  // The K-quants decode through the reference dequantizers and encode through GGML's reference
  // quantizers (core/quant.h; --weight-type q4_k converts with them, make_model writes with them).
  table.row_to_f32[at(DType::Q4_K)] = dequantize_row_q4_K;
  table.row_to_f32[at(DType::Q5_K)] = dequantize_row_q5_K;
  table.row_to_f32[at(DType::Q6_K)] = dequantize_row_q6_K;
  table.row_from_f32[at(DType::Q4_K)] = quantize_row_q4_K;
  table.row_from_f32[at(DType::Q5_K)] = quantize_row_q5_K;
  table.row_from_f32[at(DType::Q6_K)] = quantize_row_q6_K;
  table.row_from_f32[at(DType::F32)] = f32_from_f32__portable;
  table.row_from_f32[at(DType::F16)] = f16_from_f32__portable;
  table.row_from_f32[at(DType::BF16)] = bf16_from_f32__portable;
  table.row_from_f32[at(DType::Q8_0)] = q8_0_from_f32__portable;
  table.row_from_f32[at(DType::Q4_0)] = q4_0_from_f32__portable;
  table.row_from_f32[at(DType::Q4_1)] = q4_1_from_f32__portable;
  table.row_from_f32[at(DType::Q5_0)] = q5_0_from_f32__portable;
  table.row_from_f32[at(DType::Q5_1)] = q5_1_from_f32__portable;
  table.attention[at(DType::F32)] = f32_attention__portable;
  table.attention[at(DType::F16)] = f16_attention__portable;
  table.rms_norm = f32_rms_norm__portable;
  table.rope = f32_rope__portable;
  table.softmax = f32_softmax__portable;
  table.silu_mul = f32_silu_mul__portable;
  table.add = f32_add__portable;
  return table;
}

#if defined(EDGELM_HAVE_X86_KERNELS)

// The x86 tables start from the portable one, so every entry without a SIMD kernel (the BF16 and
// quantizing row conversions, BF16 attention...) stays the reference.
KernelTable make_avx2_table() {
  KernelTable table = portable_kernels();
  table.isa = "avx2";
  auto at = [](DType dtype) { return static_cast<size_t>(dtype); };
  table.matmul[at(DType::F32)] = f32_matmul__avx2;
  table.matmul[at(DType::F16)] = f16_matmul__avx2;
  table.matmul[at(DType::BF16)] = bf16_matmul__avx2;
  table.matmul[at(DType::Q8_0)] = q8_0_matmul__avx2;
  table.matmul[at(DType::Q4_0)] = q4_0_matmul__avx2;
  table.matmul[at(DType::Q4_0x8)] = q4_0x8_matmul__avx2;
  table.matmul_layout[at(DType::Q4_0)] = DType::Q4_0x8;  // decode 1B Q4_0: see performance.md
  table.matmul[at(DType::Q8_0x8)] = q8_0x8_matmul__avx2;
  table.matmul_layout[at(DType::Q8_0)] = DType::Q8_0x8;  // prefill 1B Q8_0: see performance.md
  table.matmul[at(DType::F16x4)] = f16x4_matmul__avx2;
  table.matmul_layout[at(DType::F16)] = DType::F16x4;  // 1B F16 decode: see performance.md
  // Decode on Zen 5: see performance.md.
  table.decode_pairs[at(DType::Q4_0x8)] = q4_0x8_decode_pairs__avx2;
  table.decode_pairs[at(DType::Q8_0x8)] = q8_0x8_decode_pairs__avx2;
  table.decode_pair_min_bytes = kMinPairDistanceBytes;
  table.quantized_matmul[at(DType::Q4_0)] = {quantize_x_pairs__avx2, q4_0_matmul_xq__avx2};
  table.quantized_matmul[at(DType::Q8_0)] = {quantize_x__avx2, q8_0_matmul_xq__avx2};
  table.quantized_matmul[at(DType::Q4_0x8)] = {quantize_x__avx2, q4_0x8_matmul_xq__avx2};
  table.quantized_matmul[at(DType::Q8_0x8)] = {quantize_x__avx2, q8_0x8_matmul_xq__avx2};
  table.attention[at(DType::F32)] = f32_attention__avx2;
  table.attention[at(DType::F16)] = f16_attention__avx2;
  elementwise_kernels__avx2(table);
  table.row_to_f32[at(DType::F16)] = f16_to_f32__avx2;
  table.row_to_f32[at(DType::Q8_0)] = q8_0_to_f32__avx2;
  table.row_to_f32[at(DType::Q4_0)] = q4_0_to_f32__avx2;
  table.row_from_f32[at(DType::F16)] = f16_from_f32__avx2;
  EDGELM_SET_BLOCK_MATMULS(table, avx2, quantize_x__avx2);
  return table;
}

KernelTable make_avx512_table() {
  KernelTable table = portable_kernels();
  table.isa = "avx512";
  auto at = [](DType dtype) { return static_cast<size_t>(dtype); };
  table.matmul[at(DType::F32)] = f32_matmul__avx512;
  table.matmul[at(DType::F16)] = f16_matmul__avx512;
  table.matmul[at(DType::BF16)] = bf16_matmul__avx512;
  table.matmul[at(DType::Q8_0)] = q8_0_matmul__avx512;
  table.matmul[at(DType::Q4_0)] = q4_0_matmul__avx512;
  table.matmul[at(DType::Q4_0x8)] = q4_0x8_matmul__avx512;
  table.matmul_layout[at(DType::Q4_0)] = DType::Q4_0x8;  // 1B Q4_0: see performance.md
  table.matmul[at(DType::Q8_0x8)] = q8_0x8_matmul__avx512;
  table.matmul_layout[at(DType::Q8_0)] = DType::Q8_0x8;  // 1B Q8_0: see performance.md
  table.matmul[at(DType::F16x4)] = f16x4_matmul__avx512;
  table.matmul_layout[at(DType::F16)] = DType::F16x4;  // 1B F16 decode: see performance.md
  // Decode on Zen 5: see performance.md.
  table.decode_pairs[at(DType::Q4_0x8)] = q4_0x8_decode_pairs__avx512;
  table.decode_pairs[at(DType::Q8_0x8)] = q8_0x8_decode_pairs__avx512;
  table.decode_pairs[at(DType::F16x4)] = f16x4_decode_pairs__avx512;
  table.decode_pairs_prefetch[at(DType::Q4_0x8)] = q4_0x8_decode_pairs_prefetch__avx512;
  table.decode_pair_min_bytes = kMinPairDistanceBytes;
  table.quantized_matmul[at(DType::Q4_0)] = {quantize_x_q4_0__avx512, q4_0_matmul_xq__avx512};
  table.quantized_matmul[at(DType::Q8_0)] = {quantize_x_q8_0__avx512, q8_0_matmul_xq__avx512};
  table.quantized_matmul[at(DType::Q4_0x8)] = {quantize_x_x8__avx512, q4_0x8_matmul_xq__avx512};
  table.quantized_matmul[at(DType::Q8_0x8)] = {quantize_x_x8__avx512, q8_0x8_matmul_xq__avx512};
  // Decode: an AVX-512 kernel of its own; prefill: the AVX2 kernels, faster than an AVX-512
  // build of the same algorithm on Zen 4 (5-20 %, micro_bench; performance.md).
  table.attention[at(DType::F32)] = f32_attention__avx512;
  table.attention[at(DType::F16)] = f16_attention__avx512;
  elementwise_kernels__avx512(table);
  table.row_to_f32[at(DType::F16)] = f16_to_f32__avx2;
  table.row_to_f32[at(DType::Q8_0)] = q8_0_to_f32__avx2;
  table.row_to_f32[at(DType::Q4_0)] = q4_0_to_f32__avx2;
  table.row_from_f32[at(DType::F16)] = f16_from_f32__avx2;
  EDGELM_SET_BLOCK_MATMULS(table, avx512, quantize_x_x8__avx512);
  // Q4_K and Q6_K decode eight rows at a time: see performance.md.
  table.matmul[at(DType::Q4_Kx8)] = q4_kx8_matmul__avx512;
  table.matmul[at(DType::Q6_Kx8)] = q6_kx8_matmul__avx512;
  table.quantized_matmul[at(DType::Q4_Kx8)] = {quantize_x_k__avx512, q4_kx8_matmul_xq__avx512};
  table.quantized_matmul[at(DType::Q6_Kx8)] = {quantize_x_k16__avx512, q6_kx8_matmul_xq__avx512};
  table.decode_pairs[at(DType::Q4_Kx8)] = q4_kx8_decode_pairs__avx512;
  table.decode_pairs[at(DType::Q6_Kx8)] = q6_kx8_decode_pairs__avx512;
  table.matmul_layout[at(DType::Q4_K)] = DType::Q4_Kx8;
  table.matmul_layout[at(DType::Q6_K)] = DType::Q6_Kx8;
  return table;
}

// Clang (14 and 15 at least) has no "f16c" among __builtin_cpu_supports' features, so the bit is
// read from CPUID leaf 1 there (ECX bit 29, bit_F16C).
bool cpu_has_f16c() {
#if defined(__clang__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  return __builtin_cpu_supports("f16c");
#endif
}

// What avx2.cpp and avx512.cpp were compiled for (their -m flags). __builtin_cpu_supports also
// checks that the OS saves the YMM/ZMM state.
bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

bool cpu_has_avx512() {
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

#endif  // EDGELM_HAVE_X86_KERNELS

#if defined(EDGELM_HAVE_ARM_KERNELS)

// NEON is part of every AArch64 CPU; entries without a NEON kernel stay the reference.
KernelTable make_neon_table() {
  KernelTable table = portable_kernels();
  table.isa = "neon";
  auto at = [](DType dtype) { return static_cast<size_t>(dtype); };
  table.matmul[at(DType::F32)] = f32_matmul__neon;
  table.matmul[at(DType::F16)] = f16_matmul__neon;
  table.matmul[at(DType::BF16)] = bf16_matmul__neon;
  table.matmul[at(DType::Q8_0)] = q8_0_matmul__neon;
  table.matmul[at(DType::Q4_0)] = q4_0_matmul__neon;
  table.quantized_matmul[at(DType::Q8_0)] = {quantize_x__neon, q8_0_matmul_xq__neon};
  table.quantized_matmul[at(DType::Q4_0)] = {quantize_x__neon, q4_0_matmul_xq__neon};
  table.attention[at(DType::F32)] = f32_attention__neon;
  table.attention[at(DType::F16)] = f16_attention__neon;
  elementwise_kernels__neon(table);
  table.row_to_f32[at(DType::F16)] = f16_to_f32__neon;
  table.row_to_f32[at(DType::Q8_0)] = q8_0_to_f32__neon;
  table.row_to_f32[at(DType::Q4_0)] = q4_0_to_f32__neon;
  table.row_from_f32[at(DType::F16)] = f16_from_f32__neon;
  EDGELM_SET_BLOCK_MATMULS(table, neon, quantize_x__neon);
  return table;
}

// The NEON table with the quantized matmuls on SDOT (Armv8.2 dot product).
KernelTable make_neon_dotprod_table() {
  KernelTable table = make_neon_table();
  table.isa = "neon_dotprod";
  auto at = [](DType dtype) { return static_cast<size_t>(dtype); };
  table.matmul[at(DType::Q8_0)] = q8_0_matmul__neon_dotprod;
  table.matmul[at(DType::Q4_0)] = q4_0_matmul__neon_dotprod;
  table.quantized_matmul[at(DType::Q8_0)] = {quantize_x__neon, q8_0_matmul_xq__neon_dotprod};
  table.quantized_matmul[at(DType::Q4_0)] = {quantize_x__neon, q4_0_matmul_xq__neon_dotprod};
  // The interleaved layouts, chosen on an estimate, not a device measurement: 1.4-2.2x fewer
  // cycles than the stored layouts in llvm-mca's Cortex-A55, A76 and Apple A14 models, decode and
  // prefill (android.md, performance.md; micro_bench rows matmul/neon_dotprod/q4_0 against
  // .../q4_0x8 on a device settle it).
  table.matmul[at(DType::Q4_0x8)] = q4_0x8_matmul__neon_dotprod;
  table.matmul_layout[at(DType::Q4_0)] = DType::Q4_0x8;
  table.matmul[at(DType::Q8_0x8)] = q8_0x8_matmul__neon_dotprod;
  table.matmul_layout[at(DType::Q8_0)] = DType::Q8_0x8;
  table.quantized_matmul[at(DType::Q4_0x8)] = {quantize_x__neon, q4_0x8_matmul_xq__neon_dotprod};
  table.quantized_matmul[at(DType::Q8_0x8)] = {quantize_x__neon, q8_0x8_matmul_xq__neon_dotprod};
  EDGELM_SET_BLOCK_MATMULS(table, neon_dotprod, quantize_x__neon);
  return table;
}

// What neon_dotprod.cpp was compiled for (+dotprod), as the kernel reports it to user space.
bool cpu_has_dotprod() {
#if defined(__linux__)  // Linux and Android
#ifndef HWCAP_ASIMDDP
  constexpr unsigned long HWCAP_ASIMDDP = 1ul << 20;  // older libc headers (asm/hwcap.h value)
#endif
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__APPLE__)
  int has = 0;
  size_t size = sizeof(has);
  return sysctlbyname("hw.optional.arm.FEAT_DotProd", &has, &size, nullptr, 0) == 0 && has != 0;
#else
  return false;
#endif
}

#endif  // EDGELM_HAVE_ARM_KERNELS

}  // namespace

AttentionView attention_view(const AttentionArgs& args) {
  AttentionView view{};
  view.q = args.q.data<float>();
  view.k = args.k.raw();
  view.v = args.v.raw();
  view.q_pos = args.q_pos.data<int32_t>();
  view.kv_pos = args.kv_pos.data<int32_t>();
  view.out = args.out.data<float>();
  view.mass = args.mass.defined() ? args.mass.data<float>() : nullptr;
  view.n_queries = args.q.dim(0);
  view.n_heads = args.q.dim(1);
  view.head_dim = args.q.dim(2);
  view.n_slots = args.k.dim(0);
  view.n_kv_heads = args.k.dim(1);
  view.mass_first_query = args.mass_first_query;
  view.scale = args.scale;
  return view;
}

const KernelTable& portable_kernels() {
  static const KernelTable table = make_portable_table();
  return table;
}

std::vector<const KernelTable*> available_kernel_tables() {
  std::vector<const KernelTable*> tables = {&portable_kernels()};
#if defined(EDGELM_HAVE_X86_KERNELS)
  static const KernelTable avx2 = make_avx2_table();
  static const KernelTable avx512 = make_avx512_table();
  static const bool has_avx2 = cpu_has_avx2();
  static const bool has_avx512 = cpu_has_avx512();
  if (has_avx2) tables.push_back(&avx2);
  if (has_avx512) tables.push_back(&avx512);
#endif
#if defined(EDGELM_HAVE_ARM_KERNELS)
  static const KernelTable neon = make_neon_table();
  static const KernelTable neon_dotprod = make_neon_dotprod_table();
  static const bool has_dotprod = cpu_has_dotprod();
  tables.push_back(&neon);
  if (has_dotprod) tables.push_back(&neon_dotprod);
#endif
  return tables;
}

const KernelTable& select_kernels(const std::string& isa) {
  const std::vector<const KernelTable*> tables = available_kernel_tables();
  std::string names;
  for (const KernelTable* table : tables) {
    names += names.empty() ? table->isa : std::string(", ") + table->isa;
  }
  // The table has one spelling, cpu:<isa>. The variable that once chose it is refused rather than
  // ignored, so that a run meant for one table never silently uses another.
  if (std::getenv("EDGELM_CPU_ISA") != nullptr) {
    EDGELM_FAIL("[cpu] EDGELM_CPU_ISA is not read: name the table with --backend cpu:<isa> (",
                names, ") and unset the variable");
  }
  if (isa.empty()) return *tables.back();  // the most capable one is listed last
  for (const KernelTable* table : tables) {
    if (isa == table->isa) return *table;
  }
  EDGELM_FAIL("[cpu] instruction set '", isa, "' (--backend cpu:", isa,
              ") is not available in this build on this CPU; available: ", names);
}

bool decode_prefetch_wanted() {
  if (const char* env = std::getenv("EDGELM_CPU_PREFETCH")) {
    const std::string value = env;
    if (value == "on") return true;
    if (value == "off") return false;
    EDGELM_FAIL("[cpu] EDGELM_CPU_PREFETCH='", value, "': expected on or off");
  }
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

// The SIMD kernel files' scratch memory (scratch.h).
namespace {

struct ScratchBuffers {
  static constexpr std::align_val_t kAlignment{64};
  void* data[static_cast<int>(Scratch::kCount)] = {};
  size_t capacity[static_cast<int>(Scratch::kCount)] = {};

  ScratchBuffers() = default;
  ScratchBuffers(const ScratchBuffers&) = delete;
  ScratchBuffers& operator=(const ScratchBuffers&) = delete;
  ~ScratchBuffers() {
    for (void* pointer : data) ::operator delete(pointer, kAlignment);
  }
};

}  // namespace

void* scratch(Scratch slot, size_t bytes) {
  thread_local ScratchBuffers buffers;
  const auto index = static_cast<int>(slot);
  if (buffers.data[index] == nullptr || bytes > buffers.capacity[index]) {
    // Grow by at least half again, so a slowly rising size (attention over a growing cache)
    // reallocates O(log n) times; even 0 bytes get a real (64-byte) buffer.
    size_t capacity = buffers.capacity[index] + buffers.capacity[index] / 2;
    if (capacity < bytes) capacity = bytes;
    if (capacity == 0) capacity = 64;
    void* grown = ::operator new(capacity, ScratchBuffers::kAlignment);
    ::operator delete(buffers.data[index], ScratchBuffers::kAlignment);
    buffers.data[index] = grown;
    buffers.capacity[index] = capacity;
  }
  return buffers.data[index];
}

#if defined(EDGELM_HAVE_X86_KERNELS)

// Helpers for the x86 kernel files, compiled here without ISA flags (see x86.h).
namespace x86 {

void prefetch_part(const void* begin, int64_t bytes, int64_t part, int64_t parts) {
  const int64_t lines = (bytes + 63) / 64;
  const auto* base = static_cast<const char*>(begin);
  for (int64_t line = lines * part / parts; line < lines * (part + 1) / parts; ++line)
    _mm_prefetch(base + 64 * line, _MM_HINT_T0);
}

}  // namespace x86

#endif  // EDGELM_HAVE_X86_KERNELS

}  // namespace edgelm::cpu
