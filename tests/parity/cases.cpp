// The parity matrix. Each op lists its dtype combinations (including some no backend supports, to
// show skips) and at least three shapes: odd sizes and SIMD tile boundaries (15/16/17, 33, 65,
// multi-block K). Tolerances are max NMSE against the double-precision reference; each is
// justified where it is set. Exact ops (data movement, decoding, rounding casts) use 0.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/rope.h"
#include "tests/parity/parity.h"

namespace edgelm::parity {
namespace {

using Expected = std::vector<std::vector<double>>;

// A float32 result of one rounding: relative error ≤ 2^-24, NMSE ≤ 2^-48 ≈ 3.6e-15.
constexpr double kOneRounding = 1e-12;
// A float32 computation with a few roundings or a float32 accumulation over up to ~2k terms
// (fast kernels): relative error ~ sqrt(n)·2^-24 → NMSE ≲ 1e-11; 1e-10 leaves headroom while any
// real bug (a wrong index, a dropped term) gives NMSE far above 1e-6.
constexpr double kFloatMath = 1e-10;
// Quantized matmul may quantize activations to 8 bits per 32-block (as GGML's dot products do):
// step max|x|/127, error variance step²/12 → NMSE ≈ 3e-5 on Gaussian rows on average. Cases with
// only a few outputs scatter around that (the SIMD kernels measure up to 8.6e-5 over 30 seeds),
// so the bound is 10x the mean; a real bug (wrong nibble, scale or block) gives NMSE > 1e-2.
constexpr double kQuantizedActivations = 3e-4;
// Quantizing casts are compared with their input, so the tolerance is the format's own error on
// Gaussian data: Q8_0 ≈ 2e-5 (step max/127), Q4_0 ≈ 6e-3 (step max/8); bounds with 3-5x headroom.
// Q4_1's step (max - min)/15 is a little smaller than Q4_0's, Q5_0's and Q5_1's (max/16,
// (max - min)/31) about half that: NMSE ≈ 6e-3, 1.8e-3 and 1.4e-3 (up to 1.1e-2, 2.6e-3 and
// 2.1e-3 on one-block rows over five seeds).
constexpr double kQ8_0Format = 1e-4;
constexpr double kQ4_0Format = 2e-2;
constexpr double kQ4_1Format = 2e-2;
constexpr double kQ5Format = 6e-3;

const std::vector<DType> kWeightTypes = {DType::F32,  DType::F16,  DType::BF16,
                                         DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                         DType::Q5_0, DType::Q5_1, DType::I32};

int64_t uniform_int(std::mt19937_64& rng, int64_t low, int64_t high) {  // [low, high]
  return std::uniform_int_distribution<int64_t>(low, high)(rng);
}

// `count` distinct sorted values from [0, range).
std::vector<double> sorted_subset(std::mt19937_64& rng, int64_t range, int64_t count) {
  std::vector<int64_t> all(static_cast<size_t>(range));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(count));
  std::sort(all.begin(), all.end());
  return {all.begin(), all.end()};
}

std::string dims(std::initializer_list<std::pair<const char*, int64_t>> named) {
  std::string text;
  for (const auto& [key, value] : named) {
    if (!text.empty()) text += "_";
    text += key + std::to_string(value);
  }
  return text;
}

void embed_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t vocab, dim, n;
  };
  // The stored types, then the CPU's load-time layouts (a tied output matrix repacked for matmul
  // is also the embedding table): whole row groups, and rows past one K segment of each layout.
  std::vector<std::pair<DType, std::vector<S>>> tables;
  for (DType dtype : kWeightTypes)
    tables.push_back({dtype, {S{7, 32, 1}, S{50, 96, 5}, S{33, 256, 17}}});
  for (DType dtype : {DType::Q4_0x8, DType::Q8_0x8, DType::F16x4})
    tables.push_back({dtype, {S{8, 32, 1}, S{48, 96, 9}, S{24, 4160, 5}}});
  for (const auto& [dtype, sizes] : tables) {
    for (S s : sizes) {
      cases.push_back({OpKind::Embed,
                       {dtype},
                       dims({{"vocab", s.vocab}, {"dim", s.dim}, {"n", s.n}}),
                       0.0,  // decoding is exact in float32
                       [=](Context& ctx) {
                         Tensor table = ctx.random(dtype, {s.vocab, s.dim});
                         std::vector<double> ids(static_cast<size_t>(s.n));
                         for (double& id : ids) id = uniform_int(ctx.rng(), 0, s.vocab - 1);
                         Tensor id_tensor = ctx.values(DType::I32, {s.n}, ids);
                         Tensor out = ctx.output(DType::F32, {s.n, s.dim});
                         ctx.backend().embed(table, id_tensor, out);
                         ctx.compare(out);
                       },
                       [=](const Context& ctx) {
                         const auto table = ctx.input(0);
                         const auto ids = ctx.input(1);
                         std::vector<double> out;
                         for (double id : ids) {
                           for (int64_t d = 0; d < s.dim; ++d) {
                             out.push_back(table[static_cast<size_t>(id) * s.dim + d]);
                           }
                         }
                         return Expected{out};
                       }});
    }
  }
}

