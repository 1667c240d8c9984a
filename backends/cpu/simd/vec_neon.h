// The vector contract for AArch64 Advanced SIMD (NEON): four float lanes in a Q register. NEON
// and its F16 conversions are part of every AArch64 CPU.
//
// Textual header: include it inside the instruction set's own anonymous namespace, after
// <arm_neon.h>, <cmath>, <cstring> and <cstdint> (see simd/vec_avx2.h).

struct Vec128 {
  using Reg = float32x4_t;
  static constexpr int kLanes = 4;

  static Reg zero() { return vdupq_n_f32(0.0f); }
  static Reg set1(float x) { return vdupq_n_f32(x); }
  static Reg load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, Reg v) { vst1q_f32(p, v); }
  static Reg load_tail(const float* p, int64_t n, float fill) {
    float lanes[kLanes] = {fill, fill, fill, fill};
    std::memcpy(lanes, p, sizeof(float) * static_cast<size_t>(n));
    return vld1q_f32(lanes);
  }
  static void store_tail(float* p, int64_t n, Reg v) {
    float lanes[kLanes];
    vst1q_f32(lanes, v);
    std::memcpy(p, lanes, sizeof(float) * static_cast<size_t>(n));
  }

  static Reg add(Reg a, Reg b) { return vaddq_f32(a, b); }
  static Reg sub(Reg a, Reg b) { return vsubq_f32(a, b); }
  static Reg mul(Reg a, Reg b) { return vmulq_f32(a, b); }
  static Reg div(Reg a, Reg b) { return vdivq_f32(a, b); }
  static Reg max(Reg a, Reg b) { return vmaxq_f32(a, b); }
  static Reg min(Reg a, Reg b) { return vminq_f32(a, b); }
  static Reg neg(Reg a) { return vnegq_f32(a); }
  static Reg fma(Reg a, Reg b, Reg c) { return vfmaq_f32(c, a, b); }
  static Reg fms(Reg a, Reg b, Reg c) { return vfmaq_f32(vnegq_f32(c), a, b); }
  static Reg fnma(Reg a, Reg b, Reg c) { return vfmsq_f32(c, a, b); }

  static float sum(Reg v) { return vaddvq_f32(v); }
  static float max_of(Reg v) { return vmaxvq_f32(v); }
  // out[i] = the sum of the lanes of a[i], i < 8, by pairwise adds four vectors at a time.
  static void lane_sums8(const Reg* a, float* out) {
    vst1q_f32(out, vpaddq_f32(vpaddq_f32(a[0], a[1]), vpaddq_f32(a[2], a[3])));
    vst1q_f32(out + 4, vpaddq_f32(vpaddq_f32(a[4], a[5]), vpaddq_f32(a[6], a[7])));
  }

  static Reg round(Reg v) { return vrndnq_f32(v); }
  static Reg pow2(Reg n) {
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23));
  }
  static Reg keep_ge(Reg value, Reg x, Reg bound) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(value), vcgeq_f32(x, bound)));
  }

  static Reg visible(Reg score, int32_t slot_position, const int32_t* row_positions) {
    const uint32x4_t sees = vcleq_s32(vdupq_n_s32(slot_position), vld1q_s32(row_positions));
    return vbslq_f32(sees, score, vdupq_n_f32(-INFINITY));
  }
  // max > -inf: false for -inf and NaN, as the x86 contracts' ordered not-equal.
  static Reg seen_or_zero(Reg max_value, Reg value) {
    const uint32x4_t seen = vcgtq_f32(max_value, vdupq_n_f32(-INFINITY));
    return vreinterpretq_f32_u32(vandq_u32(seen, vreinterpretq_u32_f32(value)));
  }

  static Reg load_f16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static void store_f16(uint16_t* p, Reg v) { vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v))); }
  static Reg load_i8(const int8_t* p) {
    int32_t bytes;
    std::memcpy(&bytes, p, sizeof(bytes));
    const int16x8_t wide = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(bytes)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(wide)));
  }
  // A bfloat16 is the high half of a float32.
  static Reg load_bf16(const uint16_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
  }
  static float half_to_float(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
  }
};

