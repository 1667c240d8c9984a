// The sub-block matmul family: weights whose blocks decode to small integers per sub-block of 32
// elements with a float scale and, for some, a float offset — Q4_1, Q5_0, Q5_1 and the K-quants
// Q4_K, Q5_K, Q6_K — multiplied as stored, written once over an instruction set's byte contract.
// Each weight sub-block is unpacked into 32 quants in a register (Quants::Q), the exact integers
// the file stores, and multiplied by 32 quantized values of x with an integer dot product; the
// float side then adds d_x·scale·Σ q·x_q (+ d_x·offset·Σ x_q). The weights are never rounded
// again: the only difference from the portable oracle is the rounding of x to 8 bits, done as
// GGML's reference dot product for the type does it (DTypeInfo::activation): 8 bits per 32-block
// for Q4_1/Q5_0/Q5_1 (Q8_0 rounding, with the block sums Q8_1 carries), one step per 256 values
// for the K-quants (Q8_K). Decode multiplies each weight row as stored; prefill first unpacks the
// rows into panels of interleaved rows (below: the same integers and scales in another order).
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
//   zero(), fma(sums, scale, acc): acc + scale·Σ sums; sum(acc): one float;
//   zero_sums(), mac(acc, sums, scale): acc + scale·sums in 32-bit integers, and
//     mac_halves(acc, sums, scale_low, scale_high) with scale_low for the lanes of elements
//     0..15 and scale_high for those of 16..31 (the K-quants' sub-block scales, below);
//   kSumScale: QuantizedX's per-block integer is kSumScale·Σ x_q (x86 8, NEON -8);
//   half(bits): an IEEE half as float; prefetch(p); kPrefetchBytes (how far ahead of the block
//     being multiplied the weights are prefetched); kChunkBytes (weights per chunk, bands.h);
//   transpose8, store: for the prefill panels (below, with the panel contract `Panel`).
//
// Textual header: include it inside the instruction set's own anonymous namespace after the
// contracts, simd/bands.h and simd/x_block_scale.h, with `scratch` and `Scratch` in scope (see
// simd/vec_avx2.h), and kBlock (32) defined. Needs <cmath>, <cstring> and <type_traits>.