// Rows for the cases with non-finite inputs: row m of [M, K] normal values gets pattern
// (first + m) % 5: a NaN, +inf or -inf at a random position; one whole 32-block of values around
// 1e-38, too small for the 8-bit rounding of x to scale (it rounds them to zeros); or nothing.
enum class Spoil { kNaN, kPositiveInf, kNegativeInf, kTinyBlock, kNone, kCount };

std::vector<double> spoiled_rows(std::mt19937_64& rng, int64_t M, int64_t K, Spoil first,
                                 double scale = 1.0) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> x(static_cast<size_t>(M * K));
  for (double& v : x) v = normal(rng);
  for (int64_t m = 0; m < M; ++m) {
    const auto spoil =
        static_cast<Spoil>((static_cast<int>(first) + m) % static_cast<int>(Spoil::kCount));
    double* row = x.data() + m * K;
    const int64_t k = uniform_int(rng, 0, K - 1);
    switch (spoil) {
      case Spoil::kNaN:
        row[k] = std::nan("");
        break;
      case Spoil::kPositiveInf:
        row[k] = INFINITY;
        break;
      case Spoil::kNegativeInf:
        row[k] = -INFINITY;
        break;
      case Spoil::kTinyBlock:
        for (int64_t i = k / 32 * 32; i < k / 32 * 32 + 32 && i < K; ++i) row[i] *= 1e-38 / scale;
        break;
      case Spoil::kNone:
      case Spoil::kCount:
        break;
    }
  }
  return x;
}

struct MatmulShape {
  int64_t M, N, K;
};

// x · Wᵀ against the double-precision product. With `spoil`, x holds NaN, infinities and blocks
// too small to scale (spoiled_rows, starting at that pattern; the name gets `what`): every product
// with a non-finite value must be non-finite (the harness requires finiteness to agree), never an
// arbitrary finite number, which is what rounding such x to 8 bits once gave; the tiny blocks
// contribute ~1e-38, so their rows match the reference within the usual tolerance.
void add_matmul_case(std::vector<OpCase>& cases, DType dtype, MatmulShape s,
                     std::optional<Spoil> spoil = std::nullopt, const char* what = "") {
  const double tolerance = dtype_is_quantized(dtype) ? kQuantizedActivations : kFloatMath;
  const std::string shape = dims({{"M", s.M}, {"N", s.N}, {"K", s.K}});
  cases.push_back({OpKind::Matmul,
                   {dtype},
                   spoil ? shape + "_" + what : shape,
                   tolerance,
                   [=](Context& ctx) {
                     Tensor x = spoil ? ctx.values(DType::F32, {s.M, s.K},
                                                   spoiled_rows(ctx.rng(), s.M, s.K, *spoil))
                                      : ctx.random(DType::F32, {s.M, s.K});
                     Tensor w = ctx.random(dtype, {s.N, s.K}, 0.5f);
                     Tensor y = ctx.output(DType::F32, {s.M, s.N});
                     ctx.backend().matmul(x, w, y);
                     ctx.compare(y);
                   },
                   [=](const Context& ctx) {
                     const auto x = ctx.input(0);
                     const auto w = ctx.input(1);
                     std::vector<double> y(static_cast<size_t>(s.M * s.N));
                     for (int64_t m = 0; m < s.M; ++m) {
                       for (int64_t n = 0; n < s.N; ++n) {
                         double sum = 0.0;
                         for (int64_t k = 0; k < s.K; ++k) sum += x[m * s.K + k] * w[n * s.K + k];
                         y[m * s.N + n] = sum;
                       }
                     }
                     return Expected{y};
                   }});
}

