// CPU attention: grouped K/V heads against repeated ones, the positional mask, independence from
// slot order, the exported attention mass, a case small enough to do by hand, and shape checks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"

namespace edgelm {

// Names the parameter in gtest's messages ("f16" rather than "1-byte object <01>"); found by ADL.
void PrintTo(DType dtype, std::ostream* os) {
  *os << dtype_name(dtype);
}

namespace {

cpu::CpuBackend make_backend() {
  return cpu::CpuBackend(cpu::CpuOptions{.n_threads = 2, .isa = {}, .memory = nullptr});
}

struct Problem {
  int64_t n_queries = 0;
  int64_t n_heads = 0;
  int64_t n_slots = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  std::vector<float> q;         // [n_queries, n_heads, head_dim]
  std::vector<float> k;         // [n_slots, n_kv_heads, head_dim]
  std::vector<float> v;         // [n_slots, n_kv_heads, head_dim]
  std::vector<int32_t> q_pos;   // [n_queries]
  std::vector<int32_t> kv_pos;  // [n_slots, n_kv_heads]
  int64_t mass_first_query = 0;
  float scale = 0.0f;  // 0: 1/sqrt(head_dim)

  float& k_at(int64_t s, int64_t g, int64_t d) { return k[(s * n_kv_heads + g) * head_dim + d]; }
  float& v_at(int64_t s, int64_t g, int64_t d) { return v[(s * n_kv_heads + g) * head_dim + d]; }
};

struct Result {
  std::vector<float> out;   // [n_queries, n_heads, head_dim]
  std::vector<float> mass;  // [n_kv_heads, n_slots]
};

template <class T>
Tensor make_tensor(Backend& backend, DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t = Tensor::empty(backend.memory(), dtype, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

Tensor make_kv(Backend& backend, DType dtype, Shape shape, const std::vector<float>& values) {
  if (dtype == DType::F32) return make_tensor(backend, dtype, shape, values);
  std::vector<uint16_t> halves(values.size());
  for (size_t i = 0; i < values.size(); ++i) halves[i] = f32_to_f16(values[i]);
  return make_tensor(backend, dtype, shape, halves);
}

AttentionArgs make_args(Backend& backend, const Problem& p, DType kv_dtype) {
  const Shape kv_shape{p.n_slots, p.n_kv_heads, p.head_dim};
  AttentionArgs args;
  args.q = make_tensor(backend, DType::F32, Shape{p.n_queries, p.n_heads, p.head_dim}, p.q);
  args.k = make_kv(backend, kv_dtype, kv_shape, p.k);
  args.v = make_kv(backend, kv_dtype, kv_shape, p.v);
  args.q_pos = make_tensor(backend, DType::I32, Shape{p.n_queries}, p.q_pos);
  args.kv_pos = make_tensor(backend, DType::I32, Shape{p.n_slots, p.n_kv_heads}, p.kv_pos);
  // NaN-filled, so that an element the op forgets to write cannot pass for a result.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  args.out = make_tensor(backend, DType::F32, args.q.shape(), std::vector<float>(p.q.size(), nan));
  args.mass = make_tensor(backend, DType::F32, Shape{p.n_kv_heads, p.n_slots},
                          std::vector<float>(static_cast<size_t>(p.n_kv_heads * p.n_slots), nan));
  args.mass_first_query = p.mass_first_query;
  args.scale = p.scale != 0.0f ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  return args;
}

Result run_attention(cpu::CpuBackend& backend, const Problem& p, DType kv_dtype) {
  const AttentionArgs args = make_args(backend, p, kv_dtype);
  backend.attention(args);
  Result result;
  result.out.assign(args.out.data<float>(), args.out.data<float>() + args.out.numel());
  result.mass.assign(args.mass.data<float>(), args.mass.data<float>() + args.mass.numel());
  return result;
}

// Queries at positions start_pos .. start_pos + n_queries - 1 over slots holding positions
// first_slot_pos, first_slot_pos + 1, ... for every kv head; Gaussian q, k, v.
Problem random_problem(uint32_t seed, int64_t n_queries, int64_t n_heads, int64_t n_slots,
                       int64_t n_kv_heads, int64_t head_dim, int32_t start_pos,
                       int32_t first_slot_pos) {
  Problem p;
  p.n_queries = n_queries;
  p.n_heads = n_heads;
  p.n_slots = n_slots;
  p.n_kv_heads = n_kv_heads;
  p.head_dim = head_dim;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // q twice as large as k, so that the softmax is far from uniform and a wrong weight shows.
  p.q.resize(static_cast<size_t>(n_queries * n_heads * head_dim));
  for (float& x : p.q) x = 2.0f * normal(rng);
  p.k.resize(static_cast<size_t>(n_slots * n_kv_heads * head_dim));
  for (float& x : p.k) x = normal(rng);
  p.v.resize(p.k.size());
  for (float& x : p.v) x = normal(rng);
  for (int64_t i = 0; i < n_queries; ++i) p.q_pos.push_back(start_pos + static_cast<int32_t>(i));
  for (int64_t s = 0; s < n_slots; ++s) {
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      p.kv_pos.push_back(first_slot_pos + static_cast<int32_t>(s));
    }
  }
  return p;
}

// The same problem with every kv head repeated for each query head of its group (MHA).
Problem repeat_kv_heads(const Problem& p) {
  const int64_t group_size = p.n_heads / p.n_kv_heads;
  Problem r = p;
  r.n_kv_heads = p.n_heads;
  r.k.clear();
  r.v.clear();
  r.kv_pos.clear();
  for (int64_t s = 0; s < p.n_slots; ++s) {
    for (int64_t h = 0; h < p.n_heads; ++h) {
      const int64_t g = h / group_size;
      const int64_t row = (s * p.n_kv_heads + g) * p.head_dim;
      r.k.insert(r.k.end(), p.k.begin() + row, p.k.begin() + row + p.head_dim);
      r.v.insert(r.v.end(), p.v.begin() + row, p.v.begin() + row + p.head_dim);
      r.kv_pos.push_back(p.kv_pos[s * p.n_kv_heads + g]);
    }
  }
  return r;
}

// Straightforward attention in double, for comparison with the backend.
Result naive_attention(const Problem& p, DType kv_dtype) {
  auto kv_value = [&](float x) {
    return kv_dtype == DType::F16 ? static_cast<double>(f16_to_f32(f32_to_f16(x))) : double{x};
  };
  const double scale = p.scale != 0.0f ? p.scale : 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  const int64_t group_size = p.n_heads / p.n_kv_heads;
  Result result;
  result.out.assign(p.q.size(), 0.0f);
  std::vector<double> mass(static_cast<size_t>(p.n_kv_heads * p.n_slots), 0.0);
  for (int64_t i = 0; i < p.n_queries; ++i) {
    for (int64_t h = 0; h < p.n_heads; ++h) {
      const int64_t g = h / group_size;
      std::vector<double> weights(static_cast<size_t>(p.n_slots), 0.0);
      double total = 0.0;
      for (int64_t s = 0; s < p.n_slots; ++s) {
        if (p.kv_pos[s * p.n_kv_heads + g] > p.q_pos[i]) continue;
        double dot = 0.0;
        for (int64_t d = 0; d < p.head_dim; ++d) {
          dot += double{p.q[(i * p.n_heads + h) * p.head_dim + d]} *
                 kv_value(p.k[(s * p.n_kv_heads + g) * p.head_dim + d]);
        }
        // Scores here are a few units, so exp needs no max subtraction.
        weights[s] = std::exp(dot * scale);
        total += weights[s];
      }
      if (total == 0.0) continue;
      for (int64_t d = 0; d < p.head_dim; ++d) {
        double sum = 0.0;
        for (int64_t s = 0; s < p.n_slots; ++s) {
          sum += weights[s] / total * kv_value(p.v[(s * p.n_kv_heads + g) * p.head_dim + d]);
        }
        result.out[(i * p.n_heads + h) * p.head_dim + d] = static_cast<float>(sum);
      }
      if (i >= p.mass_first_query) {
        for (int64_t s = 0; s < p.n_slots; ++s) mass[g * p.n_slots + s] += weights[s] / total;
      }
    }
  }
  result.mass.assign(mass.begin(), mass.end());
  return result;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    // A NaN on either side is an unwritten or broken element: count it as infinitely wrong.
    const double diff = std::fabs(double{a[i]} - double{b[i]});
    worst = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(worst, diff);
  }
  return worst;
}

class AttentionShapesTest : public testing::Test {
 protected:
  cpu::CpuBackend backend_ = make_backend();
};

// Parameterised by the K/V dtype.
class AttentionTest : public testing::TestWithParam<DType> {
 protected:
  cpu::CpuBackend backend_ = make_backend();
};

INSTANTIATE_TEST_SUITE_P(KvDtypes, AttentionTest, testing::Values(DType::F32, DType::F16),
                         [](const testing::TestParamInfo<DType>& param_info) {
                           return std::string(dtype_name(param_info.param));
                         });

void expect_gqa_equals_repeated_heads(cpu::CpuBackend& backend, const Problem& gqa, DType dtype) {
  const Problem mha = repeat_kv_heads(gqa);
  const Result grouped = run_attention(backend, gqa, dtype);
  const Result repeated = run_attention(backend, mha, dtype);
  // Each query head does the same arithmetic on the same rows either way; 1e-6 leaves room for a
  // kernel that blocks the heads of a group together.
  EXPECT_LE(max_abs_diff(grouped.out, repeated.out), 1e-6);

  const int64_t group_size = gqa.n_heads / gqa.n_kv_heads;
  std::vector<float> summed(static_cast<size_t>(gqa.n_kv_heads * gqa.n_slots), 0.0f);
  for (int64_t g = 0; g < gqa.n_kv_heads; ++g) {
    for (int64_t s = 0; s < gqa.n_slots; ++s) {
      double sum = 0.0;
      for (int64_t h = g * group_size; h < (g + 1) * group_size; ++h) {
        sum += repeated.mass[h * gqa.n_slots + s];
      }
      summed[g * gqa.n_slots + s] = static_cast<float>(sum);
    }
  }
  // Masses are at most group_size * (queries) ~ 50 here; the per-head float roundings of the
  // repeated run add up to a few 1e-6 at that size.
  EXPECT_LE(max_abs_diff(grouped.mass, summed), 1e-5);

  const Result naive = naive_attention(gqa, dtype);
  EXPECT_LE(max_abs_diff(grouped.out, naive.out), 1e-5);
  EXPECT_LE(max_abs_diff(grouped.mass, naive.mass), 1e-5);
}

TEST_P(AttentionTest, GroupedPrefillEqualsRepeatedKvHeads) {
  // 13 new tokens at positions 5..17 attending causally to themselves.
  Problem p = random_problem(1, 13, 8, 13, 2, 16, 5, 5);
  p.mass_first_query = 4;
  expect_gqa_equals_repeated_heads(backend_, p, GetParam());
}

TEST_P(AttentionTest, GroupedDecodeEqualsRepeatedKvHeads) {
  Problem p = random_problem(2, 1, 8, 37, 2, 16, 36, 0);
  // The kv heads need not agree on positions (per-head eviction): shuffle kv head 1's.
  std::mt19937 rng(3);
  std::vector<int32_t> positions(37);
  std::iota(positions.begin(), positions.end(), 0);
  std::shuffle(positions.begin(), positions.end(), rng);
  for (int64_t s = 0; s < 37; ++s) p.kv_pos[s * 2 + 1] = positions[s];
  expect_gqa_equals_repeated_heads(backend_, p, GetParam());
}

TEST_P(AttentionTest, SlotsAfterAQueryPositionDoNotAffectIt) {
  const Problem base = random_problem(4, 13, 4, 13, 2, 8, 0, 0);
  const Result before = run_attention(backend_, base, GetParam());
  for (const int64_t changed_slot : {0, 6, 12}) {
    Problem p = base;
    for (int64_t g = 0; g < 2; ++g) {
      for (int64_t d = 0; d < 8; ++d) {
        p.k_at(changed_slot, g, d) = 3.0f + static_cast<float>(d);
        p.v_at(changed_slot, g, d) = -5.0f;
      }
    }
    const Result after = run_attention(backend_, p, GetParam());
    const int64_t query_size = 4 * 8;
    for (int64_t i = 0; i < 13; ++i) {
      const auto begin = static_cast<size_t>(i * query_size);
      const std::vector<float> old_row(before.out.begin() + begin,
                                       before.out.begin() + begin + query_size);
      const std::vector<float> new_row(after.out.begin() + begin,
                                       after.out.begin() + begin + query_size);
      if (i < changed_slot) {
        EXPECT_EQ(old_row, new_row) << "query " << i << " saw slot " << changed_slot;
      } else {
        EXPECT_GT(max_abs_diff(old_row, new_row), 1e-3)
            << "query " << i << " did not see slot " << changed_slot;
      }
    }
  }
}

TEST_P(AttentionTest, SlotOrderAndGapsInPositionsDoNotMatter) {
  // A cache after eviction: positions 0..3 and 50..59 remain, stored out of order, and a query at
  // position 60 that sees all of them.
  Problem p = random_problem(5, 1, 4, 14, 2, 16, 60, 0);
  std::vector<int32_t> kept = {0, 1, 2, 3};
  for (int32_t pos = 50; pos < 60; ++pos) kept.push_back(pos);
  std::mt19937 rng(6);
  std::shuffle(kept.begin(), kept.end(), rng);
  for (int64_t s = 0; s < 14; ++s) {
    for (int64_t g = 0; g < 2; ++g) p.kv_pos[s * 2 + g] = kept[s];
  }
  const Result base = run_attention(backend_, p, GetParam());

  // Each kv head's rows permuted independently; the mass follows its slot.
  for (int trial = 0; trial < 3; ++trial) {
    Problem permuted = p;
    std::vector<std::vector<int64_t>> order(2, std::vector<int64_t>(14));
    for (int64_t g = 0; g < 2; ++g) {
      std::iota(order[g].begin(), order[g].end(), 0);
      std::shuffle(order[g].begin(), order[g].end(), rng);
      for (int64_t j = 0; j < 14; ++j) {
        const int64_t source = order[g][j];
        permuted.kv_pos[j * 2 + g] = p.kv_pos[source * 2 + g];
        for (int64_t d = 0; d < 16; ++d) {
          permuted.k_at(j, g, d) = p.k[(source * 2 + g) * 16 + d];
          permuted.v_at(j, g, d) = p.v[(source * 2 + g) * 16 + d];
        }
      }
    }
    const Result result = run_attention(backend_, permuted, GetParam());
    // Only the order of the sums changes.
    EXPECT_LE(max_abs_diff(result.out, base.out), 1e-6) << "trial " << trial;
    for (int64_t g = 0; g < 2; ++g) {
      for (int64_t j = 0; j < 14; ++j) {
        EXPECT_NEAR(result.mass[g * 14 + j], base.mass[g * 14 + order[g][j]], 1e-6)
            << "trial " << trial << " kv head " << g << " slot " << j;
      }
    }
  }

  // Positions only decide visibility: the same rows at contiguous positions give the same result.
  Problem contiguous = p;
  for (int64_t s = 0; s < 14; ++s) {
    for (int64_t g = 0; g < 2; ++g) contiguous.kv_pos[s * 2 + g] = static_cast<int32_t>(s);
  }
  contiguous.q_pos = {14};
  const Result same = run_attention(backend_, contiguous, GetParam());
  EXPECT_EQ(same.out, base.out);
  EXPECT_EQ(same.mass, base.mass);
}

TEST_P(AttentionTest, MassRowsSumToTheContributingQueryHeads) {
  // 9 queries, 6 heads over 3 kv heads (groups of 2), 9 slots with a causal mask.
  for (const int64_t first : {0, 3, 8, 9}) {
    Problem p = random_problem(7, 9, 6, 9, 3, 8, 0, 0);
    p.mass_first_query = first;
    const Result result = run_attention(backend_, p, GetParam());
    for (int64_t g = 0; g < 3; ++g) {
      double sum = 0.0;
      for (int64_t s = 0; s < 9; ++s) {
        const float m = result.mass[g * 9 + s];
        EXPECT_GE(m, 0.0f);
        if (first == 9) {
          EXPECT_EQ(m, 0.0f) << "no query contributes";
        }
        sum += m;
      }
      // Each contributing (query, head) adds a softmax that sums to 1 (to ~1e-7 in float).
      EXPECT_NEAR(sum, static_cast<double>((9 - first) * 2), 1e-5)
          << "mass_first_query " << first << " kv head " << g;
    }
  }
}

TEST_P(AttentionTest, HandComputedCase) {
  // One query, two slots, head_dim 1, two query heads sharing one kv head. With scale ln 3,
  // q = +1 scores the slots (k = 0, 1) as 0 and ln 3: weights 1/4, 3/4, so over v = (2, 6) the
  // output is 2/4 + 18/4 = 5. q = -1 scores them 0 and -ln 3: weights 3/4, 1/4, output 3.
  // The mass of the kv head adds both heads: (1/4 + 3/4, 3/4 + 1/4) = (1, 1).
  Problem p;
  p.n_queries = 1;
  p.n_heads = 2;
  p.n_slots = 2;
  p.n_kv_heads = 1;
  p.head_dim = 1;
  p.q = {1.0f, -1.0f};
  p.k = {0.0f, 1.0f};
  p.v = {2.0f, 6.0f};
  p.q_pos = {1};
  p.kv_pos = {0, 1};
  p.scale = std::log(3.0f);
  const Result result = run_attention(backend_, p, GetParam());
  // k, v and q are exact in both dtypes; ln 3 rounded to float moves e^score by ~1e-7 relative.
  ASSERT_EQ(result.out.size(), 2u);
  EXPECT_NEAR(result.out[0], 5.0f, 1e-6);
  EXPECT_NEAR(result.out[1], 3.0f, 1e-6);
  ASSERT_EQ(result.mass.size(), 2u);
  EXPECT_NEAR(result.mass[0], 1.0f, 1e-6);
  EXPECT_NEAR(result.mass[1], 1.0f, 1e-6);

  // A query at position 0 sees slot 0 only: both heads copy its v and put all their mass there.
  p.q_pos = {0};
  const Result masked = run_attention(backend_, p, GetParam());
  EXPECT_EQ(masked.out[0], 2.0f);
  EXPECT_EQ(masked.out[1], 2.0f);
  EXPECT_EQ(masked.mass[0], 2.0f);
  EXPECT_EQ(masked.mass[1], 0.0f);
}

TEST_P(AttentionTest, QueryThatSeesNothingGetsZeros) {
  // Slots hold positions 5..9; the query at position 2 sees none of them, the one at 10 all.
  Problem p = random_problem(8, 2, 4, 5, 2, 8, 0, 5);
  p.q_pos = {2, 10};
  const Result result = run_attention(backend_, p, GetParam());
  for (int64_t e = 0; e < 4 * 8; ++e) EXPECT_EQ(result.out[e], 0.0f) << "element " << e;
  EXPECT_GT(max_abs_diff(std::vector<float>(result.out.begin() + 32, result.out.end()),
                         std::vector<float>(32, 0.0f)),
            1e-3);
  for (int64_t g = 0; g < 2; ++g) {
    double sum = 0.0;
    for (int64_t s = 0; s < 5; ++s) sum += result.mass[g * 5 + s];
    EXPECT_NEAR(sum, 2.0, 1e-5) << "only the second query's two heads contribute";
  }

  // Per kv head: kv head 0 keeps only later positions, so its query heads (0, 1) see nothing,
  // while kv head 1 is visible.
  Problem split = random_problem(9, 1, 4, 3, 2, 8, 4, 0);
  for (int64_t s = 0; s < 3; ++s) split.kv_pos[s * 2] = 100 + static_cast<int32_t>(s);
  const Result by_head = run_attention(backend_, split, GetParam());
  for (int64_t e = 0; e < 2 * 8; ++e) EXPECT_EQ(by_head.out[e], 0.0f) << "element " << e;
  for (int64_t e = 2 * 8; e < 4 * 8; ++e) EXPECT_NE(by_head.out[e], 0.0f) << "element " << e;
  for (int64_t s = 0; s < 3; ++s) EXPECT_EQ(by_head.mass[s], 0.0f) << "slot " << s;
}

TEST_F(AttentionShapesTest, MassIsOptional) {
  const Problem p = random_problem(10, 3, 4, 3, 2, 8, 0, 0);
  AttentionArgs args = make_args(backend_, p, DType::F32);
  const Result with_mass = run_attention(backend_, p, DType::F32);
  args.mass = Tensor();
  backend_.attention(args);
  const std::vector<float> out(args.out.data<float>(), args.out.data<float>() + args.out.numel());
  EXPECT_EQ(out, with_mass.out);
}

TEST_F(AttentionShapesTest, RejectsMismatchedShapes) {
  const Problem p = random_problem(11, 3, 4, 5, 2, 8, 0, 0);
  Memory& memory = backend_.memory();
  const AttentionArgs good = make_args(backend_, p, DType::F32);
  EXPECT_NO_THROW(backend_.attention(good));

  auto expect_rejected = [&](const char* what, auto&& edit) {
    AttentionArgs args = good;
    edit(args);
    EXPECT_THROW(backend_.attention(args), Error) << what;
  };
  expect_rejected("v shape differs from k", [&](AttentionArgs& a) {
    a.v = Tensor::empty(memory, DType::F32, Shape{4, 2, 8});
  });
  expect_rejected("v dtype differs from k", [&](AttentionArgs& a) {
    a.v = Tensor::empty(memory, DType::F16, Shape{5, 2, 8});
  });
  expect_rejected("k head_dim differs from q", [&](AttentionArgs& a) {
    a.k = Tensor::empty(memory, DType::F32, Shape{5, 2, 16});
    a.v = Tensor::empty(memory, DType::F32, Shape{5, 2, 16});
  });
  expect_rejected("query heads not a multiple of kv heads", [&](AttentionArgs& a) {
    a.k = Tensor::empty(memory, DType::F32, Shape{5, 3, 8});
    a.v = Tensor::empty(memory, DType::F32, Shape{5, 3, 8});
    a.kv_pos = Tensor::empty(memory, DType::I32, Shape{5, 3});
    a.mass = Tensor::empty(memory, DType::F32, Shape{3, 5});
  });
  expect_rejected("unsupported k/v dtype", [&](AttentionArgs& a) {
    a.k = Tensor::empty(memory, DType::BF16, Shape{5, 2, 8});
    a.v = Tensor::empty(memory, DType::BF16, Shape{5, 2, 8});
  });
  expect_rejected("q rank 2", [&](AttentionArgs& a) { a.q = a.q.reshape(Shape{3, 32}); });
  expect_rejected("out shape differs from q", [&](AttentionArgs& a) {
    a.out = Tensor::empty(memory, DType::F32, Shape{3, 4, 4});
  });
  expect_rejected("q_pos length",
                  [&](AttentionArgs& a) { a.q_pos = Tensor::empty(memory, DType::I32, Shape{4}); });
  expect_rejected("q_pos dtype",
                  [&](AttentionArgs& a) { a.q_pos = Tensor::empty(memory, DType::F32, Shape{3}); });
  expect_rejected("kv_pos one-dimensional", [&](AttentionArgs& a) {
    a.kv_pos = Tensor::empty(memory, DType::I32, Shape{5});
  });
  expect_rejected("kv_pos transposed", [&](AttentionArgs& a) {
    a.kv_pos = Tensor::empty(memory, DType::I32, Shape{2, 5});
  });
  expect_rejected("mass transposed", [&](AttentionArgs& a) {
    a.mass = Tensor::empty(memory, DType::F32, Shape{5, 2});
  });
  expect_rejected("mass_first_query past the end",
                  [&](AttentionArgs& a) { a.mass_first_query = 4; });
  expect_rejected("mass_first_query negative", [&](AttentionArgs& a) { a.mass_first_query = -1; });
}

}  // namespace
}  // namespace edgelm
