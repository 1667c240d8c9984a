// Row gathers and conversions between dtypes: embed, cast (including quantization to Q8_0, Q4_0,
// Q4_1, Q5_0 and Q5_1 with the reference quantizers' rules).

// Work-item (d, i): out[i, d] = table[ids[i], d] as float. Ids outside [0, vocab) were rejected
// by the host; the guard keeps a bad id from reading out of bounds anyway.
kernel void embed_rows(global const uchar* table, ulong table_off, global const uchar* ids,
                       ulong ids_off, global uchar* out, ulong out_off, int dtype, int vocab,
                       int dim, int n) {
  const int d = get_global_id(0);
  const int i = get_global_id(1);
  if (d >= dim || i >= n) return;
  const int id = AT_CONST(int, ids, ids_off)[i];
  float value = 0.0f;
  if (id >= 0 && id < vocab) {
    value = load_element(AT_CONST(uchar, table, table_off) + (ulong)id * row_bytes(dtype, dim),
                         dtype, d);
  }
  AT(float, out, out_off)[(ulong)i * dim + d] = value;
}

// Work-item (e, r): element e of row r converted to a float dtype (F32, F16, BF16), rounding to
// nearest even.
kernel void cast_to_float(global const uchar* src, ulong src_off, global uchar* dst, ulong dst_off,
                          int src_dtype, int dst_dtype, int n, int rows) {
  const int e = get_global_id(0);
  const int r = get_global_id(1);
  if (e >= n || r >= rows) return;
  const float value =
      load_element(AT_CONST(uchar, src, src_off) + (ulong)r * row_bytes(src_dtype, n), src_dtype, e);
  const ulong index = (ulong)r * n + e;
  if (dst_dtype == DT_F32) {
    AT(float, dst, dst_off)[index] = value;
  } else if (dst_dtype == DT_F16) {
    vstore_half_rte(value, index, AT(half, dst, dst_off));
  } else {
    AT(ushort, dst, dst_off)[index] = float_to_bf16(value);
  }
}

// The quantizing casts store a block holding a NaN or an infinity with a NaN scale (this half, and
// a NaN m for the offset types) and zero quants, as the quantize_row_* functions do.
#define HALF_NAN 0x7e00

bool block_is_finite(const float* values) {
  bool finite = true;
  for (int i = 0; i < QK; ++i) finite = finite && isfinite(values[i]);
  return finite;
}

// Work-item (b, r): block b of row r quantized to Q8_0: d = max|x| / 127, q = round(x / d)
// (half away from zero), as quantize_row_q8_0.
kernel void cast_to_q8_0(global const uchar* src, ulong src_off, global uchar* dst, ulong dst_off,
                         int src_dtype, int n, int rows) {
  const int b = get_global_id(0);
  const int r = get_global_id(1);
  if (b >= n / QK || r >= rows) return;
  global const uchar* row = AT_CONST(uchar, src, src_off) + (ulong)r * row_bytes(src_dtype, n);
  float values[QK];
  float max_abs = 0.0f;
  for (int i = 0; i < QK; ++i) {
    values[i] = load_element(row, src_dtype, b * QK + i);
    max_abs = fmax(max_abs, fabs(values[i]));
  }
  global uchar* block = AT(uchar, dst, dst_off) + ((ulong)r * (n / QK) + b) * Q8_0_BYTES;
  if (!block_is_finite(values)) {  // NaN scale, zero quants: the block decodes to NaN
    *(global ushort*)block = HALF_NAN;
    for (int i = 0; i < QK; ++i) block[2 + i] = 0;
    return;
  }
  const float d = max_abs / 127.0f;
  const float inverse = d >= FLT_MIN ? 1.0f / d : 0.0f;  // 1/d overflows below it
  vstore_half_rte(d, 0, (global half*)block);
  for (int i = 0; i < QK; ++i) block[2 + i] = (uchar)(char)round(values[i] * inverse);
}