void matmul_cases(std::vector<OpCase>& cases) {
  for (DType dtype : kWeightTypes) {
    for (MatmulShape s :
         {MatmulShape{1, 1, 32}, MatmulShape{1, 17, 96}, MatmulShape{5, 7, 64},
          MatmulShape{4, 33, 288}, MatmulShape{17, 16, 160}, MatmulShape{33, 65, 256},
          MatmulShape{1, 15, 1024}, MatmulShape{6, 50, 2080}}) {
      add_matmul_case(cases, dtype, s);
    }
  }
  // Float weights take any K: one that is no multiple of 8, past the float GEMM's K slices (1024
  // elements in the AVX2 kernel), with an M tail and an N tail.
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    add_matmul_case(cases, dtype, MatmulShape{5, 13, 1091});
  // Q4_0x8 and Q8_0x8 hold whole groups of eight rows: N = 8, 16, 24, 40, 64 (one to eight
  // groups, split between threads on group boundaries), with the same M tails and K lengths as
  // above, and K past one segment (2048 values for both layouts): 2080 and 4160 end in
  // a short segment, 8192 is Llama-3.2-1B's down projection. 1032 rows (129 groups) are enough for
  // the CPU backend to pair the two halves for the x86 decode kernels (KernelTable::decode_pairs,
  // x86.h: kMinPairDistanceBytes), an odd group left alone.
  for (DType dtype : {DType::Q4_0x8, DType::Q8_0x8}) {
    for (MatmulShape s :
         {MatmulShape{1, 8, 32}, MatmulShape{1, 16, 96}, MatmulShape{5, 24, 64},
          MatmulShape{4, 32, 288}, MatmulShape{17, 16, 160}, MatmulShape{33, 64, 256},
          MatmulShape{1, 64, 1024}, MatmulShape{3, 24, 2080}, MatmulShape{1, 16, 4160},
          MatmulShape{5, 24, 4160}, MatmulShape{1, 16, 8192}, MatmulShape{1, 24, 96},
          MatmulShape{1, 40, 4160}, MatmulShape{1, 1032, 2048}}) {
      add_matmul_case(cases, dtype, s);
    }
  }
  // F16x4 holds whole groups of four rows and whole chunks of 16 columns: one to eighteen groups,
  // M tails, and K from one chunk to the 8192 of Llama-3.2-1B's down projection, past one K
  // segment (2048 columns): 2064 and 4112 end in a one-chunk segment, and 72 rows at 8192 are more
  // groups than the decode kernels take per batch; 140 rows (35 groups) are more than a batch of
  // pairs, and 1028 rows are enough for the CPU backend to pair the two halves for the AVX-512
  // decode kernel (KernelTable::decode_pairs, x86.h: kMinPairDistanceBytes).
  for (MatmulShape s : {MatmulShape{1, 4, 16}, MatmulShape{1, 20, 96}, MatmulShape{5, 12, 64},
                        MatmulShape{4, 32, 288}, MatmulShape{17, 16, 160}, MatmulShape{33, 64, 256},
                        MatmulShape{1, 64, 1024}, MatmulShape{2, 8, 8192}, MatmulShape{1, 20, 2064},
                        MatmulShape{7, 12, 4112}, MatmulShape{1, 72, 8192},
                        MatmulShape{1, 140, 2064}, MatmulShape{1, 1028, 2048}}) {
    add_matmul_case(cases, DType::F16x4, s);
  }
  // Non-finite and tiny x, on every weight type and layout: one row (decode) and row blocks with
  // tails (prefill), the spoiled values in paired and unpaired blocks alike.
  std::vector<DType> layouts = kWeightTypes;
  layouts.insert(layouts.end(), {DType::Q4_0x8, DType::Q8_0x8, DType::F16x4});
  for (DType dtype : layouts) {
    add_matmul_case(cases, dtype, {1, 16, 96}, Spoil::kNaN, "nan");
    add_matmul_case(cases, dtype, {1, 16, 96}, Spoil::kTinyBlock, "tiny");
    add_matmul_case(cases, dtype, {5, 24, 160}, Spoil::kNaN, "spoiled");
    add_matmul_case(cases, dtype, {17, 16, 96}, Spoil::kPositiveInf, "spoiled");
  }
}

std::vector<double> rms_norm_reference(const std::vector<double>& x, const std::vector<double>& w,
                                       int64_t dim, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / dim; ++r) {
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += x[r * dim + i] * x[r * dim + i];
    const double inverse = 1.0 / std::sqrt(sum / dim + eps);
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * inverse * w[i];
  }
  return y;
}

void rms_norm_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t rows, dim;
    bool in_place;
  };
  constexpr float kEps = 1e-5f;
  for (DType dtype : {DType::F32, DType::F16}) {
    for (S s :
         {S{1, 7, false}, S{3, 64, false}, S{5, 255, false}, S{2, 2048, false}, S{3, 64, true}}) {
      std::string shape = dims({{"rows", s.rows}, {"dim", s.dim}}) + (s.in_place ? "_inplace" : "");
      cases.push_back({OpKind::RmsNorm,
                       {dtype},
                       shape,
                       kFloatMath,
                       [=](Context& ctx) {
                         Tensor x = s.in_place ? ctx.inout(dtype, {s.rows, s.dim})
                                               : ctx.random(dtype, {s.rows, s.dim});
                         Tensor w = ctx.random(DType::F32, {s.dim});
                         Tensor y = s.in_place ? x : ctx.output(dtype, {s.rows, s.dim});
                         ctx.backend().rms_norm(x, w, kEps, y);
                         ctx.compare(y);
                       },
                       [=](const Context& ctx) {
                         return Expected{
                             rms_norm_reference(ctx.input(0), ctx.input(1), s.dim, kEps)};
                       }});
    }
  }
}

