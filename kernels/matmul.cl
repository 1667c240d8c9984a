// Matrix-vector products for matmul with few rows of x (decode, short chunks): y = x · Wᵀ with
// x F32 [M, K], W [N, K] of one weight dtype, y F32 [M, N]. One work-group of MATMUL_GROUP
// work-items per output column n: they stride over K (consecutive work-items read consecutive
// elements or blocks of W's row, which coalesces on GPUs), accumulate in float, and reduce in
// local memory. W's row is read once per row of x, so this path is for small M; larger M goes to
// the tiled GEMM (CLBlast).
#define MATMUL_GROUP 64

// Partial dot product of this work-item's share of one W row with one x row.
inline float dot_f32(global const uchar* w_row, global const float* x, int K, int lid) {
  global const float* w = (global const float*)w_row;
  float sum = 0.0f;
  for (int k = lid; k < K; k += MATMUL_GROUP) sum += w[k] * x[k];
  return sum;
}

inline float dot_f16(global const uchar* w_row, global const float* x, int K, int lid) {
  global const half* w = (global const half*)w_row;
  float sum = 0.0f;
  for (int k = lid; k < K; k += MATMUL_GROUP) sum += vload_half(k, w) * x[k];
  return sum;
}

inline float dot_bf16(global const uchar* w_row, global const float* x, int K, int lid) {
  global const ushort* w = (global const ushort*)w_row;
  float sum = 0.0f;
  for (int k = lid; k < K; k += MATMUL_GROUP) sum += bf16_to_float(w[k]) * x[k];
  return sum;
}

// Quantized weights multiply activations that were rounded to 8 bits per 32-block first, exactly
// as the CPU's fast kernels do (and GGML's Q8_0 dot products): d_x = max|x| / 127, q_x =
// round-to-nearest-even(x · 127 / max|x|). The block product is then an integer sum, exact, scaled
// once by d_w · d_x; CPU and OpenCL thus differ only in the order of float additions.

// Work-item (b, m): block b of row m of x into qx (char [M, K]) and dx (float [M, K / 32]).
kernel void matmul_quantize_x(global const uchar* x, ulong x_off, global char* qx,
                              global float* dx, int K, int M) {
  const int b = get_global_id(0);
  const int m = get_global_id(1);
  if (b >= K / QK || m >= M) return;
  global const float* xb = AT_CONST(float, x, x_off) + (ulong)m * K + b * QK;
  float max_abs = 0.0f;
  for (int i = 0; i < QK; ++i) max_abs = fmax(max_abs, fabs(xb[i]));
  const float inverse = max_abs > 0.0f ? 127.0f / max_abs : 0.0f;
  global char* q = qx + (ulong)m * K + b * QK;
  for (int i = 0; i < QK; ++i) q[i] = (char)convert_int_rte(xb[i] * inverse);
  dx[(ulong)m * (K / QK) + b] = max_abs / 127.0f;
}

// The same rounding, written back as floats q_x · d_x ([M, K]) for the GEMM path, whose SGEMM then
// forms the same products as the integer kernels (up to float rounding of q_x · d_x).
kernel void matmul_round_x(global const uchar* x, ulong x_off, global float* rounded, int K,
                           int M) {
  const int b = get_global_id(0);
  const int m = get_global_id(1);
  if (b >= K / QK || m >= M) return;
  global const float* xb = AT_CONST(float, x, x_off) + (ulong)m * K + b * QK;
  float max_abs = 0.0f;
  for (int i = 0; i < QK; ++i) max_abs = fmax(max_abs, fabs(xb[i]));
  const float inverse = max_abs > 0.0f ? 127.0f / max_abs : 0.0f;
  const float d = max_abs / 127.0f;
  global float* out = rounded + (ulong)m * K + b * QK;
  for (int i = 0; i < QK; ++i) out[i] = (float)convert_int_rte(xb[i] * inverse) * d;
}

// Partial dot products of this work-item's blocks of one quantized W row with one quantized x row.
inline float dot_q8_0(global const uchar* w_row, global const char* qx, global const float* dx,
                      int K, int lid) {
  float sum = 0.0f;
  for (int b = lid; b < K / QK; b += MATMUL_GROUP) {
    global const uchar* block = w_row + (ulong)b * Q8_0_BYTES;
    global const char* xb = qx + b * QK;
    int isum = 0;
    for (int i = 0; i < QK; ++i) isum += (int)((char)block[2 + i]) * (int)xb[i];
    sum += (float)isum * (vload_half(0, (global const half*)block) * dx[b]);
  }
  return sum;
}