namespace block_matmul {

// Rows of x from which a matmul unpacks the weights into panels (panel_matmul) instead of
// multiplying them row by row as stored (row_matmul); the unpacking costs about one pass of the
// row kernel over the weights. On the Zen 5 VM (Qwen2.5-0.5B's Q5_0, Q4_K and Q6_K shapes and
// SmolLM2's Q4_1, weights in cache, one thread) panels were faster from 3 rows on with both the
// AVX2 and the AVX-512 table (1.1-2.8x at 3, 1.3-3.5x at 4 and 6), and at 2 rows faster for some
// types and slower for others (0.7-2.0x).
constexpr int64_t kPanelMinRows = 3;
// Q4_1's row kernel (nibbles alone, eight blocks a step on x86) is cheap enough that rows of x up
// to five go faster row by row: on the Zen 4 VM (AVX-512, one thread) SmolLM2 Q4_1's prompt-lookup
// decode, whose verification steps are 2-5 rows, ran 1.05-1.3 times as fast with panels from 6 rows
// on as from 3, while Qwen2.5-Coder's Q5_0/Q4_K/Q6_K ran 0.8-0.9 times as fast that way. A format
// may set its own kPanelMinRows; the others take kPanelMinRows.
template <class Format>
constexpr int64_t panel_min_rows() {
  if constexpr (requires { Format::kPanelMinRows; }) {
    return Format::kPanelMinRows;
  } else {
    return kPanelMinRows;
  }
}

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

// Q8_K rounding (GGML's quantize_row_q8_K): per 256 values, the value of largest magnitude v (the
// first such) sets the step d = 1/(-127/v) and every value rounds to nearest (ties to even) of
// x·(-127/v), at most 127; a negative step with negated quants is the same product as GGML's.
// Stored per 32-block as the other formats are (each of a super-block's eight blocks gets the same
// step), with the sums the offset types need. Non-finite values and steps too small to invert
// follow x_block_scale: NaN steps (every product NaN) or zero quants. The magnitudes are compared
// as bit patterns (the same order, NaN above infinity) and the first largest found by a minimum
// of indices, so that every loop is one the compiler vectorizes (about half the time of the
// scalar search on the Zen 5 VM). With kHalfSums, each block's sum slot holds instead the sums of
// its two halves of 16 quants as two int16 (elements 0..15 in the low half of the 32-bit slot,
// |Σ| <= 16·127), unscaled: what the Q6_Kx8 decode kernel wants (x86/avx512_quant.cpp).
template <int kSumScale, bool kHalfSums = false>
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
      uint32_t magnitude[kSuper];
      uint32_t max_bits = 0;
      for (int i = 0; i < kSuper; ++i) {
        uint32_t bits;
        std::memcpy(&bits, src + i, sizeof(bits));
        magnitude[i] = bits & 0x7fffffffu;
        max_bits = magnitude[i] > max_bits ? magnitude[i] : max_bits;
      }
      int first_max = kSuper;
      for (int i = 0; i < kSuper; ++i) {
        const int at = magnitude[i] == max_bits ? i : kSuper;
        first_max = at < first_max ? at : first_max;
      }
      float max_abs;
      std::memcpy(&max_abs, &max_bits, sizeof(max_abs));
      const XBlockScale check = x_block_scale(max_bits < 0x7f800000u ? max_abs : NAN);
      const float inverse = check.finite && check.inverse != 0.0f ? -127.0f / src[first_max] : 0.0f;
      const float step = !check.finite ? check.scale : inverse != 0.0f ? 1.0f / inverse : 0.0f;
      int8_t* dst = qs + m * K + first;
      for (int b = 0; b < kSuper / kBlock; ++b) {
        int32_t half_sums[2] = {0, 0};
        for (int i = 0; i < kBlock; ++i) {
          const int at = b * kBlock + i;
          const float q = std::nearbyint(src[at] * inverse);
          const auto value = static_cast<int8_t>(q < 127.0f ? q : 127.0f);
          dst[at] = value;
          half_sums[i / 16] += value;
        }
        const int64_t at = m * blocks + first / kBlock + b;
        scale[at] = step;
        if constexpr (kHalfSums) {
          sums[at] = static_cast<int32_t>((static_cast<uint32_t>(half_sums[0]) & 0xffffu) |
                                          (static_cast<uint32_t>(half_sums[1]) << 16));
        } else {
          sums[at] = kSumScale * (half_sums[0] + half_sums[1]);
        }
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

// Whether the byte contract takes eight blocks a step (totals8, bytes8, halves8, ...: the x86
// contract): decode then sums eight blocks' products into the lanes of one vector and scales them
// with one vector multiply-add, as the Q4_0 kernels do, instead of a float multiply-add with
// broadcast scalars per block (or per sub-block). On the Zen 4 VM (one thread, weights in cache,
// the 1B MLP-up GEMV) Q4_1 took 0.69 times as long that way, Q5_0 and Q5_1 0.78-0.86.
template <class Quants>
concept EightBlockSteps = requires(const typename Quants::Sums* s) {
  Quants::totals8(s);
};

// Each format: Block; kElements (per block); kUnit (the elements one scale covers: 32, or Q6_K's
// 16); quants(block, s): sub-block s's 32 stored integers, unsigned, in element order, at most
// kMaxQuant (15, 31 or 63);
// scales(block, scale, offset): per unit u of the block, value = scale[u]·q + offset[u] (each an
// exact float: a half times a small integer); accumulate<MR>(block, x, first x block, acc,
// offset): the decode path, adding the block's products with MR rows of x to acc[i] (scaled sums)
// and offset[i] (the offset terms, summed in float).

template <class Quants>
struct Q4_1Format {
  using Block = BlockQ4_1;
  static constexpr int kElements = 32;
  static constexpr int kUnit = 32;
  static constexpr int kMaxQuant = 15;
  static constexpr bool kMin = true;  // value = d·q + m
  static constexpr int kBias = 0;
  static constexpr int64_t kPanelMinRows = 6;
  static typename Quants::Q quants(const Block& w, int /*s*/) { return Quants::nibbles(w.qs); }
  static typename Quants::Sums block_dot(const Block& w, const int8_t* x) {
    return Quants::dot_unsigned(quants(w, 0), x);
  }
  static void scales(const Block& w, float* scale, float* offset) {
    scale[0] = Quants::half(w.d);
    offset[0] = Quants::half(w.m);
  }
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b,
                         typename Quants::Acc* acc, float* offset) {
    const typename Quants::Q q = quants(w, 0);
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

// Q5_0: q stored biased by 16 (value = d·(q - 16)).
template <class Quants>
struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr int kElements = 32;
  static constexpr int kUnit = 32;
  static constexpr int kMaxQuant = 31;
  static constexpr bool kMin = false;
  static constexpr int kBias = 16;  // value = d·(q - 16); block_dot sums q·x, the bias after
  static typename Quants::Q quants(const Block& w, int /*s*/) {
    return Quants::or_(Quants::nibbles(w.qs), Quants::bits_16(high_bits(w.qh)));
  }
  static typename Quants::Sums block_dot(const Block& w, const int8_t* x) {
    return Quants::dot_unsigned(quants(w, 0), x);
  }
  static void scales(const Block& w, float* scale, float* offset) {
    scale[0] = Quants::half(w.d);
    offset[0] = -16.0f * scale[0];
  }
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b,
                         typename Quants::Acc* acc, float* /*offset*/) {
    const typename Quants::Q q = Quants::minus(quants(w, 0), 16);
    const float d = Quants::half(w.d);
    for (int i = 0; i < MR; ++i)
      acc[i] = Quants::fma(Quants::dot_signed(q, x.at(i, b)), d * x.scale[i][b], acc[i]);
  }
};

template <class Quants>
struct Q5_1Format {
  using Block = BlockQ5_1;
  static constexpr int kElements = 32;
  static constexpr int kUnit = 32;
  static constexpr int kMaxQuant = 31;
  static constexpr bool kMin = true;
  static constexpr int kBias = 0;
  static typename Quants::Q quants(const Block& w, int /*s*/) {
    return Quants::or_(Quants::nibbles(w.qs), Quants::bits_16(high_bits(w.qh)));
  }
  static typename Quants::Sums block_dot(const Block& w, const int8_t* x) {
    return Quants::dot_unsigned(quants(w, 0), x);
  }
  static void scales(const Block& w, float* scale, float* offset) {
    scale[0] = Quants::half(w.d);
    offset[0] = Quants::half(w.m);
  }
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b,
                         typename Quants::Acc* acc, float* offset) {
    const typename Quants::Q q = quants(w, 0);
    const float d = Quants::half(w.d), m = Quants::half(w.m);
    for (int i = 0; i < MR; ++i) {
      const float step = x.scale[i][b];
      acc[i] = Quants::fma(Quants::dot_unsigned(q, x.at(i, b)), d * step, acc[i]);
      offset[i] += m * step * x.sum(i, b);
    }
  }
};