void rope_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t tokens, heads, head_dim;
    bool llama3;
    bool in_place;
  };
  for (S s : {S{1, 1, 2, false, false}, S{3, 4, 64, true, false}, S{5, 3, 128, false, false},
              S{7, 2, 34, true, false}, S{4, 2, 64, true, true}}) {
    RopeParams params;
    params.head_dim = s.head_dim;
    params.theta = s.llama3 ? 500000.0f : 10000.0f;
    if (s.llama3) {
      params.scaling = {RopeScaling::Type::Llama3, 32.0f, 1.0f, 4.0f, 8192};
    }
    const std::vector<float> inv_freq = rope_inv_freq(params);
    std::string shape = dims({{"tokens", s.tokens}, {"heads", s.heads}, {"dim", s.head_dim}}) +
                        (s.llama3 ? "_llama3" : "") + (s.in_place ? "_inplace" : "");
    cases.push_back({OpKind::Rope,
                     {DType::F32},
                     shape,
                     kFloatMath,
                     [=](Context& ctx) {
                       Shape x_shape{s.tokens, s.heads, s.head_dim};
                       Tensor x = s.in_place ? ctx.inout(DType::F32, x_shape)
                                             : ctx.random(DType::F32, x_shape);
                       std::vector<double> positions(static_cast<size_t>(s.tokens));
                       for (double& p : positions) p = uniform_int(ctx.rng(), 0, 9000);
                       Tensor pos = ctx.values(DType::I32, {s.tokens}, positions);
                       Tensor freq = ctx.values(DType::F32, {s.head_dim / 2},
                                                {inv_freq.begin(), inv_freq.end()});
                       Tensor out = s.in_place ? x : ctx.output(DType::F32, x_shape);
                       ctx.backend().rope(x, pos, freq, out);
                       ctx.compare(out);
                     },
                     [=](const Context& ctx) {
                       const auto x = ctx.input(0);
                       const auto positions = ctx.input(1);
                       const auto freq = ctx.input(2);
                       const int64_t half = s.head_dim / 2;
                       std::vector<double> out(x.size());
                       for (int64_t t = 0; t < s.tokens; ++t) {
                         for (int64_t h = 0; h < s.heads; ++h) {
                           const size_t base = (t * s.heads + h) * s.head_dim;
                           for (int64_t i = 0; i < half; ++i) {
                             // The angle is defined as a float32 product (as in HF).
                             const double angle =
                                 static_cast<float>(positions[t]) * static_cast<float>(freq[i]);
                             const double a = x[base + i];
                             const double b = x[base + i + half];
                             out[base + i] = a * std::cos(angle) - b * std::sin(angle);
                             out[base + i + half] = b * std::cos(angle) + a * std::sin(angle);
                           }
                         }
                       }
                       return Expected{out};
                     }});
  }
}

struct AttentionShape {
  int64_t n_queries, n_heads, n_kv_heads, n_slots, head_dim;
  bool mass;
  int64_t mass_first_query;
  const char* kind;  // how positions are laid out
};

// Positions for each attention layout; see the cases below.
void attention_positions(const AttentionShape& s, std::mt19937_64& rng, std::vector<double>& q_pos,
                         std::vector<double>& kv_pos) {
  q_pos.assign(static_cast<size_t>(s.n_queries), 0);
  kv_pos.assign(static_cast<size_t>(s.n_slots * s.n_kv_heads), 0);
  const std::string kind = s.kind;
  if (kind == "decode") {  // one query after every cached slot; slots hold increasing positions
    const auto positions = sorted_subset(rng, 4 * s.n_slots, s.n_slots);
    q_pos[0] = 4 * static_cast<double>(s.n_slots);
    for (int64_t slot = 0; slot < s.n_slots; ++slot) {
      for (int64_t g = 0; g < s.n_kv_heads; ++g) kv_pos[slot * s.n_kv_heads + g] = positions[slot];
    }
  } else if (kind == "decode_masked") {
    // One query at 2n; each kv head kept its own positions in [0, 4n), so about half of each
    // head's slots lie past the query and are masked, differently per head. Head 0 holds only
    // positions past the query: its query heads see nothing (zeros).
    q_pos[0] = 2 * static_cast<double>(s.n_slots);
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      const auto kept = g == 0 ? sorted_subset(rng, 2 * s.n_slots - 1, s.n_slots)
                               : sorted_subset(rng, 4 * s.n_slots, s.n_slots);
      for (int64_t slot = 0; slot < s.n_slots; ++slot) {
        kv_pos[slot * s.n_kv_heads + g] = g == 0 ? 2 * s.n_slots + 1 + kept[slot] : kept[slot];
      }
    }
  } else if (kind == "prefill") {  // a prompt attending to itself: the causal mask
    for (int64_t i = 0; i < s.n_queries; ++i) q_pos[i] = static_cast<double>(i);
    for (int64_t slot = 0; slot < s.n_slots; ++slot) {
      for (int64_t g = 0; g < s.n_kv_heads; ++g) kv_pos[slot * s.n_kv_heads + g] = slot;
    }
  } else if (kind == "chunk") {  // the last chunk of a long prompt: its queries hold the last
                                 // positions and see every slot up to their own (causal)
    for (int64_t i = 0; i < s.n_queries; ++i) {
      q_pos[i] = static_cast<double>(s.n_slots - s.n_queries + i);
    }
    for (int64_t slot = 0; slot < s.n_slots; ++slot) {
      for (int64_t g = 0; g < s.n_kv_heads; ++g) kv_pos[slot * s.n_kv_heads + g] = slot;
    }
  } else {  // "evicted": each kv head kept different old slots, then a new chunk was appended
    const int64_t n_old = s.n_slots - s.n_queries;
    const int64_t first_new = 3 * n_old + 10;
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      const auto kept = sorted_subset(rng, 3 * n_old, n_old);
      for (int64_t slot = 0; slot < n_old; ++slot) kv_pos[slot * s.n_kv_heads + g] = kept[slot];
      for (int64_t j = 0; j < s.n_queries; ++j) {
        kv_pos[(n_old + j) * s.n_kv_heads + g] = static_cast<double>(first_new + j);
      }
    }
    // The first two queries sit before every cached position: they see nothing (zeros).
    for (int64_t i = 0; i < s.n_queries; ++i) q_pos[i] = i < 2 ? -2 + i : first_new + i;
  }
}

