// Scaled dot-product attention with grouped K/V heads, split over slots (flash decoding):
//   attention_partial_*  one work-group per (split j, head h, query i): the softmax partial of the
//                        split's slots, (m, l, acc) with m = max score, l = sum exp(score - m),
//                        acc[d] = sum exp(score - m) v[d].
//   attention_combine    per (i, h): merges the splits into out and keeps the final (M, L).
//   attention_mass_*     per (g, s): sum over queries i >= first_query and the heads of group g of
//                        exp(score - M) / L, recomputing the scores.
// K/V are F32 or F16 (read with vload_half, so cl_khr_fp16 is not needed); all math is float.
// Scores are relative to a running maximum, so every exp() argument is <= 0 and nothing
// overflows; a change of maximum rescales by exp(m_old - m_new), a factor with a few ulp of error
// applied at most once per chunk and once per split, far below the float rounding of the sums.

inline float4 kv_load4_f32(global const uchar* row, int i) {
  return vload4(i, (global const float*)row);
}
inline float4 kv_load4_f16(global const uchar* row, int i) {
  return vload_half4(i, (global const half*)row);
}
inline float kv_load1_f32(global const uchar* row, int i) {
  return ((global const float*)row)[i];
}
inline float kv_load1_f16(global const uchar* row, int i) {
  return vload_half(i, (global const half*)row);
}

// q . k_row over head_dim, four lanes at a time. Both score kernels use this function with q in
// local memory, so the mass export sees the same scores as the softmax.
#define ATTENTION_DOT(T)                                                                        \
  inline float attention_dot_##T(local const float* q, global const uchar* k_row,              \
                                 int head_dim) {                                                \
    float4 sum4 = (float4)(0.0f);                                                               \
    const int n4 = head_dim / 4;                                                                \
    for (int c = 0; c < n4; ++c) sum4 += vload4(c, q) * kv_load4_##T(k_row, c);                 \
    float sum = (sum4.x + sum4.y) + (sum4.z + sum4.w);                                          \
    for (int d = 4 * n4; d < head_dim; ++d) sum += q[d] * kv_load1_##T(k_row, d);               \
    return sum;                                                                                 \
  }

