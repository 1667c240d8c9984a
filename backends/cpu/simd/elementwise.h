// The element-wise kernel family, written once over a vector contract (simd/vec_avx2.h,
// vec_avx512.h, vec_neon.h): rms_norm, rope, softmax, silu_mul, add, the row conversions, and the
// softmax pieces the attention kernels share. Semantics are those of backends/cpu/portable/; every
// vector loop ends in a scalar tail (or a contract tail load/store) that gives the same result as
// the portable kernel's per-element formula would in that lane.
//
// Textual header: include it inside the instruction set's own anonymous namespace, after its
// contract header and after declaring `using Vec = <the contract>;` (the default vector of every
// function here), with <cmath>, <cstring>, backends/cpu/kernels.h, backends/cpu/rope_table.h and
// core/quant.h included before the namespace. Each instruction set thus compiles a private copy
// (see simd/vec_avx2.h).

// e^x for float lanes, relative error ~1e-7 (a few ulp), so softmax and silu stay far inside the
// 1e-10 NMSE bound. x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in a high part exact in float and a
// low correction, so r carries no cancellation error); e^r is its Taylor series to degree 7, whose
// truncation error (ln2/2)^8/8! ≈ 5e-9 is below float rounding; 2^n is built in the exponent bits.
// Inputs below -87.3 (results below the smallest normal float) and -inf give 0; inputs are capped
// at 88 (e^88 ≈ 1.7e38), which no caller reaches: softmax and attention exponentiate x - max ≤ 0,
// and silu's e^-x only matters where it is small.
template <class V = Vec>
typename V::Reg vec_exp(typename V::Reg x) {
  using Reg = typename V::Reg;
  const Reg min_input = V::set1(-87.3f);
  const Reg clamped = V::min(V::max(x, min_input), V::set1(88.0f));
  const Reg n = V::round(V::mul(clamped, V::set1(1.44269504088896341f)));
  Reg r = V::fnma(n, V::set1(0.693359375f), clamped);
  r = V::fnma(n, V::set1(-2.12194440e-4f), r);
  Reg p = V::set1(1.0f / 5040.0f);
  p = V::fma(p, r, V::set1(1.0f / 720.0f));
  p = V::fma(p, r, V::set1(1.0f / 120.0f));
  p = V::fma(p, r, V::set1(1.0f / 24.0f));
  p = V::fma(p, r, V::set1(1.0f / 6.0f));
  p = V::fma(p, r, V::set1(0.5f));
  p = V::fma(p, r, V::set1(1.0f));
  p = V::fma(p, r, V::set1(1.0f));
  return V::keep_ge(V::mul(p, V::pow2(n)), x, min_input);
}

// The largest of p[0..n), -inf when n is 0.
template <class V = Vec>
float array_max(const float* p, int64_t n) {
  constexpr int64_t kLanes = V::kLanes;
  typename V::Reg max_vector = V::set1(-INFINITY);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) max_vector = V::max(max_vector, V::load(p + i));
  if (i < n) max_vector = V::max(max_vector, V::load_tail(p + i, n - i, -INFINITY));
  return V::max_of(max_vector);
}

// y[i] = e^(x[i] - max) for i < n (y may be x); returns Σ y[i]. Masked entries (-inf) become 0.
template <class V = Vec>
float exp_shifted(const float* x, float* y, int64_t n, float max_value) {
  constexpr int64_t kLanes = V::kLanes;
  const typename V::Reg shift = V::set1(max_value);
  typename V::Reg total = V::zero();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const typename V::Reg e = vec_exp<V>(V::sub(V::load(x + i), shift));
    V::store(y + i, e);
    total = V::add(total, e);
  }
  if (i < n) {
    // The padding lanes are -inf, whose e^ is 0.
    const typename V::Reg e = vec_exp<V>(V::sub(V::load_tail(x + i, n - i, -INFINITY), shift));
    V::store_tail(y + i, n - i, e);
    total = V::add(total, e);
  }
  return V::sum(total);
}