Expected attention_reference(const AttentionShape& s, const Context& ctx) {
  const auto q = ctx.input(0), k = ctx.input(1), v = ctx.input(2);
  const auto q_pos = ctx.input(3), kv_pos = ctx.input(4);
  const int64_t group = s.n_heads / s.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<double> out(static_cast<size_t>(s.n_queries * s.n_heads * s.head_dim), 0.0);
  std::vector<double> mass(static_cast<size_t>(s.n_kv_heads * s.n_slots), 0.0);
  for (int64_t i = 0; i < s.n_queries; ++i) {
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const int64_t g = h / group;
      std::vector<double> p(static_cast<size_t>(s.n_slots), 0.0);
      double max_score = -INFINITY;
      for (int64_t slot = 0; slot < s.n_slots; ++slot) {
        if (kv_pos[slot * s.n_kv_heads + g] > q_pos[i]) continue;
        double dot = 0.0;
        for (int64_t d = 0; d < s.head_dim; ++d) {
          dot += q[(i * s.n_heads + h) * s.head_dim + d] *
                 k[(slot * s.n_kv_heads + g) * s.head_dim + d];
        }
        p[slot] = dot * static_cast<float>(scale);  // the op receives scale as a float
        max_score = std::max(max_score, p[slot]);
      }
      if (max_score == -INFINITY) continue;
      double total = 0.0;
      for (int64_t slot = 0; slot < s.n_slots; ++slot) {
        const bool visible = kv_pos[slot * s.n_kv_heads + g] <= q_pos[i];
        p[slot] = visible ? std::exp(p[slot] - max_score) : 0.0;
        total += p[slot];
      }
      for (int64_t slot = 0; slot < s.n_slots; ++slot) {
        p[slot] /= total;
        for (int64_t d = 0; d < s.head_dim; ++d) {
          out[(i * s.n_heads + h) * s.head_dim + d] +=
              p[slot] * v[(slot * s.n_kv_heads + g) * s.head_dim + d];
        }
        if (i >= s.mass_first_query) mass[g * s.n_slots + slot] += p[slot];
      }
    }
  }
  return s.mass ? Expected{out, mass} : Expected{out};
}

