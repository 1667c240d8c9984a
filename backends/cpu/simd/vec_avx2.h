// The vector contract for AVX2 + FMA + F16C: eight float lanes in a YMM register. The kernel
// families (simd/elementwise.h, ...) are written once over this contract's operations and compiled
// per instruction set; this header and its AVX-512 and NEON siblings are the only places the
// families' float arithmetic meets intrinsics.
//
// Textual header: include it inside the instruction set's own anonymous namespace, after
// <immintrin.h>, <cmath>, <cstring> and <cstdint>, in a file compiled with -mavx2 -mfma -mf16c, so
// that every function below is private to that translation unit (no copy built with AVX flags can
// be the one a baseline caller ends up running; see x86/x86.h).

// The 256-bit float contract. Every operation is lane-wise unless it says otherwise; results are
// IEEE single precision, rounded to nearest even.
struct Vec256 {
  using Reg = __m256;
  static constexpr int kLanes = 8;

  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  // The n < kLanes floats at p in the first lanes, `fill` in the others; reads only those n.
  static Reg load_tail(const float* p, int64_t n, float fill) {
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, _mm256_set1_ps(fill));
    std::memcpy(lanes, p, sizeof(float) * static_cast<size_t>(n));
    return _mm256_load_ps(lanes);
  }
  // Stores the first n < kLanes lanes of v at p; writes only those n.
  static void store_tail(float* p, int64_t n, Reg v) {
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, v);
    std::memcpy(p, lanes, sizeof(float) * static_cast<size_t>(n));
  }

  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg neg(Reg a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }  // a·b + c, one rounding
  static Reg fms(Reg a, Reg b, Reg c) { return _mm256_fmsub_ps(a, b, c); }    // a·b - c
  static Reg fnma(Reg a, Reg b, Reg c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a·b

  // Sum and maximum of the lanes (in a fixed order: halves, then pairs, then the last two).
  static float sum(Reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float max_of(Reg v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[i] = the sum of the lanes of a[i], i < 8. hadd pairs lanes within each 128-bit half: after
  // two rounds, half h of u0 holds the sums of half h of a[0..3], and of u1 those of a[4..7].
  static void lane_sums8(const Reg* a, float* out) {
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                        _mm256_permute2f128_ps(u0, u1, 0x31)));
  }

  // The pieces of vec_exp (simd/elementwise.h): round to the nearest integer (ties to even); 2^n
  // for lanes holding integers in [-126, 127], built in the exponent bits; `value` where x >= bound
  // and 0 elsewhere (also where x is NaN).
  static Reg round(Reg v) {
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg pow2(Reg n) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static Reg keep_ge(Reg value, Reg x, Reg bound) {
    return _mm256_and_ps(value, _mm256_cmp_ps(x, bound, _CMP_GE_OQ));
  }

  // Masks of the prefill attention (simd/prefill_attention.h): `score` in the lanes whose row
  // position is >= slot_position, -inf in the others; `value` in the lanes whose max is not -inf
  // (nor NaN), 0 in the others.
  static Reg visible(Reg score, int32_t slot_position, const int32_t* row_positions) {
    const __m256i hidden =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(slot_position),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_positions)));
    return _mm256_blendv_ps(score, _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(hidden));
  }
  static Reg seen_or_zero(Reg max_value, Reg value) {
    return _mm256_and_ps(_mm256_cmp_ps(max_value, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ), value);
  }

  // Conversions: kLanes halves (F16C, exact), kLanes signed bytes, one half.
  static Reg load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static void store_f16(uint16_t* p, Reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static Reg load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static Reg load_bf16(const uint16_t* p) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

  // Requests the cache line at p into L1.
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
};

// The 256-bit integer side of the x86 quantized matmuls (simd/quant_matmul.h, with the ISA's own
// quantize_block and weight formats): eight 32-bit block sums a step, their conversion to float
// (exact: the sums stay below 2^24), and a software prefetch into L1.
struct Int256 {
  using V = Vec256;
  using Sums = __m256i;
  static constexpr int kStepBlocks = 8;

