// Host side of kernels/matmul.cl and the CLBlast GEMM path of matmul.
//
// Few rows of x (decode, and chunks shorter than gemm_min_rows): one GEMV kernel per weight dtype
// that reads W once per row of x. More rows (prefill): a tiled GEMM through CLBlast's SGEMM; F32
// weights go in directly, other dtypes are converted to F32 one tile of W rows at a time into a
// device scratch buffer (bounded size), then multiplied. Quantized weights therefore cost one
// extra pass over a tile per chunk, which the GEMM's O(M) reuse amortises.
//
// Quantized weights meet activations rounded to 8 bits per block (kernels/matmul.cl says how), on
// both paths, because the CPU's fast kernels do the same: the two backends then agree to float
// rounding instead of differing by the activation rounding, which on small models is enough to
// flip a greedy token.
#include <clblast.h>

#include "backends/opencl/checks.h"
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
    default:
      return nullptr;
  }
}

const char* clblast_error(clblast::StatusCode status) {
  const int code = static_cast<int>(status);
  // Codes above -1024 are OpenCL's own error codes.
  if (code > -1024) return cl_error_name(code);
  return "CLBlast error";
}

}  // namespace

void OpenClBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& y) {
  EDGELM_CHECK(supports(OpKind::Matmul, {w.dtype()}), "[opencl] matmul: unsupported weight dtype ",
               w.describe());
  const auto [M, N, K] = op_checks::matmul("opencl", x, w, y);
  check_int32(M * K, "matmul", "x elements");
  check_int32(M * N, "matmul", "y elements");
  check_int32(N, "matmul", "N");
  if (M == 0 || N == 0) return;

  const bool quantized = dtype_is_quantized(w.dtype());
  const int64_t blocks = K / 32;
  if (gemm_min_rows_ <= 0 || M < gemm_min_rows_) {
    KernelCall gemv = call("matmul", "matmul", gemv_kernel(w.dtype()));
    if (quantized) {
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

  // GEMM: y[M, N] = x[M, K] · W[N, K]ᵀ, row-major, offsets in elements. Quantized weights
  // multiply the rounded copy of x.
  cl_mem a = mem_of(x, "matmul", "x");
  size_t a_offset = x.byte_offset() / sizeof(float);
  if (quantized) {
    a = scratch(kActivationSlot, static_cast<size_t>(M * K) * sizeof(float));
    a_offset = 0;
    call("matmul", "matmul", "matmul_round_x")
        .tensor(x, "x")
        .buffer(a)
        .i32(K)
        .i32(M)
        .run({static_cast<size_t>(blocks), static_cast<size_t>(M)}, {1, 1});
  }
  // Plain copies of the sizes: Clang before 16 cannot capture structured bindings in a lambda.
  const auto m = static_cast<size_t>(M);
  const auto k = static_cast<size_t>(K);
  const auto ldc = static_cast<size_t>(N);
  auto sgemm = [&](cl_mem b, size_t b_offset, size_t n_begin, size_t n_count) {
    const size_t c_offset = y.byte_offset() / sizeof(float) + n_begin;
    cl_command_queue queue_handle = queue();
    size_t temp_bytes = 0;
    clblast::StatusCode status = clblast::GemmTempBufferSize<float>(
        clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, m, n_count,
        k, a_offset, k, b_offset, k, c_offset, ldc, &queue_handle, temp_bytes);
    EDGELM_CHECK(status == clblast::StatusCode::kSuccess, "[opencl] matmul: CLBlast ",
                 "GemmTempBufferSize failed: ", clblast_error(status), " (",
                 static_cast<int>(status), ")");
    cl_mem temp = temp_bytes > 0 ? scratch(kClblastSlot, temp_bytes) : nullptr;
    EventHandle event;
    const bool profiling = device_->profiling();
    status = clblast::Gemm<float>(
        clblast::Layout::kRowMajor, clblast::Transpose::kNo, clblast::Transpose::kYes, m, n_count,
        k, 1.0f, a, a_offset, k, b, b_offset, k, 0.0f, mem_of(y, "matmul", "y"), c_offset, ldc,
        &queue_handle, profiling ? event.reset_and_get_address() : nullptr, temp);
    EDGELM_CHECK(status == clblast::StatusCode::kSuccess, "[opencl] matmul: CLBlast SGEMM (M ", m,
                 ", N ", n_count, ", K ", k, ") failed: ", clblast_error(status), " (",
                 static_cast<int>(status), ")");
    if (profiling) track_event("matmul", "clblast_sgemm", std::move(event));
  };

  if (w.dtype() == DType::F32) {
    sgemm(mem_of(w, "matmul", "w"), w.byte_offset() / sizeof(float), 0, static_cast<size_t>(N));
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
    sgemm(tile, 0, static_cast<size_t>(n_begin), static_cast<size_t>(rows));
  }
}

}  // namespace edgelm::opencl
