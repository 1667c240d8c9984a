// Helpers shared by every kernel family (prepended to each family's source at build time).
// OpenCL C 1.2. Tensors arrive as (global uchar* base, ulong byte offset) pairs, because a view
// may start anywhere in its buffer; AT() turns such a pair into a typed pointer.
#ifdef EDGELM_FP16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif

#define AT(type, base, offset) ((global type*)((global uchar*)(base) + (offset)))
#define AT_CONST(type, base, offset) ((global const type*)((global const uchar*)(base) + (offset)))

// GGML block formats: 32 values per block. nibble(i) = (qs[i % 16] >> 4 * (i / 16)) & 15, and the
// 5-bit types add bit i of qh (a little-endian uint32) as bit 4: q5(i) = nibble(i) | qh_i << 4.
//   Q8_0: half d, char qs[32]                       (34 bytes), value = qs[i] * d
//   Q4_0: half d, uchar qs[16]                      (18 bytes), value = (nibble(i) - 8) * d
//   Q4_1: half d, half m, uchar qs[16]              (20 bytes), value = nibble(i) * d + m
//   Q5_0: half d, uchar qh[4], uchar qs[16]         (22 bytes), value = (q5(i) - 16) * d
//   Q5_1: half d, half m, uchar qh[4], uchar qs[16] (24 bytes), value = q5(i) * d + m
#define QK 32
#define Q8_0_BYTES 34
#define Q4_0_BYTES 18
#define Q4_1_BYTES 20
#define Q5_0_BYTES 22
#define Q5_1_BYTES 24

// GGML K-quant super-blocks: 256 values (core/quant.h, element order in core/quant_k.cpp).
//   Q4_K: half d, half dmin, uchar scales[12], uchar qs[128]               (144 bytes)
//   Q5_K: half d, half dmin, uchar scales[12], uchar qh[32], uchar qs[128] (176 bytes)
//   Q6_K: uchar ql[128], uchar qh[64], char scales[16], half d             (210 bytes)
// Q4_K/Q5_K: element i is in sub-block s = i / 32 (l = i % 32); its 4 low bits are the low
// (s even) or high (s odd) nibble of qs[32 * (s / 2) + l], Q5_K's fifth bit is bit s of qh[l], and
// value = d * scale[s] * q - dmin * min[s] with the 6-bit scale and min of k_scale_min.
// Q6_K: element i = 128 * h + 32 * k + l takes its low 4 bits from ql[64 * h + 32 * (k % 2) + l]
// (low nibble for k < 2, high for k >= 2) and its top 2 bits from bits 2k, 2k + 1 of
// qh[32 * h + l]; value = d * scales[i / 16] * (q - 32).
#define QK_K 256
#define Q4_K_BYTES 144
#define Q5_K_BYTES 176
#define Q6_K_BYTES 210

// dtype codes, the order of edgelm::DType (core/dtype.h).
#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_Q8_0 3
#define DT_Q4_0 4
#define DT_Q4_1 5
#define DT_Q5_0 6
#define DT_Q5_1 7
#define DT_I32 8
// 9-11 (Q4_0x8, Q8_0x8, F16x4) are the CPU's load-time layouts; OpenCL never sees them.
#define DT_Q4_K 12
#define DT_Q5_K 13
#define DT_Q6_K 14
// 15-16 (Q4_Kx8, Q6_Kx8) are the CPU's load-time layouts too.

inline float bf16_to_float(ushort bits) { return as_float(((uint)bits) << 16); }

// Round to nearest even, as edgelm::f32_to_bf16; a NaN is truncated and stays a NaN.
inline ushort float_to_bf16(float value) {
  const uint bits = as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    uint top = bits >> 16;
    if ((top & 0x7fu) == 0) top |= 0x40u;
    return (ushort)top;
  }
  const uint rounding = 0x7fffu + ((bits >> 16) & 1u);
  return (ushort)((bits + rounding) >> 16);
}

// Quant j (0..31) of a block's 4-bit nibbles `qs`.
inline int block_nibble(global const uchar* qs, int j) {
  return (qs[j & 15] >> ((j >> 4) * 4)) & 15;
}

// Quant j (0..31) of a 5-bit block: its nibble and bit j of the little-endian uint32 at `qh`.
inline int block_q5(global const uchar* qh, global const uchar* qs, int j) {
  return block_nibble(qs, j) | (((qh[j >> 3] >> (j & 7)) & 1) << 4);
}

// The 6-bit scale (x) and min (y) of sub-block s (0..7) of a Q4_K or Q5_K block, from its 12
// packed bytes `sc`: for s < 4 the low 6 bits of bytes s and s + 4; for s >= 4 the low and high
// nibbles of byte s + 4, topped by the two high bits of bytes s - 4 and s.
inline int2 k_scale_min(global const uchar* sc, int s) {
  if (s < 4) return (int2)(sc[s] & 63, sc[s + 4] & 63);
  return (int2)((sc[s + 4] & 15) | ((sc[s - 4] >> 6) << 4),
                (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4));
}