  static Sums sub(Sums s, const int32_t* p) {
    return _mm256_sub_epi32(s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m256 to_float(Sums s) { return _mm256_cvtepi32_ps(s); }
  static void prefetch(const void* p) { Vec256::prefetch(p); }
};

// The byte contract of simd/block_matmul.h over 256-bit registers: a sub-block's 32 quants in one
// YMM register, their products with x summed four at a time into eight 32-bit lanes (lanes 0..3:
// elements 0..15, lanes 4..7: elements 16..31) by the instruction set's `Dot`:
// Dot::dot(unsigned bytes, signed bytes) -> those eight lanes (maddubs + madd on AVX2, vpdpbusd
// with AVX-512 VNNI). Products stay in range: unsigned quants are at most 63 and |x_q| at most 127,
// so maddubs's pair sums stay below 2^15.
template <class Dot>
struct Quants256 {
  using Q = __m256i;
  using Sums = __m256i;
  using Acc = __m256;
  static constexpr int kSumScale = 8;
  // As the Q4_0/Q8_0 kernels: weights come straight from DRAM, 2 KiB ahead; chunks of about
  // 128 KiB stay in L2 while every band of x passes.
  static constexpr int64_t kPrefetchBytes = 2048;
  static constexpr size_t kChunkBytes = size_t{128} << 10;

  static Q nibbles(const uint8_t* p) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                            _mm256_set1_epi8(0x0f));
  }
  static Q low_nibbles(const uint8_t* p) {
    return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                            _mm256_set1_epi8(0x0f));
  }
  static Q high_nibbles(const uint8_t* p) {
    return _mm256_and_si256(
        _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), 4),
        _mm256_set1_epi8(0x0f));
  }
  // Byte i takes byte i / 8 of `bits` (the shuffle works within 128-bit halves, each of which
  // holds all four bytes), then tests its own bit.
  static Q bits_16(uint32_t bits) {
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                            _mm256_set1_epi8(16));
  }
  static Q bit_plane_16(const uint8_t* p, int bit) {
    const __m256i mask = _mm256_set1_epi8(static_cast<char>(1 << bit));
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), mask),
                            _mm256_set1_epi8(16));
  }
  static Q two_bits_16(const uint8_t* p, int shift) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i two =
        _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(3));
    return _mm256_slli_epi16(two, 4);  // at most 48 per byte: nothing crosses into the next
  }
  static Q or_(Q a, Q b) { return _mm256_or_si256(a, b); }
  static Q minus(Q a, int8_t value) { return _mm256_sub_epi8(a, _mm256_set1_epi8(value)); }
  static Sums dot_unsigned(Q w, const int8_t* x) {
    return Dot::dot(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  }
  // |w| as the unsigned operand, x with w's sign (x_q is never -128, so the sign moves exactly).
  static Sums dot_signed(Q w, const int8_t* x) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    return Dot::dot(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
  }
  // acc + s·scale, and with one scale for elements 0..15 (lanes 0..3) and another for 16..31: the
  // K-quants' sub-block scales applied in integers (block_matmul.h, ScaledSums).
  static Sums mac(Sums acc, Sums s, int32_t scale) {
    return _mm256_add_epi32(acc, _mm256_mullo_epi32(s, _mm256_set1_epi32(scale)));
  }
  static Sums mac_halves(Sums acc, Sums s, int32_t scale_low, int32_t scale_high) {
    return _mm256_add_epi32(
        acc, _mm256_mullo_epi32(
                 s, _mm256_set_m128i(_mm_set1_epi32(scale_high), _mm_set1_epi32(scale_low))));
  }
  static Sums zero_sums() { return _mm256_setzero_si256(); }

  // Eight blocks a step (block_matmul.h, decode): lane j of totals8 is the sum of s[j]'s lanes
  // (hadd within 128-bit halves twice, then the halves of blocks 0..3 and 4..7 added).
  static Sums totals8(const Sums* s) {
    const __m256i a =
        _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i b =
        _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20),
                            _mm256_permute2x128_si256(a, b, 0x31));
  }
  // Lanes 0..3: the sums of elements 0..15 of s[0..3], lanes 4..7: those of elements 16..31 (the
  // lanes of each Sums holding elements 0..15 are its low four).
  static Sums half_totals4(const Sums* s) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  }
  // Eight signed bytes, one per lane.
  static Sums signed_bytes8(uint64_t bytes) {
    return _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes)));
  }
  static Sums add(Sums a, Sums b) { return _mm256_add_epi32(a, b); }
  static Sums bytes8(uint64_t bytes) {  // eight unsigned bytes, one per lane
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes)));
  }
  static Sums load_sums8(const int32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static Sums mul(Sums a, Sums b) { return _mm256_mullo_epi32(a, b); }
  static Acc to_float(Sums s) { return _mm256_cvtepi32_ps(s); }
  static Acc load8(const float* p) { return _mm256_loadu_ps(p); }
  // The two IEEE halves at `first` and every `stride` bytes after it (eight blocks' d and m, or d
  // and the next field), as floats: eight 32-bit loads (a gather of the same words took several
  // times as long on the Zen 5 VM), each word's low half into `low` and its high half into `high`.
  static void halves8(const uint16_t* first, int stride, Acc* low, Acc* high) {
    const auto* bytes = reinterpret_cast<const char*>(first);
    int32_t word[8];
    for (int j = 0; j < 8; ++j) std::memcpy(&word[j], bytes + j * stride, sizeof(int32_t));
    const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(word));
    // packus keeps 16 bits of each 32-bit lane; the permutation puts the eight in block order.
    const __m256i lows = _mm256_packus_epi32(_mm256_and_si256(words, _mm256_set1_epi32(0xffff)),
                                             _mm256_setzero_si256());
    const __m256i highs = _mm256_packus_epi32(_mm256_srli_epi32(words, 16), _mm256_setzero_si256());
    *low = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(lows, 0x08)));
    *high = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(highs, 0x08)));
  }
  static Acc broadcast(float v) { return _mm256_set1_ps(v); }
  static Acc mul(Acc a, Acc b) { return _mm256_mul_ps(a, b); }
  static Acc fma(Acc a, Acc b, Acc acc) { return _mm256_fmadd_ps(a, b, acc); }

  static Acc zero() { return _mm256_setzero_ps(); }
  // The sums stay below 2^24 (block_matmul.h), so their conversion to float is exact.
  static Acc fma(Sums s, float scale, Acc acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale), acc);
  }
  static float sum(Acc acc) { return Vec256::sum(acc); }
  static float half(uint16_t bits) { return _cvtsh_ss(bits); }
  static void prefetch(const void* p) { Vec256::prefetch(p); }

  // Eight rows' quants as eight 4-byte columns: q[c] = bytes 4c..4c+3 of q[0..8), row r in lane r
  // (an 8 x 8 transpose of 32-bit lanes: pairs, then quads, then the 128-bit halves).
  static void transpose8(Q* q) {
    __m256i pair[8], quad[8];
    for (int r = 0; r < 8; r += 2) {
      pair[r] = _mm256_unpacklo_epi32(q[r], q[r + 1]);
      pair[r + 1] = _mm256_unpackhi_epi32(q[r], q[r + 1]);
    }
    for (int r = 0; r < 8; r += 4) {
      quad[r] = _mm256_unpacklo_epi64(pair[r], pair[r + 2]);
      quad[r + 1] = _mm256_unpackhi_epi64(pair[r], pair[r + 2]);
      quad[r + 2] = _mm256_unpacklo_epi64(pair[r + 1], pair[r + 3]);
      quad[r + 3] = _mm256_unpackhi_epi64(pair[r + 1], pair[r + 3]);
    }
    for (int c = 0; c < 4; ++c) {
      q[c] = _mm256_permute2x128_si256(quad[c], quad[c + 4], 0x20);
      q[c + 4] = _mm256_permute2x128_si256(quad[c], quad[c + 4], 0x31);
    }
  }
  static void store(uint8_t* p, Q q) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), q); }
};

