// The CPU backend's load-time weight layouts (core/quant.h): Q4_0x8, Q8_0x8, Q4_Kx8 and Q6_Kx8
// interleave eight rows' blocks, F16x4 four rows' 16-column chunks; each repack is checked byte for
// byte against the layout's definition, unpacked back, and refused on shapes that are not whole
// groups.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/quant.h"

namespace edgelm {
namespace {

// Q4_0x8 and Q8_0x8 move bytes only: a record holds block b of rows 8g..8g+7, scales first, then
// for each four-byte chunk c the eight rows' chunks side by side; records come in K segments of
// `segment` blocks (the last one shorter), each holding every group's blocks of it, group after
// group. Unpacking restores every byte, and row counts that are not whole groups of eight are
// refused. Checked with one segment (3 blocks) and with three (2·segment + 3 blocks).
template <class Block, class Record, class Repack, class Unpack>
void check_x8_repack(Repack repack, Unpack unpack, int64_t segment) {
  constexpr int64_t kRows = 16;
  constexpr int64_t kGroups = kRows / 8;
  constexpr int kBytes = static_cast<int>(sizeof(Block::qs));
  for (const int64_t blocks : {int64_t{3}, 2 * segment + 3}) {
    std::mt19937 rng(5);
    std::vector<Block> rows(static_cast<size_t>(kRows * blocks));
    for (Block& block : rows) {
      block.d = static_cast<uint16_t>(rng());
      for (auto& byte : block.qs)
        byte = static_cast<std::remove_reference_t<decltype(byte)>>(rng());
    }
    std::vector<Record> packed(static_cast<size_t>(kGroups * blocks));
    repack(rows.data(), packed.data(), kRows, blocks);
    for (int64_t g = 0; g < kGroups; ++g) {
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t s = b / segment;
        const int64_t in_segment = s < blocks / segment ? segment : blocks % segment;
        const Record& record = packed[kGroups * s * segment + g * in_segment + b % segment];
        for (int r = 0; r < 8; ++r) {
          const Block& block = rows[(g * 8 + r) * blocks + b];
          ASSERT_EQ(record.d[r], block.d)
              << "blocks " << blocks << " group " << g << " block " << b;
          for (int j = 0; j < kBytes; ++j) {
            ASSERT_EQ(record.qs[(j / 4 * 8 + r) * 4 + j % 4], block.qs[j]) << "byte " << j;
          }
        }
      }
    }
    std::vector<Block> unpacked(rows.size());
    unpack(packed.data(), unpacked.data(), kRows, blocks);
    EXPECT_EQ(std::memcmp(unpacked.data(), rows.data(), rows.size() * sizeof(Block)), 0);
    for (const int64_t bad_rows : {1, 7, 12}) {
      EXPECT_THROW(repack(rows.data(), packed.data(), bad_rows, blocks), Error);
      EXPECT_THROW(unpack(packed.data(), unpacked.data(), bad_rows, blocks), Error);
    }
  }
}

TEST(QuantTest, Q4_0x8RepackInterleavesEightRowsAndRoundTrips) {
  static_assert(kQ4_0x8Rows == 8 && kQ4_0x8SegmentBlocks == 64);
  check_x8_repack<BlockQ4_0, BlockQ4_0x8>(repack_q4_0_x8, unpack_q4_0_x8, 64);
}

TEST(QuantTest, Q8_0x8RepackInterleavesEightRowsAndRoundTrips) {
  static_assert(kQ8_0x8Rows == 8 && kQ8_0x8SegmentBlocks == 64);
  check_x8_repack<BlockQ8_0, BlockQ8_0x8>(repack_q8_0_x8, unpack_q8_0_x8, 64);
}

// Q4_Kx8 and Q6_Kx8 move bytes only: a record holds super-block b of rows 8g..8g+7, each field of
// the block cut into chunks and the eight rows' chunk j side by side at place(j) (Q4_K: d, dmin in
// 2 bytes, the 12 scale bytes and 128 qs in 4, in the block's order; Q6_K: ql and qh in 4,
// interleaved in steps of 96 bytes, then the 16 scales in 1, d in 2); records come in K segments
// of 8 super-blocks as above. Unpacking, of the whole matrix or of one row, restores every byte.
// Checked with one segment (3 super-blocks) and three (19).
struct KFieldLayout {
  int bytes, chunk;
  size_t (*place)(size_t j);
};

template <class Block, class Record, class Repack, class Unpack, class UnpackRow>
void check_k_x8_repack(Repack repack, Unpack unpack, UnpackRow unpack_row,
                       std::initializer_list<KFieldLayout> fields) {
  constexpr int64_t kRows = 16;
  constexpr int64_t kGroups = kRows / 8;
  constexpr int64_t kSegment = 8;
  static_assert(kKx8SegmentBlocks == kSegment && kKx8Rows == 8);
  for (const int64_t blocks : {int64_t{3}, 2 * kSegment + 3}) {
    std::mt19937 rng(7);
    std::vector<Block> rows(static_cast<size_t>(kRows * blocks));
    auto* row_bytes = reinterpret_cast<uint8_t*>(rows.data());
    for (size_t i = 0; i < rows.size() * sizeof(Block); ++i)
      row_bytes[i] = static_cast<uint8_t>(rng());
    std::vector<Record> packed(static_cast<size_t>(kGroups * blocks));
    repack(rows.data(), packed.data(), kRows, blocks);
    for (int64_t g = 0; g < kGroups; ++g) {
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t s = b / kSegment;
        const int64_t in_segment = s < blocks / kSegment ? kSegment : blocks % kSegment;
        const auto* record = reinterpret_cast<const uint8_t*>(
            &packed[kGroups * s * kSegment + g * in_segment + b % kSegment]);
        for (int r = 0; r < 8; ++r) {
          const auto* block = reinterpret_cast<const uint8_t*>(&rows[(g * 8 + r) * blocks + b]);
          int offset = 0;
          for (const KFieldLayout& field : fields) {
            for (int i = 0; i < field.bytes; ++i) {
              ASSERT_EQ(record[field.place(i / field.chunk) + r * field.chunk + i % field.chunk],
                        block[offset + i])
                  << "blocks " << blocks << " group " << g << " block " << b << " byte "
                  << offset + i;
            }
            offset += field.bytes;
          }
          ASSERT_EQ(offset, static_cast<int>(sizeof(Block)));
        }
      }
    }
    std::vector<Block> unpacked(rows.size());
    unpack(packed.data(), unpacked.data(), kRows, blocks);
    EXPECT_EQ(std::memcmp(unpacked.data(), rows.data(), rows.size() * sizeof(Block)), 0);
    std::vector<Block> one(static_cast<size_t>(blocks));
    unpack_row(packed.data(), kRows, blocks, 11, one.data());
    EXPECT_EQ(std::memcmp(one.data(), rows.data() + 11 * blocks, one.size() * sizeof(Block)), 0);
    EXPECT_THROW(unpack_row(packed.data(), kRows, blocks, kRows, one.data()), Error);
    for (const int64_t bad_rows : {1, 7, 12}) {
      EXPECT_THROW(repack(rows.data(), packed.data(), bad_rows, blocks), Error);
      EXPECT_THROW(unpack(packed.data(), unpacked.data(), bad_rows, blocks), Error);
    }
  }
}

