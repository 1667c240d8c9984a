// The float-weight element types and layouts of the float matmuls (F32, F16, BF16, and F16x4's
// groups of four interleaved rows, core/quant.h), and the decode row dot product, written once
// over the vector contract. Each ISA's float matmul (x86/avx2.cpp, x86/avx512.cpp, arm/neon.cpp)
// tiles over them.
//
// Textual header: include it inside the instruction set's own anonymous namespace after its
// contract and simd/bands.h (see simd/vec_avx2.h). Needs <cstring> and core/quant.h.

float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// The layouts place the elements: rows one after the other, or in F16x4's groups of four
// interleaved rows (core/quant.h), stored in K segments of kSegment columns. row(w, n, N, K, first)
// is where row n's part of the segment starting at column `first` begins, and offset(j) where its
// element first + j sits from there: in F16x4, row n starts in its group's first chunk of the
// segment, 16 elements after the row before it, and element j is in chunk j / 16, whose rows are
// four chunks apart.
struct RowMajor {
  static constexpr int kGroupRows = 1;
  static constexpr int64_t kSegment = int64_t{1} << 62;  // one segment
  template <class Element>
  static const Element* row(const Element* w, int64_t n, int64_t, int64_t K, int64_t first) {
    return w + n * K + first;
  }
  static int64_t offset(int64_t j) { return j; }
};

struct FourRowsInterleaved {
  static constexpr int kGroupRows = kF16x4Rows;
  static constexpr int64_t kSegment = kF16x4SegmentElements;
  // The segment's groups come after N·first elements of the earlier segments, each group taking
  // four rows of the segment's width (as f16x4_segment_index, which an ISA file must not call:
  // x86/x86.h).
  template <class Element>
  static const Element* row(const Element* w, int64_t n, int64_t N, int64_t K, int64_t first) {
    const int64_t width = min_of(kSegment, K - first);
    return w + N * first + (n / kF16x4Rows) * kF16x4Rows * width + (n % kF16x4Rows) * kF16x4Chunk;
  }
  static int64_t offset(int64_t j) { return kF16x4Rows * (j - j % kF16x4Chunk) + j % kF16x4Chunk; }
};

// load<V>(p): V::kLanes consecutive elements as floats; at(p): one element.
struct F32Weights : RowMajor {
  using Element = float;
  template <class V>
  static typename V::Reg load(const float* p) {
    return V::load(p);
  }
  static float at(const float* p) { return *p; }
};

struct F16Weights : RowMajor {
  using Element = uint16_t;
  template <class V>
  static typename V::Reg load(const uint16_t* p) {
    return V::load_f16(p);
  }
  static float at(const uint16_t* p) { return Vec::half_to_float(*p); }
};

struct BF16Weights : RowMajor {
  using Element = uint16_t;
  template <class V>
  static typename V::Reg load(const uint16_t* p) {
    return V::load_bf16(p);
  }
  static float at(const uint16_t* p) { return bf16_to_float(*p); }
};

struct F16x4Weights : FourRowsInterleaved {
  using Element = uint16_t;
  template <class V>
  static typename V::Reg load(const uint16_t* p) {
    return V::load_f16(p);
  }
  static float at(const uint16_t* p) { return F16Weights::at(p); }
};

// One weight row against one row of x (decode): the row is read front to back as one sequential
// stream, four vectors a step into four independent accumulators (which hide the FMA latency).
// kPrefetchBytes > 0: each step's weights that far ahead are requested into L1 (an ISA trait:
// the AVX2 table, whose cores needed it, 1 KiB; the AVX-512 table none).
template <class V, class Weights, int kPrefetchBytes>
float float_row_dot(const float* x, const typename Weights::Element* w, int64_t K) {
  constexpr int64_t kLanes = V::kLanes;
  constexpr int kStepBytes = 4 * kLanes * sizeof(typename Weights::Element);
  typename V::Reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int64_t k = 0;
  for (; k + 4 * kLanes <= K; k += 4 * kLanes) {
    if constexpr (kPrefetchBytes > 0) {
      const char* ahead = reinterpret_cast<const char*>(w + k) + kPrefetchBytes;
      for (int line = 0; line < kStepBytes; line += 64) V::prefetch(ahead + line);
    }
    for (int u = 0; u < 4; ++u) {
      acc[u] = V::fma(V::load(x + k + kLanes * u), Weights::template load<V>(w + k + kLanes * u),
                      acc[u]);
    }
  }
  for (; k + kLanes <= K; k += kLanes)
    acc[0] = V::fma(V::load(x + k), Weights::template load<V>(w + k), acc[0]);
  float sum = V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  for (; k < K; ++k) sum += x[k] * Weights::at(w + k);
  return sum;
}

// y[m0 + i, n0 + j] for i < MR, j < NR over the whole of K (the AVX-512 and NEON float GEMMs; the
// AVX2 one slices K, x86/avx2.cpp): a register tile of MR rows of x by NR weight rows, each
// accumulator a vector of partial sums along K, reduced once at the end of the row. x: [M, K];
// w: [N, K] in the Weights' layout; y: [M, N]. The layout's K segments are taken in turn (the
// accumulators run on across them); K is a multiple of kF16x4Chunk when there is more than one,
// so only the last can leave a tail.
template <class V, class Weights, int MR, int NR>
void float_tile(const float* x, const typename Weights::Element* w, float* y, int64_t N, int64_t K,
                int64_t m0, int64_t n0) {
  constexpr int64_t kLanes = V::kLanes;
  typename V::Reg acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  const float* x_rows[MR];
  const typename Weights::Element* w_rows[NR] = {};
  for (int i = 0; i < MR; ++i) x_rows[i] = x + (m0 + i) * K;
  int64_t k = 0;
  int64_t first = 0;
  for (; first < K; first += Weights::kSegment) {
    for (int j = 0; j < NR; ++j) w_rows[j] = Weights::row(w, n0 + j, N, K, first);
    const int64_t end = min_of(first + Weights::kSegment, K);
    for (k = first; k + kLanes <= end; k += kLanes) {
      typename V::Reg wv[NR];
      for (int j = 0; j < NR; ++j)
        wv[j] = Weights::template load<V>(w_rows[j] + Weights::offset(k - first));
      for (int i = 0; i < MR; ++i) {
        const typename V::Reg xv = V::load(x_rows[i] + k);
        for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(xv, wv[j], acc[i][j]);
      }
    }
    if (k < end) break;  // the tail of the last segment
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      float sum = V::sum(acc[i][j]);
      for (int64_t t = k; t < K; ++t)
        sum += x_rows[i][t] * Weights::at(w_rows[j] + Weights::offset(t - first));
      y[(m0 + i) * N + n0 + j] = sum;
    }
  }
}

// Weight rows [n_begin, n_end) against MR rows of x from m0: float_tile over NR rows at a time,
// then over the rows left one by one.
template <class V, class Weights, int MR, int NR>
void float_tiles(const float* x, const typename Weights::Element* w, float* y, int64_t N,
                 int64_t K, int64_t m0, int64_t n_begin, int64_t n_end) {
  int64_t n = n_begin;
  for (; n + NR <= n_end; n += NR) float_tile<V, Weights, MR, NR>(x, w, y, N, K, m0, n);
  for (; n < n_end; ++n) float_tile<V, Weights, MR, 1>(x, w, y, N, K, m0, n);
}