// The K-quants' decode: x has one step per super-block (Q8_K), so a block's eight sub-block dot
// products are weighted by their integer scales and summed in 32-bit lanes, then converted and
// multiplied by d·step once per block, as GGML's Q8_K dot products do, instead of a conversion
// and a float multiply-add per sub-block (on the Zen 4 VM, one thread, weights in cache, the 1B
// MLP-up GEMV took 0.37-0.55 times as long for Q4_K and Q5_K, 0.6-0.9 for Q6_K). A lane's sum is
// at most 32·31·127·63 (Q5_K, x86's reduced lanes) or 16·32·127·128 twice (Q6_K), both below
// 2^24, so the conversion is exact and the block's sum is the integer the float path rounded.

// Q4_K and Q5_K: sub-block s (32 elements) is the low (s even) or high (s odd) nibbles of
// qs[32·(s/2) ...], Q5_K's fifth bit is bit s of qh[l]; value = d·scale[s]·q - dmin·min[s].
template <class Quants, bool kFifthBit>
struct QK_4_5Format {
  using Block = std::conditional_t<kFifthBit, BlockQ5_K, BlockQ4_K>;
  static constexpr int kElements = 256;
  static constexpr int kUnit = 32;
  static constexpr int kMaxQuant = kFifthBit ? 31 : 15;
  static typename Quants::Q quants(const Block& w, int s) {
    const uint8_t* packed = w.qs + 32 * (s / 2);
    typename Quants::Q q = s % 2 == 0 ? Quants::low_nibbles(packed) : Quants::high_nibbles(packed);
    if constexpr (kFifthBit) q = Quants::or_(q, Quants::bit_plane_16(w.qh, s));
    return q;
  }
  static void scales(const Block& w, float* scale, float* offset) {
    uint64_t scales8, mins8;
    scale_bytes(w.scales, &scales8, &mins8);
    const float d = Quants::half(w.d), dmin = Quants::half(w.dmin);
    for (int s = 0; s < 8; ++s) {
      scale[s] = d * static_cast<float>((scales8 >> (8 * s)) & 0xff);
      offset[s] = -(dmin * static_cast<float>((mins8 >> (8 * s)) & 0xff));
    }
  }
  // The twelve packed bytes as eight scales and eight mins, byte s for sub-block s (core/quant.h,
  // KScales, has the packing), four sub-blocks at a time in 32-bit words.
  static void scale_bytes(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
    uint32_t word[3];
    std::memcpy(word, packed, sizeof(word));
    const uint64_t scale_low = word[0] & 0x3f3f3f3fu;
    const uint64_t min_low = word[1] & 0x3f3f3f3fu;
    const uint64_t scale_high = (word[2] & 0x0f0f0f0fu) | ((word[0] & 0xc0c0c0c0u) >> 2);
    const uint64_t min_high = ((word[2] >> 4) & 0x0f0f0f0fu) | ((word[1] & 0xc0c0c0c0u) >> 2);
    *scales = scale_low | (scale_high << 32);
    *mins = min_low | (min_high << 32);
  }
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b0,
                         typename Quants::Acc* acc, float* offset) {
    // Σ_s scale[s]·(q_s·x_q) and Σ_s min[s]·Σ x_q in integers (the second at most 8·63·32·127 in
    // magnitude, times kSumScale's 8), each scaled once by the block's factor and x's step. On x86
    // lane s holds sub-block s (its products reduced by totals8, its min times x's block sum).
    if constexpr (EightBlockSteps<Quants>) {
      uint64_t scale_bytes8, min_bytes8;
      scale_bytes(w.scales, &scale_bytes8, &min_bytes8);
      typename Quants::Sums sums[MR][8];
      for (int s = 0; s < 8; ++s) {
        const typename Quants::Q q = quants(w, s);
        for (int i = 0; i < MR; ++i) sums[i][s] = Quants::dot_unsigned(q, x.at(i, b0 + s));
      }
      const typename Quants::Sums scales = Quants::bytes8(scale_bytes8);
      const typename Quants::Sums mins = Quants::bytes8(min_bytes8);
      const float d = Quants::half(w.d), dmin = Quants::half(w.dmin);
      for (int i = 0; i < MR; ++i) {
        const float step = x.scale[i][b0];  // the super-block's one step
        acc[i] = Quants::fma(Quants::mul(Quants::totals8(sums[i]), scales), d * step, acc[i]);
        acc[i] = Quants::fma(Quants::mul(Quants::load_sums8(x.sums[i] + b0), mins),
                             -dmin * step / static_cast<float>(Quants::kSumScale), acc[i]);
      }
      (void)offset;
      return;
    }
    uint64_t scales8, mins8;
    scale_bytes(w.scales, &scales8, &mins8);
    typename Quants::Sums sums[MR];
    int32_t mins[MR];
    for (int i = 0; i < MR; ++i) {
      sums[i] = Quants::zero_sums();
      mins[i] = 0;
    }
    for (int s = 0; s < 8; ++s) {
      const typename Quants::Q q = quants(w, s);
      for (int i = 0; i < MR; ++i) {
        const auto scale = static_cast<int32_t>((scales8 >> (8 * s)) & 0xff);
        const auto min = static_cast<int32_t>((mins8 >> (8 * s)) & 0xff);
        sums[i] = Quants::mac(sums[i], Quants::dot_unsigned(q, x.at(i, b0 + s)), scale);
        mins[i] += min * x.sums[i][b0 + s];
      }
    }
    const float d = Quants::half(w.d), dmin = Quants::half(w.dmin);
    for (int i = 0; i < MR; ++i) {
      const float step = x.scale[i][b0];  // the super-block's one step
      acc[i] = Quants::fma(sums[i], d * step, acc[i]);
      offset[i] -= dmin * step *
                   (static_cast<float>(mins[i]) * (1.0f / static_cast<float>(Quants::kSumScale)));
    }
  }
};

