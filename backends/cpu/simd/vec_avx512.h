// The vector contract for AVX-512 (F, BW, VL, DQ): sixteen float lanes in a ZMM register, with the
// 256-bit contract as its Half (the families take a last step of eight lanes with it, where the
// AVX-512 kernels always did). Tails are masked loads and stores.
//
// Textual header: include it inside the instruction set's own anonymous namespace, after
// simd/vec_avx2.h, in a file compiled with the AVX-512 flags (see simd/vec_avx2.h).

struct Vec512 {
  using Reg = __m512;
  using Half = Vec256;
  static constexpr int kLanes = 16;

  // The first n < kLanes lanes.
  static __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg load_tail(const float* p, int64_t n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p);
  }
  static void store_tail(float* p, int64_t n, Reg v) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }

  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg neg(Reg a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg fms(Reg a, Reg b, Reg c) { return _mm512_fmsub_ps(a, b, c); }
  static Reg fnma(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }

  // The two 256-bit halves added (or maxed), then as Vec256.
  static float sum(Reg v) {
    return Vec256::sum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
  }
  static float max_of(Reg v) {
    return Vec256::max_of(_mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
  }

  static Reg round(Reg v) {
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg pow2(Reg n) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static Reg keep_ge(Reg value, Reg x, Reg bound) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, bound, _CMP_GE_OQ), value);
  }

  static Reg visible(Reg score, int32_t slot_position, const int32_t* row_positions) {
    const __mmask16 sees = _mm512_cmp_epi32_mask(_mm512_set1_epi32(slot_position),
                                                 _mm512_loadu_si512(row_positions), _MM_CMPINT_LE);
    return _mm512_mask_blend_ps(sees, _mm512_set1_ps(-INFINITY), score);
  }
  static Reg seen_or_zero(Reg max_value, Reg value) {
    return _mm512_maskz_mov_ps(
        _mm512_cmp_ps_mask(max_value, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ), value);
  }

  static Reg load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void store_f16(uint16_t* p, Reg v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static Reg load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static Reg load_bf16(const uint16_t* p) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
};

// The panel contract of simd/block_matmul.h's prefill with AVX-512 VNNI: sixteen rows a panel, one
// per 32-bit lane of a ZMM register (a chunk is the 32 bytes of rows 0..7, then those of 8..15),
// each chunk's products summed straight into 32 bits by vpdpbusd (unsigned quants by signed x).
// Two dependency chains per row of x, as the interleaved Q4_0/Q8_0 tiles, keep enough vpdpbusd in
// flight.
struct Panel512 {
  static constexpr int kRows = 16;
  using Sums = __m512i;
  using Acc = __m512;

  template <int MR, int kChunks, int /*kMaxQuant*/>
  static void dot(const uint8_t* w, const int8_t* const* x, Sums* sums) {
    static_assert(kChunks % 2 == 0);
    __m512i odd[MR];
    for (int i = 0; i < MR; ++i) sums[i] = odd[i] = _mm512_setzero_si512();
    for (int c = 0; c < kChunks; c += 2) {
      const __m512i w0 = _mm512_loadu_si512(w + 64 * c);
      const __m512i w1 = _mm512_loadu_si512(w + 64 * c + 64);
      for (int i = 0; i < MR; ++i) {
        int32_t x0, x1;
        std::memcpy(&x0, x[i] + 4 * c, sizeof(x0));
        std::memcpy(&x1, x[i] + 4 * c + 4, sizeof(x1));
        sums[i] = _mm512_dpbusd_epi32(sums[i], w0, _mm512_set1_epi32(x0));
        odd[i] = _mm512_dpbusd_epi32(odd[i], w1, _mm512_set1_epi32(x1));
      }
    }
    for (int i = 0; i < MR; ++i) sums[i] = _mm512_add_epi32(sums[i], odd[i]);
  }
  static Acc zero() { return _mm512_setzero_ps(); }
  // The sums stay below 2^24, so their conversion to float is exact.
  static Acc fma(Sums s, const float* scale, float step, Acc acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
                           _mm512_mul_ps(_mm512_loadu_ps(scale), _mm512_set1_ps(step)), acc);
  }
  static Acc fma_offset(const float* offset, float v, Acc acc) {
    return _mm512_fmadd_ps(_mm512_loadu_ps(offset), _mm512_set1_ps(v), acc);
  }
  static void store(float* y, int64_t rows, Acc acc) {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << rows) - 1), acc);
  }
};
