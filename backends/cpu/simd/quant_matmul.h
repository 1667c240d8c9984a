// The quantized-weight matmul family (Q8_0, Q4_0 and the interleaved Q4_0x8, Q8_0x8), written once
// over an instruction set's integer policy. The rows of x are quantized to 8 bits per 32-block
// (scale max|x|/127, as GGML's Q8_0) once per matmul (by the CPU backend through QuantizedMatmul,
// or at the start of a MatmulFn call), then every block product is an integer dot product scaled
// by d_w·d_x.
//
// The policy `Isa` (x86/avx2_matmul.cpp, x86/avx512_matmul.cpp) supplies:
//   using V: the float contract of the accumulators (simd/vec_*.h); using Sums: the integer vector
//     of kStepBlocks block sums; kStepBlocks; kPrefetchBytes (how far ahead of the blocks being
//     multiplied the weights are prefetched); kChunkBytes (weights per chunk, see bands.h);
//   quantize_block(src, at_low, at_high, biased) -> BlockQuant: one block of x rounded, elements
//     0..15 stored at at_low and 16..31 at at_high (as q + 128 when biased);
//   sub(Sums, const int32_t*), to_float(Sums) -> V::Reg, prefetch(const void*).
// A row-major weight Format supplies Block, kGroup (x's block order it reads, see QuantizedX),
// kOffset (values are biased by 8: take 8·Σx off each block sum), scales(w) -> V::Reg of
// kStepBlocks block scales, dot<MR>(w, x_rows, sums) for kStepBlocks blocks and dot1(w, x_low,
// x_high) for one. An interleaved Kernel (records of eight weight rows, core/quant.h) supplies
// Record, kSegmentBlocks, kTileRows (output rows per prefill tile), kStreamPrefetch and
// kDecodePrefetchBytes (whether and how far ahead decode prefetches its records), row_step (one
// record against one row of x, eight sums in the lanes of a V::Reg) and tile<MR> (prefill).
//
// Textual header: include it inside the instruction set's own anonymous namespace after
// simd/bands.h and simd/x_block_scale.h, with a `scratch` function and `Scratch` slots in scope
// (see simd/vec_avx2.h).

constexpr int kBlock = 32;

// One block of x rounded to 8 bits: its step and the sum of its quants.
struct BlockQuant {
  float scale;
  int32_t sum;
};

// Rows of x quantized for one matmul: a view of a buffer laid out [M·K values][M·blocks scales]
// [M·blocks sums] (kernels.h, quantized_x_bytes).
struct QuantizedX {
  const int8_t* qs;      // [M, K] values, in the byte order the weight format reads (see below);
                         // as unsigned bytes q + 128 when the format asks for biased values
  const float* scale;    // [M, K / 32] d_x per block
  const int32_t* sum8;   // [M, K / 32] 8·Σ qs per block: Q4_0's offset of 8 folded out
  int64_t blocks;        // K / 32
  int64_t group_blocks;  // blocks [0, group_blocks) are stored in group order
  int group;             // blocks per group (1: plain order)
};

// Group order (Q4_0: groups of as many blocks as one load of packed nibbles holds): a group of g
// blocks occupies 32·g bytes as the elements 0..15 of each block, then the elements 16..31 of
// each, matching one load of the g blocks' nibbles split into low nibbles (elements 0..15) and
// high nibbles (elements 16..31). Blocks after the last whole group are stored in order.
QuantizedX quantized_view(const void* buffer, int64_t M, int64_t K, int group) {
  const int64_t blocks = K / kBlock;
  // M·K is a multiple of 32, so the scales after the values stay aligned.
  const auto* base = static_cast<const char*>(buffer);
  const auto* scale = reinterpret_cast<const float*>(base + M * K);
  return {reinterpret_cast<const int8_t*>(base),
          scale,
          reinterpret_cast<const int32_t*>(scale + M * blocks),
          blocks,
          blocks - blocks % group,
          group};
}

