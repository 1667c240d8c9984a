// Reference matmul: y = x · Wᵀ for every weight dtype. Weights are decoded element by element and
// every dot product is accumulated in double, so the result is the exact product of x and the
// dequantized weights up to one final rounding.
#include <vector>

#include "backends/cpu/portable/portable.h"
#include "core/half.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

// Generic loop; decode(row, k) returns element k of weight row `row` as float.
template <class Decode>
void matmul_rows(const float* x, float* y, int64_t M, int64_t N, int64_t K, int64_t n_begin,
                 int64_t n_end, Decode decode) {
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      const float* x_row = x + m * K;  // [K]
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(x_row[k]) * decode(n, k);
      y[m * N + n] = static_cast<float>(sum);
    }
  }
}

}  // namespace

void f32_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end) {
  const auto* weights = static_cast<const float*>(w);  // [N, K]
  matmul_rows(x, y, M, N, K, n_begin, n_end,
              [&](int64_t n, int64_t k) { return static_cast<double>(weights[n * K + k]); });
}

void f16_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                          int64_t n_begin, int64_t n_end) {
  const auto* weights = static_cast<const uint16_t*>(w);  // [N, K] half bits
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    return static_cast<double>(f16_to_f32(weights[n * K + k]));
  });
}

void bf16_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  const auto* weights = static_cast<const uint16_t*>(w);  // [N, K] bfloat16 bits
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    return static_cast<double>(bf16_to_f32(weights[n * K + k]));
  });
}

void q8_0_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const BlockQ8_0*>(w);  // [N, K / 32]
  const int64_t blocks_per_row = K / kQ8_0BlockSize;
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    const BlockQ8_0& block = blocks[n * blocks_per_row + k / kQ8_0BlockSize];
    return static_cast<double>(f16_to_f32(block.d)) * block.qs[k % kQ8_0BlockSize];
  });
}

void q4_0_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const BlockQ4_0*>(w);  // [N, K / 32]
  const int64_t blocks_per_row = K / kQ4_0BlockSize;
  constexpr int kHalf = kQ4_0BlockSize / 2;
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    const BlockQ4_0& block = blocks[n * blocks_per_row + k / kQ4_0BlockSize];
    const int i = static_cast<int>(k % kQ4_0BlockSize);
    const int nibble = i < kHalf ? (block.qs[i] & 0x0f) : (block.qs[i - kHalf] >> 4);
    return static_cast<double>(f16_to_f32(block.d)) * (nibble - 8);
  });
}

// The offset types decode q·d + m in double, which is exact (q·d has at most 16 significant bits),
// so the product is that of x and the blocks' values as written, before any float rounding.
void q4_1_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const BlockQ4_1*>(w);  // [N, K / 32]
  const int64_t blocks_per_row = K / kQ4_1BlockSize;
  constexpr int kHalf = kQ4_1BlockSize / 2;
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    const BlockQ4_1& block = blocks[n * blocks_per_row + k / kQ4_1BlockSize];
    const int i = static_cast<int>(k % kQ4_1BlockSize);
    const int nibble = i < kHalf ? (block.qs[i] & 0x0f) : (block.qs[i - kHalf] >> 4);
    return static_cast<double>(f16_to_f32(block.d)) * nibble + f16_to_f32(block.m);
  });
}

namespace {

// Quant i (0..31) of a Q5_0 or Q5_1 block: the nibble, and bit i of qh as a little-endian uint32.
int five_bit_quant(const uint8_t* qs, const uint8_t* qh, int i) {
  const int nibble = i < 16 ? (qs[i] & 0x0f) : (qs[i - 16] >> 4);
  return nibble | (((qh[i / 8] >> (i % 8)) & 1) << 4);
}

}  // namespace

void q5_0_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const BlockQ5_0*>(w);  // [N, K / 32]
  const int64_t blocks_per_row = K / kQ5_0BlockSize;
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    const BlockQ5_0& block = blocks[n * blocks_per_row + k / kQ5_0BlockSize];
    const int q = five_bit_quant(block.qs, block.qh, static_cast<int>(k % kQ5_0BlockSize));
    return static_cast<double>(f16_to_f32(block.d)) * (q - 16);
  });
}

void q5_1_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const BlockQ5_1*>(w);  // [N, K / 32]
  const int64_t blocks_per_row = K / kQ5_1BlockSize;
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    const BlockQ5_1& block = blocks[n * blocks_per_row + k / kQ5_1BlockSize];
    const int q = five_bit_quant(block.qs, block.qh, static_cast<int>(k % kQ5_1BlockSize));
    return static_cast<double>(f16_to_f32(block.d)) * q + f16_to_f32(block.m);
  });
}