// Work-group (j, h, i), 1-D local size (a power of two). Slots [j * split_slots, + split_slots)
// are taken `chunk` at a time: each work-item scores slots t = lid, lid + size, ... of the chunk
// into `scores`, the group finds the chunk maximum, the scores become exp(score - m), and each
// work-item accumulates the weighted V rows into its own elements d = lid, lid + size, ... of
// `acc` (a coalesced read of each V row). Masked slots score -inf and weigh 0; their V rows are
// skipped, and their dot products never computed.
//   partial_ml:  [n_queries, n_heads, n_splits] (m, l); m = -inf when the split saw no slot
//   partial_acc: [n_queries, n_heads, n_splits, head_dim]
#define ATTENTION_PARTIAL(T, KV_BYTES)                                                          \
  kernel void attention_partial_##T(                                                            \
      global const uchar* q, ulong q_off, global const uchar* k, ulong k_off,                   \
      global const uchar* v, ulong v_off, global const uchar* q_pos, ulong q_pos_off,           \
      global const uchar* kv_pos, ulong kv_pos_off, global float2* partial_ml,                  \
      global float* partial_acc, int n_queries, int n_heads, int n_kv_heads, int head_dim,      \
      int n_slots, int split_slots, int n_splits, int chunk, float scale,                       \
      local float* q_row, /* [head_dim] */                                                      \
      local float* scores, /* [chunk] */                                                        \
      local float* acc, /* [head_dim] */                                                        \
      local float* reduce /* [local size] */) {                                                 \
    const int j = get_group_id(0);                                                              \
    const int h = get_global_id(1);                                                             \
    const int i = get_global_id(2);                                                             \
    if (j >= n_splits || h >= n_heads || i >= n_queries) return; /* uniform per group */        \
    const int lid = get_local_id(0);                                                            \
    const int size = get_local_size(0);                                                         \
    const int g = h / (n_heads / n_kv_heads);                                                   \
    const ulong row = (ulong)i * n_heads + h;                                                   \
    global const float* q_src = AT_CONST(float, q, q_off) + row * head_dim;                     \
    for (int d = lid; d < head_dim; d += size) {                                                \
      q_row[d] = q_src[d];                                                                      \
      acc[d] = 0.0f;                                                                            \
    }                                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                               \
    global const uchar* k_base = AT_CONST(uchar, k, k_off);                                     \
    global const uchar* v_base = AT_CONST(uchar, v, v_off);                                     \
    global const int* kv_positions = AT_CONST(int, kv_pos, kv_pos_off);                         \
    const int position = AT_CONST(int, q_pos, q_pos_off)[i];                                    \
    const ulong row_bytes = (ulong)head_dim * KV_BYTES;                                         \
    const int begin = (int)min((long)j * split_slots, (long)n_slots);                           \
    const int end = (int)min((long)begin + split_slots, (long)n_slots);                         \
    float m = -INFINITY; /* the group's running maximum (uniform) */                            \
    float l = 0.0f;      /* this work-item's share of sum exp(score - m) */                     \
    for (int c0 = begin; c0 < end; c0 += chunk) {                                               \
      const int count = min(chunk, end - c0);                                                   \
      float chunk_max = -INFINITY;                                                              \
      for (int t = lid; t < count; t += size) {                                                 \
        const ulong kv_row = (ulong)(c0 + t) * n_kv_heads + g;                                  \
        float score = -INFINITY;                                                                \
        if (kv_positions[kv_row] <= position) {                                                 \
          score = scale * attention_dot_##T(q_row, k_base + kv_row * row_bytes, head_dim);      \
        }                                                                                       \
        scores[t] = score;                                                                      \
        chunk_max = fmax(chunk_max, score);                                                     \
      }                                                                                         \
      chunk_max = group_max(chunk_max, reduce);                                                 \
      if (chunk_max == -INFINITY) continue; /* nothing visible in this chunk */                 \
      const float m_new = fmax(m, chunk_max);                                                   \
      const float alpha = exp(m - m_new); /* 0 while m is still -inf */                         \
      l *= alpha;                                                                               \
      for (int t = lid; t < count; t += size) {                                                 \
        const float p = exp(scores[t] - m_new); /* exp(-inf) = 0 for masked slots */            \
        scores[t] = p;                                                                          \
        l += p;                                                                                 \
      }                                                                                         \
      barrier(CLK_LOCAL_MEM_FENCE);                                                             \
      for (int d = lid; d < head_dim; d += size) {                                              \
        float a = acc[d] * alpha;                                                               \
        for (int t = 0; t < count; ++t) {                                                       \
          const float p = scores[t];                                                            \
          if (p == 0.0f) continue; /* the same slot for every work-item: no divergence */       \
          const ulong kv_row = (ulong)(c0 + t) * n_kv_heads + g;                                \
          a += p * kv_load1_##T(v_base + kv_row * row_bytes, d);                                \
        }                                                                                       \
        acc[d] = a;                                                                             \
      }                                                                                         \
      m = m_new;                                                                                \
      barrier(CLK_LOCAL_MEM_FENCE); /* the next chunk overwrites scores */                      \
    }                                                                                           \
    l = group_sum(l, reduce);                                                                   \
    const ulong partial = row * n_splits + j;                                                   \
    global float* acc_dst = partial_acc + partial * head_dim;                                   \
    for (int d = lid; d < head_dim; d += size) acc_dst[d] = acc[d];                             \
    if (lid == 0) partial_ml[partial] = (float2)(m, l);                                         \
  }