// The byte contract of simd/block_matmul.h over pairs of Q registers: a sub-block's 32 quants as
// elements 0..15 and 16..31, their products with x summed per half by the instruction set's `Dot`:
// Dot::dot16(w, x) -> four 32-bit lanes summing the 16 products (SMULL/SADDLP, or SDOT). Quants
// are signed bytes whatever the format (unsigned ones are at most 63), so one dot serves both.
template <class Dot>
struct Quants128x2 {
  using Q = int8x16x2_t;
  struct Sums {
    int32x4_t low;   // elements 0..15
    int32x4_t high;  // elements 16..31
  };
  using Acc = float32x4_t;
  static constexpr int kSumScale = -8;  // neon_quant_matmul.h stores -8·Σ x_q per block
  // Weights prefetched 1 KiB ahead; chunks of about 64 KiB stay in the L2 of a phone's small cores
  // (neon_quant_matmul.h, kChunkBytes).
  static constexpr int64_t kPrefetchBytes = 1024;
  static constexpr size_t kChunkBytes = size_t{64} << 10;

  static int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }
  static Q nibbles(const uint8_t* p) {
    const uint8x16_t packed = vld1q_u8(p);
    return {{s8(vandq_u8(packed, vdupq_n_u8(0x0f))), s8(vshrq_n_u8(packed, 4))}};
  }
  static Q low_nibbles(const uint8_t* p) {
    return {{s8(vandq_u8(vld1q_u8(p), vdupq_n_u8(0x0f))),
             s8(vandq_u8(vld1q_u8(p + 16), vdupq_n_u8(0x0f)))}};
  }
  static Q high_nibbles(const uint8_t* p) {
    return {{s8(vshrq_n_u8(vld1q_u8(p), 4)), s8(vshrq_n_u8(vld1q_u8(p + 16), 4))}};
  }
  // Byte i takes byte i / 8 of `bits`, then tests its own bit.
  static Q bits_16(uint32_t bits) {
    static constexpr uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bit = vld1q_u8(kBits);
    const uint8x16_t low = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)),
                                       vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
    const uint8x16_t high = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits >> 16)),
                                        vdup_n_u8(static_cast<uint8_t>(bits >> 24)));
    return {{s8(vandq_u8(vtstq_u8(low, bit), vdupq_n_u8(16))),
             s8(vandq_u8(vtstq_u8(high, bit), vdupq_n_u8(16)))}};
  }
  static Q bit_plane_16(const uint8_t* p, int bit) {
    const uint8x16_t mask = vdupq_n_u8(static_cast<uint8_t>(1 << bit));
    return {{s8(vandq_u8(vtstq_u8(vld1q_u8(p), mask), vdupq_n_u8(16))),
             s8(vandq_u8(vtstq_u8(vld1q_u8(p + 16), mask), vdupq_n_u8(16)))}};
  }
  static Q two_bits_16(const uint8_t* p, int shift) {
    const int8x16_t right = vdupq_n_s8(static_cast<int8_t>(-shift));
    auto two = [&](const uint8_t* at) {
      return s8(vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(at), right), vdupq_n_u8(3)), 4));
    };
    return {{two(p), two(p + 16)}};
  }
  static Q or_(Q a, Q b) { return {{vorrq_s8(a.val[0], b.val[0]), vorrq_s8(a.val[1], b.val[1])}}; }
  static Q minus(Q a, int8_t value) {
    return {{vsubq_s8(a.val[0], vdupq_n_s8(value)), vsubq_s8(a.val[1], vdupq_n_s8(value))}};
  }
  static Sums dot_signed(Q w, const int8_t* x) {
    return {Dot::dot16(w.val[0], vld1q_s8(x)), Dot::dot16(w.val[1], vld1q_s8(x + 16))};
  }
  static Sums dot_unsigned(Q w, const int8_t* x) { return dot_signed(w, x); }
  static Sums mac(Sums acc, Sums s, int32_t scale) {
    return {vmlaq_n_s32(acc.low, s.low, scale), vmlaq_n_s32(acc.high, s.high, scale)};
  }
  static Sums mac_halves(Sums acc, Sums s, int32_t scale_low, int32_t scale_high) {
    return {vmlaq_n_s32(acc.low, s.low, scale_low), vmlaq_n_s32(acc.high, s.high, scale_high)};
  }
  static Sums zero_sums() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
  static Acc zero() { return vdupq_n_f32(0.0f); }
  // Each half converted on its own: a K-quant block's lanes are each below 2^24 (exact as
  // floats), their sum need not be (block_matmul.h).
  static Acc fma(Sums s, float scale, Acc acc) {
    return vfmaq_n_f32(vfmaq_n_f32(acc, vcvtq_f32_s32(s.low), scale), vcvtq_f32_s32(s.high), scale);
  }
  static float sum(Acc acc) { return vaddvq_f32(acc); }
  static float half(uint16_t bits) { return Vec128::half_to_float(bits); }
  static void prefetch(const void* p) { __builtin_prefetch(p); }

  // Eight rows' quants as eight 4-byte columns: q[c] = bytes 4c..4c+3 of q[0..8), rows 0..3 in
  // the lanes of val[0] and rows 4..7 in those of val[1] (4 x 4 transposes of 32-bit lanes).
  static void transpose8(Q* q) {
    int32x4_t column[8][2];
    for (int half = 0; half < 2; ++half) {    // columns 4·half .. 4·half + 3
      for (int rows = 0; rows < 2; ++rows) {  // rows 4·rows .. 4·rows + 3
        const int r = 4 * rows;
        const int32x4x2_t ab = vtrnq_s32(vreinterpretq_s32_s8(q[r].val[half]),
                                         vreinterpretq_s32_s8(q[r + 1].val[half]));
        const int32x4x2_t cd = vtrnq_s32(vreinterpretq_s32_s8(q[r + 2].val[half]),
                                         vreinterpretq_s32_s8(q[r + 3].val[half]));
        column[4 * half][rows] = vcombine_s32(vget_low_s32(ab.val[0]), vget_low_s32(cd.val[0]));
        column[4 * half + 1][rows] = vcombine_s32(vget_low_s32(ab.val[1]), vget_low_s32(cd.val[1]));
        column[4 * half + 2][rows] =
            vcombine_s32(vget_high_s32(ab.val[0]), vget_high_s32(cd.val[0]));
        column[4 * half + 3][rows] =
            vcombine_s32(vget_high_s32(ab.val[1]), vget_high_s32(cd.val[1]));
      }
    }
    for (int c = 0; c < 8; ++c) {
      q[c] = {{vreinterpretq_s8_s32(column[c][0]), vreinterpretq_s8_s32(column[c][1])}};
    }
  }
  static void store(uint8_t* p, Q q) {
    vst1q_s8(reinterpret_cast<int8_t*>(p), q.val[0]);
    vst1q_s8(reinterpret_cast<int8_t*>(p + 16), q.val[1]);
  }
};