// Work-item (b, r): block b of row r quantized to Q4_0: d = extreme / -8 (extreme: the first
// value of largest magnitude), nibble = min(15, trunc(x / d + 8.5)), as quantize_row_q4_0.
kernel void cast_to_q4_0(global const uchar* src, ulong src_off, global uchar* dst, ulong dst_off,
                         int src_dtype, int n, int rows) {
  const int b = get_global_id(0);
  const int r = get_global_id(1);
  if (b >= n / QK || r >= rows) return;
  global const uchar* row = AT_CONST(uchar, src, src_off) + (ulong)r * row_bytes(src_dtype, n);
  float values[QK];
  float max_abs = 0.0f;
  float extreme = 0.0f;
  for (int i = 0; i < QK; ++i) {
    values[i] = load_element(row, src_dtype, b * QK + i);
    if (fabs(values[i]) > max_abs) {
      max_abs = fabs(values[i]);
      extreme = values[i];
    }
  }
  global uchar* block = AT(uchar, dst, dst_off) + ((ulong)r * (n / QK) + b) * Q4_0_BYTES;
  if (!block_is_finite(values)) {  // NaN scale, nibbles of zero: the block decodes to NaN
    *(global ushort*)block = HALF_NAN;
    for (int i = 0; i < QK / 2; ++i) block[2 + i] = 0x88;
    return;
  }
  const float d = extreme / -8.0f;
  const float inverse = fabs(d) >= FLT_MIN ? 1.0f / d : 0.0f;  // 1/d overflows below it
  vstore_half_rte(d, 0, (global half*)block);
  for (int i = 0; i < QK / 2; ++i) {
    const int low = min(15, (int)(values[i] * inverse + 8.5f));
    const int high = min(15, (int)(values[i + QK / 2] * inverse + 8.5f));
    block[2 + i] = (uchar)(low | (high << 4));
  }
}

// The block's 32 values from row r of src, with their smallest and largest.
void load_block(global const uchar* src, ulong src_off, int src_dtype, int n, int r, int b,
                float* values, float* lowest, float* highest) {
  global const uchar* row = AT_CONST(uchar, src, src_off) + (ulong)r * row_bytes(src_dtype, n);
  for (int i = 0; i < QK; ++i) values[i] = load_element(row, src_dtype, b * QK + i);
  *lowest = values[0];
  *highest = values[0];
  for (int i = 1; i < QK; ++i) {
    *lowest = fmin(*lowest, values[i]);
    *highest = fmax(*highest, values[i]);
  }
}

// 1/d, or 0 where it would overflow (|d| below the smallest normal float).
float block_inverse(float d) {
  return fabs(d) >= FLT_MIN ? 1.0f / d : 0.0f;
}

// Five-bit quants: low nibbles in qs (element i of byte i % 16, low half for i < 16), fifth bits in
// qh (bit i of a little-endian uint32).
void store_q5(const int* q, global uchar* qh, global uchar* qs) {
  uint high = 0;
  for (int i = 0; i < QK / 2; ++i) {
    qs[i] = (uchar)((q[i] & 15) | ((q[i + QK / 2] & 15) << 4));
    high |= (uint)(q[i] >> 4) << i;
    high |= (uint)(q[i + QK / 2] >> 4) << (i + QK / 2);
  }
  for (int i = 0; i < 4; ++i) qh[i] = (uchar)(high >> (8 * i));
}