// Element j (0..255) of a Q4_K (five = false) or Q5_K block. d·scale, dmin·min and d·scale·q are
// exact in float (at most 22 significant bits), so the one rounding is that of the difference, as
// in the CPU's dequantize_row_q4_K / q5_K.
inline float k45_element(global const uchar* block, bool five, int j) {
  const int s = j / 32;
  const int l = j % 32;
  const int2 sm = k_scale_min(block + 4, s);
  int q = (block[(five ? 48 : 16) + 32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
  if (five) q |= ((block[16 + l] >> s) & 1) << 4;
  const float scale = vload_half(0, (global const half*)block) * (float)sm.x;
  const float min = vload_half(1, (global const half*)block) * (float)sm.y;
  return scale * (float)q - min;
}

// Element j (0..255) of a Q6_K block; d·scale·(q - 32) is exact in float (at most 24 bits).
inline float q6_k_element(global const uchar* block, int j) {
  const int h = j / 128;
  const int k = (j % 128) / 32;
  const int l = j % 32;
  const int low = (block[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
  const int high = (block[128 + 32 * h + l] >> (2 * k)) & 3;
  const float d = vload_half(0, (global const half*)(block + 208));
  return d * (float)((char)block[192 + j / 16]) * (float)((low | (high << 4)) - 32);
}

// Element i of a row of any weight dtype; `row` points at the row's first byte. q·d is exact in
// float (at most 16 significant bits), so a contracted q·d + m rounds as the CPU's does.
inline float load_element(global const uchar* row, int dtype, int i) {
  switch (dtype) {
    case DT_F32:
      return ((global const float*)row)[i];
    case DT_F16:
      return vload_half(i, (global const half*)row);
    case DT_BF16:
      return bf16_to_float(((global const ushort*)row)[i]);
    case DT_Q8_0: {
      global const uchar* block = row + (i / QK) * Q8_0_BYTES;
      return vload_half(0, (global const half*)block) * (float)((char)block[2 + i % QK]);
    }
    case DT_Q4_0: {
      global const uchar* block = row + (i / QK) * Q4_0_BYTES;
      const int nibble = block_nibble(block + 2, i % QK);
      return vload_half(0, (global const half*)block) * (float)(nibble - 8);
    }
    case DT_Q4_1: {
      global const uchar* block = row + (i / QK) * Q4_1_BYTES;
      const int nibble = block_nibble(block + 4, i % QK);
      return vload_half(0, (global const half*)block) * (float)nibble +
             vload_half(1, (global const half*)block);
    }
    case DT_Q5_0: {
      global const uchar* block = row + (i / QK) * Q5_0_BYTES;
      const int q = block_q5(block + 2, block + 6, i % QK);
      return vload_half(0, (global const half*)block) * (float)(q - 16);
    }
    case DT_Q5_1: {
      global const uchar* block = row + (i / QK) * Q5_1_BYTES;
      const int q = block_q5(block + 4, block + 8, i % QK);
      return vload_half(0, (global const half*)block) * (float)q +
             vload_half(1, (global const half*)block);
    }
    case DT_Q4_K:
      return k45_element(row + (i / QK_K) * Q4_K_BYTES, false, i % QK_K);
    case DT_Q5_K:
      return k45_element(row + (i / QK_K) * Q5_K_BYTES, true, i % QK_K);
    case DT_Q6_K:
      return q6_k_element(row + (i / QK_K) * Q6_K_BYTES, i % QK_K);
    default:
      return 0.0f;
  }
}

// Bytes of a row of n elements (n a multiple of 32 for the block types, of 256 for the K-quants).
inline ulong row_bytes(int dtype, int n) {
  switch (dtype) {
    case DT_F16:
    case DT_BF16:
      return (ulong)n * 2;
    case DT_Q8_0:
      return (ulong)(n / QK) * Q8_0_BYTES;
    case DT_Q4_0:
      return (ulong)(n / QK) * Q4_0_BYTES;
    case DT_Q4_1:
      return (ulong)(n / QK) * Q4_1_BYTES;
    case DT_Q5_0:
      return (ulong)(n / QK) * Q5_0_BYTES;
    case DT_Q5_1:
      return (ulong)(n / QK) * Q5_1_BYTES;
    case DT_Q4_K:
      return (ulong)(n / QK_K) * Q4_K_BYTES;
    case DT_Q5_K:
      return (ulong)(n / QK_K) * Q5_K_BYTES;
    case DT_Q6_K:
      return (ulong)(n / QK_K) * Q6_K_BYTES;
    default:
      return (ulong)n * 4;
  }
}

// Sum of `value` over the work-group (1-D, size a power of two up to 1024, `scratch` holds one
// float per work-item). Every work-item gets the sum.
inline float group_sum(float value, local float* scratch) {
  const int lid = get_local_id(0);
  const int size = get_local_size(0);
  scratch[lid] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = size / 2; stride > 0; stride /= 2) {
    if (lid < stride) scratch[lid] += scratch[lid + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float sum = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return sum;
}

inline float group_max(float value, local float* scratch) {
  const int lid = get_local_id(0);
  const int size = get_local_size(0);
  scratch[lid] = value;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = size / 2; stride > 0; stride /= 2) {
    if (lid < stride) scratch[lid] = fmax(scratch[lid], scratch[lid + stride]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float result = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return result;
}
