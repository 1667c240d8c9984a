#include "core/quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/half.h"

namespace edgelm {
namespace {

// A block holding a NaN or an infinity is stored with a NaN scale and zero quants, so it decodes
// to NaN: the bad value reaches the logits (where the sampler reports it) instead of turning into
// an arbitrary finite number through an out-of-range float-to-int conversion.
constexpr uint16_t kHalfNaN = 0x7e00;
// Scales below the smallest normal float have no finite reciprocal; such a block is below ~2^-119
// in magnitude and is stored as zeros (its half scale rounds to zero anyway).
constexpr float kMinNormal = std::numeric_limits<float>::min();

bool all_finite(const float* block) {
  bool finite = true;
  for (int i = 0; i < kQ8_0BlockSize; ++i) finite &= std::isfinite(block[i]);
  return finite;
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  EDGELM_CHECK(n % kQ8_0BlockSize == 0, "[quant] q8_0 row length ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const float* block = x + b * kQ8_0BlockSize;
    float max_abs = 0.0f;
    for (int i = 0; i < kQ8_0BlockSize; ++i) max_abs = std::max(max_abs, std::fabs(block[i]));
    if (!all_finite(block)) {
      y[b].d = kHalfNaN;
      std::fill(std::begin(y[b].qs), std::end(y[b].qs), int8_t{0});
      continue;
    }
    const float d = max_abs / 127.0f;
    const float inverse = d >= kMinNormal ? 1.0f / d : 0.0f;  // 1/d overflows below it
    y[b].d = f32_to_f16(d);
    for (int i = 0; i < kQ8_0BlockSize; ++i) {
      y[b].qs[i] = static_cast<int8_t>(std::round(block[i] * inverse));
    }
  }
}

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  EDGELM_CHECK(n % kQ4_0BlockSize == 0, "[quant] q4_0 row length ", n, " is not a multiple of 32");
  constexpr int kHalf = kQ4_0BlockSize / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
    const float* block = x + b * kQ4_0BlockSize;
    float max_abs = 0.0f;
    float extreme = 0.0f;  // the signed value with the largest magnitude (first one on ties)
    for (int i = 0; i < kQ4_0BlockSize; ++i) {
      if (std::fabs(block[i]) > max_abs) {
        max_abs = std::fabs(block[i]);
        extreme = block[i];
      }
    }
    if (!all_finite(block)) {
      y[b].d = kHalfNaN;
      std::fill(std::begin(y[b].qs), std::end(y[b].qs), uint8_t{0x88});
      continue;
    }
    const float d = extreme / -8.0f;
    const float inverse = std::fabs(d) >= kMinNormal ? 1.0f / d : 0.0f;  // 1/d overflows below it
    y[b].d = f32_to_f16(d);
    for (int i = 0; i < kHalf; ++i) {
      // x * inverse lies in [-8, 8]; adding 8.5 and truncating rounds half up into [0, 16].
      const int low = std::min(15, static_cast<int>(block[i] * inverse + 8.5f));
      const int high = std::min(15, static_cast<int>(block[i + kHalf] * inverse + 8.5f));
      y[b].qs[i] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

namespace {

// The smallest and largest value of a block of 32.
struct BlockRange {
  float min;
  float max;
};

BlockRange block_range(const float* block) {
  BlockRange range{block[0], block[0]};
  for (int i = 1; i < 32; ++i) {
    range.min = std::min(range.min, block[i]);
    range.max = std::max(range.max, block[i]);
  }
  return range;
}

// The signed value of largest magnitude (the first one on ties), as GGML's Q4_0 and Q5_0 take it.
float block_extreme(const float* block) {
  float max_abs = 0.0f;
  float extreme = 0.0f;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(block[i]) > max_abs) {
      max_abs = std::fabs(block[i]);
      extreme = block[i];
    }
  }
  return extreme;
}

// 1/d, or 0 where 1/d would overflow (|d| below the smallest normal float): the quants then all
// round to the same value.
float block_inverse(float d) {
  return std::fabs(d) >= kMinNormal ? 1.0f / d : 0.0f;
}

// Five-bit quants q[32] into the low nibbles (element i in byte i % 16, low half for i < 16) and
// the fifth bits (bit i of the little-endian uint32 qh).
void pack_5bit(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int i = 0; i < 16; ++i) {
    qs[i] = static_cast<uint8_t>((q[i] & 0x0f) | ((q[i + 16] & 0x0f) << 4));
    high |= static_cast<uint32_t>(q[i] >> 4) << i;
    high |= static_cast<uint32_t>(q[i + 16] >> 4) << (i + 16);
  }
  for (int byte = 0; byte < 4; ++byte) qh[byte] = static_cast<uint8_t>(high >> (8 * byte));
}

// Quant i of a block of 5-bit quants.
int unpack_5bit(const uint8_t* qs, const uint8_t* qh, int i) {
  const uint32_t high = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (static_cast<uint32_t>(qh[3]) << 24);
  const int nibble = i < 16 ? (qs[i] & 0x0f) : (qs[i - 16] >> 4);
  return nibble | static_cast<int>(((high >> i) & 1u) << 4);
}

// Quant of x in a block stored as value = q * d + m: trunc((x - min) / d + 0.5), at most `top`.
int offset_quant(float x, float min, float inverse, int top) {
  return std::min(top, static_cast<int>((x - min) * inverse + 0.5f));
}

}  // namespace