void attention_cases(std::vector<OpCase>& cases) {
  const AttentionShape shapes[] = {
      {1, 4, 2, 37, 64, true, 0, "decode"},
      {7, 6, 3, 7, 32, true, 3, "prefill"},
      {5, 8, 8, 21, 16, false, 0, "evicted"},
      {1, 32, 8, 129, 64, true, 0, "decode"},
      {33, 2, 1, 40, 8, true, 0, "evicted"},
      // A long cache: backends that split the slots of one query (flash decoding, OpenCL: 256
      // slots per split) combine several partial softmaxes here.
      {1, 8, 2, 700, 64, true, 0, "decode"},
      {3, 4, 2, 600, 32, true, 1, "evicted"},
      // Enough queries for the SIMD tables' prefill path (two GEMMs per kv head, blocks of about
      // 64 query heads): several blocks and a partial one, slots no query sees, GQA groups of 4
      // and 3, and queries that see nothing.
      {70, 8, 2, 100, 64, true, 5, "prefill"},
      {20, 12, 4, 57, 128, false, 0, "evicted"},
      // One query over slots masked differently per kv head (the SIMD tables' decode path takes
      // a thread's kv heads together, slot by slot): with mass not exported for it (first query
      // 1: zeros), and GQA groups of 3 without mass.
      {1, 8, 4, 300, 64, true, 1, "decode_masked"},
      {1, 12, 4, 90, 32, false, 0, "decode_masked"},
      // The decode kernel's other GQA groupings (up to eight dot products per step: eight kv
      // heads of one query, or one kv head of six, or eleven queries in steps of 8 and 3), row
      // lengths with an element tail (12, 20), and slot counts that are not a multiple of its
      // 4-slot steps.
      {1, 5, 5, 23, 12, true, 0, "decode"},
      {1, 6, 1, 41, 20, false, 0, "decode"},
      {1, 22, 2, 50, 16, true, 0, "decode_masked"},
      // The AVX-512 decode kernel (head_dim 64 and 128): Llama-3.2-3B's grouping (three queries
      // per kv head, 128-wide heads) over masked slots with mass, a group of eight, and slot
      // counts that leave partial blocks of its 16-slot scores and 8-slot outputs.
      {1, 24, 8, 77, 128, true, 0, "decode_masked"},
      {1, 16, 2, 45, 64, false, 0, "decode"},
      // A long cache, masked differently per kv head, four kv heads per thread.
      {1, 16, 8, 601, 64, true, 0, "decode_masked"},
      // The SIMD prefill kernel (simd/prefill_attention.h: head_dim a multiple of 64 on
      // AVX-512, of 16 on AVX2 and NEON; blocks of 64 rows of query heads, slots in panels of 256):
      // a prompt's last chunk over three panels (the last partial; score tiles that run past a
      // panel's end into the next) with mass from a query inside a block, and a 32-wide head;
      // many slots that no query sees, under the causal mask; Llama-3.2-3B's grouping with a
      // query's three heads split between two blocks; more query heads per kv head than a block
      // holds.
      {70, 8, 2, 600, 64, true, 30, "chunk"},
      {20, 6, 2, 530, 32, false, 0, "chunk"},
      {130, 8, 2, 520, 64, true, 100, "prefill"},
      {50, 24, 8, 300, 128, true, 20, "evicted"},
      {40, 72, 1, 70, 64, false, 0, "prefill"},
      // The panel kernel (x86: head sizes the prefill kernel does not take; NEON: all) under the
      // causal mask over several query blocks, where each block leaves out the slots past the
      // last one it sees.
      {70, 8, 2, 100, 24, true, 5, "prefill"},
  };
  for (DType dtype : {DType::F32, DType::F16, DType::Q8_0}) {
    for (const AttentionShape& s : shapes) {
      std::string shape = std::string(s.kind) + "_" +
                          dims({{"q", s.n_queries},
                                {"heads", s.n_heads},
                                {"kv", s.n_kv_heads},
                                {"slots", s.n_slots},
                                {"dim", s.head_dim}}) +
                          (s.mass ? "_mass" : "");
      cases.push_back({OpKind::Attention,
                       {dtype},
                       shape,
                       kFloatMath,
                       [=](Context& ctx) {
                         AttentionArgs args;
                         args.q = ctx.random(DType::F32, {s.n_queries, s.n_heads, s.head_dim});
                         args.k = ctx.random(dtype, {s.n_slots, s.n_kv_heads, s.head_dim});
                         args.v = ctx.random(dtype, {s.n_slots, s.n_kv_heads, s.head_dim});
                         std::vector<double> q_pos, kv_pos;
                         attention_positions(s, ctx.rng(), q_pos, kv_pos);
                         args.q_pos = ctx.values(DType::I32, {s.n_queries}, q_pos);
                         args.kv_pos = ctx.values(DType::I32, {s.n_slots, s.n_kv_heads}, kv_pos);
                         args.out = ctx.output(DType::F32, {s.n_queries, s.n_heads, s.head_dim});
                         if (s.mass) args.mass = ctx.output(DType::F32, {s.n_kv_heads, s.n_slots});
                         args.mass_first_query = s.mass_first_query;
                         args.scale =
                             static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
                         ctx.backend().attention(args);
                         ctx.compare(args.out);
                         if (s.mass) ctx.compare(args.mass);
                       },
                       [=](const Context& ctx) { return attention_reference(s, ctx); }});
    }
  }
}