template <class Quants>
using Q4_KFormat = QK_4_5Format<Quants, false>;
template <class Quants>
using Q5_KFormat = QK_4_5Format<Quants, true>;

// Q6_K: half h (128 elements) reads ql[64h ...] and qh[32h ...]; its quarter k (32 elements, sub-
// block 4h + k) takes the low (k < 2) or high nibbles of ql[64h + 32·(k % 2) ...] and bits 2k,
// 2k + 1 of qh[32h + l]; q is stored biased by 32, and each 16 elements have their own signed 8-bit
// scale: value = d·scales[j]·(q - 32) for the elements 16j..16j+15.
template <class Quants>
struct Q6_KFormat {
  using Block = BlockQ6_K;
  static constexpr int kElements = 256;
  static constexpr int kUnit = 16;
  static constexpr int kMaxQuant = 63;
  // Quarter k of half h; the decode loop below unrolls over h and k (as one loop over sub-blocks
  // it did not, and took 1.2-1.3 times as long).
  static typename Quants::Q quants(const Block& w, int h, int k) {
    const uint8_t* packed = w.ql + 64 * h + 32 * (k % 2);
    const typename Quants::Q low =
        k < 2 ? Quants::low_nibbles(packed) : Quants::high_nibbles(packed);
    return Quants::or_(low, Quants::two_bits_16(w.qh + 32 * h, 2 * k));
  }
  static typename Quants::Q quants(const Block& w, int s) { return quants(w, s / 4, s % 4); }
  static void scales(const Block& w, float* scale, float* offset) {
    const float d = Quants::half(w.d);
    for (int j = 0; j < 16; ++j) {
      scale[j] = d * static_cast<float>(w.scales[j]);
      offset[j] = -32.0f * scale[j];
    }
  }
  // Sub-blocks 4g..4g+3's sixteen-element scales as the lanes of half_totals4: scales[2s] (their
  // elements 0..15) in lanes 0..3, scales[2s + 1] in lanes 4..7.
  static uint64_t scale_lanes(const int8_t* scales, int g) {
    uint64_t bytes;
    std::memcpy(&bytes, scales + 8 * g, sizeof(bytes));
    uint64_t lanes = 0;
    for (int s = 0; s < 4; ++s) {
      lanes |= ((bytes >> (16 * s)) & 0xff) << (8 * s);
      lanes |= ((bytes >> (16 * s + 8)) & 0xff) << (8 * (s + 4));
    }
    return lanes;
  }
  template <int MR>
  static void accumulate(const Block& w, const XTile<Quants, MR>& x, int64_t b0,
                         typename Quants::Acc* acc, float* /*offset*/) {
    if constexpr (EightBlockSteps<Quants>) {
      typename Quants::Sums sums[MR][8];
      for (int s = 0; s < 8; ++s) {
        const typename Quants::Q q = Quants::minus(quants(w, s / 4, s % 4), 32);
        for (int i = 0; i < MR; ++i) sums[i][s] = Quants::dot_signed(q, x.at(i, b0 + s));
      }
      const typename Quants::Sums low = Quants::signed_bytes8(scale_lanes(w.scales, 0));
      const typename Quants::Sums high = Quants::signed_bytes8(scale_lanes(w.scales, 1));
      const float d = Quants::half(w.d);
      for (int i = 0; i < MR; ++i) {
        const typename Quants::Sums scaled =
            Quants::add(Quants::mul(Quants::half_totals4(sums[i]), low),
                        Quants::mul(Quants::half_totals4(sums[i] + 4), high));
        acc[i] = Quants::fma(scaled, d * x.scale[i][b0], acc[i]);
      }
      return;
    }
    typename Quants::Sums sums[MR];
    for (int i = 0; i < MR; ++i) sums[i] = Quants::zero_sums();
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        const typename Quants::Q q = Quants::minus(quants(w, h, k), 32);
        const int sub = 8 * h + 2 * k;  // the first of the quarter's two 16-element scales
        const int64_t b = b0 + 4 * h + k;
        for (int i = 0; i < MR; ++i) {
          sums[i] = Quants::mac_halves(sums[i], Quants::dot_signed(q, x.at(i, b)), w.scales[sub],
                                       w.scales[sub + 1]);
        }
      }
    }
    const float d = Quants::half(w.d);
    for (int i = 0; i < MR; ++i) acc[i] = Quants::fma(sums[i], d * x.scale[i][b0], acc[i]);
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
  int64_t b = 0;
  if constexpr (Format::kElements == kBlock && EightBlockSteps<Quants>) {
    for (; b + 8 <= blocks; b += 8) {
      const char* ahead = reinterpret_cast<const char*>(w_row + b) + prefetch_bytes;
      for (size_t line = 0; line < 8 * sizeof(*w_row); line += 64) Quants::prefetch(ahead + line);
      typename Quants::Sums sums[MR][8];
      for (int j = 0; j < 8; ++j) {
        for (int i = 0; i < MR; ++i)
          sums[i][j] = Format::block_dot(w_row[b + j], rows.at(i, b + j));
      }
      // d, and for Q4_1/Q5_1 m, the half after it (Q5_0's is its first high bits, unused).
      typename Quants::Acc d, m;
      Quants::halves8(&w_row[b].d, sizeof(*w_row), &d, &m);
      for (int i = 0; i < MR; ++i) {
        const typename Quants::Acc step = Quants::load8(rows.scale[i] + b);
        acc[i] =
            Quants::fma(Quants::to_float(Quants::totals8(sums[i])), Quants::mul(d, step), acc[i]);
        if constexpr (Format::kMin || Format::kBias != 0) {
          // (m, or -bias·d)·step·Σ x_q per block (x's sums are kSumScale·Σ x_q: exact as floats).
          const typename Quants::Acc x_sums =
              Quants::mul(Quants::to_float(Quants::load_sums8(rows.sums[i] + b)), step);
          const float per_sum = (Format::kMin ? 1.0f : -static_cast<float>(Format::kBias)) /
                                static_cast<float>(Quants::kSumScale);
          acc[i] = Quants::fma(Quants::mul(Format::kMin ? m : d, Quants::broadcast(per_sum)),
                               x_sums, acc[i]);
        }
      }
    }
  }
  for (; b < blocks; ++b) {
    const char* ahead = reinterpret_cast<const char*>(w_row + b) + prefetch_bytes;
    for (size_t line = 0; line < sizeof(*w_row); line += 64) Quants::prefetch(ahead + line);
    Format::template accumulate<MR>(w_row[b], rows, b * kSubBlocks, acc, offset);
  }
  for (int i = 0; i < MR; ++i) y[(m0 + i) * N + n] = Quants::sum(acc[i]) + offset[i];
}