// Work-item (b, r): block b of row r quantized to Q4_1: m = min, d = (max - min) / 15, nibble =
// min(15, trunc((x - min) / d + 0.5)), as quantize_row_q4_1. A block whose max - min overflows is
// stored like a non-finite one.
kernel void cast_to_q4_1(global const uchar* src, ulong src_off, global uchar* dst, ulong dst_off,
                         int src_dtype, int n, int rows) {
  const int b = get_global_id(0);
  const int r = get_global_id(1);
  if (b >= n / QK || r >= rows) return;
  float values[QK];
  float lowest, highest;
  load_block(src, src_off, src_dtype, n, r, b, values, &lowest, &highest);
  global uchar* block = AT(uchar, dst, dst_off) + ((ulong)r * (n / QK) + b) * Q4_1_BYTES;
  if (!block_is_finite(values) || !isfinite(highest - lowest)) {
    *(global ushort*)block = HALF_NAN;
    *(global ushort*)(block + 2) = HALF_NAN;
    for (int i = 0; i < QK / 2; ++i) block[4 + i] = 0;
    return;
  }
  const float d = (highest - lowest) / 15.0f;
  const float inverse = block_inverse(d);
  vstore_half_rte(d, 0, (global half*)block);
  vstore_half_rte(lowest, 1, (global half*)block);
  for (int i = 0; i < QK / 2; ++i) {
    const int low = min(15, (int)((values[i] - lowest) * inverse + 0.5f));
    const int high = min(15, (int)((values[i + QK / 2] - lowest) * inverse + 0.5f));
    block[4 + i] = (uchar)(low | (high << 4));
  }
}

// Work-item (b, r): block b of row r quantized to Q5_0: d = extreme / -16 (extreme: the first
// value of largest magnitude), q = min(31, trunc(x / d + 16.5)), as quantize_row_q5_0.
kernel void cast_to_q5_0(global const uchar* src, ulong src_off, global uchar* dst, ulong dst_off,
                         int src_dtype, int n, int rows) {
  const int b = get_global_id(0);
  const int r = get_global_id(1);
  if (b >= n / QK || r >= rows) return;
  float values[QK];
  float lowest, highest;
  load_block(src, src_off, src_dtype, n, r, b, values, &lowest, &highest);
  float max_abs = 0.0f;
  float extreme = 0.0f;
  for (int i = 0; i < QK; ++i) {
    if (fabs(values[i]) > max_abs) {
      max_abs = fabs(values[i]);
      extreme = values[i];
    }
  }
  global uchar* block = AT(uchar, dst, dst_off) + ((ulong)r * (n / QK) + b) * Q5_0_BYTES;
  int q[QK];
  if (!block_is_finite(values)) {  // NaN scale, quants of zero (16): the block decodes to NaN
    *(global ushort*)block = HALF_NAN;
    for (int i = 0; i < QK; ++i) q[i] = 16;
    store_q5(q, block + 2, block + 6);
    return;
  }
  const float d = extreme / -16.0f;
  const float inverse = block_inverse(d);
  vstore_half_rte(d, 0, (global half*)block);
  for (int i = 0; i < QK; ++i) q[i] = min(31, (int)(values[i] * inverse + 16.5f));
  store_q5(q, block + 2, block + 6);
}

// Work-item (b, r): block b of row r quantized to Q5_1: m = min, d = (max - min) / 31, q =
// min(31, trunc((x - min) / d + 0.5)), as quantize_row_q5_1.
kernel void cast_to_q5_1(global const uchar* src, ulong src_off, global uchar* dst, ulong dst_off,
                         int src_dtype, int n, int rows) {
  const int b = get_global_id(0);
  const int r = get_global_id(1);
  if (b >= n / QK || r >= rows) return;
  float values[QK];
  float lowest, highest;
  load_block(src, src_off, src_dtype, n, r, b, values, &lowest, &highest);
  global uchar* block = AT(uchar, dst, dst_off) + ((ulong)r * (n / QK) + b) * Q5_1_BYTES;
  int q[QK];
  if (!block_is_finite(values) || !isfinite(highest - lowest)) {
    *(global ushort*)block = HALF_NAN;
    *(global ushort*)(block + 2) = HALF_NAN;
    for (int i = 0; i < QK; ++i) q[i] = 0;
    store_q5(q, block + 4, block + 8);
    return;
  }
  const float d = (highest - lowest) / 31.0f;
  const float inverse = block_inverse(d);
  vstore_half_rte(d, 0, (global half*)block);
  vstore_half_rte(lowest, 1, (global half*)block);
  for (int i = 0; i < QK; ++i) q[i] = min(31, (int)((values[i] - lowest) * inverse + 0.5f));
  store_q5(q, block + 4, block + 8);
}