void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
  EDGELM_CHECK(n % kQ4_1BlockSize == 0, "[quant] q4_1 row length ", n, " is not a multiple of 32");
  constexpr int kHalf = kQ4_1BlockSize / 2;
  for (int64_t b = 0; b < n / kQ4_1BlockSize; ++b) {
    const float* block = x + b * kQ4_1BlockSize;
    const BlockRange range = block_range(block);
    // A range past the float maximum would make (x - min) / d an infinity times zero.
    if (!all_finite(block) || !std::isfinite(range.max - range.min)) {
      y[b].d = kHalfNaN;
      y[b].m = kHalfNaN;
      std::fill(std::begin(y[b].qs), std::end(y[b].qs), uint8_t{0});
      continue;
    }
    const float d = (range.max - range.min) / 15.0f;
    const float inverse = block_inverse(d);
    y[b].d = f32_to_f16(d);
    y[b].m = f32_to_f16(range.min);
    for (int i = 0; i < kHalf; ++i) {
      const int low = offset_quant(block[i], range.min, inverse, 15);
      const int high = offset_quant(block[i + kHalf], range.min, inverse, 15);
      y[b].qs[i] = static_cast<uint8_t>(low | (high << 4));
    }
  }
}

void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  EDGELM_CHECK(n % kQ5_0BlockSize == 0, "[quant] q5_0 row length ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kQ5_0BlockSize; ++b) {
    const float* block = x + b * kQ5_0BlockSize;
    int q[kQ5_0BlockSize];
    if (!all_finite(block)) {
      y[b].d = kHalfNaN;
      std::fill(std::begin(q), std::end(q), 16);  // the quant of zero
      pack_5bit(q, y[b].qs, y[b].qh);
      continue;
    }
    const float d = block_extreme(block) / -16.0f;
    const float inverse = block_inverse(d);
    y[b].d = f32_to_f16(d);
    // x * inverse lies in [-16, 16]; adding 16.5 and truncating rounds half up into [0, 32].
    for (int i = 0; i < kQ5_0BlockSize; ++i)
      q[i] = std::min(31, static_cast<int>(block[i] * inverse + 16.5f));
    pack_5bit(q, y[b].qs, y[b].qh);
  }
}

