// Parity cases of the row-wise and element-wise ops: rms_norm, silu_mul, add, softmax (in place
// and not), and cast between every pair of types it supports, with non-finite inputs.
#include <algorithm>
#include <cmath>

#include "tests/parity/cases.h"

namespace edgelm::parity {

namespace {

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

}  // namespace

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

}  // namespace edgelm::parity
