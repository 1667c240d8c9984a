// Reference attention: for each query and head, scores over every visible slot, a softmax and the
// weighted sum of values, all in double. Visibility is by logical position (kv_pos <= q_pos), which
// is the causal mask in prefill and admits every cached slot in decode.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/portable/portable.h"
#include "core/half.h"

namespace edgelm::cpu {
namespace {

inline double load(const float* p, int64_t i) {
  return p[i];
}
inline double load(const uint16_t* p, int64_t i) {
  return f16_to_f32(p[i]);
}

template <class KvT>
void attention_groups(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  const int64_t n_queries = args.q.dim(0);
  const int64_t n_heads = args.q.dim(1);
  const int64_t head_dim = args.q.dim(2);
  const int64_t n_slots = args.k.dim(0);
  const int64_t n_kv_heads = args.k.dim(1);
  const int64_t group_size = n_heads / n_kv_heads;

  const float* q = args.q.data<float>();                // [n_queries, n_heads, head_dim]
  const KvT* k = args.k.data<KvT>();                    // [n_slots, n_kv_heads, head_dim]
  const KvT* v = args.v.data<KvT>();                    // [n_slots, n_kv_heads, head_dim]
  const int32_t* q_pos = args.q_pos.data<int32_t>();    // [n_queries]
  const int32_t* kv_pos = args.kv_pos.data<int32_t>();  // [n_slots, n_kv_heads]
  float* out = args.out.data<float>();                  // [n_queries, n_heads, head_dim]
  float* mass = args.mass.defined() ? args.mass.data<float>() : nullptr;  // [n_kv_heads, n_slots]

  // Scratch rows grow to the largest size seen by this thread, then are reused.
  thread_local std::vector<double> weights, accumulator, group_mass;
  weights.resize(static_cast<size_t>(n_slots));
  accumulator.resize(static_cast<size_t>(head_dim));
  group_mass.resize(static_cast<size_t>(n_slots));

  for (int64_t g = group_begin; g < group_end; ++g) {
    std::fill(group_mass.begin(), group_mass.end(), 0.0);
    for (int64_t i = 0; i < n_queries; ++i) {
      for (int64_t h = g * group_size; h < (g + 1) * group_size; ++h) {
        const float* q_row = q + (i * n_heads + h) * head_dim;
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < n_slots; ++s) {
          if (kv_pos[s * n_kv_heads + g] > q_pos[i]) {
            weights[s] = -std::numeric_limits<double>::infinity();
            continue;
          }
          const KvT* k_row = k + (s * n_kv_heads + g) * head_dim;
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d) dot += q_row[d] * load(k_row, d);
          weights[s] = dot * args.scale;
          max_score = std::fmax(max_score, weights[s]);
        }
        float* out_row = out + (i * n_heads + h) * head_dim;
        if (max_score == -std::numeric_limits<double>::infinity()) {  // nothing visible
          std::memset(out_row, 0, sizeof(float) * head_dim);
          continue;
        }
        double total = 0.0;
        for (int64_t s = 0; s < n_slots; ++s) {
          weights[s] = std::exp(weights[s] - max_score);  // exp(-inf) = 0 for masked slots
          total += weights[s];
        }
        std::fill(accumulator.begin(), accumulator.end(), 0.0);
        for (int64_t s = 0; s < n_slots; ++s) {
          weights[s] /= total;
          if (weights[s] == 0.0) continue;
          const KvT* v_row = v + (s * n_kv_heads + g) * head_dim;
          for (int64_t d = 0; d < head_dim; ++d) accumulator[d] += weights[s] * load(v_row, d);
        }
        for (int64_t d = 0; d < head_dim; ++d) out_row[d] = static_cast<float>(accumulator[d]);
        if (i >= args.mass_first_query) {
          for (int64_t s = 0; s < n_slots; ++s) group_mass[s] += weights[s];
        }
      }
    }
    if (mass != nullptr) {
      for (int64_t s = 0; s < n_slots; ++s)
        mass[g * n_slots + s] = static_cast<float>(group_mass[s]);
    }
  }
}

}  // namespace

void f32_attention__portable(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  attention_groups<float>(args, group_begin, group_end);
}

void f16_attention__portable(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  attention_groups<uint16_t>(args, group_begin, group_end);
}

}  // namespace edgelm::cpu