// Rows [n_begin, n_end) of y = x · Wᵀ one weight row at a time, in chunks of weight rows that stay
// in cache while every band of x passes over them (decode, and prefill steps of few rows).
template <class Quants, class Format>
void row_matmul(const XRows& x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
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

// ---------------------------------------------------------------------------------------------
// Prefill: each chunk of weight rows is unpacked once into panels of Panel::kRows interleaved rows
// (the same integers and scales, in another order), which every band of x then multiplies with
// one row of y per lane: no horizontal reduction, and the per-block float work (a conversion, two
// multiply-adds) shared by all the panel's rows, where the row kernel spends it on each row.
//
// The panel contract `Panel` (simd/vec_avx2.h Panel256, simd/vec_avx512.h Panel512,
// simd/vec_neon.h Panel128x2<Dot>) supplies:
//   kRows (rows per panel, a multiple of 8); Sums (kRows 32-bit sums); Acc (kRows floats);
//   dot<MR, kChunks, kMaxQuant>(w, x, sums): for each of MR rows of x, sums[i] = per row r, Σ over
//     chunks c of the four unsigned bytes (at most kMaxQuant) of row r in chunk c (w + c·4·kRows +
//     4r) times the signed bytes x[i][4c .. 4c + 3];
//   zero(); fma(sums, scale, step, acc): acc + sums·(scale[r]·step); fma_offset(offset, v, acc):
//     acc + offset[r]·v; store(y, rows, acc): the first `rows` lanes at y.
// and the byte contract `Quants` two more: transpose8(q): eight rows' Q (32 quants each) into
// eight chunks (chunk c: bytes 4c..4c+3 of each row, row r at 4r); store(p, q): 32 bytes at p.

// A panel is, for each unit u of K (kUnit elements with one scale per row), a record: the unit's
// kUnit / 4 chunks of 4·kRows bytes (chunk c: elements 4c..4c+3 of each row), then kRows scales
// and kRows offsets (value = scale·q + offset, per row).
template <class Panel, class Format>
struct PanelLayout {
  static constexpr int kUnit = Format::kUnit;
  static constexpr int kChunks = kUnit / 4;
  static constexpr size_t kChunkBytes = 4 * Panel::kRows;
  static constexpr size_t kScaleBytes = Panel::kRows * sizeof(float);
  static constexpr size_t kRecordBytes = kChunks * kChunkBytes + 2 * kScaleBytes;
};

// Weight rows [0, rows) of `w` (rows of row_blocks blocks) into consecutive panels at `out`. A
// last panel's missing rows repeat the last row (their outputs are never stored).
template <class Quants, class Panel, class Format>
void pack_panels(const typename Format::Block* w, int64_t row_blocks, int64_t rows, uint8_t* out) {
  using Layout = PanelLayout<Panel, Format>;
  constexpr int kSubBlocks = Format::kElements / kBlock;
  constexpr int kUnits = Format::kElements / Layout::kUnit;  // per block
  const int64_t units = row_blocks * kUnits;
  for (int64_t first = 0; first < rows; first += Panel::kRows) {
    uint8_t* panel = out + (first / Panel::kRows) * units * Layout::kRecordBytes;
    for (int group = 0; group < Panel::kRows / 8; ++group) {
      const typename Format::Block* row_at[8];
      for (int r = 0; r < 8; ++r) {
        const int64_t row = first + group * 8 + r;
        row_at[r] = w + (row < rows ? row : rows - 1) * row_blocks;
      }
      // The next eight rows (contiguous), a block's share of them with each block of these.
      const char* next = reinterpret_cast<const char*>(w + (first + group * 8 + 8) * row_blocks);
      constexpr size_t kShare = 8 * sizeof(typename Format::Block);
      for (int64_t b = 0; b < row_blocks; ++b) {
        for (size_t at = b * kShare / 64 * 64; at < (b + 1) * kShare; at += 64)
          Quants::prefetch(next + at);
        uint8_t* block_records = panel + b * kUnits * Layout::kRecordBytes;
        typename Quants::Q q[kSubBlocks][8];
        for (int r = 0; r < 8; ++r) {
          const typename Format::Block& block = row_at[r][b];
          for (int s = 0; s < kSubBlocks; ++s) q[s][r] = Format::quants(block, s);
          float scale[kUnits], offset[kUnits];
          Format::scales(block, scale, offset);
          for (int u = 0; u < kUnits; ++u) {
            auto* scales = reinterpret_cast<float*>(block_records + u * Layout::kRecordBytes +
                                                    Layout::kChunks * Layout::kChunkBytes);
            scales[group * 8 + r] = scale[u];
            scales[Panel::kRows + group * 8 + r] = offset[u];
          }
        }
        for (int s = 0; s < kSubBlocks; ++s) {
          Quants::transpose8(q[s]);
          for (int c = 0; c < 8; ++c) {
            // Chunk c of sub-block s: elements 32s + 4c.. of the block, in unit (32s + 4c) / kUnit.
            const int element = kBlock * s + 4 * c;
            const int unit = element / Layout::kUnit;
            const int chunk = element % Layout::kUnit / 4;
            Quants::store(block_records + unit * Layout::kRecordBytes +
                              chunk * Layout::kChunkBytes + group * 32,
                          q[s][c]);
          }
        }
      }
    }
  }
}

// step·Σx_q of each unit of each row of x (the factor of a unit's offsets), [M, K / kUnit].
template <class Quants, int kUnit>
void unit_sums(const XRows& x, int64_t M, int64_t K, float* out) {
  const int64_t units = K / kUnit;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t u = 0; u < units; ++u) {
      const int64_t b = m * x.blocks + u * kUnit / kBlock;
      int32_t sum;
      if constexpr (kUnit == kBlock) {
        sum = x.sums[b] / Quants::kSumScale;  // exact: kSumScale·Σ x_q
      } else {
        const int8_t* q = x.qs + m * K + u * kUnit;
        sum = 0;
        for (int k = 0; k < kUnit; ++k) sum += q[k];
      }
      out[m * units + u] = x.scale[b] * static_cast<float>(sum);
    }
  }
}