// Rows [m_begin, m_end) of x into the buffer of an M x K quantized x.
template <class Isa>
void quantize_rows(const float* x, void* buffer, int64_t M, int64_t K, int64_t m_begin,
                   int64_t m_end, int group, bool biased) {
  const QuantizedX view = quantized_view(buffer, M, K, group);
  auto* qs = const_cast<int8_t*>(view.qs);
  auto* scale = const_cast<float*>(view.scale);
  auto* sum8 = const_cast<int32_t*>(view.sum8);
  const int64_t blocks = view.blocks;
  for (int64_t m = m_begin; m < m_end; ++m) {
    int8_t* row = qs + m * K;
    for (int64_t b = 0; b < blocks; ++b) {
      int8_t* at_low = row + b * kBlock;
      int8_t* at_high = at_low + 16;
      if (b < view.group_blocks) {
        at_low = row + (b - b % group) * kBlock + (b % group) * 16;
        at_high = at_low + 16 * group;
      }
      const BlockQuant quant = Isa::quantize_block(x + m * K + b * kBlock, at_low, at_high, biased);
      scale[m * blocks + b] = quant.scale;
      sum8[m * blocks + b] = 8 * quant.sum;
    }
  }
}

// All of x quantized into per-thread scratch, for a MatmulFn call.
template <class Isa>
QuantizedX quantize_x(const float* x, int64_t M, int64_t K, int group, bool biased) {
  void* buffer = scratch(Scratch::kActivations,
                         static_cast<size_t>(M * K) + static_cast<size_t>(M * (K / kBlock)) * 8);
  quantize_rows<Isa>(x, buffer, M, K, 0, M, group, biased);
  return quantized_view(buffer, M, K, group);
}

// ---------------------------------------------------------------------------------------------
// Row-major weights (Q8_0, Q4_0): blocks are taken kStepBlocks at a time, so their integer sums
// are reduced into one vector and scaled with one multiply-add against the blocks' scales.

// y[m0 + i, n] for i < MR: one weight row against MR quantized rows of x.
template <class Isa, class Format, int MR>
void quant_tile(const QuantizedX& xq, const typename Format::Block* w_row, float* y, int64_t N,
                int64_t K, int64_t m0, int64_t n) {
  using V = typename Isa::V;
  constexpr int kStep = Isa::kStepBlocks;
  const int64_t blocks = xq.blocks;
  const int8_t* x_rows[MR];
  for (int i = 0; i < MR; ++i) x_rows[i] = xq.qs + (m0 + i) * K;
  typename V::Reg acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = V::zero();
  int64_t b = 0;
  for (; b + kStep <= blocks; b += kStep) {
    const int8_t* x_at[MR];
    for (int i = 0; i < MR; ++i) x_at[i] = x_rows[i] + b * kBlock;
    typename Isa::Sums sums[MR];
    const char* ahead = reinterpret_cast<const char*>(w_row + b) + Isa::kPrefetchBytes;
    for (size_t line = 0; line < kStep * sizeof(*w_row); line += 64) Isa::prefetch(ahead + line);
    Format::template dot<MR>(w_row + b, x_at, sums);
    const typename V::Reg w_scale = Format::scales(w_row + b);
    for (int i = 0; i < MR; ++i) {
      const int64_t at = (m0 + i) * blocks + b;
      if constexpr (Format::kOffset) sums[i] = Isa::sub(sums[i], xq.sum8 + at);
      const typename V::Reg scale = V::mul(w_scale, V::load(xq.scale + at));
      acc[i] = V::fma(Isa::to_float(sums[i]), scale, acc[i]);
    }
  }
  float tail[MR] = {};
  for (; b < blocks; ++b) {
    const float w_scale = V::half_to_float(w_row[b].d);
    for (int i = 0; i < MR; ++i) {
      const int8_t* x_low = x_rows[i] + b * kBlock;
      const int8_t* x_high = x_low + 16;
      if (b < xq.group_blocks) {
        x_low = x_rows[i] + (b - b % xq.group) * kBlock + (b % xq.group) * 16;
        x_high = x_low + 16 * xq.group;
      }
      const int64_t at = (m0 + i) * blocks + b;
      int32_t sum = Format::dot1(w_row[b], x_low, x_high);
      if constexpr (Format::kOffset) sum -= xq.sum8[at];
      tail[i] += w_scale * xq.scale[at] * static_cast<float>(sum);
    }
  }
  for (int i = 0; i < MR; ++i) y[(m0 + i) * N + n] = V::sum(acc[i]) + tail[i];
}