inline float dot_q4_0(global const uchar* w_row, global const char* qx, global const float* dx,
                      int K, int lid) {
  float sum = 0.0f;
  for (int b = lid; b < K / QK; b += MATMUL_GROUP) {
    global const uchar* block = w_row + (ulong)b * Q4_0_BYTES;
    global const char* xb = qx + b * QK;
    int isum = 0;
    for (int i = 0; i < QK / 2; ++i) {
      const uchar packed = block[2 + i];
      isum += ((int)(packed & 15) - 8) * (int)xb[i];
      isum += ((int)(packed >> 4) - 8) * (int)xb[i + QK / 2];
    }
    sum += (float)isum * (vload_half(0, (global const half*)block) * dx[b]);
  }
  return sum;
}

#define MATMUL_GEMV_QUANTIZED(dtype)                                                            \
  kernel void matmul_##dtype##_gemv(global const char* qx, global const float* dx,              \
                                    global const uchar* w, ulong w_off, global uchar* y,        \
                                    ulong y_off, int M, int N, int K, local float* scratch) {   \
    const int n = get_group_id(0);                                                              \
    const int lid = get_local_id(0);                                                            \
    if (n >= N) return;                                                                         \
    global const uchar* w_row = AT_CONST(uchar, w, w_off) + (ulong)n * row_bytes(DT_NAME, K);  \
    for (int m = 0; m < M; ++m) {                                                               \
      const float partial =                                                                     \
          dot_##dtype(w_row, qx + (ulong)m * K, dx + (ulong)m * (K / QK), K, lid);              \
      const float total = group_sum(partial, scratch);                                          \
      if (lid == 0) AT(float, y, y_off)[(ulong)m * N + n] = total;                              \
    }                                                                                           \
  }

#define MATMUL_GEMV(dtype)                                                                      \
  kernel void matmul_##dtype##_gemv(global const uchar* x, ulong x_off, global const uchar* w,  \
                                    ulong w_off, global uchar* y, ulong y_off, int M, int N,    \
                                    int K, local float* scratch) {                              \
    const int n = get_group_id(0);                                                              \
    const int lid = get_local_id(0);                                                            \
    if (n >= N) return;                                                                         \
    global const uchar* w_row = AT_CONST(uchar, w, w_off) + (ulong)n * row_bytes(DT_NAME, K);  \
    for (int m = 0; m < M; ++m) {                                                               \
      const float partial = dot_##dtype(w_row, AT_CONST(float, x, x_off) + (ulong)m * K, K, lid); \
      const float total = group_sum(partial, scratch);                                          \
      if (lid == 0) AT(float, y, y_off)[(ulong)m * N + n] = total;                              \
    }                                                                                           \
  }

#define DT_NAME DT_F32
MATMUL_GEMV(f32)
#undef DT_NAME
#define DT_NAME DT_F16
MATMUL_GEMV(f16)
#undef DT_NAME
#define DT_NAME DT_BF16
MATMUL_GEMV(bf16)
#undef DT_NAME
#define DT_NAME DT_Q8_0
MATMUL_GEMV_QUANTIZED(q8_0)
#undef DT_NAME
#define DT_NAME DT_Q4_0
MATMUL_GEMV_QUANTIZED(q4_0)
#undef DT_NAME

// Rows [n_begin, n_begin + rows) of W converted to F32 into `tile` [rows, K] for the GEMM path.
// Work-item (k, r).
kernel void matmul_dequantize_tile(global const uchar* w, ulong w_off, global float* tile,
                                   int dtype, int K, int n_begin, int rows) {
  const int k = get_global_id(0);
  const int r = get_global_id(1);
  if (k >= K || r >= rows) return;
  global const uchar* w_row = AT_CONST(uchar, w, w_off) + (ulong)(n_begin + r) * row_bytes(dtype, K);
  tile[(ulong)r * K + k] = load_element(w_row, dtype, k);
}
