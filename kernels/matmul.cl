// Matrix-vector products for matmul with few rows of x (decode, short chunks): y = x · Wᵀ with
// x F32 [M, K], W [N, K] of one weight dtype, y F32 [M, N]. One work-group of MATMUL_GROUP
// work-items per MATMUL_ROWS output columns: for each of its W rows the work-items stride over K
// (consecutive work-items read consecutive elements or blocks, which coalesces on GPUs) and
// accumulate in float; the MATMUL_ROWS partial sums are then reduced together in local memory
// (one tree, log2(MATMUL_GROUP) barriers, for all rows). Several rows per group amortise the
// group's fixed cost (launch, reduction), which dominates on CPU devices such as PoCL. W's rows
// are read once per row of x, so this path is for small M; larger M goes to the tiled GEMM.
#define MATMUL_GROUP 64
#define MATMUL_ROWS 8

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

// A block holding a NaN or an infinity gets zero quants and a NaN scale, so its products are NaN
// (the CPU kernels' x_block_scale); one below 2^-120, whose step 127 / max|x| would overflow, rounds
// to zeros. The largest |x| is taken over bit patterns, which order as the values and put NaN
// above infinity (fmax would drop a NaN).
float x_block_max_abs(global const float* xb) {
  uint max_bits = 0;
  for (int i = 0; i < QK; ++i) max_bits = max(max_bits, as_uint(xb[i]) & 0x7fffffffu);
  return as_float(max_bits);
}

float x_block_inverse(float max_abs) {
  return isfinite(max_abs) && max_abs >= 0x1p-120f ? 127.0f / max_abs : 0.0f;
}

float x_block_step(float max_abs) {
  return isfinite(max_abs) ? max_abs / 127.0f : NAN;
}

// Work-item (b, m): block b of row m of x into qx (char [M, K]) and dx (float [M, K / 32]).
kernel void matmul_quantize_x(global const uchar* x, ulong x_off, global char* qx,
                              global float* dx, int K, int M) {
  const int b = get_global_id(0);
  const int m = get_global_id(1);
  if (b >= K / QK || m >= M) return;
  global const float* xb = AT_CONST(float, x, x_off) + (ulong)m * K + b * QK;
  const float max_abs = x_block_max_abs(xb);
  const float inverse = x_block_inverse(max_abs);
  const bool finite = isfinite(max_abs);
  global char* q = qx + (ulong)m * K + b * QK;
  for (int i = 0; i < QK; ++i) q[i] = finite ? (char)convert_int_rte(xb[i] * inverse) : 0;
  dx[(ulong)m * (K / QK) + b] = x_block_step(max_abs);
}

// The same rounding, written back as floats q_x · d_x ([M, K]) for the GEMM path, whose SGEMM then
// forms the same products as the integer kernels (up to float rounding of q_x · d_x).
kernel void matmul_round_x(global const uchar* x, ulong x_off, global float* rounded, int K,
                           int M) {
  const int b = get_global_id(0);
  const int m = get_global_id(1);
  if (b >= K / QK || m >= M) return;
  global const float* xb = AT_CONST(float, x, x_off) + (ulong)m * K + b * QK;
  const float max_abs = x_block_max_abs(xb);
  const float inverse = x_block_inverse(max_abs);
  const float d = x_block_step(max_abs);
  const bool finite = isfinite(max_abs);
  global float* out = rounded + (ulong)m * K + b * QK;
  for (int i = 0; i < QK; ++i) out[i] = (finite ? (float)convert_int_rte(xb[i] * inverse) : 0.0f) * d;
}

// Sum of the 16 lanes of a product vector, in int (|each lane| <= 2 * 128 * 127 < 2^16).
inline int sum_short16(short16 p) {
  const int8 a = convert_int8(p.lo) + convert_int8(p.hi);
  const int4 b = a.lo + a.hi;
  const int2 c = b.lo + b.hi;
  return c.x + c.y;
}