template <class Isa, class Format>
void quant_matmul(const QuantizedX& xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const typename Format::Block*>(w);
  const int64_t chunk =
      weight_chunk_rows<Isa::kChunkBytes>(static_cast<size_t>(xq.blocks) * sizeof(*blocks));
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      for (int64_t n = chunk_begin; n < chunk_end; ++n)
        quant_tile<Isa, Format, MR>(xq, blocks + n * xq.blocks, y, N, K, m, n);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Interleaved weights (Q4_0x8, Q8_0x8: core/quant.h): each record holds one block of eight weight
// rows, one row per 32-bit lane, so the eight rows' block sums land in the lanes of one vector and
// are scaled with one multiply-add against the eight row scales, with no horizontal reduction.

// Blocks [first, end) of one K segment (core/quant.h). A group's records for a segment are
// contiguous; a segment after the first adds to the sums already in y: the same additions in the
// same order as over the whole row, so the result does not depend on the segment length, nor on
// which group a group is paired with.
struct X8Segment {
  int64_t first;  // first block
  int64_t end;    // one past the last block
};

// The lines of the record kDecodePrefetchBytes after `record`, into L1. Not marked always_inline:
// GCC 12 then inlines Isa::prefetch before the hint argument of _mm_prefetch is a constant and
// drops the prefetch (the decode kernels lost every prefetch that way); as a plain template it is
// inlined all the same.
template <class Isa, class Kernel>
void prefetch_record_ahead(const typename Kernel::Record* record) {
  const char* ahead = reinterpret_cast<const char*>(record) + Kernel::kDecodePrefetchBytes;
  for (size_t line = 0; line < sizeof(*record); line += 64) Isa::prefetch(ahead + line);
}

// Decode: y_a[0 .. 8) and, when `b_group` is set, y_b[0 .. 8): row m of x against one group (two
// groups) of eight weight rows over one K segment, a record of each in turn. Reading two ranges
// side by side as two streams (x8_decode_pairs, KernelTable::decode_pairs; the CPU backend picks
// the pairs) is faster than one stream on the cores measured: on the Zen 5 VM one core streams
// ~40 GB/s from two places at once and ~33 from one (docs/performance.md). kPrefetch: each
// record's successor kDecodePrefetchBytes on is requested as it is read.
template <class Isa, class Kernel, bool kPrefetch>
void x8_row_tiles(const QuantizedX& xq, const typename Kernel::Record* a_group,
                  const typename Kernel::Record* b_group, X8Segment segment, float* y_a, float* y_b,
                  int64_t m) {
  using V = typename Isa::V;
  const int8_t* x_row = xq.qs + m * xq.blocks * kBlock;
  typename V::Reg acc_a = segment.first == 0 ? V::zero() : V::load(y_a);
  if (b_group == nullptr) {
    for (int64_t b = segment.first; b < segment.end; ++b, ++a_group) {
      if constexpr (kPrefetch) prefetch_record_ahead<Isa, Kernel>(a_group);
      acc_a = Kernel::row_step(xq, *a_group, x_row, m, b, acc_a);
    }
    V::store(y_a, acc_a);
    return;
  }
  typename V::Reg acc_b = segment.first == 0 ? V::zero() : V::load(y_b);
  for (int64_t b = segment.first; b < segment.end; ++b, ++a_group, ++b_group) {
    if constexpr (kPrefetch) prefetch_record_ahead<Isa, Kernel>(a_group);
    acc_a = Kernel::row_step(xq, *a_group, x_row, m, b, acc_a);
    if constexpr (kPrefetch) prefetch_record_ahead<Isa, Kernel>(b_group);
    acc_b = Kernel::row_step(xq, *b_group, x_row, m, b, acc_b);
  }
  V::store(y_a, acc_a);
  V::store(y_b, acc_b);
}

// Row m of x against one K segment of rows [a_begin, a_begin + rows) beside rows [b_begin,
// b_begin + rows) (b_begin < 0: the first range alone); `records` are the segment's, y is row m's.
template <class Isa, class Kernel, bool kPrefetch>
void x8_segment_pairs(const QuantizedX& xq, const typename Kernel::Record* records,
                      X8Segment segment, float* y, int64_t m, int64_t a_begin, int64_t b_begin,
                      int64_t rows) {
  const int64_t length = segment.end - segment.first;
  for (int64_t i = 0; i < rows; i += 8) {
    const int64_t a = a_begin + i, b = b_begin + i;
    x8_row_tiles<Isa, Kernel, kPrefetch>(xq, records + (a / 8) * length,
                                         b_begin >= 0 ? records + (b / 8) * length : nullptr,
                                         segment, y + a, b_begin >= 0 ? y + b : nullptr, m);
  }
}

// Decode (one row of x, KernelTable::decode_pairs): rows [a_begin, a_begin + rows) beside rows
// [b_begin, b_begin + rows), one K segment after the other.
template <class Isa, class Kernel, bool kPrefetch = Kernel::kStreamPrefetch>
void x8_decode_pairs(const QuantizedX& xq, const void* w, float* y, int64_t N, int64_t a_begin,
                     int64_t b_begin, int64_t rows) {
  const auto* all = static_cast<const typename Kernel::Record*>(w);
  for (int64_t first = 0; first < xq.blocks; first += Kernel::kSegmentBlocks) {
    const X8Segment segment{first, min_of(first + Kernel::kSegmentBlocks, xq.blocks)};
    x8_segment_pairs<Isa, Kernel, kPrefetch>(xq, all + (N / 8) * first, segment, y, 0, a_begin,
                                             b_begin, rows);
  }
}

// Rows [n_begin, n_end) of the band, one K segment after the other (each a contiguous run of
// records over the band's groups); prefill tiles of kTileRows rows (the last may be eight).
template <class Isa, class Kernel, int MR>
void x8_band(const QuantizedX& xq, const typename Kernel::Record* w, float* y, int64_t N, int64_t K,
             int64_t m0, int64_t n_begin, int64_t n_end) {
  for (int64_t first = 0; first < xq.blocks; first += Kernel::kSegmentBlocks) {
    const X8Segment segment{first, min_of(first + Kernel::kSegmentBlocks, xq.blocks)};
    const int64_t length = segment.end - segment.first;
    const auto* records = w + (N / 8) * first;  // the segment's records, group after group
    if constexpr (MR == 1) {
      // One stream, group after group (pairs: x8_decode_pairs).
      x8_segment_pairs<Isa, Kernel, Kernel::kStreamPrefetch>(xq, records, segment, y + m0 * N, m0,
                                                             n_begin, -1, n_end - n_begin);
      continue;
    }
    for (int64_t n = n_begin; n < n_end; n += Kernel::kTileRows) {
      Kernel::template tile<MR>(xq, records + (n / 8) * length, length, segment, y, N, K, m0, n,
                                min_of(Kernel::kTileRows, n_end - n));
    }
  }
}

// Weights in records of eight interleaved rows; n_begin and n_end are multiples of 8.
template <class Isa, class Kernel>
void x8_matmul(const QuantizedX& xq, const void* w, float* y, int64_t M, int64_t N, int64_t K,
               int64_t n_begin, int64_t n_end) {
  using Record = typename Kernel::Record;
  const auto* records = static_cast<const Record*>(w);
  // Whole tiles per chunk, about kChunkBytes of weights as for the other kernels, so that the
  // bands of x reuse a chunk from cache. Decode (one row of x) has one band: it takes the whole
  // range at once, so that each K segment is one run through memory.
  constexpr int64_t kTile = Kernel::kTileRows;
  const int64_t rows =
      weight_chunk_rows<Isa::kChunkBytes>(static_cast<size_t>(xq.blocks) * sizeof(Record) / 8);
  const int64_t chunk = M == 1 ? n_end - n_begin : (rows + kTile - 1) / kTile * kTile;
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      x8_band<Isa, Kernel, MR>(xq, records, y, N, K, m, chunk_begin, chunk_end);
    });
  }
}
