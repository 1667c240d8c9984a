// Host side of kernels/matmul.cl and of the GEMM path of matmul.
//
// Few rows of x (decode, and chunks shorter than gemm_min_rows): one GEMV kernel per weight dtype
// that reads W once per row of x. More rows (prefill): an F32 GEMM, CLBlast's SGEMM when it loads
// or the backend's own tiled kernel (matmul_gemm_f32; OpenClOptions::gemm chooses); F32 weights go
// in directly, other dtypes are converted to F32 one tile of W rows at a time into a device
// scratch buffer (bounded size), then multiplied. Quantized weights therefore cost one extra pass
// over a tile per chunk, which the GEMM's O(M) reuse amortises.
//
// Weights of the 32-block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) meet activations rounded to 8 bits
// per block (kernels/matmul.cl says how), on both paths, because the CPU's fast kernels do the
// same: the two backends then agree to float rounding instead of differing by the activation
// rounding, which on small models is enough to flip a greedy token. The K-quants (Q4_K, Q5_K,
// Q6_K) multiply the float activations as they are, accumulating in float.
#include <string>

#include "backends/opencl/checks.h"
#include "backends/opencl/clblast_loader.h"
#include "backends/opencl/opencl_backend.h"

namespace edgelm::opencl {
namespace {

// Scratch slots of the matmul (the attention uses 10 and up).
constexpr int kTileSlot = 0;
constexpr int kClblastSlot = 1;
constexpr int kActivationSlot = 2;       // quantized x values (GEMV) or rounded x (GEMM)
constexpr int kActivationScaleSlot = 3;  // d_x per block (GEMV)

// MATMUL_GROUP and MATMUL_ROWS of kernels/matmul.cl: work-items per group, W rows per group.
constexpr size_t kGemvGroup = 64;
constexpr int64_t kGemvRows = 8;
// GEMM_THREADS_N, GEMM_THREADS_M and GEMM_TILE of kernels/matmul.cl: a work-group of
// kGemmThreadsN x kGemmThreadsM work-items computes a kGemmTile x kGemmTile block of y.
constexpr size_t kGemmThreadsN = 8;
constexpr size_t kGemmThreadsM = 16;
constexpr int64_t kGemmTile = 64;

const char* gemv_kernel(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "matmul_f32_gemv";
    case DType::F16:
      return "matmul_f16_gemv";
    case DType::BF16:
      return "matmul_bf16_gemv";
    case DType::Q8_0:
      return "matmul_q8_0_gemv";
    case DType::Q4_0:
      return "matmul_q4_0_gemv";
    case DType::Q4_1:
      return "matmul_q4_1_gemv";
    case DType::Q5_0:
      return "matmul_q5_0_gemv";
    case DType::Q5_1:
      return "matmul_q5_1_gemv";
    case DType::Q4_K:
      return "matmul_q4_k_gemv";
    case DType::Q5_K:
      return "matmul_q5_k_gemv";
    case DType::Q6_K:
      return "matmul_q6_k_gemv";
    default:
      return nullptr;
  }
}

// Whether weights of this dtype meet x rounded to 8 bits per 32-block (the types whose CPU SIMD
// kernels round x to Q8_0 or Q8_1, the same values). The K-quants multiply x as it is, in float.
bool rounds_activations(DType dtype) {
  switch (dtype) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
      return true;
    default:
      return false;
  }
}

// c[m, n] (row stride ldc) = a[m, k] · b[n, k]ᵀ through CLBlast; offsets in bytes.
void clblast_sgemm(OpenClBackend& backend, cl_mem a, size_t a_offset, cl_mem b, size_t b_offset,
                   cl_mem c, size_t c_offset, int64_t m, int64_t n, int64_t k, int64_t ldc) {
#if EDGELM_HAVE_CLBLAST
  const ClblastApi* api = clblast();
  EDGELM_CHECK(api != nullptr, "[opencl] matmul: ", clblast_unavailable_reason());
  // CLBlast counts offsets in elements; its codes above -1024 are OpenCL's own error codes.
  const auto error = [](CLBlastStatusCode status) {
    const int code = static_cast<int>(status);
    return std::string(code > -1024 ? cl_error_name(code) : "CLBlast error") + " (" +
           std::to_string(code) + ")";
  };
  const auto size = [](int64_t value) { return static_cast<size_t>(value); };
  const size_t a_elements = a_offset / sizeof(float);
  const size_t b_elements = b_offset / sizeof(float);
  const size_t c_elements = c_offset / sizeof(float);
  cl_command_queue queue = backend.queue();
  size_t temp_bytes = 0;
  CLBlastStatusCode status = api->sgemm_temp_buffer_size(
      CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, size(m), size(n), size(k),
      a_elements, size(k), b_elements, size(k), c_elements, size(ldc), &queue, &temp_bytes);
  EDGELM_CHECK(status == CLBlastSuccess,
               "[opencl] matmul: CLBlast SGemmTempBufferSize failed: ", error(status));
  // A scratch slot of ours, so CLBlast does not allocate and free a buffer per call.
  cl_mem temp = temp_bytes > 0 ? backend.scratch(kClblastSlot, temp_bytes) : nullptr;
  const bool profiling = backend.profiling();
  EventHandle event;
  status = api->sgemm_with_temp_buffer(
      CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, size(m), size(n), size(k),
      1.0f, a, a_elements, size(k), b, b_elements, size(k), 0.0f, c, c_elements, size(ldc), &queue,
      profiling ? event.reset_and_get_address() : nullptr, temp);
  EDGELM_CHECK(status == CLBlastSuccess, "[opencl] matmul: CLBlast SGEMM (M ", m, ", N ", n, ", K ",
               k, ") failed: ", error(status));
  if (profiling) backend.track_event("matmul", "clblast_sgemm", std::move(event));
#else
  (void)backend, (void)a, (void)a_offset, (void)b, (void)b_offset, (void)c, (void)c_offset;
  (void)m, (void)n, (void)k, (void)ldc;
  EDGELM_FAIL("[opencl] matmul: ", clblast_unavailable_reason());
#endif
}

}  // namespace

void OpenClBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& y) {
  EDGELM_CHECK(supports(OpKind::Matmul, {w.dtype()}), "[opencl] matmul: unsupported weight dtype ",
               w.describe());
  // Plain variables, not a structured binding: the GEMM lambda below captures them, which Clang
  // before 16 refuses for bindings.
  const op_checks::MatmulShape shape = op_checks::matmul("opencl", x, w, y);
  const int64_t M = shape.M, N = shape.N, K = shape.K;
  check_int32(M * K, "matmul", "x elements");
  check_int32(M * N, "matmul", "y elements");
  check_int32(N, "matmul", "N");
  if (M == 0 || N == 0) return;

  const bool round_x = rounds_activations(w.dtype());
  const int64_t blocks = K / 32;
  if (gemm_min_rows_ <= 0 || M < gemm_min_rows_) {
    KernelCall gemv = call("matmul", "matmul", gemv_kernel(w.dtype()));
    if (round_x) {
      cl_mem qx = scratch(kActivationSlot, static_cast<size_t>(M * K));
      cl_mem dx = scratch(kActivationScaleSlot, static_cast<size_t>(M * blocks) * sizeof(float));
      call("matmul", "matmul", "matmul_quantize_x")
          .tensor(x, "x")
          .buffer(qx)
          .buffer(dx)
          .i32(K)
          .i32(M)
          .run({static_cast<size_t>(blocks), static_cast<size_t>(M)}, {1, 1});
      gemv.buffer(qx).buffer(dx);
    } else {
      gemv.tensor(x, "x");
    }
    gemv.tensor(w, "w")
        .tensor(y, "y")
        .i32(M)
        .i32(N)
        .i32(K)
        .local(kGemvRows * kGemvGroup * sizeof(float))
        .run({static_cast<size_t>((N + kGemvRows - 1) / kGemvRows) * kGemvGroup}, {kGemvGroup});
    return;
  }

  // GEMM: y[M, N] = x[M, K] · W[N, K]ᵀ, row-major, offsets in bytes. Weights of the 32-block
  // types multiply the rounded copy of x; the K-quants multiply x itself.
  cl_mem a = mem_of(x, "matmul", "x");
  size_t a_offset = x.byte_offset();
  if (round_x) {
    a = scratch(kActivationSlot, static_cast<size_t>(M * K) * sizeof(float));
    a_offset = 0;
    call("matmul", "matmul", "matmul_round_x")
        .tensor(x, "x")
        .buffer(a)
        .i32(K)
        .i32(M)
        .run({static_cast<size_t>(blocks), static_cast<size_t>(M)}, {1, 1});
  }
  // Columns [n_begin, n_begin + n_count) of y from b, n_count rows of W (or of its F32 tile).
  auto gemm = [&](cl_mem b, size_t b_offset, int64_t n_begin, int64_t n_count) {
    const size_t c_offset = y.byte_offset() + static_cast<size_t>(n_begin) * sizeof(float);
    if (gemm_ == ClGemm::Clblast) {
      clblast_sgemm(*this, a, a_offset, b, b_offset, mem_of(y, "matmul", "y"), c_offset, M, n_count,
                    K, N);
      return;
    }
    call("matmul", "matmul", "matmul_gemm_f32")
        .buffer(a)
        .u64(a_offset)
        .buffer(b)
        .u64(b_offset)
        .buffer(mem_of(y, "matmul", "y"))
        .u64(c_offset)
        .i32(M)
        .i32(n_count)
        .i32(K)
        .i32(N)
        .run({static_cast<size_t>((n_count + kGemmTile - 1) / kGemmTile) * kGemmThreadsN,
              static_cast<size_t>((M + kGemmTile - 1) / kGemmTile) * kGemmThreadsM},
             {kGemmThreadsN, kGemmThreadsM});
  };

  if (w.dtype() == DType::F32) {
    gemm(mem_of(w, "matmul", "w"), w.byte_offset(), 0, N);
    return;
  }
  const int64_t tile_rows =
      std::clamp<int64_t>(static_cast<int64_t>(gemm_tile_bytes_ / (sizeof(float) * K)), 1, N);
  cl_mem tile = scratch(kTileSlot, static_cast<size_t>(tile_rows * K) * sizeof(float));
  for (int64_t n_begin = 0; n_begin < N; n_begin += tile_rows) {
    const int64_t rows = std::min(tile_rows, N - n_begin);
    call("matmul", "matmul", "matmul_dequantize_tile")
        .tensor(w, "w")
        .buffer(tile)
        .i32(static_cast<int64_t>(w.dtype()))
        .i32(K)
        .i32(n_begin)
        .i32(rows)
        .run({static_cast<size_t>(K), static_cast<size_t>(rows)}, {64, 1});
    gemm(tile, 0, n_begin, rows);
  }
}

}  // namespace edgelm::opencl