// The panel contract of simd/block_matmul.h's prefill over 256-bit registers: eight rows a panel,
// one per 32-bit lane. Each chunk's products come from maddubs (unsigned quants of at most
// kMaxQuant times signed x of at most 127 in magnitude, so a lane's pair sum is at most
// 2·127·kMaxQuant), as many chunks as stay below 2^15 are added in 16 bits (eight of 4-bit quants,
// four of 5-bit, two of 6-bit), and each such run is widened by madd.
struct Panel256 {
  static constexpr int kRows = 8;
  using Sums = __m256i;
  using Acc = __m256;

  template <int MR, int kChunks, int kMaxQuant>
  static void dot(const uint8_t* w, const int8_t* const* x, Sums* sums) {
    constexpr int kFit = 32767 / (2 * 127 * kMaxQuant);  // chunks a 16-bit lane holds
    constexpr int kRun = kFit >= 8 ? 8 : kFit >= 4 ? 4 : 2;
    static_assert(kFit >= 2 && kChunks % kRun == 0);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < MR; ++i) sums[i] = _mm256_setzero_si256();
    for (int first = 0; first < kChunks; first += kRun) {
      __m256i run[MR];
      for (int c = first; c < first + kRun; ++c) {
        const __m256i wc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * c));
        for (int i = 0; i < MR; ++i) {
          int32_t x4;
          std::memcpy(&x4, x[i] + 4 * c, sizeof(x4));
          const __m256i products = _mm256_maddubs_epi16(wc, _mm256_set1_epi32(x4));
          run[i] = c == first ? products : _mm256_add_epi16(run[i], products);
        }
      }
      for (int i = 0; i < MR; ++i)
        sums[i] = _mm256_add_epi32(sums[i], _mm256_madd_epi16(run[i], ones));
    }
  }
  static Acc zero() { return _mm256_setzero_ps(); }
  // The sums stay below 2^24, so their conversion to float is exact.
  static Acc fma(Sums s, const float* scale, float step, Acc acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
                           _mm256_mul_ps(_mm256_loadu_ps(scale), _mm256_set1_ps(step)), acc);
  }
  static Acc fma_offset(const float* offset, float v, Acc acc) {
    return _mm256_fmadd_ps(_mm256_loadu_ps(offset), _mm256_set1_ps(v), acc);
  }
  static void store(float* y, int64_t rows, Acc acc) {
    if (rows == kRows) {
      _mm256_storeu_ps(y, acc);
    } else {
      Vec256::store_tail(y, rows, acc);
    }
  }
};

// The sum of the 32-bit lanes of v (the x86 quantized kernels' block sums). Inline: files that
// include this header for the float contract alone do not use them.
inline int32_t hsum_i32(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
  return _mm_cvtsi128_si32(v);
}

inline int32_t hsum_i32(__m256i v) {
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}