// y[m0 + i, n0 .. n0 + rows) for i < MR: one panel against MR rows of x.
template <class Panel, class Format, int MR>
void panel_tile(const XRows& x, const float* sums_x, const uint8_t* panel, int64_t units, float* y,
                int64_t N, int64_t K, int64_t m0, int64_t n0, int64_t rows) {
  using Layout = PanelLayout<Panel, Format>;
  typename Panel::Acc acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = Panel::zero();
  const int8_t* x_rows[MR];
  for (int i = 0; i < MR; ++i) x_rows[i] = x.qs + (m0 + i) * K;
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* record = panel + u * Layout::kRecordBytes;
    const int8_t* x_at[MR];
    for (int i = 0; i < MR; ++i) x_at[i] = x_rows[i] + u * Layout::kUnit;
    typename Panel::Sums sums[MR];
    Panel::template dot<MR, Layout::kChunks, Format::kMaxQuant>(record, x_at, sums);
    const auto* scale =
        reinterpret_cast<const float*>(record + Layout::kChunks * Layout::kChunkBytes);
    const float* offset = scale + Panel::kRows;
    const int64_t b = u * Layout::kUnit / kBlock;
    for (int i = 0; i < MR; ++i) {
      acc[i] = Panel::fma(sums[i], scale, x.scale[(m0 + i) * x.blocks + b], acc[i]);
      acc[i] = Panel::fma_offset(offset, sums_x[(m0 + i) * units + u], acc[i]);
    }
  }
  for (int i = 0; i < MR; ++i) Panel::store(y + (m0 + i) * N + n0, rows, acc[i]);
}