// Partial dot products of this work-item's blocks of one quantized W row with one quantized x row.
// Each block is read as 16-byte vectors (one load instruction on GPUs, and vector code on CPUs).
inline float dot_q8_0(global const uchar* w_row, global const char* qx, global const float* dx,
                      int K, int lid) {
  float sum = 0.0f;
  for (int b = lid; b < K / QK; b += MATMUL_GROUP) {
    global const uchar* block = w_row + (ulong)b * Q8_0_BYTES;
    global const char* xb = qx + b * QK;
    const short16 w0 = convert_short16(as_char16(vload16(0, block + 2)));
    const short16 w1 = convert_short16(as_char16(vload16(1, block + 2)));
    const int isum = sum_short16(w0 * convert_short16(vload16(0, xb))) +
                     sum_short16(w1 * convert_short16(vload16(1, xb)));
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
    const uchar16 packed = vload16(0, block + 2);
    // Element i in the low nibble of byte i, element i + 16 in the high nibble.
    const short16 low = convert_short16(packed & (uchar16)15) - (short16)8;
    const short16 high = convert_short16(packed >> (uchar16)4) - (short16)8;
    const short16 products =
        low * convert_short16(vload16(0, xb)) + high * convert_short16(vload16(1, xb));
    sum += (float)sum_short16(products) * (vload_half(0, (global const half*)block) * dx[b]);
  }
  return sum;
}

// The offset types: Σ (q·d + m)(q_x·d_x) = d·d_x·Σ q·q_x + m·d_x·Σ q_x over a block, two integer
// sums. |q·q_x| <= 31·127, so two lanes' products still fit a short.
inline float dot_q4_1(global const uchar* w_row, global const char* qx, global const float* dx,
                      int K, int lid) {
  float sum = 0.0f;
  for (int b = lid; b < K / QK; b += MATMUL_GROUP) {
    global const uchar* block = w_row + (ulong)b * Q4_1_BYTES;
    global const char* xb = qx + b * QK;
    const uchar16 packed = vload16(0, block + 4);
    const short16 x_low = convert_short16(vload16(0, xb));
    const short16 x_high = convert_short16(vload16(1, xb));
    const short16 products = convert_short16(packed & (uchar16)15) * x_low +
                             convert_short16(packed >> (uchar16)4) * x_high;
    const float d = vload_half(0, (global const half*)block);
    const float m = vload_half(1, (global const half*)block);
    sum += (float)sum_short16(products) * (d * dx[b]) +
           (float)sum_short16(x_low + x_high) * (m * dx[b]);
  }
  return sum;
}