TEST(QuantTest, Q4_Kx8RepackInterleavesEightRowsAndRoundTrips) {
  check_k_x8_repack<BlockQ4_K, BlockQ4_Kx8>(repack_q4_k_x8, unpack_q4_k_x8, unpack_row_q4_k_x8,
                                            {{2, 2, [](size_t) -> size_t { return 0; }},
                                             {2, 2, [](size_t) -> size_t { return 16; }},
                                             {12, 4, [](size_t j) { return 32 + 32 * j; }},
                                             {128, 4, [](size_t j) { return 128 + 32 * j; }}});
}

TEST(QuantTest, Q6_Kx8RepackInterleavesEightRowsAndRoundTrips) {
  check_k_x8_repack<BlockQ6_K, BlockQ6_Kx8>(
      repack_q6_k_x8, unpack_q6_k_x8, unpack_row_q6_k_x8,
      {{128, 4, [](size_t j) { return 96 * (8 * (j / 16) + j % 8) + 32 * (j / 8 % 2); }},
       {64, 4, [](size_t j) { return 96 * j + 64; }},
       {16, 1, [](size_t j) { return 1536 + 8 * j; }},
       {2, 2, [](size_t) -> size_t { return 1664; }}});
}

// F16x4 moves halves only: chunk c of group g holds elements 16c..16c+15 of rows 4g..4g+3, one
// row after the other; the columns come in segments of 2048 (the last one shorter), each holding
// every group's chunks of its columns, group after group. Unpacking restores every value, and
// shapes that are not whole groups of four rows and whole chunks of 16 columns are refused.
// Checked with one segment (48 columns) and with three (2·2048 + 48).
TEST(QuantTest, F16x4RepackInterleavesFourRowsAndRoundTrips) {
  static_assert(kF16x4Rows == 4 && kF16x4Chunk == 16 && kF16x4SegmentElements == 2048);
  constexpr int64_t kRows = 8;
  for (const int64_t cols : {int64_t{48}, int64_t{2 * 2048 + 48}}) {
    std::mt19937 rng(6);
    std::vector<uint16_t> rows(static_cast<size_t>(kRows * cols));
    for (uint16_t& value : rows) value = static_cast<uint16_t>(rng());
    std::vector<uint16_t> packed(rows.size());
    repack_f16_x4(rows.data(), packed.data(), kRows, cols);
    for (int64_t row = 0; row < kRows; ++row) {
      for (int64_t k = 0; k < cols; ++k) {
        const int64_t segment = k / 2048 * 2048;  // its first column
        const int64_t width = std::min<int64_t>(2048, cols - segment);
        const int64_t chunk = kRows * segment / 64 + (row / 4) * (width / 16) + (k - segment) / 16;
        ASSERT_EQ(packed[(chunk * 4 + row % 4) * 16 + k % 16], rows[row * cols + k])
            << "columns " << cols << " row " << row << " column " << k;
      }
    }
    std::vector<uint16_t> unpacked(rows.size());
    unpack_f16_x4(packed.data(), unpacked.data(), kRows, cols);
    EXPECT_EQ(unpacked, rows);
  }
  std::vector<uint16_t> rows(8 * 48);
  std::vector<uint16_t> packed(rows.size());
  std::vector<uint16_t> unpacked(rows.size());
  for (const auto& [bad_rows, bad_cols] :
       {std::pair<int64_t, int64_t>{6, 48}, {3, 48}, {8, 40}, {8, 8}}) {
    EXPECT_THROW(repack_f16_x4(rows.data(), packed.data(), bad_rows, bad_cols), Error);
    EXPECT_THROW(unpack_f16_x4(packed.data(), unpacked.data(), bad_rows, bad_cols), Error);
  }
}

}  // namespace
}  // namespace edgelm
