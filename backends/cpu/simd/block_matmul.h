// The sub-block matmul family: weights whose blocks decode to small integers per sub-block of 32
// elements with a float scale and, for some, a float offset — Q4_1, Q5_0, Q5_1 and the K-quants
// Q4_K, Q5_K, Q6_K — multiplied as stored, written once over an instruction set's byte contract.
// Each weight sub-block is unpacked into 32 quants in a register (Quants::Q), the exact integers
// the file stores, and multiplied by 32 quantized values of x with an integer dot product; the
// float side then adds d_x·scale·Σ q·x_q (+ d_x·offset·Σ x_q). The weights are never rounded
// again: the only difference from the portable oracle is the rounding of x to 8 bits, done as
// GGML's reference dot product for the type does it (DTypeInfo::activation): 8 bits per 32-block
// for Q4_1/Q5_0/Q5_1 (Q8_0 rounding, with the block sums Q8_1 carries), one step per 256 values
// for the K-quants (Q8_K).
//
// The contract `Quants` (simd/vec_avx2.h Quants256, simd/vec_neon.h Quants128x2) supplies:
//   Q: 32 quants of one sub-block in element order; Sums: integer partial sums of one sub-block's
//     products, elements 0..15 in some lanes and 16..31 in others; Acc: float accumulators;
//   nibbles(p): the 16 bytes at p as 32 quants, low nibbles first (elements 0..15), then high;
//   low_nibbles(p), high_nibbles(p): the low or high nibbles of the 32 bytes at p;
//   bits_16(bits): 16 in element i where bit i of `bits` is set, else 0;
//   bit_plane_16(p, bit): 16 in element i where bit `bit` of byte p[i] is set, else 0;
//   two_bits_16(p, shift): ((p[i] >> shift) & 3) << 4 in element i;
//   or_(a, b); minus(a, v): a - v per element (a signed result);
//   dot_unsigned(w, x), dot_signed(w, x): the products of w (0..63, or signed -32..31) with the
//     32 signed bytes at x, partly summed into Sums;
//   zero(), fma(sums, scale, acc): acc + scale·Σ sums; fma_halves(sums, scale_low, scale_high,
//   acc):
//     acc + scale_low·Σ (elements 0..15) + scale_high·Σ (elements 16..31); sum(acc): one float;
//   kSumScale: QuantizedX's per-block integer is kSumScale·Σ x_q (x86 8, NEON -8);
//   half(bits): an IEEE half as float; prefetch(p); kPrefetchBytes (how far ahead of the block
//     being multiplied the weights are prefetched); kChunkBytes (weights per chunk, bands.h).
//
// Textual header: include it inside the instruction set's own anonymous namespace after the
// contract, simd/bands.h and simd/x_block_scale.h, with `scratch` and `Scratch` in scope (see
// simd/vec_avx2.h), and kBlock (32) defined. Needs <cmath>, <cstring> and <type_traits>.

namespace block_matmul {

// Rows of x quantized for one matmul, in the buffer layout every ISA shares (kernels.h,
// quantized_x_bytes): [M·K values, element order][M·blocks float steps][M·blocks int32 sums].
struct XRows {
  const int8_t* qs;
  const float* scale;
  const int32_t* sums;  // kSumScale·Σ x_q per block
  int64_t blocks;       // K / 32
};

inline XRows view(const void* buffer, int64_t M, int64_t K) {
  const auto* base = static_cast<const char*>(buffer);
  const auto* scale = reinterpret_cast<const float*>(base + M * K);
  return {reinterpret_cast<const int8_t*>(base), scale,
          reinterpret_cast<const int32_t*>(scale + M * (K / kBlock)), K / kBlock};
}

// Q8_K rounding (GGML's quantize_row_q8_K): per 256 values, the value of largest magnitude v sets
// the step d = 1/(-127/v) and every value rounds to nearest (ties to even) of x·(-127/v), at most
// 127; a negative step with negated quants is the same product as GGML's. Stored per 32-block as
// the other formats are (each of a super-block's eight blocks gets the same step), with the sums
// the offset types need. Non-finite values and steps too small to invert follow x_block_scale:
// NaN steps (every product NaN) or zero quants.
template <int kSumScale>
void quantize_rows_k(const float* x, void* buffer, int64_t M, int64_t K, int64_t m_begin,
                     int64_t m_end) {
  constexpr int kSuper = 256;
  const int64_t blocks = K / kBlock;
  auto* qs = static_cast<int8_t*>(buffer);
  auto* scale = reinterpret_cast<float*>(qs + M * K);
  auto* sums = reinterpret_cast<int32_t*>(scale + M * blocks);
  for (int64_t m = m_begin; m < m_end; ++m) {
    for (int64_t first = 0; first < K; first += kSuper) {
      const float* src = x + m * K + first;
      float max_abs = 0.0f, extreme = 0.0f;
      bool finite = true;
      for (int i = 0; i < kSuper; ++i) {
        finite &= std::isfinite(src[i]);
        if (std::fabs(src[i]) > max_abs) {
          max_abs = std::fabs(src[i]);
          extreme = src[i];
        }
      }
      const XBlockScale check = x_block_scale(finite ? max_abs : NAN);
      const float inverse = check.finite && check.inverse != 0.0f ? -127.0f / extreme : 0.0f;
      const float step = !check.finite ? check.scale : inverse != 0.0f ? 1.0f / inverse : 0.0f;
      int8_t* dst = qs + m * K + first;
      for (int b = 0; b < kSuper / kBlock; ++b) {
        int32_t sum = 0;
        for (int i = 0; i < kBlock; ++i) {
          const int at = b * kBlock + i;
          const float q = std::nearbyint(src[at] * inverse);
          dst[at] = static_cast<int8_t>(q < 127.0f ? q : 127.0f);
          sum += dst[at];
        }
        const int64_t at = m * blocks + first / kBlock + b;
        scale[at] = step;
        sums[at] = kSumScale * sum;
      }
    }
  }
}

// MR rows of x, as a tile reads them: a block's x_q, step and Σ x_q.
template <class Quants, int MR>
struct XTile {
  const int8_t* qs[MR];
  const float* scale[MR];
  const int32_t* sums[MR];

