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
    default:
      return 0.0f;
  }
}

// Bytes of a row of n elements (n a multiple of 32 for the block types).
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