void elementwise_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t rows, n;
    bool in_place;
  };
  const S shapes[] = {{1, 7, false}, {3, 64, false}, {2, 1000, false}, {4, 33, true}};
  for (DType dtype : {DType::F32, DType::F16}) {
    for (S s : shapes) {
      std::string shape = dims({{"rows", s.rows}, {"n", s.n}}) + (s.in_place ? "_inplace" : "");
      cases.push_back({OpKind::SiluMul,
                       {dtype},
                       shape,
                       kFloatMath,
                       [=](Context& ctx) {
                         Tensor gate = s.in_place ? ctx.inout(dtype, {s.rows, s.n}, 3.0f)
                                                  : ctx.random(dtype, {s.rows, s.n}, 3.0f);
                         Tensor up = ctx.random(dtype, {s.rows, s.n});
                         Tensor out = s.in_place ? gate : ctx.output(dtype, {s.rows, s.n});
                         ctx.backend().silu_mul(gate, up, out);
                         ctx.compare(out);
                       },
                       [](const Context& ctx) {
                         const auto gate = ctx.input(0), up = ctx.input(1);
                         std::vector<double> out(gate.size());
                         for (size_t i = 0; i < out.size(); ++i) {
                           out[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
                         }
                         return Expected{out};
                       }});
      cases.push_back({OpKind::Add,
                       {dtype},
                       shape,
                       kOneRounding,
                       [=](Context& ctx) {
                         Tensor a = s.in_place ? ctx.inout(dtype, {s.rows, s.n})
                                               : ctx.random(dtype, {s.rows, s.n});
                         Tensor b = ctx.random(dtype, {s.rows, s.n});
                         Tensor out = s.in_place ? a : ctx.output(dtype, {s.rows, s.n});
                         ctx.backend().add(a, b, out);
                         ctx.compare(out);
                       },
                       [](const Context& ctx) {
                         const auto a = ctx.input(0), b = ctx.input(1);
                         std::vector<double> out(a.size());
                         for (size_t i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
                         return Expected{out};
                       }});
      cases.push_back({OpKind::Softmax,
                       {dtype},
                       shape,
                       kFloatMath,
                       [=](Context& ctx) {
                         // Scale 10 gives logits far apart, as attention scores and vocab logits
                         // are.
                         Tensor x = s.in_place ? ctx.inout(dtype, {s.rows, s.n}, 10.0f)
                                               : ctx.random(dtype, {s.rows, s.n}, 10.0f);
                         Tensor y = s.in_place ? x : ctx.output(dtype, {s.rows, s.n});
                         ctx.backend().softmax(x, y);
                         ctx.compare(y);
                       },
                       [=](const Context& ctx) {
                         const auto x = ctx.input(0);
                         std::vector<double> y(x.size());
                         for (int64_t r = 0; r < s.rows; ++r) {
                           const double* row = x.data() + r * s.n;
                           const double max_value = *std::max_element(row, row + s.n);
                           double total = 0.0;
                           for (int64_t i = 0; i < s.n; ++i) total += std::exp(row[i] - max_value);
                           for (int64_t i = 0; i < s.n; ++i)
                             y[r * s.n + i] = std::exp(row[i] - max_value) / total;
                         }
                         return Expected{y};
                       }});
    }
  }
}

void cast_cases(std::vector<OpCase>& cases) {
  struct Pair {
    DType src, dst;
    double tolerance;
  };
  const Pair pairs[] = {
      {DType::F32, DType::F32, 0.0},          {DType::F32, DType::F16, 0.0},
      {DType::F16, DType::F32, 0.0},          {DType::F32, DType::BF16, 0.0},
      {DType::BF16, DType::F32, 0.0},         {DType::F16, DType::BF16, 0.0},
      {DType::F32, DType::Q8_0, kQ8_0Format}, {DType::Q8_0, DType::F32, 0.0},
      {DType::F32, DType::Q4_0, kQ4_0Format}, {DType::Q4_0, DType::F32, 0.0},
      {DType::F32, DType::Q4_1, kQ4_1Format}, {DType::Q4_1, DType::F32, 0.0},
      {DType::F32, DType::Q5_0, kQ5Format},   {DType::Q5_0, DType::F32, 0.0},
      {DType::F32, DType::Q5_1, kQ5Format},   {DType::Q5_1, DType::F32, 0.0},
      {DType::I32, DType::F32, 0.0},
  };
  struct S {
    int64_t rows, n;
  };
  for (const Pair& pair : pairs) {
    std::vector<S> shapes = {S{1, 32}, S{3, 64}, S{7, 160}};
    // Rows that are not a whole number of SIMD vectors (the tails of the row conversions); the
    // quantized formats take whole blocks of 32.
    if (!dtype_is_quantized(pair.src) && !dtype_is_quantized(pair.dst)) shapes.push_back({2, 37});
    for (S s : shapes) {
      cases.push_back({OpKind::Cast,
                       {pair.src, pair.dst},
                       dims({{"rows", s.rows}, {"n", s.n}}),
                       pair.tolerance,
                       [=](Context& ctx) {
                         // Scale 300 spans many binades of every format.
                         Tensor src = ctx.random(pair.src, {s.rows, s.n}, 300.0f);
                         Tensor dst = ctx.output(pair.dst, {s.rows, s.n});
                         ctx.backend().cast(src, dst);
                         ctx.compare(dst);
                       },
                       [=](const Context& ctx) {
                         std::vector<double> values = ctx.input(0);
                         for (double& v : values) {
                           // Rounding casts are exact against independent rounding; quantizing
                           // casts compare with the input (see the tolerances).
                           if (pair.dst == DType::F16) v = round_to_f16(v);
                           if (pair.dst == DType::BF16) v = round_to_bf16(v);
                         }
                         return Expected{values};
                       }});
    }
  }
  // Inputs holding NaN, infinities and blocks too small to scale (spoiled_rows): rounding casts
  // keep them; quantizing casts store a block holding a non-finite value with a NaN scale, so all
  // of it decodes to NaN, and round the tiny blocks to zeros.
  for (const Pair& pair : pairs) {
    if (pair.src == DType::I32) continue;
    const S s{5, 96};
    cases.push_back(
        {OpKind::Cast,
         {pair.src, pair.dst},
         dims({{"rows", s.rows}, {"n", s.n}}) + "_spoiled",
         pair.tolerance,
         [=](Context& ctx) {
           Tensor src = ctx.values(pair.src, {s.rows, s.n},
                                   spoiled_rows(ctx.rng(), s.rows, s.n, Spoil::kNaN, 300.0));
           Tensor dst = ctx.output(pair.dst, {s.rows, s.n});
           ctx.backend().cast(src, dst);
           ctx.compare(dst);
         },
         [=](const Context& ctx) {
           std::vector<double> values = ctx.input(0);
           for (size_t b = 0; dtype_is_quantized(pair.dst) && b < values.size(); b += 32) {
             const auto block = values.begin() + static_cast<ptrdiff_t>(b);
             if (!std::all_of(block, block + 32, [](double v) { return std::isfinite(v); }))
               std::fill(block, block + 32, std::nan(""));
           }
           for (double& v : values) {
             if (pair.dst == DType::F16) v = round_to_f16(v);
             if (pair.dst == DType::BF16) v = round_to_bf16(v);
           }
           return Expected{values};
         }});
  }
}

void kv_append_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t capacity, kv_heads, head_dim, tokens;
  };
  for (DType dtype : {DType::F32, DType::F16, DType::Q8_0}) {
    for (S s : {S{8, 1, 32, 1}, S{33, 2, 64, 5}, S{70, 3, 16, 17}}) {
      cases.push_back(
          {OpKind::KvAppend,
           {dtype},
           dims({{"cap", s.capacity}, {"kv", s.kv_heads}, {"dim", s.head_dim}, {"n", s.tokens}}),
           0.0,  // a store, rounded to the cache dtype: exact against the rounding
           [=](Context& ctx) {
             Tensor cache = ctx.inout(dtype, {s.capacity, s.kv_heads, s.head_dim});
             Tensor src = ctx.random(DType::F32, {s.tokens, s.kv_heads, s.head_dim});
             auto slots = sorted_subset(ctx.rng(), s.capacity, s.tokens);
             std::shuffle(slots.begin(), slots.end(), ctx.rng());
             Tensor slot_tensor = ctx.values(DType::I32, {s.tokens}, slots);
             ctx.backend().kv_append(src, slot_tensor, cache);
             ctx.compare(cache);
           },
           [=](const Context& ctx) {
             auto cache = ctx.input(0);
             const auto src = ctx.input(1), slots = ctx.input(2);
             const int64_t row = s.kv_heads * s.head_dim;
             for (int64_t t = 0; t < s.tokens; ++t) {
               for (int64_t i = 0; i < row; ++i) {
                 const double v = src[t * row + i];
                 cache[static_cast<size_t>(slots[t]) * row + i] =
                     dtype == DType::F16 ? round_to_f16(v) : v;
               }
             }
             return Expected{cache};
           }});
    }
  }
}