  XTile(const XRows& x, int64_t K, int64_t m0) {
    for (int i = 0; i < MR; ++i) {
      qs[i] = x.qs + (m0 + i) * K;
      scale[i] = x.scale + (m0 + i) * x.blocks;
      sums[i] = x.sums + (m0 + i) * x.blocks;
    }
  }
  const int8_t* at(int i, int64_t block) const { return qs[i] + block * kBlock; }
  // Σ x_q of a block, as a float (exact: |Σ| ≤ 32·127).
  float sum(int i, int64_t block) const {
    return static_cast<float>(sums[i][block]) * (1.0f / static_cast<float>(Quants::kSumScale));
  }
};

// Each format: Block, kElements (per block), and accumulate<MR>(block, x, first x block, acc,
// offset): adds the block's products with MR rows of x to acc[i] (scaled sums) and offset[i] (the
// offset terms, summed in float).

template <class Quants>
struct Q4_1Format {
  using Block = BlockQ4_1;
  static constexpr int kElements = 32;
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b,
                         typename Quants::Acc* acc, float* offset) {
    const typename Quants::Q q = Quants::nibbles(w.qs);
    const float d = Quants::half(w.d), m = Quants::half(w.m);
    for (int i = 0; i < MR; ++i) {
      const float step = x.scale[i][b];
      acc[i] = Quants::fma(Quants::dot_unsigned(q, x.at(i, b)), d * step, acc[i]);
      offset[i] += m * step * x.sum(i, b);
    }
  }
};

// Q5_0/Q5_1's fifth bits: bit i of qh read as a little-endian uint32 belongs to element i.
inline uint32_t high_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  return bits;
}

template <class Quants>
struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr int kElements = 32;
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b,
                         typename Quants::Acc* acc, float* /*offset*/) {
    const typename Quants::Q q =
        Quants::minus(Quants::or_(Quants::nibbles(w.qs), Quants::bits_16(high_bits(w.qh))), 16);
    const float d = Quants::half(w.d);
    for (int i = 0; i < MR; ++i)
      acc[i] = Quants::fma(Quants::dot_signed(q, x.at(i, b)), d * x.scale[i][b], acc[i]);
  }
};

template <class Quants>
struct Q5_1Format {
  using Block = BlockQ5_1;
  static constexpr int kElements = 32;
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b,
                         typename Quants::Acc* acc, float* offset) {
    const typename Quants::Q q =
        Quants::or_(Quants::nibbles(w.qs), Quants::bits_16(high_bits(w.qh)));
    const float d = Quants::half(w.d), m = Quants::half(w.m);
    for (int i = 0; i < MR; ++i) {
      const float step = x.scale[i][b];
      acc[i] = Quants::fma(Quants::dot_unsigned(q, x.at(i, b)), d * step, acc[i]);
      offset[i] += m * step * x.sum(i, b);
    }
  }
};

