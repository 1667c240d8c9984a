// GGML-compatible quantized block formats. A row of n elements is n/32 consecutive blocks (n/256
// for the K-quants), so GGUF tensors of these types map into tensors without conversion.
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgelm {

inline constexpr int kQ8_0BlockSize = 32;
inline constexpr int kQ4_0BlockSize = 32;
inline constexpr int kQ4_1BlockSize = 32;
inline constexpr int kQ5_0BlockSize = 32;
inline constexpr int kQ5_1BlockSize = 32;

// Q8_0: value[i] = qs[i] * d.
struct BlockQ8_0 {
  uint16_t d;  // scale, IEEE half
  int8_t qs[kQ8_0BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes (GGML layout)");

// Q4_0: element i (0..15) is the low nibble of qs[i], element i + 16 the high nibble;
// value = (nibble - 8) * d.
struct BlockQ4_0 {
  uint16_t d;  // scale, IEEE half
  uint8_t qs[kQ4_0BlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes (GGML layout)");

// Q4_1: nibbles as in Q4_0 (element i low, element i + 16 high nibble of qs[i]), unsigned, with an
// offset: value = nibble * d + m.
struct BlockQ4_1 {
  uint16_t d;  // scale, IEEE half
  uint16_t m;  // offset (the block's minimum), IEEE half
  uint8_t qs[kQ4_1BlockSize / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must be 20 bytes (GGML layout)");

// Q5_0: 5-bit quants q in 0..31, value = (q - 16) * d. The low four bits as the nibbles of Q4_0;
// the fifth bit of element i is bit i of qh read as a little-endian uint32 (elements 16..31: bits
// 16..31).
struct BlockQ5_0 {
  uint16_t d;  // scale, IEEE half
  uint8_t qh[4];
  uint8_t qs[kQ5_0BlockSize / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must be 22 bytes (GGML layout)");

// Q5_1: the quants of Q5_0, unsigned, with an offset: value = q * d + m.
struct BlockQ5_1 {
  uint16_t d;  // scale, IEEE half
  uint16_t m;  // offset (the block's minimum), IEEE half
  uint8_t qh[4];
  uint8_t qs[kQ5_1BlockSize / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must be 24 bytes (GGML layout)");

// The GGML "K-quant" formats of GGUF files (Q4_K, Q5_K, Q6_K: what Q4_K_M, Q5_K_M and Q6_K files
// hold). All three group 256 elements into a super-block that stores one or two fp16 factors and
// small per-sub-block scales. Field order and sizes are those of ggml's block_q4_K / block_q5_K /
// block_q6_K, which GGUF files store unchanged; the element order inside a block and the 6-bit
// scale packing are restated in core/quant_k.cpp next to the code that applies them.
inline constexpr int kKQuantBlockSize = 256;  // elements per super-block (QK_K in ggml)
inline constexpr int kKQuantScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K/Q5_K

// Q4_K: 8 sub-blocks of 32 elements; value = d * scale[s] * q - dmin * min[s], q in 0..15.
struct BlockQ4_K {
  uint16_t d;                         // fp16 factor of the sub-block scales
  uint16_t dmin;                      // fp16 factor of the sub-block mins
  uint8_t scales[kKQuantScaleBytes];  // 8 scales and 8 mins, 6 bits each, packed
  uint8_t qs[kKQuantBlockSize / 2];   // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes (GGML layout)");

// The eight 6-bit scales and mins of a Q4_K/Q5_K block's 12 packed bytes, one pair per sub-block
// s of 32 elements: for s < 4, scale = low 6 bits of byte s and min = low 6 bits of byte s + 4;
// for s >= 4, scale = low nibble of byte s + 4 and min = its high nibble, each topped by the two
// high bits of byte s - 4 (scale) or byte s (min), the bits sub-blocks 0..3 leave free. Out of
// line, so the SIMD kernel files call it too (backends/cpu/x86/x86.h says why not inline).
struct KScales {
  uint8_t scale[8];
  uint8_t min[8];
};
void unpack_k_scales(const uint8_t* packed, KScales& out);

// Q5_K: Q4_K with a fifth bit per element; q in 0..31.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKQuantScaleBytes];
  uint8_t qh[kKQuantBlockSize / 8];  // high (fifth) bits
  uint8_t qs[kKQuantBlockSize / 2];  // low 4 bits
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes (GGML layout)");

// Q6_K: 16 sub-blocks of 16 elements; value = d * scale[s] * (q - 32), q in 0..63.
struct BlockQ6_K {
  uint8_t ql[kKQuantBlockSize / 2];      // low 4 bits
  uint8_t qh[kKQuantBlockSize / 4];      // high 2 bits
  int8_t scales[kKQuantBlockSize / 16];  // signed 8-bit sub-block scales
  uint16_t d;                            // fp16 super-block factor, stored last
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes (GGML layout)");

// Q4_0x8: block b of rows 8g..8g+7 of a Q4_0 matrix, interleaved so that a SIMD kernel reads one
// contiguous 144-byte record per block and gets one output row per 32-bit lane: d[r] is row r's
// scale, and the 4 bytes at qs[16·c + 4·r ... ] hold qs[4c..4c+3] of row r's block, for c < 4 —
// that is, for each chunk c of four bytes, the eight rows' chunks side by side. Nibble meaning as
// in Q4_0 (byte j: element j low, element j + 16 high). Records are ordered by K segment, then by
// group, then by block (x8_record_index): a segment holds kQ4_0x8SegmentBlocks blocks of every
// group (the last segment the remaining blocks), group after group. A matrix with K <= 2048 is
// one segment, group g's blocks following each other at index g·(K/32) + b. So each segment's
// records, starting N·(first column)·18/32 bytes in, are laid out as the Q4_0x8 matrix of its
// columns alone: the CPU backend multiplies a decode step's segments as separate matrices.
inline constexpr int kQ4_0x8Rows = 8;
struct BlockQ4_0x8 {
  uint16_t d[kQ4_0x8Rows];                       // scales of the 8 rows, IEEE half
  uint8_t qs[kQ4_0x8Rows * kQ4_0BlockSize / 2];  // [4 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ4_0x8) == kQ4_0x8Rows * sizeof(BlockQ4_0), "same bytes as Q4_0");

// Why segments: a decode GEMV reads one group's records while x stays in L1 for the next group. A
// group of a whole 8192-wide row (36 KiB of Q4_0x8) plus its 10 KiB of quantized x overflow the
// 32 KiB L1 of current x86 and ARM cores, so x would come from L2 on every group; one thread then
// streamed 1B's ffn_down 7-10 % slower than the 2048-wide matrices (Zen 4). The x86 decode kernels
// now read two groups at a time, each from its own half of the matrix (KernelTable::decode_pairs),
// so between two reads of the same x come two groups' records: with segments of 4096 values that
// was 36 KiB plus 5 KiB of x, and one thread streamed 1B's ffn_down 6-10 % slower than ffn_up
// again (Zen 5, 48 KiB L1; ffn_up's records read as 4096-wide rows were as slow). Segments of
// 2048 values (9 KiB of Q4_0x8 per group, 17 KiB of Q8_0x8) keep a pair's pass within L1
// (docs/performance.md).
inline constexpr int64_t kQ4_0x8SegmentBlocks = 64;

// Index of the record holding block b of row group g, in a repacked matrix of `groups` groups of
// `blocks` blocks per row and segments of `segment_blocks` blocks.
inline int64_t x8_record_index(int64_t groups, int64_t blocks, int64_t segment_blocks, int64_t g,
                               int64_t b) {
  const int64_t first = b - b % segment_blocks;  // the segment's first block
  const int64_t length = blocks - first < segment_blocks ? blocks - first : segment_blocks;
  return groups * first + g * length + (b - first);
}

// Repacks rows [0, rows) of a Q4_0 matrix with `blocks` blocks per row into Q4_0x8 (rows must be a
// multiple of 8), and back. Both are pure byte moves: unpack(repack(w)) == w.
void repack_q4_0_x8(const BlockQ4_0* src, BlockQ4_0x8* dst, int64_t rows, int64_t blocks);
void unpack_q4_0_x8(const BlockQ4_0x8* src, BlockQ4_0* dst, int64_t rows, int64_t blocks);
// Row `row` only, into `blocks` Q4_0 blocks (an embedding lookup in a tied, repacked output).
void unpack_row_q4_0_x8(const BlockQ4_0x8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ4_0* dst);

// Q8_0x8: block b of rows 8g..8g+7 of a Q8_0 matrix, interleaved the same way: d[r] is row r's
// scale, and the 4 bytes at qs[32·c + 4·r ... ] hold qs[4c..4c+3] of row r's block, for c < 8.
// Records are ordered by segments of kQ8_0x8SegmentBlocks blocks as for Q4_0x8 (K <= 2048: one
// segment, record (g, b) at index g·(K/32) + b).
inline constexpr int kQ8_0x8Rows = 8;
struct BlockQ8_0x8 {
  uint16_t d[kQ8_0x8Rows];                  // scales of the 8 rows, IEEE half
  int8_t qs[kQ8_0x8Rows * kQ8_0BlockSize];  // [8 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ8_0x8) == kQ8_0x8Rows * sizeof(BlockQ8_0), "same bytes as Q8_0");
inline constexpr int64_t kQ8_0x8SegmentBlocks = 64;

// Q8_0 <-> Q8_0x8, as for Q4_0x8: pure byte moves, rows a multiple of 8.
void repack_q8_0_x8(const BlockQ8_0* src, BlockQ8_0x8* dst, int64_t rows, int64_t blocks);
void unpack_q8_0_x8(const BlockQ8_0x8* src, BlockQ8_0* dst, int64_t rows, int64_t blocks);
void unpack_row_q8_0_x8(const BlockQ8_0x8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ8_0* dst);

// Q4_Kx8 and Q6_Kx8: super-block b of rows 8g..8g+7 of a Q4_K or Q6_K matrix, each field of the
// block cut into chunks stored as the eight rows' chunks side by side, [row][chunk bytes]: a SIMD
// kernel then loads one chunk of all eight rows at once, one row per lane, and reads a record
// front to back. The halves d and dmin are 2-byte chunks (d[r] is row r's d); Q4_K's 12 scale
// bytes are three 4-byte words (scales[32w + 4r ...]: word w of row r, still packed), its qs
// 4-byte chunks (qs[32c + 4r ...] holds qs[4c..4c+3] of row r); Q6_K's scales are 1-byte chunks
// (scales[8j + r] is row r's scales[j]), and its ql and qh 4-byte chunks in the order the kernel
// reads them: step 8h + c of q (h the half of 128 elements, c < 8) holds, 32 bytes each, ql chunk
// 16h + c, ql chunk 16h + 8 + c and qh chunk 8h + c (ql[64h + 4c ..], ql[64h + 32 + 4c ..],
// qh[32h + 4c ..]: the quants of elements 4c.. of each of the half's four quarters). Reading
// Q6_K's fields one after the other instead (three streams a record) took the AVX-512 decode
// twice the stored layout's time once the weights were out of L2. Pure byte moves, the same
// bytes as eight blocks. Records are ordered by K segments of kKx8SegmentBlocks super-blocks as
// Q4_0x8's (x8_record_index; K <= 2048: one segment, record (g, b) at index g·(K/256) + b).
inline constexpr int kKx8Rows = 8;
struct BlockQ4_Kx8 {
  uint16_t d[kKx8Rows];                          // fp16 factors of the sub-block scales
  uint16_t dmin[kKx8Rows];                       // fp16 factors of the sub-block mins
  uint8_t scales[kKx8Rows * kKQuantScaleBytes];  // [3 words][8 rows][4 bytes], packed as stored
  uint8_t qs[kKx8Rows * kKQuantBlockSize / 2];   // [32 chunks][8 rows][4 bytes]
};
static_assert(sizeof(BlockQ4_Kx8) == kKx8Rows * sizeof(BlockQ4_K), "same bytes as Q4_K");
inline constexpr size_t kQ6_Kx8StepBytes = 3 * kKx8Rows * 4;  // 96: two ql chunks, a qh chunk
struct BlockQ6_Kx8 {
  uint8_t q[16 * kQ6_Kx8StepBytes];                 // [16 steps][ql, ql, qh][8 rows][4 bytes]
  int8_t scales[kKx8Rows * kKQuantBlockSize / 16];  // [16 sub-blocks][8 rows]
  uint16_t d[kKx8Rows];                             // fp16 super-block factors
};
static_assert(sizeof(BlockQ6_Kx8) == kKx8Rows * sizeof(BlockQ6_K), "same bytes as Q6_K");
// 2048 values per segment, as Q4_0x8 (the L1 argument there): 9 KiB of Q4_Kx8 per group.
inline constexpr int64_t kKx8SegmentBlocks = 8;

// Q4_K <-> Q4_Kx8 and Q6_K <-> Q6_Kx8, as for Q4_0x8: pure byte moves, rows a multiple of 8,
// `blocks` super-blocks per row.
void repack_q4_k_x8(const BlockQ4_K* src, BlockQ4_Kx8* dst, int64_t rows, int64_t blocks);
void unpack_q4_k_x8(const BlockQ4_Kx8* src, BlockQ4_K* dst, int64_t rows, int64_t blocks);
void unpack_row_q4_k_x8(const BlockQ4_Kx8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ4_K* dst);
void repack_q6_k_x8(const BlockQ6_K* src, BlockQ6_Kx8* dst, int64_t rows, int64_t blocks);
void unpack_q6_k_x8(const BlockQ6_Kx8* src, BlockQ6_K* dst, int64_t rows, int64_t blocks);
void unpack_row_q6_k_x8(const BlockQ6_Kx8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ6_K* dst);

// F16x4: an F16 matrix with groups of four rows interleaved 16 elements at a time, for the CPU's
// float matmul. Chunk c of group g holds elements 16c..16c+15 of rows 4g, 4g+1, 4g+2, 4g+3, one row
// after the other (64 halves, 128 bytes). As Q4_0x8, the matrix is stored in K segments of
// kF16x4SegmentElements columns (the last one shorter): a segment holds every group's chunks of
// its columns, group after group, and within a group the chunks follow each other (f16x4_index;
// as there, a segment is laid out as the F16x4 matrix of its columns alone). With K <= 2048 that is
// one segment: element k of row 4g + r at index (g·(K/16) + k/16)·64 + 16r + k % 16. A
// matrix-vector product then reads the weights as one sequential stream while each 16 elements of x
// serve four rows, and a segment of a group (16 KiB) leaves room in L1 for the 8 KiB of x it
// multiplies (a whole 8192-wide group is 64 KiB, and its x 32 KiB of floats). Not a quantized
// format, but a load-time layout like Q4_0x8, and declared beside it.
inline constexpr int kF16x4Rows = 4;
inline constexpr int kF16x4Chunk = 16;
inline constexpr int64_t kF16x4SegmentElements = 2048;

// Index (in halves) of the first element of group g's chunks in the K segment that starts at
// column `first` (a multiple of kF16x4SegmentElements), in an F16x4 matrix of N rows and K
// columns: the segment's chunks of that group follow from there, 64 halves apart.
inline int64_t f16x4_segment_index(int64_t N, int64_t K, int64_t g, int64_t first) {
  const int64_t length = K - first < kF16x4SegmentElements ? K - first : kF16x4SegmentElements;
  return N * first + g * kF16x4Rows * length;
}

// Index (in halves) of element k of row n, which starts a run of the 16 - k % 16 elements after it.
inline int64_t f16x4_index(int64_t N, int64_t K, int64_t n, int64_t k) {
  const int64_t first = k - k % kF16x4SegmentElements;
  return f16x4_segment_index(N, K, n / kF16x4Rows, first) +
         kF16x4Rows * (k - first - k % kF16x4Chunk) + (n % kF16x4Rows) * kF16x4Chunk +
         k % kF16x4Chunk;
}

// Repacks an F16 matrix of `rows` x `cols` half values (rows a multiple of 4, cols of 16) into
// F16x4, and back; pure moves: unpack(repack(w)) == w.
void repack_f16_x4(const uint16_t* src, uint16_t* dst, int64_t rows, int64_t cols);
void unpack_f16_x4(const uint16_t* src, uint16_t* dst, int64_t rows, int64_t cols);
// Row `row` only, into `cols` halves.
void unpack_row_f16_x4(const uint16_t* src, int64_t rows, int64_t cols, int64_t row, uint16_t* dst);

// Reference quantizers. n must be a multiple of 32. They reproduce GGML's reference rounding:
// Q8_0 scales by max|x|/127 and rounds half away from zero; Q4_0 and Q5_0 scale by (signed value
// of largest magnitude)/-8 and /-16 so that value maps to quant 0, and round half up; Q4_1 and
// Q5_1 store m = min and d = (max - min)/15 and /31, and round (x - min)/d half up. The reciprocal
// of d is taken in float from the unrounded d, as GGML does.
//
// Blocks GGML leaves undefined get a defined encoding: a block holding a NaN or an infinity is
// stored with a NaN scale and zero quants (Q4_1, Q5_1: m NaN too; so is a Q4_1/Q5_1 block whose
// max - min overflows float), so every element decodes to NaN; a block whose scale has no finite
// reciprocal (below the smallest normal float) gets zero quants: Q8_0, Q4_0 and Q5_0 decode it to
// zeros, Q4_1 and Q5_1 to m, the block's minimum rounded to half (zeros for a block of tiny values,
// the value itself for a constant block).
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);

// value = d * q (+ m) in float, as GGML's reference dequantizers compute it.
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);
// K-quant encoders: GGML's reference quantizers (quantize_row_q4_K_ref, _q5_K_ref, _q6_K_ref,
// what llama-quantize runs without an importance matrix), bit for bit for finite input
// (tests/fixtures/quant/ggml_k_quants.inc, made by GGML itself). Each sub-block's scale (and, for
// Q4_K and Q5_K, min) comes from a weighted search over candidate steps, and the scales are then
// rounded to the format's 6- or 8-bit multiples of the block's half factors. A block holding a
// NaN or an infinity, which GGML leaves undefined, is stored as the 32-value types store one: NaN
// d (and dmin), zero scales and quants, so it decodes to NaN. n a multiple of 256; throw
// edgelm::Error otherwise.
void quantize_row_q4_K(const float* x, void* y, int64_t n);
void quantize_row_q5_K(const float* x, void* y, int64_t n);
void quantize_row_q6_K(const float* x, void* y, int64_t n);
// n / 256 consecutive K-quant blocks to out[0..n), as ggml's reference dequantizers compute them.
// `blocks` needs no particular alignment. Throw edgelm::Error when n is negative or not a multiple
// of 256.
void dequantize_row_q4_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q5_K(const void* blocks, float* out, int64_t n);
void dequantize_row_q6_K(const void* blocks, float* out, int64_t n);
// The same values in double, as the formats define them, before any float rounding (d·scale·q -
// dmin·min is exact in double): what the portable matmul multiplies by.
void dequantize_row_q4_K_exact(const void* blocks, double* out, int64_t n);
void dequantize_row_q5_K_exact(const void* blocks, double* out, int64_t n);
void dequantize_row_q6_K_exact(const void* blocks, double* out, int64_t n);

}  // namespace edgelm
