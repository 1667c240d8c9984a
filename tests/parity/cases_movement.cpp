// Parity cases of the ops that move data: kv_append (rows stored at given cache slots),
// kv_compact (kept slots moved to the front, per kv head) and copy.
#include <algorithm>

#include "tests/parity/cases.h"

namespace edgelm::parity {

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

}  // namespace edgelm::parity