void kv_compact_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t capacity, kv_heads, row, keep;
  };
  for (DType dtype : {DType::F32, DType::F16, DType::I32, DType::Q4_0}) {
    for (S s : {S{8, 1, 32, 3}, S{40, 4, 64, 17}, S{70, 3, 32, 70}, S{50, 8, 1, 20}}) {
      if (dtype_is_quantized(dtype) && s.row % 32 != 0) continue;
      cases.push_back(
          {OpKind::KvCompact,
           {dtype},
           dims({{"cap", s.capacity}, {"kv", s.kv_heads}, {"row", s.row}, {"keep", s.keep}}),
           0.0,  // pure data movement
           [=](Context& ctx) {
             Tensor cache = ctx.inout(dtype, {s.capacity, s.kv_heads, s.row});
             std::vector<double> keep;
             for (int64_t g = 0; g < s.kv_heads; ++g) {
               const auto kept = sorted_subset(ctx.rng(), s.capacity, s.keep);
               keep.insert(keep.end(), kept.begin(), kept.end());
             }
             Tensor keep_tensor = ctx.values(DType::I32, {s.kv_heads, s.keep}, keep);
             ctx.backend().kv_compact(cache, keep_tensor);
             ctx.compare(cache.slice(0, s.keep));  // rows past n_keep are undefined
           },
           [=](const Context& ctx) {
             const auto cache = ctx.input(0), keep = ctx.input(1);
             std::vector<double> out(static_cast<size_t>(s.keep * s.kv_heads * s.row));
             for (int64_t g = 0; g < s.kv_heads; ++g) {
               for (int64_t j = 0; j < s.keep; ++j) {
                 const auto source = static_cast<int64_t>(keep[g * s.keep + j]);
                 for (int64_t i = 0; i < s.row; ++i) {
                   out[(j * s.kv_heads + g) * s.row + i] =
                       cache[(source * s.kv_heads + g) * s.row + i];
                 }
               }
             }
             return Expected{out};
           }});
    }
  }
}

void copy_cases(std::vector<OpCase>& cases) {
  struct S {
    int64_t rows, n;
  };
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::I32}) {
    const bool quantized = dtype_is_quantized(dtype);
    for (S s : quantized ? std::vector<S>{{1, 32}, {3, 96}, {7, 160}}
                         : std::vector<S>{{1, 7}, {3, 33}, {7, 160}}) {
      cases.push_back({OpKind::Copy,
                       {dtype},
                       dims({{"rows", s.rows}, {"n", s.n}}),
                       0.0,
                       [=](Context& ctx) {
                         Tensor src = ctx.random(dtype, {s.rows, s.n});
                         Tensor dst = ctx.output(dtype, {s.rows, s.n});
                         ctx.backend().copy(src, dst);
                         ctx.compare(dst);
                       },
                       [](const Context& ctx) { return Expected{ctx.input(0)}; }});
    }
  }
}

std::vector<OpCase> build_cases() {
  std::vector<OpCase> cases;
  embed_cases(cases);
  matmul_cases(cases);
  rms_norm_cases(cases);
  rope_cases(cases);
  attention_cases(cases);
  elementwise_cases(cases);
  cast_cases(cases);
  kv_append_cases(cases);
  kv_compact_cases(cases);
  copy_cases(cases);
  return cases;
}

}  // namespace

const std::vector<OpCase>& all_cases() {
  static const std::vector<OpCase> cases = build_cases();
  return cases;
}

}  // namespace edgelm::parity