void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  EDGELM_CHECK(n % kQ5_1BlockSize == 0, "[quant] q5_1 row length ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kQ5_1BlockSize; ++b) {
    const float* block = x + b * kQ5_1BlockSize;
    const BlockRange range = block_range(block);
    int q[kQ5_1BlockSize] = {};
    if (!all_finite(block) || !std::isfinite(range.max - range.min)) {
      y[b].d = kHalfNaN;
      y[b].m = kHalfNaN;
      pack_5bit(q, y[b].qs, y[b].qh);
      continue;
    }
    const float d = (range.max - range.min) / 31.0f;
    const float inverse = block_inverse(d);
    y[b].d = f32_to_f16(d);
    y[b].m = f32_to_f16(range.min);
    // GGML does not clamp here: (max - min) / d is 31 up to a float rounding or two, so q <= 31
    // anyway; the clamp only says so.
    for (int i = 0; i < kQ5_1BlockSize; ++i) q[i] = offset_quant(block[i], range.min, inverse, 31);
    pack_5bit(q, y[b].qs, y[b].qh);
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  EDGELM_CHECK(n % kQ8_0BlockSize == 0, "[quant] q8_0 row length ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kQ8_0BlockSize; ++i) y[b * kQ8_0BlockSize + i] = x[b].qs[i] * d;
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  EDGELM_CHECK(n % kQ4_0BlockSize == 0, "[quant] q4_0 row length ", n, " is not a multiple of 32");
  constexpr int kHalf = kQ4_0BlockSize / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
    const float d = f16_to_f32(x[b].d);
    float* out = y + b * kQ4_0BlockSize;
    for (int i = 0; i < kHalf; ++i) {
      out[i] = static_cast<float>((x[b].qs[i] & 0x0f) - 8) * d;
      out[i + kHalf] = static_cast<float>((x[b].qs[i] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  EDGELM_CHECK(n % kQ4_1BlockSize == 0, "[quant] q4_1 row length ", n, " is not a multiple of 32");
  constexpr int kHalf = kQ4_1BlockSize / 2;
  for (int64_t b = 0; b < n / kQ4_1BlockSize; ++b) {
    const float d = f16_to_f32(x[b].d);
    const float m = f16_to_f32(x[b].m);
    float* out = y + b * kQ4_1BlockSize;
    for (int i = 0; i < kHalf; ++i) {
      out[i] = static_cast<float>(x[b].qs[i] & 0x0f) * d + m;
      out[i + kHalf] = static_cast<float>(x[b].qs[i] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  EDGELM_CHECK(n % kQ5_0BlockSize == 0, "[quant] q5_0 row length ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kQ5_0BlockSize; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int i = 0; i < kQ5_0BlockSize; ++i) {
      y[b * kQ5_0BlockSize + i] = static_cast<float>(unpack_5bit(x[b].qs, x[b].qh, i) - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  EDGELM_CHECK(n % kQ5_1BlockSize == 0, "[quant] q5_1 row length ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kQ5_1BlockSize; ++b) {
    const float d = f16_to_f32(x[b].d);
    const float m = f16_to_f32(x[b].m);
    for (int i = 0; i < kQ5_1BlockSize; ++i) {
      y[b * kQ5_1BlockSize + i] = static_cast<float>(unpack_5bit(x[b].qs, x[b].qh, i)) * d + m;
    }
  }
}

namespace {

// Interleaved records move 4-byte chunks of each row's block qs: chunk c of row r lands at
// qs[(c·8 + r)·4]. Q4_0 has 4 chunks per block (elements 4c..4c+3 and 4c+16..4c+19 as nibbles),
// Q8_0 has 8.
constexpr int kChunkBytes = 4;
constexpr int kRows = 8;
static_assert(kQ4_0x8Rows == kRows && kQ8_0x8Rows == kRows, "both records hold eight rows");

void check_x8_rows(int64_t rows, const char* name) {
  EDGELM_CHECK(rows % kRows == 0, "[quant] ", name, " needs a multiple of ", kRows, " rows, got ",
               rows);
}

template <class Block, class Record>
void repack_x8(const Block* src, Record* dst, int64_t rows, int64_t blocks, int64_t segment,
               const char* name) {
  check_x8_rows(rows, name);
  constexpr int kChunks = static_cast<int>(sizeof(Block::qs)) / kChunkBytes;
  const int64_t groups = rows / kRows;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < blocks; ++b) {
      Record& out = dst[x8_record_index(groups, blocks, segment, g, b)];
      for (int r = 0; r < kRows; ++r) {
        const Block& in = src[(g * kRows + r) * blocks + b];
        out.d[r] = in.d;
        for (int c = 0; c < kChunks; ++c) {
          std::memcpy(out.qs + (c * kRows + r) * kChunkBytes, in.qs + c * kChunkBytes, kChunkBytes);
        }
      }
    }
  }
}

// Row `row` of a repacked matrix of `groups` row groups into `blocks` blocks.
template <class Block, class Record>
void unpack_row_x8(const Record* src, int64_t groups, int64_t blocks, int64_t segment, int64_t row,
                   Block* dst) {
  constexpr int kChunks = static_cast<int>(sizeof(Block::qs)) / kChunkBytes;
  const int64_t g = row / kRows;
  const int r = static_cast<int>(row % kRows);
  for (int64_t b = 0; b < blocks; ++b) {
    const Record& in = src[x8_record_index(groups, blocks, segment, g, b)];
    Block& out = dst[b];
    out.d = in.d[r];
    for (int c = 0; c < kChunks; ++c)
      std::memcpy(out.qs + c * kChunkBytes, in.qs + (c * kRows + r) * kChunkBytes, kChunkBytes);
  }
}

template <class Block, class Record>
void unpack_x8(const Record* src, Block* dst, int64_t rows, int64_t blocks, int64_t segment,
               const char* name) {
  check_x8_rows(rows, name);
  for (int64_t row = 0; row < rows; ++row)
    unpack_row_x8(src, rows / kRows, blocks, segment, row, dst + row * blocks);
}

template <class Block, class Record>
void unpack_one_row_x8(const Record* src, int64_t rows, int64_t blocks, int64_t segment,
                       int64_t row, Block* dst, const char* name) {
  check_x8_rows(rows, name);
  EDGELM_CHECK(row >= 0 && row < rows, "[quant] ", name, ": row ", row, " outside [0, ", rows, ")");
  unpack_row_x8(src, rows / kRows, blocks, segment, row, dst);
}

// Calls move(plain, packed) for every 16-element chunk of an F16x4 matrix: the chunk starting at
// element `plain` of the row-major matrix starts at element `packed` of the interleaved one.
template <class Move>
void for_each_f16_x4(int64_t rows, int64_t cols, Move move) {
  EDGELM_CHECK(rows % kF16x4Rows == 0 && cols % kF16x4Chunk == 0, "[quant] f16x4 needs a multiple ",
               "of ", kF16x4Rows, " rows and of ", kF16x4Chunk, " columns, got ", rows, " x ",
               cols);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t k = 0; k < cols; k += kF16x4Chunk)
      move(row * cols + k, f16x4_index(rows, cols, row, k));
  }
}

// The K-quant records (Q4_Kx8, Q6_Kx8): each field of a block, `bytes` long at `offset`, is cut
// into chunks of `chunk` bytes; chunk j of the eight rows sits at place(j) in the record, row r's
// at place(j) + r·chunk.
struct KField {
  size_t offset, bytes, chunk;
  size_t (*place)(size_t j);
};
constexpr KField kQ4_KFields[] = {
    {offsetof(BlockQ4_K, d), 2, 2, [](size_t) { return offsetof(BlockQ4_Kx8, d); }},
    {offsetof(BlockQ4_K, dmin), 2, 2, [](size_t) { return offsetof(BlockQ4_Kx8, dmin); }},
    {offsetof(BlockQ4_K, scales), kKQuantScaleBytes, 4,
     [](size_t j) { return offsetof(BlockQ4_Kx8, scales) + 32 * j; }},
    {offsetof(BlockQ4_K, qs), kKQuantBlockSize / 2, 4,
     [](size_t j) { return offsetof(BlockQ4_Kx8, qs) + 32 * j; }}};
// Q6_K's ql chunk j = 16h + 8i + c (half h, i: the first or second 32 bytes of the half) and qh
// chunk 8h + c go to step 8h + c of BlockQ6_Kx8::q, at 0, 32 and 64 in it.
constexpr KField kQ6_KFields[] = {
    {offsetof(BlockQ6_K, ql), kKQuantBlockSize / 2, 4,
     [](size_t j) { return kQ6_Kx8StepBytes * (8 * (j / 16) + j % 8) + 32 * (j / 8 % 2); }},
    {offsetof(BlockQ6_K, qh), kKQuantBlockSize / 4, 4,
     [](size_t j) { return kQ6_Kx8StepBytes * j + 64; }},
    {offsetof(BlockQ6_K, scales), kKQuantBlockSize / 16, 1,
     [](size_t j) { return offsetof(BlockQ6_Kx8, scales) + 8 * j; }},
    {offsetof(BlockQ6_K, d), 2, 2, [](size_t) { return offsetof(BlockQ6_Kx8, d); }}};
static_assert(kKx8Rows == kRows, "the K-quant records hold eight rows too");

// A field's chunks' places, computed once (a call through place() per chunk made loading a 1B
// Q4_K_M file take seconds longer).
struct KFieldPlan {
  size_t offset, chunk, chunks;
  std::array<uint16_t, 32> places;
};
template <size_t kFields>
std::array<KFieldPlan, kFields> plan_fields(const KField (&fields)[kFields]) {
  std::array<KFieldPlan, kFields> plans{};
  for (size_t f = 0; f < kFields; ++f) {
    KFieldPlan& plan = plans[f];
    plan.offset = fields[f].offset;
    plan.chunk = fields[f].chunk;
    plan.chunks = fields[f].bytes / fields[f].chunk;
    EDGELM_CHECK(plan.chunks <= plan.places.size(), "[quant] a K-quant field of ", plan.chunks,
                 " chunks");
    for (size_t j = 0; j < plan.chunks; ++j)
      plan.places[j] = static_cast<uint16_t>(fields[f].place(j));
  }
  return plans;
}

// Calls move(plain, packed, bytes) for each chunk of a block of row r: `plain` its offset in the
// block, `packed` in the record, `bytes` a std::integral_constant (1, 2 or 4: a fixed-size copy).
template <size_t kFields, class Move>
void for_each_k_chunk(const std::array<KFieldPlan, kFields>& plans, int r, Move move) {
  const auto each = [&](const KFieldPlan& plan, auto bytes) {
    for (size_t j = 0; j < plan.chunks; ++j)
      move(plan.offset + j * bytes, plan.places[j] + r * bytes, bytes);
  };
  for (const KFieldPlan& plan : plans) {
    if (plan.chunk == 4) {
      each(plan, std::integral_constant<size_t, 4>{});
    } else if (plan.chunk == 2) {
      each(plan, std::integral_constant<size_t, 2>{});
    } else {
      each(plan, std::integral_constant<size_t, 1>{});
    }
  }
}

const std::array<KFieldPlan, 4>& q4_k_plan() {
  static const std::array<KFieldPlan, 4> plan = plan_fields(kQ4_KFields);
  return plan;
}
const std::array<KFieldPlan, 4>& q6_k_plan() {
  static const std::array<KFieldPlan, 4> plan = plan_fields(kQ6_KFields);
  return plan;
}

template <class Block, class Record, size_t kFields>
void repack_k_x8(const std::array<KFieldPlan, kFields>& fields, const Block* src, Record* dst,
                 int64_t rows, int64_t blocks, const char* name) {
  check_x8_rows(rows, name);
  const int64_t groups = rows / kRows;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < blocks; ++b) {
      auto* record = reinterpret_cast<uint8_t*>(
          &dst[x8_record_index(groups, blocks, kKx8SegmentBlocks, g, b)]);
      for (int r = 0; r < kRows; ++r) {
        const auto* block = reinterpret_cast<const uint8_t*>(&src[(g * kRows + r) * blocks + b]);
        for_each_k_chunk(fields, r, [&](size_t plain, size_t packed, auto bytes) {
          std::memcpy(record + packed, block + plain, bytes);
        });
      }
    }
  }
}

template <class Block, class Record, size_t kFields>
void unpack_row_k_x8(const std::array<KFieldPlan, kFields>& fields, const Record* src,
                     int64_t groups, int64_t blocks, int64_t row, Block* dst) {
  const int64_t g = row / kRows;
  const int r = static_cast<int>(row % kRows);
  for (int64_t b = 0; b < blocks; ++b) {
    const auto* record = reinterpret_cast<const uint8_t*>(
        &src[x8_record_index(groups, blocks, kKx8SegmentBlocks, g, b)]);
    auto* block = reinterpret_cast<uint8_t*>(&dst[b]);
    for_each_k_chunk(fields, r, [&](size_t plain, size_t packed, auto bytes) {
      std::memcpy(block + plain, record + packed, bytes);
    });
  }
}

template <class Block, class Record, size_t kFields>
void unpack_k_x8(const std::array<KFieldPlan, kFields>& fields, const Record* src, Block* dst,
                 int64_t rows, int64_t blocks, const char* name) {
  check_x8_rows(rows, name);
  for (int64_t row = 0; row < rows; ++row)
    unpack_row_k_x8(fields, src, rows / kRows, blocks, row, dst + row * blocks);
}

template <class Block, class Record, size_t kFields>
void unpack_one_row_k_x8(const std::array<KFieldPlan, kFields>& fields, const Record* src,
                         int64_t rows, int64_t blocks, int64_t row, Block* dst, const char* name) {
  check_x8_rows(rows, name);
  EDGELM_CHECK(row >= 0 && row < rows, "[quant] ", name, ": row ", row, " outside [0, ", rows, ")");
  unpack_row_k_x8(fields, src, rows / kRows, blocks, row, dst);
}

}  // namespace

void repack_f16_x4(const uint16_t* src, uint16_t* dst, int64_t rows, int64_t cols) {
  for_each_f16_x4(rows, cols, [&](int64_t plain, int64_t packed) {
    std::memcpy(dst + packed, src + plain, kF16x4Chunk * sizeof(uint16_t));
  });
}

void unpack_f16_x4(const uint16_t* src, uint16_t* dst, int64_t rows, int64_t cols) {
  for_each_f16_x4(rows, cols, [&](int64_t plain, int64_t packed) {
    std::memcpy(dst + plain, src + packed, kF16x4Chunk * sizeof(uint16_t));
  });
}

void unpack_row_f16_x4(const uint16_t* src, int64_t rows, int64_t cols, int64_t row,
                       uint16_t* dst) {
  EDGELM_CHECK(rows % kF16x4Rows == 0 && cols % kF16x4Chunk == 0 && row >= 0 && row < rows,
               "[quant] f16x4: row ", row, " of a ", rows, " x ", cols, " matrix");
  for (int64_t k = 0; k < cols; k += kF16x4Chunk) {
    std::memcpy(dst + k, src + f16x4_index(rows, cols, row, k), kF16x4Chunk * sizeof(uint16_t));
  }
}

void repack_q4_0_x8(const BlockQ4_0* src, BlockQ4_0x8* dst, int64_t rows, int64_t blocks) {
  repack_x8(src, dst, rows, blocks, kQ4_0x8SegmentBlocks, "q4_0x8");
}

void unpack_q4_0_x8(const BlockQ4_0x8* src, BlockQ4_0* dst, int64_t rows, int64_t blocks) {
  unpack_x8(src, dst, rows, blocks, kQ4_0x8SegmentBlocks, "q4_0x8");
}

void unpack_row_q4_0_x8(const BlockQ4_0x8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ4_0* dst) {
  unpack_one_row_x8(src, rows, blocks, kQ4_0x8SegmentBlocks, row, dst, "q4_0x8");
}

void repack_q8_0_x8(const BlockQ8_0* src, BlockQ8_0x8* dst, int64_t rows, int64_t blocks) {
  repack_x8(src, dst, rows, blocks, kQ8_0x8SegmentBlocks, "q8_0x8");
}

void unpack_q8_0_x8(const BlockQ8_0x8* src, BlockQ8_0* dst, int64_t rows, int64_t blocks) {
  unpack_x8(src, dst, rows, blocks, kQ8_0x8SegmentBlocks, "q8_0x8");
}

void unpack_row_q8_0_x8(const BlockQ8_0x8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ8_0* dst) {
  unpack_one_row_x8(src, rows, blocks, kQ8_0x8SegmentBlocks, row, dst, "q8_0x8");
}

void repack_q4_k_x8(const BlockQ4_K* src, BlockQ4_Kx8* dst, int64_t rows, int64_t blocks) {
  repack_k_x8(q4_k_plan(), src, dst, rows, blocks, "q4_kx8");
}

void unpack_q4_k_x8(const BlockQ4_Kx8* src, BlockQ4_K* dst, int64_t rows, int64_t blocks) {
  unpack_k_x8(q4_k_plan(), src, dst, rows, blocks, "q4_kx8");
}

void unpack_row_q4_k_x8(const BlockQ4_Kx8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ4_K* dst) {
  unpack_one_row_k_x8(q4_k_plan(), src, rows, blocks, row, dst, "q4_kx8");
}

void repack_q6_k_x8(const BlockQ6_K* src, BlockQ6_Kx8* dst, int64_t rows, int64_t blocks) {
  repack_k_x8(q6_k_plan(), src, dst, rows, blocks, "q6_kx8");
}

void unpack_q6_k_x8(const BlockQ6_Kx8* src, BlockQ6_K* dst, int64_t rows, int64_t blocks) {
  unpack_k_x8(q6_k_plan(), src, dst, rows, blocks, "q6_kx8");
}

void unpack_row_q6_k_x8(const BlockQ6_Kx8* src, int64_t rows, int64_t blocks, int64_t row,
                        BlockQ6_K* dst) {
  unpack_one_row_k_x8(q6_k_plan(), src, rows, blocks, row, dst, "q6_kx8");
}

}  // namespace edgelm