// Rows [n_begin, n_end) of y = x · Wᵀ by panels, which pack(first, rows, out) writes for weight
// rows [first, first + rows) (pack_panels from the stored blocks, or from another layout of them).
template <class Quants, class Panel, class Format, class Pack>
void panel_matmul_packed(const XRows& x, Pack pack, float* y, int64_t M, int64_t N, int64_t K,
                         int64_t n_begin, int64_t n_end) {
  using Layout = PanelLayout<Panel, Format>;
  const int64_t units = K / Layout::kUnit;
  const size_t panel_bytes = static_cast<size_t>(units) * Layout::kRecordBytes;
  // Whole panels per chunk, about kChunkBytes of them.
  const int64_t chunk =
      (weight_chunk_rows<Quants::kChunkBytes>(panel_bytes / Panel::kRows) + Panel::kRows - 1) /
      Panel::kRows * Panel::kRows;
  auto* sums_x = static_cast<float*>(
      scratch(Scratch::kUnitSums, static_cast<size_t>(M * units) * sizeof(float)));
  unit_sums<Quants, Layout::kUnit>(x, M, K, sums_x);
  auto* panels = static_cast<uint8_t*>(
      scratch(Scratch::kWeightPanels, static_cast<size_t>(chunk / Panel::kRows) * panel_bytes));
  for (int64_t chunk_begin = n_begin; chunk_begin < n_end; chunk_begin += chunk) {
    const int64_t rows = min_of(chunk, n_end - chunk_begin);
    pack(chunk_begin, rows, panels);
    for_each_band(M, [&]<int MR>(int64_t m) {
      for (int64_t first = 0; first < rows; first += Panel::kRows) {
        panel_tile<Panel, Format, MR>(x, sums_x, panels + (first / Panel::kRows) * panel_bytes,
                                      units, y, N, K, m, chunk_begin + first,
                                      min_of(Panel::kRows, rows - first));
      }
    });
  }
}

template <class Quants, class Panel, class Format>
void panel_matmul(const XRows& x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
                  int64_t n_begin, int64_t n_end) {
  const auto* blocks = static_cast<const typename Format::Block*>(w);
  const int64_t row_blocks = K / Format::kElements;
  panel_matmul_packed<Quants, Panel, Format>(
      x,
      [&](int64_t first, int64_t rows, uint8_t* out) {
        pack_panels<Quants, Panel, Format>(blocks + first * row_blocks, row_blocks, rows, out);
      },
      y, M, N, K, n_begin, n_end);
}

// Rows [n_begin, n_end) of y = x · Wᵀ: by panels from panel_min_rows rows of x on, where unpacking
// the weights once more per call costs less than the panels save, else row by row.
template <class Quants, class Panel, class Format>
void matmul(const XRows& x, const void* w, float* y, int64_t M, int64_t N, int64_t K,
            int64_t n_begin, int64_t n_end) {
  if (M >= panel_min_rows<Format>()) {
    panel_matmul<Quants, Panel, Format>(x, w, y, M, N, K, n_begin, n_end);
  } else {
    row_matmul<Quants, Format>(x, w, y, M, N, K, n_begin, n_end);
  }
}

}  // namespace block_matmul
