// Helpers shared by every kernel family (prepended to each family's source at build time).
// OpenCL C 1.2. Tensors arrive as (global uchar* base, ulong byte offset) pairs, because a view
// may start anywhere in its buffer; AT() turns such a pair into a typed pointer.
#ifdef EDGELM_FP16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif

#define AT(type, base, offset) ((global type*)((global uchar*)(base) + (offset)))
#define AT_CONST(type, base, offset) ((global const type*)((global const uchar*)(base) + (offset)))

// GGML block formats: 32 values per block.
//   Q8_0: half d, char qs[32]               (34 bytes), value = qs[i] * d
//   Q4_0: half d, uchar qs[16]              (18 bytes), value = ((qs[i % 16] >> 4 * (i / 16)) & 15) - 8) * d
#define QK 32
#define Q8_0_BYTES 34
#define Q4_0_BYTES 18

// dtype codes, the order of edgelm::DType.
#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2
#define DT_Q8_0 3
#define DT_Q4_0 4
#define DT_I32 5

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

// Element i of a row of any weight dtype; `row` points at the row's first byte.
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
      const int j = i % QK;
      const int nibble = (block[2 + (j & 15)] >> ((j >> 4) * 4)) & 15;
      return vload_half(0, (global const half*)block) * (float)(nibble - 8);
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