// The fifth bits of a 5-bit block's elements 0..15 (shift 0) or 16..31 (shift 16), as 16 or 0.
inline short16 high_bits(uint qh, uint shift) {
  const uint16 lanes = (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return convert_short16((((uint16)(qh >> shift)) >> lanes) & (uint16)1) << (short16)4;
}

// The 32 quants (0..31) of a 5-bit block as two halves.
inline void load_q5(global const uchar* qh_bytes, global const uchar* qs, short16* low,
                    short16* high) {
  const uint qh = (uint)qh_bytes[0] | ((uint)qh_bytes[1] << 8) | ((uint)qh_bytes[2] << 16) |
                  ((uint)qh_bytes[3] << 24);
  const uchar16 packed = vload16(0, qs);
  *low = convert_short16(packed & (uchar16)15) | high_bits(qh, 0);
  *high = convert_short16(packed >> (uchar16)4) | high_bits(qh, 16);
}

inline float dot_q5_0(global const uchar* w_row, global const char* qx, global const float* dx,
                      int K, int lid) {
  float sum = 0.0f;
  for (int b = lid; b < K / QK; b += MATMUL_GROUP) {
    global const uchar* block = w_row + (ulong)b * Q5_0_BYTES;
    global const char* xb = qx + b * QK;
    short16 low, high;
    load_q5(block + 2, block + 6, &low, &high);
    const short16 products = (low - (short16)16) * convert_short16(vload16(0, xb)) +
                             (high - (short16)16) * convert_short16(vload16(1, xb));
    sum += (float)sum_short16(products) * (vload_half(0, (global const half*)block) * dx[b]);
  }
  return sum;
}

inline float dot_q5_1(global const uchar* w_row, global const char* qx, global const float* dx,
                      int K, int lid) {
  float sum = 0.0f;
  for (int b = lid; b < K / QK; b += MATMUL_GROUP) {
    global const uchar* block = w_row + (ulong)b * Q5_1_BYTES;
    global const char* xb = qx + b * QK;
    short16 low, high;
    load_q5(block + 4, block + 8, &low, &high);
    const short16 x_low = convert_short16(vload16(0, xb));
    const short16 x_high = convert_short16(vload16(1, xb));
    const short16 products = low * x_low + high * x_high;
    const float d = vload_half(0, (global const half*)block);
    const float m = vload_half(1, (global const half*)block);
    sum += (float)sum_short16(products) * (d * dx[b]) +
           (float)sum_short16(x_low + x_high) * (m * dx[b]);
  }
  return sum;
}

// The K-quants (super-blocks of 256) multiply float activations, unrounded: each work-item takes
// 32-element sub-blocks (consecutive work-items consecutive sub-blocks, so short rows still spread
// over the group) and forms Σ q·x per run of one scale in float, scaled once by that run's factor.
// Q4_K/Q5_K: Σ (d·sc·q - dmin·mn)·x = d·sc·Σ q·x - dmin·mn·Σ x over a sub-block.

// Float vectors of 8 lanes (one AVX register; PoCL on AVX2 warns about float16 arguments).
inline float sum_float8(float8 v) {
  const float4 a = v.lo + v.hi;
  const float2 b = a.lo + a.hi;
  return b.x + b.y;
}

// Σ q[i]·x[i] over 32 elements (q holds elements 0..15, q_high 16..31), in float.
inline float dot_32(uchar16 q, uchar16 q_high, global const float* x) {
  return sum_float8(convert_float8(q.lo) * vload8(0, x) + convert_float8(q.hi) * vload8(1, x) +
                    convert_float8(q_high.lo) * vload8(2, x) +
                    convert_float8(q_high.hi) * vload8(3, x));
}

// Sub-block u (of K / 32) of a Q4_K (five = false) or Q5_K row times x[32u, 32u + 32).
inline float k45_sub_block_dot(global const uchar* w_row, int block_bytes, bool five,
                               global const float* x, int u) {
  global const uchar* block = w_row + (ulong)(u / 8) * block_bytes;
  const int s = u % 8;
  const int2 sm = k_scale_min(block + 4, s);
  global const uchar* qs = block + (five ? 48 : 16) + 32 * (s / 2);
  const uchar16 shift = (uchar16)(4 * (s % 2));
  uchar16 q0 = (vload16(0, qs) >> shift) & (uchar16)15;
  uchar16 q1 = (vload16(1, qs) >> shift) & (uchar16)15;
  if (five) {  // bit s of qh[l] is bit 4 of element l's quant
    const uchar16 bit = (uchar16)s;
    q0 |= ((vload16(0, block + 16) >> bit) & (uchar16)1) << (uchar16)4;
    q1 |= ((vload16(1, block + 16) >> bit) & (uchar16)1) << (uchar16)4;
  }
  x += (ulong)u * QK;
  const float qx = dot_32(q0, q1, x);
  const float sx = sum_float8(vload8(0, x) + vload8(1, x) + vload8(2, x) + vload8(3, x));
  const float scale = vload_half(0, (global const half*)block) * (float)sm.x;
  const float min = vload_half(1, (global const half*)block) * (float)sm.y;
  return scale * qx - min * sx;
}

inline float dot_q4_k(global const uchar* w_row, global const float* x, int K, int lid) {
  float sum = 0.0f;
  for (int u = lid; u < K / QK; u += MATMUL_GROUP)
    sum += k45_sub_block_dot(w_row, Q4_K_BYTES, false, x, u);
  return sum;
}

inline float dot_q5_k(global const uchar* w_row, global const float* x, int K, int lid) {
  float sum = 0.0f;
  for (int u = lid; u < K / QK; u += MATMUL_GROUP)
    sum += k45_sub_block_dot(w_row, Q5_K_BYTES, true, x, u);
  return sum;
}

// Q6_K: sub-block u = 8b + 4h + k is quarter k of half h of block b (common.cl); its two runs of 16
// take scales[8h + 2k] and scales[8h + 2k + 1]. The quants q (0..63) carry a bias of 32.
inline float dot_q6_k(global const uchar* w_row, global const float* x, int K, int lid) {
  float sum = 0.0f;
  for (int u = lid; u < K / QK; u += MATMUL_GROUP) {
    global const uchar* block = w_row + (ulong)(u / 8) * Q6_K_BYTES;
    const int h = (u % 8) / 4;
    const int k = u % 4;
    global const uchar* ql = block + 64 * h + 32 * (k % 2);
    global const uchar* qh = block + 128 + 32 * h;
    const uchar16 low_shift = (uchar16)(4 * (k / 2));
    const uchar16 high_shift = (uchar16)(2 * k);
    const uchar16 q0 = ((vload16(0, ql) >> low_shift) & (uchar16)15) |
                       (((vload16(0, qh) >> high_shift) & (uchar16)3) << (uchar16)4);
    const uchar16 q1 = ((vload16(1, ql) >> low_shift) & (uchar16)15) |
                       (((vload16(1, qh) >> high_shift) & (uchar16)3) << (uchar16)4);
    global const float* xs = x + (ulong)u * QK;
    const float first = sum_float8((convert_float8(q0.lo) - 32.0f) * vload8(0, xs) +
                                   (convert_float8(q0.hi) - 32.0f) * vload8(1, xs));
    const float second = sum_float8((convert_float8(q1.lo) - 32.0f) * vload8(2, xs) +
                                    (convert_float8(q1.hi) - 32.0f) * vload8(3, xs));
    global const char* scales = (global const char*)block + 192 + 8 * h + 2 * k;
    const float d = vload_half(0, (global const half*)(block + 208));
    sum += d * ((float)scales[0] * first + (float)scales[1] * second);
  }
  return sum;
}

// Reduces partial[r] (r < MATMUL_ROWS) of every work-item; work-item r < MATMUL_ROWS gets the
// total of row r. `scratch` holds MATMUL_ROWS * MATMUL_GROUP floats.
inline float gemv_reduce(float partial[MATMUL_ROWS], local float* scratch, int lid) {
  for (int r = 0; r < MATMUL_ROWS; ++r) scratch[r * MATMUL_GROUP + lid] = partial[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = MATMUL_GROUP / 2; stride > 0; stride /= 2) {
    if (lid < stride) {
      for (int r = 0; r < MATMUL_ROWS; ++r)
        scratch[r * MATMUL_GROUP + lid] += scratch[r * MATMUL_GROUP + lid + stride];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float total = lid < MATMUL_ROWS ? scratch[lid * MATMUL_GROUP] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

// The GEMV kernel of one weight dtype. X_ARGS / X_ROW say how a row of x is passed: float rows
// (buffer + offset) or quantized rows (values qx and scales dx, see matmul_quantize_x).
#define MATMUL_GEMV_KERNEL(dtype, X_ARGS, X_ROW)                                                \
  kernel void matmul_##dtype##_gemv(X_ARGS, global const uchar* w, ulong w_off,                 \
                                    global uchar* y, ulong y_off, int M, int N, int K,          \
                                    local float* scratch) {                                     \
    const int n_first = get_group_id(0) * MATMUL_ROWS;                                          \
    const int lid = get_local_id(0);                                                            \
    const ulong w_row_bytes = row_bytes(DT_NAME, K);                                            \
    global const uchar* w_rows = AT_CONST(uchar, w, w_off) + (ulong)n_first * w_row_bytes;     \
    for (int m = 0; m < M; ++m) {                                                               \
      float partial[MATMUL_ROWS];                                                               \
      for (int r = 0; r < MATMUL_ROWS; ++r) {                                                   \
        partial[r] = n_first + r < N ? dot_##dtype(w_rows + r * w_row_bytes, X_ROW, K, lid)     \
                                     : 0.0f;                                                    \
      }                                                                                         \
      const float total = gemv_reduce(partial, scratch, lid);                                   \
      if (lid < MATMUL_ROWS && n_first + lid < N)                                               \
        AT(float, y, y_off)[(ulong)m * N + n_first + lid] = total;                              \
    }                                                                                           \
  }

#define FLOAT_X_ARGS global const uchar *x, ulong x_off
#define FLOAT_X_ROW AT_CONST(float, x, x_off) + (ulong)m * K
#define QUANTIZED_X_ARGS global const char *qx, global const float *dx
#define QUANTIZED_X_ROW qx + (ulong)m * K, dx + (ulong)m * (K / QK)

#define DT_NAME DT_F32
MATMUL_GEMV_KERNEL(f32, FLOAT_X_ARGS, FLOAT_X_ROW)
#undef DT_NAME
#define DT_NAME DT_F16
MATMUL_GEMV_KERNEL(f16, FLOAT_X_ARGS, FLOAT_X_ROW)
#undef DT_NAME
#define DT_NAME DT_BF16
MATMUL_GEMV_KERNEL(bf16, FLOAT_X_ARGS, FLOAT_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q8_0
MATMUL_GEMV_KERNEL(q8_0, QUANTIZED_X_ARGS, QUANTIZED_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q4_0
MATMUL_GEMV_KERNEL(q4_0, QUANTIZED_X_ARGS, QUANTIZED_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q4_1
MATMUL_GEMV_KERNEL(q4_1, QUANTIZED_X_ARGS, QUANTIZED_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q5_0
MATMUL_GEMV_KERNEL(q5_0, QUANTIZED_X_ARGS, QUANTIZED_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q5_1
MATMUL_GEMV_KERNEL(q5_1, QUANTIZED_X_ARGS, QUANTIZED_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q4_K
MATMUL_GEMV_KERNEL(q4_k, FLOAT_X_ARGS, FLOAT_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q5_K
MATMUL_GEMV_KERNEL(q5_k, FLOAT_X_ARGS, FLOAT_X_ROW)
#undef DT_NAME
#define DT_NAME DT_Q6_K
MATMUL_GEMV_KERNEL(q6_k, FLOAT_X_ARGS, FLOAT_X_ROW)
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

// The backend's own GEMM, used when CLBlast is absent (or not chosen):
// c[M, N] = a[M, K] · b[N, K]ᵀ, all F32 and row-major, c's rows `ldc` floats apart (a tile of
// converted W rows writes a band of columns of y). b is W itself for F32 weights, else an F32
// tile of converted W rows (matmul_dequantize_tile), and a is then the rounded x
// (matmul_round_x) for quantized W.
//
// A work-group of GEMM_THREADS_N x GEMM_THREADS_M work-items computes a GEMM_TILE x GEMM_TILE
// block of c: it stages GEMM_TILE_K columns of the block's a rows and b rows in local memory, then
// each work-item accumulates GEMM_ROWS rows (GEMM_THREADS_M apart) x 8 neighbouring columns (a
// float8) from them, in float (the CPU oracle's precision). Each element of a and b is thus read
// from global memory once per block of c instead of once per product, and each local value feeds
// GEMM_ROWS or 8 multiply-adds; neighbouring work-items read neighbouring local words. The float8
// gives vector multiply-adds on devices that do not vectorise across work-items, PoCL's CPU
// device among them (there, prefill of SmolLM2-135M ran about 2.5x faster than with 4 x 4 scalar
// accumulators per work-item, 1.6x faster than with a float4). 64 x 64 per group of
// 128 work-items keeps 32 accumulators per work-item (within mobile GPUs' registers) and the
// group at 128, which every Adreno and Mali GPU and PoCL allow; a K step of 16 keeps the two
// tiles at 8 KiB of local memory (OpenCL 1.2 devices offer at least 16 KiB).
#define GEMM_ROWS 4
#define GEMM_THREADS_M 16
#define GEMM_THREADS_N 8
#define GEMM_THREADS (GEMM_THREADS_M * GEMM_THREADS_N)
#define GEMM_TILE 64  // = GEMM_ROWS * GEMM_THREADS_M = 8 * GEMM_THREADS_N
#define GEMM_TILE_K 16

// Loads rows [row0, row0 + GEMM_TILE) x columns [k0, k0 + GEMM_TILE_K) of `src` ([rows, K])
// transposed into `tile` [GEMM_TILE_K][GEMM_TILE], zeros outside the matrix. Consecutive
// work-items read consecutive k of a row.
inline void gemm_load_tile(global const float* src, int rows, int K, int row0, int k0,
                           local float* tile, int lid) {
  for (int e = lid; e < GEMM_TILE * GEMM_TILE_K; e += GEMM_THREADS) {
    const int r = e / GEMM_TILE_K;
    const int kk = e % GEMM_TILE_K;
    const int row = row0 + r;
    const int k = k0 + kk;
    tile[kk * GEMM_TILE + r] = row < rows && k < K ? src[(ulong)row * K + k] : 0.0f;
  }
}

kernel void matmul_gemm_f32(global const uchar* a, ulong a_off, global const uchar* b,
                            ulong b_off, global uchar* c, ulong c_off, int M, int N, int K,
                            int ldc) {
  local float a_tile[GEMM_TILE_K * GEMM_TILE];
  local float b_tile[GEMM_TILE_K * GEMM_TILE];
  const int lx = get_local_id(0);  // along N: columns lx * 8 .. lx * 8 + 7 of the block
  const int ly = get_local_id(1);  // along M: rows ly + i * GEMM_THREADS_M of the block
  const int lid = ly * GEMM_THREADS_N + lx;
  const int n0 = get_group_id(0) * GEMM_TILE;
  const int m0 = get_group_id(1) * GEMM_TILE;
  global const float* a_rows = AT_CONST(float, a, a_off);
  global const float* b_rows = AT_CONST(float, b, b_off);

  float8 acc[GEMM_ROWS];
  for (int i = 0; i < GEMM_ROWS; ++i) acc[i] = (float8)(0.0f);

  for (int k0 = 0; k0 < K; k0 += GEMM_TILE_K) {
    gemm_load_tile(a_rows, M, K, m0, k0, a_tile, lid);
    gemm_load_tile(b_rows, N, K, n0, k0, b_tile, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < GEMM_TILE_K; ++kk) {
      const float8 b_values = vload8(lx, b_tile + kk * GEMM_TILE);
      for (int i = 0; i < GEMM_ROWS; ++i)
        acc[i] += a_tile[kk * GEMM_TILE + ly + i * GEMM_THREADS_M] * b_values;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  global float* c_rows = AT(float, c, c_off);
  for (int i = 0; i < GEMM_ROWS; ++i) {
    const int m = m0 + ly + i * GEMM_THREADS_M;
    if (m >= M) continue;
    float values[8];
    vstore8(acc[i], 0, values);
    for (int j = 0; j < 8; ++j) {
      const int n = n0 + lx * 8 + j;
      if (n < N) c_rows[(ulong)m * ldc + n] = values[j];
    }
  }
}