namespace {

// The K-quants: each weight row decoded exactly (in double) once, then multiplied by every row of
// x. The decoded row lives in a per-thread buffer that grows to the longest row seen. row_at(n)
// gives row n's K / 256 super-blocks as stored.
template <class RowAt>
void k_quant_matmul(const float* x, float* y, int64_t M, int64_t N, int64_t K, int64_t n_begin,
                    int64_t n_end, void (*decode)(const void*, double*, int64_t), RowAt row_at) {
  thread_local std::vector<double> row;
  if (static_cast<int64_t>(row.size()) < K) row.resize(static_cast<size_t>(K));
  for (int64_t n = n_begin; n < n_end; ++n) {
    decode(row_at(n), row.data(), K);
    for (int64_t m = 0; m < M; ++m) {
      const float* x_row = x + m * K;  // [K]
      double sum = 0.0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(x_row[k]) * row[k];
      y[m * N + n] = static_cast<float>(sum);
    }
  }
}

// Rows of a K-quant matrix as stored: row n at n·(K / 256) blocks.
template <class Block>
void stored_k_quant_matmul(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end,
                           void (*decode)(const void*, double*, int64_t)) {
  const auto* blocks = static_cast<const Block*>(w);  // [N, K / 256]
  k_quant_matmul(x, y, M, N, K, n_begin, n_end, decode,
                 [&](int64_t n) { return blocks + n * (K / kKQuantBlockSize); });
}

// Rows of a Q4_Kx8 / Q6_Kx8 matrix, each unpacked into its stored blocks first.
template <class Block, class Record>
void interleaved_k_quant_matmul(const float* x, const void* w, float* y, int64_t M, int64_t N,
                                int64_t K, int64_t n_begin, int64_t n_end,
                                void (*decode)(const void*, double*, int64_t),
                                void (*unpack_row)(const Record*, int64_t, int64_t, int64_t,
                                                   Block*)) {
  thread_local std::vector<Block> blocks;
  blocks.resize(static_cast<size_t>(K / kKQuantBlockSize));
  k_quant_matmul(x, y, M, N, K, n_begin, n_end, decode, [&](int64_t n) {
    unpack_row(static_cast<const Record*>(w), N, K / kKQuantBlockSize, n, blocks.data());
    return blocks.data();
  });
}

}  // namespace

void q4_k_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  stored_k_quant_matmul<BlockQ4_K>(x, w, y, M, N, K, n_begin, n_end, dequantize_row_q4_K_exact);
}

void q5_k_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  stored_k_quant_matmul<BlockQ5_K>(x, w, y, M, N, K, n_begin, n_end, dequantize_row_q5_K_exact);
}

void q6_k_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                           int64_t n_begin, int64_t n_end) {
  stored_k_quant_matmul<BlockQ6_K>(x, w, y, M, N, K, n_begin, n_end, dequantize_row_q6_K_exact);
}

void q4_kx8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end) {
  interleaved_k_quant_matmul<BlockQ4_K, BlockQ4_Kx8>(x, w, y, M, N, K, n_begin, n_end,
                                                     dequantize_row_q4_K_exact, unpack_row_q4_k_x8);
}

void q6_kx8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end) {
  interleaved_k_quant_matmul<BlockQ6_K, BlockQ6_Kx8>(x, w, y, M, N, K, n_begin, n_end,
                                                     dequantize_row_q6_K_exact, unpack_row_q6_k_x8);
}

void q4_0x8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end) {
  const auto* records = static_cast<const BlockQ4_0x8*>(w);  // N / 8 groups, in K segments
  const int64_t blocks_per_row = K / kQ4_0BlockSize;
  constexpr int kHalf = kQ4_0BlockSize / 2;
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    const BlockQ4_0x8& record =
        records[x8_record_index(N / kQ4_0x8Rows, blocks_per_row, kQ4_0x8SegmentBlocks,
                                n / kQ4_0x8Rows, k / kQ4_0BlockSize)];
    const auto r = static_cast<int>(n % kQ4_0x8Rows);
    const int i = static_cast<int>(k % kQ4_0BlockSize);
    const int j = i % kHalf;  // byte j of the row's block: chunk j / 4, byte j % 4 of it
    const uint8_t byte = record.qs[(j / 4 * kQ4_0x8Rows + r) * 4 + j % 4];
    const int nibble = i < kHalf ? (byte & 0x0f) : (byte >> 4);
    return static_cast<double>(f16_to_f32(record.d[r])) * (nibble - 8);
  });
}

void f16x4_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                            int64_t K, int64_t n_begin, int64_t n_end) {
  const auto* halves = static_cast<const uint16_t*>(w);  // K segments of [N / 4, chunks, 4, 16]
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    return static_cast<double>(f16_to_f32(halves[f16x4_index(N, K, n, k)]));
  });
}

void q8_0x8_matmul__portable(const float* x, const void* w, float* y, int64_t M, int64_t N,
                             int64_t K, int64_t n_begin, int64_t n_end) {
  const auto* records = static_cast<const BlockQ8_0x8*>(w);  // N / 8 groups, in K segments
  const int64_t blocks_per_row = K / kQ8_0BlockSize;
  matmul_rows(x, y, M, N, K, n_begin, n_end, [&](int64_t n, int64_t k) {
    const BlockQ8_0x8& record =
        records[x8_record_index(N / kQ8_0x8Rows, blocks_per_row, kQ8_0x8SegmentBlocks,
                                n / kQ8_0x8Rows, k / kQ8_0BlockSize)];
    const auto r = static_cast<int>(n % kQ8_0x8Rows);
    const int i = static_cast<int>(k % kQ8_0BlockSize);  // chunk i / 4, byte i % 4 of it
    return static_cast<double>(f16_to_f32(record.d[r])) *
           record.qs[(i / 4 * kQ8_0x8Rows + r) * 4 + i % 4];
  });
}

}  // namespace edgelm::cpu