// Q4_K and Q5_K: sub-block s (32 elements) is the low (s even) or high (s odd) nibbles of
// qs[32·(s/2) ...], Q5_K's fifth bit is bit s of qh[l]; value = d·scale[s]·q - dmin·min[s].
template <class Quants, bool kFifthBit>
struct QK_4_5Format {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  static constexpr int kElements = 256;
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b0,
                         typename Quants::Acc* acc, float* offset) {
    KScales sm;
    unpack_k_scales(w.scales, sm);
    const float d = Quants::half(w.d), dmin = Quants::half(w.dmin);
    for (int s = 0; s < 8; ++s) {
      const uint8_t* packed = w.qs + 32 * (s / 2);
      typename Quants::Q q =
          s % 2 == 0 ? Quants::low_nibbles(packed) : Quants::high_nibbles(packed);
      if constexpr (kFifthBit) q = Quants::or_(q, Quants::bit_plane_16(w.qh, s));
      const float scale = d * static_cast<float>(sm.scale[s]);
      const float min = dmin * static_cast<float>(sm.min[s]);
      const int64_t b = b0 + s;
      for (int i = 0; i < MR; ++i) {
        const float step = x.scale[i][b];
        acc[i] = Quants::fma(Quants::dot_unsigned(q, x.at(i, b)), scale * step, acc[i]);
        offset[i] -= min * step * x.sum(i, b);
      }
    }
  }
};

template <class Quants>
using Q4_KFormat = QK_4_5Format<Quants, false>;
template <class Quants>
using Q5_KFormat = QK_4_5Format<Quants, true>;

// Q6_K: half h (128 elements) reads ql[64h ...] and qh[32h ...]; its quarter k (32 elements) takes
// the low (k < 2) or high nibbles of ql[64h + 32·(k % 2) ...] and bits 2k, 2k + 1 of qh[32h + l];
// q is stored biased by 32, and each 16 elements have their own signed 8-bit scale.
template <class Quants>
struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr int kElements = 256;
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b0,
                         typename Quants::Acc* acc, float* /*offset*/) {
    const float d = Quants::half(w.d);
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        const uint8_t* packed = w.ql + 64 * h + 32 * (k % 2);
        const typename Quants::Q low =
            k < 2 ? Quants::low_nibbles(packed) : Quants::high_nibbles(packed);
        const typename Quants::Q q =
            Quants::minus(Quants::or_(low, Quants::two_bits_16(w.qh + 32 * h, 2 * k)), 32);
        const int sub = 8 * h + 2 * k;  // the first of the quarter's two 16-element scales
        const float scale_low = d * static_cast<float>(w.scales[sub]);
        const float scale_high = d * static_cast<float>(w.scales[sub + 1]);
        const int64_t b = b0 + 4 * h + k;
        for (int i = 0; i < MR; ++i) {
          const float step = x.scale[i][b];
          acc[i] = Quants::fma_halves(Quants::dot_signed(q, x.at(i, b)), scale_low * step,
                                      scale_high * step, acc[i]);
        }
      }
    }
  }
};

// y[m0 + i, n] for i < MR: one weight row against MR rows of x, each block unpacked once.
template <class Quants, class Format, int MR>
void tile(const XRows& x, const typename Format::Block* w_row, float* y, int64_t N, int64_t K,
          int64_t m0, int64_t n, int64_t prefetch_bytes) {
  const XTile<Quants, MR> rows(x, K, m0);
  typename Quants::Acc acc[MR];
  float offset[MR];
  for (int i = 0; i < MR; ++i) {
    acc[i] = Quants::zero();
    offset[i] = 0.0f;
  }
  constexpr int64_t kSubBlocks = Format::kElements / kBlock;
  const int64_t blocks = K / Format::kElements;
  for (int64_t b = 0; b < blocks; ++b) {
    const char* ahead = reinterpret_cast<const char*>(w_row + b) + prefetch_bytes;
    for (size_t line = 0; line < sizeof(*w_row); line += 64) Quants::prefetch(ahead + line);
    Format::template accumulate<MR>(w_row[b], rows, b * kSubBlocks, acc, offset);
  }
  for (int i = 0; i < MR; ++i) y[(m0 + i) * N + n] = Quants::sum(acc[i]) + offset[i];
}

// Rows [n_begin, n_end) of y = x · Wᵀ, in chunks of weight rows that stay in cache while every
// band of x passes over them.
template <class Quants, class Format>
void matmul(const XRows& x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
            int64_t n_begin, int64_t n_end) {
  using Block = typename Format::Block;
  const auto* blocks = static_cast<const Block*>(w);
  const int64_t row_blocks = K / Format::kElements;
  const int64_t chunk =
      weight_chunk_rows<Quants::kChunkBytes>(static_cast<size_t>(row_blocks) * sizeof(Block));
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t chunk_end = min_of(chunk_begin + chunk, n_end);
    for_each_band(M, [&]<int MR>(int64_t m) {
      for (int64_t n = chunk_begin; n < chunk_end; ++n) {
        tile<Quants, Format, MR>(x, blocks + n * row_blocks, y, N, K, m, n, Quants::kPrefetchBytes);
      }
    });
  }
}

}  // namespace block_matmul