// Work-item (d, h, i): out[i, h, d] from the splits' partials, each rescaled to the common
// maximum M by exp(m_j - M); zeros when no split saw a slot (M = -inf). Work-item d = 0 also
// stores stats[i, h] = (M, L), L = sum of the rescaled l_j, for attention_mass_*. The global
// size of dimension 0 is at least 1, so the stats are written even when head_dim is 0.
//   partial_ml: [n_queries, n_heads, n_splits]; partial_acc: [n_queries, n_heads, n_splits,
//   head_dim]; out: F32 [n_queries, n_heads, head_dim]; stats: [n_queries, n_heads]
kernel void attention_combine(global const float2* partial_ml, global const float* partial_acc,
                              global uchar* out, ulong out_off, global float2* stats,
                              int n_queries, int n_heads, int head_dim, int n_splits) {
  const int d = get_global_id(0);
  const int h = get_global_id(1);
  const int i = get_global_id(2);
  if (h >= n_heads || i >= n_queries) return;
  const ulong row = (ulong)i * n_heads + h;
  global const float2* ml = partial_ml + row * n_splits;
  float max_score = -INFINITY;
  for (int j = 0; j < n_splits; ++j) max_score = fmax(max_score, ml[j].x);
  float total = 0.0f;
  float value = 0.0f;
  if (max_score != -INFINITY) {
    global const float* acc = partial_acc + row * n_splits * head_dim + d;
    for (int j = 0; j < n_splits; ++j) {
      const float2 part = ml[j];
      if (part.x == -INFINITY) continue;  // an empty split: l = 0 and acc = 0
      const float weight = exp(part.x - max_score);
      total += part.y * weight;
      if (d < head_dim) value += acc[(ulong)j * head_dim] * weight;
    }
    value /= total;  // total >= 1: the split holding the maximum contributes exp(0) at least
  }
  if (d == 0) stats[row] = (float2)(max_score, total);
  if (d < head_dim) AT(float, out, out_off)[row * head_dim + d] = value;
}

// Work-group of slots s (dimension 0) of one kv head g (dimension 1): mass[g, s] = sum over
// queries i >= first_query and the group's heads h of exp(score(i, h, s) - M) / L with (M, L)
// from stats, for slots query i sees. The group loads each q row into local memory once and
// every work-item scores its slot against it. Out-of-range work-items still take part in the
// barriers; every in-range slot is written (0 when no query sees it).
//   mass: F32 [n_kv_heads, n_slots]
#define ATTENTION_MASS(T, KV_BYTES)                                                             \
  kernel void attention_mass_##T(                                                               \
      global const uchar* q, ulong q_off, global const uchar* k, ulong k_off,                   \
      global const uchar* q_pos, ulong q_pos_off, global const uchar* kv_pos, ulong kv_pos_off, \
      global const float2* stats, global uchar* mass, ulong mass_off, int n_queries,            \
      int n_heads, int n_kv_heads, int head_dim, int n_slots, int first_query, float scale,     \
      local float* q_row /* [head_dim] */) {                                                    \
    const int s = get_global_id(0);                                                             \
    const int g = get_global_id(1);                                                             \
    if (g >= n_kv_heads) return; /* uniform per group */                                        \
    const int lid = get_local_id(0);                                                            \
    const int size = get_local_size(0);                                                         \
    const bool in_range = s < n_slots;                                                          \
    const ulong kv_row = (ulong)(in_range ? s : 0) * n_kv_heads + g;                            \
    const int slot_position = in_range ? AT_CONST(int, kv_pos, kv_pos_off)[kv_row] : 0;         \
    global const uchar* k_row = AT_CONST(uchar, k, k_off) + kv_row * head_dim * KV_BYTES;       \
    global const int* positions = AT_CONST(int, q_pos, q_pos_off);                              \
    global const float* q_rows = AT_CONST(float, q, q_off);                                     \
    const int group = n_heads / n_kv_heads;                                                     \
    float total = 0.0f;                                                                         \
    for (int i = first_query; i < n_queries; ++i) {                                             \
      const bool visible = in_range && slot_position <= positions[i];                           \
      for (int h = g * group; h < (g + 1) * group; ++h) {                                       \
        const ulong row = (ulong)i * n_heads + h;                                               \
        for (int d = lid; d < head_dim; d += size) q_row[d] = q_rows[row * head_dim + d];       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                           \
        if (visible) {                                                                          \
          const float2 ml = stats[row];                                                         \
          const float score = scale * attention_dot_##T(q_row, k_row, head_dim);                \
          total += exp(score - ml.x) / ml.y;                                                    \
        }                                                                                       \
        barrier(CLK_LOCAL_MEM_FENCE); /* the next head overwrites q_row */                      \
      }                                                                                         \
    }                                                                                           \
    if (in_range) AT(float, mass, mass_off)[(ulong)g * n_slots + s] = total;                    \
  }

ATTENTION_DOT(f32)
ATTENTION_DOT(f16)
ATTENTION_PARTIAL(f32, 4)
ATTENTION_PARTIAL(f16, 2)
ATTENTION_MASS(f32, 4)
ATTENTION_MASS(f16, 2)