// The panel contract of simd/block_matmul.h's prefill over pairs of Q registers: eight rows a
// panel, rows 0..3 in the lanes of one register and 4..7 in the other. `Dot`, as for Quants128x2,
// supplies dot4(acc, w, x): acc + per 32-bit lane the four products of w's bytes with x's (SDOT,
// or SMULL and pairwise adds).
template <class Dot>
struct Panel128x2 {
  static constexpr int kRows = 8;
  struct Sums {
    int32x4_t low;   // rows 0..3
    int32x4_t high;  // rows 4..7
  };
  struct Acc {
    float32x4_t low;
    float32x4_t high;
  };

  template <int MR, int kChunks, int /*kMaxQuant*/>
  static void dot(const uint8_t* w, const int8_t* const* x, Sums* sums) {
    for (int i = 0; i < MR; ++i) sums[i] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int c = 0; c < kChunks; ++c) {
      const int8x16_t low = vld1q_s8(reinterpret_cast<const int8_t*>(w + 32 * c));
      const int8x16_t high = vld1q_s8(reinterpret_cast<const int8_t*>(w + 32 * c + 16));
      for (int i = 0; i < MR; ++i) {
        int32_t x4;
        std::memcpy(&x4, x[i] + 4 * c, sizeof(x4));
        const int8x16_t xv = vreinterpretq_s8_s32(vdupq_n_s32(x4));
        sums[i].low = Dot::dot4(sums[i].low, low, xv);
        sums[i].high = Dot::dot4(sums[i].high, high, xv);
      }
    }
  }
  static Acc zero() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
  static Acc fma(Sums s, const float* scale, float step, Acc acc) {
    return {vfmaq_f32(acc.low, vcvtq_f32_s32(s.low), vmulq_n_f32(vld1q_f32(scale), step)),
            vfmaq_f32(acc.high, vcvtq_f32_s32(s.high), vmulq_n_f32(vld1q_f32(scale + 4), step))};
  }
  static Acc fma_offset(const float* offset, float v, Acc acc) {
    return {vfmaq_n_f32(acc.low, vld1q_f32(offset), v),
            vfmaq_n_f32(acc.high, vld1q_f32(offset + 4), v)};
  }
  static void store(float* y, int64_t rows, Acc acc) {
    if (rows == kRows) {
      vst1q_f32(y, acc.low);
      vst1q_f32(y + 4, acc.high);
      return;
    }
    float lanes[kRows];
    vst1q_f32(lanes, acc.low);
    vst1q_f32(lanes + 4, acc.high);
    std::memcpy(y, lanes, sizeof(float) * static_cast<size_t>(rows));
  }
};