// p[i] *= factor for i < n.
template <class V = Vec>
void scale_in_place(float* p, float factor, int64_t n) {
  constexpr int64_t kLanes = V::kLanes;
  const typename V::Reg f = V::set1(factor);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) V::store(p + i, V::mul(V::load(p + i), f));
  if (i < n) V::store_tail(p + i, n - i, V::mul(V::load_tail(p + i, n - i, 0.0f), f));
}

// y += x
template <class V = Vec>
void accumulate(float* y, const float* x, int64_t n) {
  constexpr int64_t kLanes = V::kLanes;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) V::store(y + i, V::add(V::load(y + i), V::load(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

// Sum of squares in float with four vector accumulators (relative error ~1e-7 for any dim the
// models use); the inverse RMS itself in double.
template <class V = Vec>
void rms_norm(const float* x, const float* weight, float* y, int64_t dim, float eps) {
  constexpr int64_t kLanes = V::kLanes;
  typename V::Reg acc[4] = {V::zero(), V::zero(), V::zero(), V::zero()};
  int64_t i = 0;
  for (; i + 4 * kLanes <= dim; i += 4 * kLanes) {
    for (int j = 0; j < 4; ++j) {
      const typename V::Reg v = V::load(x + i + kLanes * j);
      acc[j] = V::fma(v, v, acc[j]);
    }
  }
  for (; i + kLanes <= dim; i += kLanes) {
    const typename V::Reg v = V::load(x + i);
    acc[0] = V::fma(v, v, acc[0]);
  }
  double sum_squares = V::sum(V::add(V::add(acc[0], acc[1]), V::add(acc[2], acc[3])));
  for (; i < dim; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const auto inverse_rms =
      static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps));
  const typename V::Reg scale = V::set1(inverse_rms);
  i = 0;
  // y may alias x: each element is read before its own store.
  for (; i + kLanes <= dim; i += kLanes)
    V::store(y + i, V::mul(V::mul(V::load(x + i), scale), V::load(weight + i)));
  for (; i < dim; ++i) y[i] = x[i] * inverse_rms * weight[i];
}

// Pairs [i, half) of one head rotated kLanes at a time, as far as whole vectors go; returns where
// it stopped. Both halves are loaded before either is stored, so out may alias x.
template <class V>
int64_t rotate_pairs(const float* first, const float* second, const float* cosines,
                     const float* sines, float* out_first, float* out_second, int64_t i,
                     int64_t half) {
  constexpr int64_t kLanes = V::kLanes;
  for (; i + kLanes <= half; i += kLanes) {
    const typename V::Reg a = V::load(first + i);
    const typename V::Reg b = V::load(second + i);
    const typename V::Reg c = V::load(cosines + i);
    const typename V::Reg s = V::load(sines + i);
    V::store(out_first + i, V::fms(a, c, V::mul(b, s)));
    V::store(out_second + i, V::fma(b, c, V::mul(a, s)));
  }
  return i;
}

// The cosines and sines come from rope_rotation (computed in double from the float32 angle and
// rounded to float, once per position and thread); the rotation runs across the pair index, a
// vector of pairs at a time (then half a vector, where the contract has a Half), for every head.
template <class V = Vec>
void rope(const float* x, float* out, int64_t n_heads, int64_t head_dim, int32_t position,
          const float* inv_freq) {
  const int64_t half = head_dim / 2;
  const float* cosines = rope_rotation(position, inv_freq, half);
  const float* sines = cosines + half;
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* first = x + h * head_dim;
    const float* second = first + half;
    float* out_first = out + h * head_dim;
    float* out_second = out_first + half;
    int64_t i = rotate_pairs<V>(first, second, cosines, sines, out_first, out_second, 0, half);
    if constexpr (requires { typename V::Half; }) {
      i = rotate_pairs<typename V::Half>(first, second, cosines, sines, out_first, out_second, i,
                                         half);
    }
    for (; i < half; ++i) {
      const float a = first[i];
      const float b = second[i];
      out_first[i] = a * cosines[i] - b * sines[i];
      out_second[i] = b * cosines[i] + a * sines[i];
    }
  }
}

template <class V = Vec>
void softmax(const float* x, float* y, int64_t n) {
  // y may alias x: each element is read before its own store.
  const float sum = exp_shifted<V>(x, y, n, array_max<V>(x, n));
  scale_in_place<V>(y, 1.0f / sum, n);
}

// gate · sigmoid(gate) · up; the scalar tail in double, as the portable kernel.
template <class V = Vec>
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr int64_t kLanes = V::kLanes;
  const typename V::Reg one = V::set1(1.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const typename V::Reg g = V::load(gate + i);
    const typename V::Reg e = vec_exp<V>(V::neg(g));
    const typename V::Reg product = V::mul(g, V::load(up + i));
    V::store(out + i, V::div(product, V::add(one, e)));
  }
  for (; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

template <class V = Vec>
void add(const float* a, const float* b, float* out, int64_t n) {
  constexpr int64_t kLanes = V::kLanes;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) V::store(out + i, V::add(V::load(a + i), V::load(b + i)));
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

// The element-wise entries of a kernel table (kernels.h), from this family: each ISA's file calls
// it from its exported elementwise_kernels__<isa>(table), so an element-wise op added here reaches
// every SIMD table without touching the ISA files.
template <class V = Vec>
void set_elementwise_kernels(KernelTable& table) {
  table.rms_norm = rms_norm<V>;
  table.rope = rope<V>;
  table.softmax = softmax<V>;
  table.silu_mul = silu_mul<V>;
  table.add = add<V>;
}

// Row conversions (embed, cast, kv_append). Exact like the portable ones: the contracts convert
// halves with IEEE round-to-nearest-even, and a quantized value times its scale is one float
// product either way.

template <class V = Vec>
void f16_to_f32(const void* src, float* dst, int64_t n) {
  constexpr int64_t kLanes = V::kLanes;
  const auto* half = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) V::store(dst + i, V::load_f16(half + i));
  for (; i < n; ++i) dst[i] = V::half_to_float(half[i]);
}

template <class V = Vec>
void f16_from_f32(const float* src, void* dst, int64_t n) {
  constexpr int64_t kLanes = V::kLanes;
  auto* half = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) V::store_f16(half + i, V::load(src + i));
  if (i < n) {
    // The last values through one padded vector.
    uint16_t rest[kLanes];
    V::store_f16(rest, V::load_tail(src + i, n - i, 0.0f));
    std::memcpy(half + i, rest, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

template <class V = Vec>
void q8_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const typename V::Reg d = V::set1(V::half_to_float(blocks[b].d));
    for (int j = 0; j < kQ8_0BlockSize; j += V::kLanes)
      V::store(dst + b * kQ8_0BlockSize + j, V::mul(V::load_i8(blocks[b].qs + j), d));
  }
}

template <class V = Vec>
void q4_0_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  constexpr int kHalf = kQ4_0BlockSize / 2;
  for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
    const typename V::Reg d = V::set1(V::half_to_float(blocks[b].d));
    // Elements 0..15 are the low nibbles, 16..31 the high ones; each minus 8.
    int8_t values[kQ4_0BlockSize];
    for (int j = 0; j < kHalf; ++j) {
      values[j] = static_cast<int8_t>((blocks[b].qs[j] & 0x0f) - 8);
      values[kHalf + j] = static_cast<int8_t>((blocks[b].qs[j] >> 4) - 8);
    }
    for (int j = 0; j < kQ4_0BlockSize; j += V::kLanes)
      V::store(dst + b * kQ4_0BlockSize + j, V::mul(V::load_i8(values + j), d));
  }
}
