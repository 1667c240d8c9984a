// The attention algorithm of the SIMD kernel tables (x86/avx2.cpp, arm/neon.cpp; the AVX-512 table
// has decode and prefill kernels of its own and uses the AVX2 ones for the head sizes they do not
// take), written once over the vector contract `Vec`. Textual header: each of those files includes
// it inside its own anonymous namespace, so every instruction set compiles a private copy with its
// own flags (no function with external linkage is shared between files built for different ISAs;
// see x86/x86.h). The including file has first included simd/elementwise.h (accumulate,
// exp_shifted, array_max, scale_in_place), simd/cache_rows.h (F32Cache, F16Cache) and
// simd/prefill_attention.h (prefill_attention, prefill_takes), and defines:
//   Vec::lane_sums8(acc, out)  out[i] = the sum of the lanes of acc[i], i < 8 (the contract's
//                              reduction of eight vectors at once)
//   scratch(Scratch, bytes) with Scratch::kScores, kAccumulators and kActivations (per-thread)
//   F32Weights and float_matmul<F32Weights>(x, w, y, M, N, K, n_begin, n_end): y = x w^T, the
//   float GEMM of the file's matmul kernels (it uses no scratch buffer)
// and attention_view() comes from backends/cpu/attention_view.h.

// Slots ahead of the one being converted whose K or V row is prefetched. One kv head's rows are
// n_kv_heads * head_dim elements apart in the cache, and the hardware prefetchers left each row's
// load waiting on memory: decode attention over 2048 F16 slots (1B shape, AVX2) spent 80 % of its
// time in the row conversions, and ran 2.7x faster with this.
constexpr int64_t kPrefetchSlots = 8;

// Decode (attention_decode) prefetches this many slots ahead, into L2 (the locality hint 2; on
// x86 PREFETCHT1): 1B shape, 2048 slots, cache from memory, one thread 520-550 us against 770-875
// without it, two threads 254-283 against 570-601; 32 or 64 slots measured alike. With the panel
// kernel before it, requesting the rows into L1 as well left the conversions waiting on memory.
// Each of its two passes also requests its first kDecodePrefetchSlots rows up front: in the model
// (1B Q4_0, ~100 slots, alternating token by token with the kernel without them) 0.3-8.6 % less
// time per call, 4.9 % on average over five runs (docs/performance.md).
constexpr int64_t kDecodePrefetchSlots = 16;

// Requests the cache lines of the row of `n` elements at `offset`, with __builtin_prefetch's
// temporal locality hint (3: into every level).
template <class Cache, int kLocality = 3>
void prefetch_row(const void* cache, int64_t offset, int64_t n) {
  const auto* begin =
      reinterpret_cast<const char*>(static_cast<const typename Cache::Element*>(cache) + offset);
  const auto bytes = static_cast<int64_t>(sizeof(typename Cache::Element)) * n;
  for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(begin + line, 0, kLocality);
}

// y[d] += Σ_{s<n} w[s] · rows[s·stride + d] for d < dim. The sums stay in registers across the
// rows (y is read and written once per call), in two sets for even and odd s, so that twice as
// many FMA chains as vectors per 32 columns hide the FMA latency.
void weighted_sum(float* y, const float* w, const float* rows, int64_t stride, int64_t n,
                  int64_t dim) {
  constexpr int L = Vec::kLanes;
  auto columns = [&]<int V>(int64_t d) {
    typename Vec::Reg even[V];
    typename Vec::Reg odd[V];
    for (int j = 0; j < V; ++j) {
      even[j] = Vec::load(y + d + L * j);
      odd[j] = Vec::zero();
    }
    int64_t s = 0;
    for (; s + 2 <= n; s += 2) {
      const typename Vec::Reg w0 = Vec::set1(w[s]);
      const typename Vec::Reg w1 = Vec::set1(w[s + 1]);
      const float* r0 = rows + s * stride + d;
      const float* r1 = r0 + stride;
      for (int j = 0; j < V; ++j) {
        even[j] = Vec::fma(w0, Vec::load(r0 + L * j), even[j]);
        odd[j] = Vec::fma(w1, Vec::load(r1 + L * j), odd[j]);
      }
    }
    if (s < n) {
      const typename Vec::Reg w0 = Vec::set1(w[s]);
      for (int j = 0; j < V; ++j)
        even[j] = Vec::fma(w0, Vec::load(rows + s * stride + d + L * j), even[j]);
    }
    for (int j = 0; j < V; ++j) Vec::store(y + d + L * j, Vec::add(even[j], odd[j]));
  };
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) columns.template operator()<32 / L>(d);
  for (; d + L <= dim; d += L) columns.template operator()<1>(d);
  for (; d < dim; ++d) {
    float sum = y[d];
    for (int64_t s = 0; s < n; ++s) sum += w[s] * rows[s * stride + d];
    y[d] = sum;
  }
}

// out[(h·G + j)·out_stride] = q[(h·G + j)·dim ..] · rows[h·dim ..] for h < H, j < G (H·G <= 8):
// one slot's rows of H adjacent kv heads against G queries each, each vector of a row converted
// once, the H·G sums reduced together (Vec::lane_sums8).
template <class Cache, int H, int G>
void dot_slot(const float* q, const typename Cache::Element* rows, int64_t dim, float* out,
              int64_t out_stride) {
  static_assert(H * G <= 8);
  typename Vec::Reg acc[8];
  for (typename Vec::Reg& a : acc) a = Vec::zero();
  int64_t d = 0;
  for (; d + Vec::kLanes <= dim; d += Vec::kLanes) {
    for (int h = 0; h < H; ++h) {
      const typename Vec::Reg k = Cache::load(rows + h * dim + d);
      for (int j = 0; j < G; ++j)
        acc[h * G + j] = Vec::fma(Vec::load(q + (h * G + j) * dim + d), k, acc[h * G + j]);
    }
  }
  float sums[8];
  Vec::lane_sums8(acc, sums);
  for (; d < dim; ++d) {
    for (int h = 0; h < H; ++h) {
      const float k = Cache::value(rows + h * dim + d);
      for (int j = 0; j < G; ++j) sums[h * G + j] += q[(h * G + j) * dim + d] * k;
    }
  }
  for (int i = 0; i < H * G; ++i) out[i * out_stride] = sums[i];
}

// acc[j·dim + d] += Σ_{t<S} p[j·p_stride + t] · rows[t·stride + d] for j < group, d < dim: S
// consecutive slots' V rows of a kv head added into its group's outputs (in L1), each vector of a
// row converted once and each output vector loaded and stored once per S slots.
template <class Cache, int S>
void add_weighted_rows(float* acc, const float* p, int64_t p_stride,
                       const typename Cache::Element* rows, int64_t stride, int64_t dim,
                       int64_t group) {
  int64_t d = 0;
  for (; d + Vec::kLanes <= dim; d += Vec::kLanes) {
    typename Vec::Reg v[S];
    for (int t = 0; t < S; ++t) v[t] = Cache::load(rows + t * stride + d);
    for (int64_t j = 0; j < group; ++j) {
      float* out = acc + j * dim + d;
      typename Vec::Reg sum = Vec::load(out);
      for (int t = 0; t < S; ++t) sum = Vec::fma(Vec::set1(p[j * p_stride + t]), v[t], sum);
      Vec::store(out, sum);
    }
  }
  for (; d < dim; ++d) {
    for (int64_t j = 0; j < group; ++j) {
      float sum = acc[j * dim + d];
      for (int t = 0; t < S; ++t) sum += p[j * p_stride + t] * Cache::value(rows + t * stride + d);
      acc[j * dim + d] = sum;
    }
  }
}

// p[0..n) = softmax(p), masked entries being -inf; returns the row's maximum (-inf when every
// entry is masked: this query sees nothing, and its weights are all zero).
float masked_softmax(float* p, int64_t n) {
  const float max_value = array_max(p, n);
  if (max_value == -INFINITY) {
    std::memset(p, 0, sizeof(float) * static_cast<size_t>(n));
    return max_value;
  }
  scale_in_place(p, 1.0f / exp_shifted(p, p, n, max_value), n);
  return max_value;
}

// As f32_attention__portable, in float; one query goes to attention_decode. Per kv head g and
// block of queries (rows: the block's queries x the group's heads, about 64):
//   scores [rows, n_slots] = Q_block K^T: K rows are converted kPanelSlots at a time into a float
//   panel (read in slot order, prefetched; the panel stays in L2) and multiplied by the file's
//   float GEMM;
//   mask by position, scale, softmax per row;
//   out [rows, head_dim] = P V: V rows are converted into the panel the same way and summed,
//   weighted by the probabilities, kValueSlots rows at a time so that part of the panel stays in
//   L1 for every row, with the sums held in registers.
// Slots past the last one that a query of the block sees (in a prompt chunk, the chunk's later
// tokens for its earlier queries) are left out of both products and the softmax: in the model
// (1B Q4_0, AVX2, two threads) that took attention over a 128-token prompt from 1222 to 531 us
// per layer and over a 512-token one from 2.8-2.9 to 1.6 ms (docs/performance.md). Other masked
// slots get probability 0 and still take part in both products. Panel rows of slots that no query
// of the block sees are zeros, so whatever such slots hold cannot turn a zero probability into
// NaN. Per-thread scratch: the panel and its scores (4 · kPanelSlots · (head_dim + rows) bytes)
// and the block's scores (4 · rows · n_slots bytes).
// Prefill converts K and V once per block (about 1 % of its products).
//
// Against the previous kernel (per query, head and slot: a K row conversion, a dot product with a
// horizontal sum, an axpy through memory), AVX2, 1B shape, one thread: prefill (64 queries over
// 512 or 2048 slots) 6.7-6.9 -> 22-29 GFLOP/s; decode over 512 slots 8.2 -> 16-20, over 2048
// slots 3.0 -> 14-19 (micro_bench attention/avx2/f16/...).
template <class Cache>
void attention_decode(const AttentionView& a, int64_t group_begin, int64_t group_end);

template <class Cache>
void attention_groups(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  const AttentionView a = attention_view(args);
  if (a.n_queries == 0) return;
  if (a.n_queries == 1) {
    attention_decode<Cache>(a, group_begin, group_end);
    return;
  }
  const int64_t group_size = a.n_heads / a.n_kv_heads;
  const int64_t head_dim = a.head_dim;
  const int64_t n_slots = a.n_slots;
  constexpr float kMasked = -INFINITY;
  constexpr int64_t kPanelSlots = 256;  // K or V rows converted at a time (stay in L2)
  constexpr int64_t kValueSlots = 64;   // V panel rows per pass over the output rows
  const int64_t block_queries = std::min(a.n_queries, std::max<int64_t>(1, 64 / group_size));
  const int64_t max_rows = block_queries * group_size;
  const float scale = a.scale;  // a local, so the masking loop below vectorizes

  // A panel of K or V rows as floats [kPanelSlots, head_dim], then the block's scores for those
  // slots [max_rows, kPanelSlots]
  auto* panel = static_cast<float*>(
      scratch(Scratch::kActivations,
              sizeof(float) * static_cast<size_t>(kPanelSlots * (head_dim + max_rows))));
  float* panel_scores = panel + kPanelSlots * head_dim;
  // scores [max_rows, n_slots], group_mass [n_slots], slot positions [n_slots] (as int32)
  auto* scores = static_cast<float*>(
      scratch(Scratch::kScores, sizeof(float) * static_cast<size_t>((max_rows + 2) * n_slots)));
  float* group_mass = scores + max_rows * n_slots;
  auto* slot_pos = reinterpret_cast<int32_t*>(group_mass + n_slots);
  // q block and out block [max_rows, head_dim] each, row maxima [max_rows]
  auto* q_block = static_cast<float*>(
      scratch(Scratch::kAccumulators,
              sizeof(float) * static_cast<size_t>(2 * max_rows * head_dim + max_rows)));
  float* out_block = q_block + max_rows * head_dim;
  float* row_max = out_block + max_rows * head_dim;

  auto row_offset = [&](int64_t slot, int64_t g) { return (slot * a.n_kv_heads + g) * head_dim; };
  // Rows [s0, s0 + n) of kv head g of `cache` into the panel, prefetched kPrefetchSlots ahead;
  // rows of slots past `visible_until` are zeros.
  auto load_panel = [&](const void* cache, int64_t g, int64_t s0, int64_t n,
                        int32_t visible_until) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t s = s0 + j;
      if (s + kPrefetchSlots < n_slots)
        prefetch_row<Cache>(cache, row_offset(s + kPrefetchSlots, g), head_dim);
      float* panel_row = panel + j * head_dim;  // F16 rows convert straight into the panel
      if (slot_pos[s] > visible_until) {
        std::memset(panel_row, 0, sizeof(float) * static_cast<size_t>(head_dim));
        continue;
      }
      const float* row = Cache::row(cache, row_offset(s, g), head_dim, panel_row);
      if (row != panel_row)
        std::memcpy(panel_row, row, sizeof(float) * static_cast<size_t>(head_dim));
    }
  };

  for (int64_t g = group_begin; g < group_end; ++g) {
    std::memset(group_mass, 0, sizeof(float) * static_cast<size_t>(n_slots));
    for (int64_t s = 0; s < n_slots; ++s) slot_pos[s] = a.kv_pos[s * a.n_kv_heads + g];
    for (int64_t i0 = 0; i0 < a.n_queries; i0 += block_queries) {
      const int64_t i1 = std::min(i0 + block_queries, a.n_queries);
      const int64_t rows = (i1 - i0) * group_size;
      int32_t last_position = a.q_pos[i0];  // of the block's queries
      for (int64_t i = i0; i < i1; ++i) {   // the group's heads of one query are contiguous
        last_position = std::max(last_position, a.q_pos[i]);
        std::memcpy(q_block + (i - i0) * group_size * head_dim,
                    a.q + (i * a.n_heads + g * group_size) * head_dim,
                    sizeof(float) * static_cast<size_t>(group_size * head_dim));
      }
      // Slots from seen_slots on are seen by no query of the block (in a prompt chunk, the
      // chunk's later tokens for its earlier queries): they would only add zero weights.
      int64_t seen_slots = 0;
      for (int64_t s = 0; s < n_slots; ++s)
        seen_slots = slot_pos[s] <= last_position ? s + 1 : seen_slots;
      for (int64_t s0 = 0; s0 < seen_slots; s0 += kPanelSlots) {
        const int64_t n = std::min(kPanelSlots, seen_slots - s0);
        load_panel(a.k, g, s0, n, last_position);
        float_matmul<F32Weights>(q_block, panel, panel_scores, rows, n, head_dim, 0, n);
        for (int64_t r = 0; r < rows; ++r) {
          std::memcpy(scores + r * n_slots + s0, panel_scores + r * n,
                      sizeof(float) * static_cast<size_t>(n));
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int32_t position = a.q_pos[i0 + r / group_size];
        float* p = scores + r * n_slots;
        for (int64_t s = 0; s < seen_slots; ++s)
          p[s] = slot_pos[s] <= position ? p[s] * scale : kMasked;
        row_max[r] = masked_softmax(p, seen_slots);
      }
      // out = P V, weighted sums of kValueSlots panel rows at a time (in L1 for every row).
      std::memset(out_block, 0, sizeof(float) * static_cast<size_t>(rows * head_dim));
      for (int64_t s0 = 0; s0 < seen_slots; s0 += kPanelSlots) {
        const int64_t n = std::min(kPanelSlots, seen_slots - s0);
        load_panel(a.v, g, s0, n, last_position);
        for (int64_t c0 = 0; c0 < n; c0 += kValueSlots) {
          const int64_t m = std::min(kValueSlots, n - c0);
          for (int64_t r = 0; r < rows; ++r) {
            weighted_sum(out_block + r * head_dim, scores + r * n_slots + s0 + c0,
                         panel + c0 * head_dim, head_dim, m, head_dim);
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r / group_size;
        float* out_row = a.out + (i * a.n_heads + g * group_size + r % group_size) * head_dim;
        if (row_max[r] == kMasked) {  // zeros, and no mass
          std::memset(out_row, 0, sizeof(float) * static_cast<size_t>(head_dim));
          continue;
        }
        std::memcpy(out_row, out_block + r * head_dim,
                    sizeof(float) * static_cast<size_t>(head_dim));
        if (i >= a.mass_first_query) accumulate(group_mass, scores + r * n_slots, seen_slots);
      }
    }
    if (a.mass != nullptr) {
      std::memcpy(a.mass + g * n_slots, group_mass, sizeof(float) * static_cast<size_t>(n_slots));
    }
  }
}

// Scores of one slot for `heads` adjacent kv heads of G queries each: q holds their queries
// ([heads·G, dim]), rows the slot's rows of those heads, out the first head's first score (rows of
// the scores out_stride apart). Up to eight dot products at a time.
template <class Cache, int G>
void slot_scores(const float* q, const typename Cache::Element* rows, int64_t heads, int64_t dim,
                 float* out, int64_t out_stride) {
  constexpr int H = G >= 8 ? 1 : 8 / G;
  int64_t h = 0;
  for (; h + H <= heads; h += H)
    dot_slot<Cache, H, G>(q + h * G * dim, rows + h * dim, dim, out + h * G * out_stride,
                          out_stride);
  for (; h < heads; ++h)
    dot_slot<Cache, 1, G>(q + h * G * dim, rows + h * dim, dim, out + h * G * out_stride,
                          out_stride);
}

template <class Cache>
void slot_scores_any(const float* q, const typename Cache::Element* rows, int64_t heads,
                     int64_t group, int64_t dim, float* out, int64_t out_stride) {
  switch (group) {
    case 1:
      return slot_scores<Cache, 1>(q, rows, heads, dim, out, out_stride);
    case 2:
      return slot_scores<Cache, 2>(q, rows, heads, dim, out, out_stride);
    case 3:
      return slot_scores<Cache, 3>(q, rows, heads, dim, out, out_stride);
    case 4:
      return slot_scores<Cache, 4>(q, rows, heads, dim, out, out_stride);
    case 5:
      return slot_scores<Cache, 5>(q, rows, heads, dim, out, out_stride);
    case 6:
      return slot_scores<Cache, 6>(q, rows, heads, dim, out, out_stride);
    case 7:
      return slot_scores<Cache, 7>(q, rows, heads, dim, out, out_stride);
    case 8:
      return slot_scores<Cache, 8>(q, rows, heads, dim, out, out_stride);
    default:
      // More than eight queries per kv head: eight at a time, head by head.
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t j = 0; j < group; j += 8) {
          const float* q_rows = q + (h * group + j) * dim;
          float* o = out + (h * group + j) * out_stride;
          if (j + 8 <= group) {
            dot_slot<Cache, 1, 8>(q_rows, rows + h * dim, dim, o, out_stride);
          } else {
            slot_scores_any<Cache>(q_rows, rows + h * dim, 1, group - j, dim, o, out_stride);
          }
        }
      }
  }
}

// One query (decode): the same products as attention_groups, read straight from the cache in slot
// order. The cache is cold in decode (the token's weights have pushed it out), and a slot's rows
// of the thread's kv heads are adjacent ([slot, kv head, head_dim]), so taking every head of a
// slot before the next slot reads K, then V, as one ascending stream that the hardware
// prefetchers follow:
//   scores: per slot, dot_slot takes the rows of up to eight queries' kv heads (two kv heads of
//   four queries for Llama 3.2 1B), each 8 (NEON: 4) elements of a row converted once, and
//   reduces the eight dot products together;
//   mask by position, scale, softmax per row;
//   outputs: per kStep slots, add_weighted_rows adds each kv head's V rows of those slots into its
//   group's outputs (in L1), converting each row once and loading and storing each output
//   vector once per step. A slot a head does not see is skipped (whatever such a row holds
//   cannot reach the outputs).
// The kernel before this one converted each block of 64 slots into float panels first and used
// the float GEMM and weighted_sum on them; against it, in the model (1B Q4_0, ~1500 slots, the
// two kernels alternating call by call) one thread 481 -> 314 us, two threads 327 -> 300 us
// (docs/performance.md). Kernels without panels that took a kv head's rows over a block of
// slots before the next head's (registers held over the block) ran faster from cache but
// slower from memory: the strided reads left them waiting on it.
template <class Cache>
void attention_decode(const AttentionView& a, int64_t group_begin, int64_t group_end) {
  constexpr float kMasked = -INFINITY;
  using Element = typename Cache::Element;
  const int64_t group_size = a.n_heads / a.n_kv_heads;
  const int64_t head_dim = a.head_dim;
  const int64_t n_slots = a.n_slots;
  const int64_t heads = group_end - group_begin;
  const int64_t rows = heads * group_size;
  const int32_t position = a.q_pos[0];
  const float scale = a.scale;
  if (heads <= 0) return;
  // Row (g - group_begin) * group_size + h: query head h of kv head g. scores [rows, n_slots], then
  // the outputs [rows, head_dim] and row maxima [rows].
  auto* scores = static_cast<float*>(
      scratch(Scratch::kScores, sizeof(float) * static_cast<size_t>(rows * n_slots)));
  auto* out_block = static_cast<float*>(
      scratch(Scratch::kAccumulators, sizeof(float) * static_cast<size_t>(rows * head_dim + rows)));
  float* row_max = out_block + rows * head_dim;
  const int64_t slot_elements = a.n_kv_heads * head_dim;
  const int64_t first_element = group_begin * head_dim;  // of the thread's heads in a slot
  const int64_t span = heads * head_dim;                 // their elements in a slot
  const auto* k_cache = static_cast<const Element*>(a.k) + first_element;
  const auto* v_cache = static_cast<const Element*>(a.v) + first_element;
  const float* q = a.q + group_begin * group_size * head_dim;  // the thread's query heads
  auto visible = [&](int64_t s, int64_t g) { return a.kv_pos[s * a.n_kv_heads + g] <= position; };

  // Each pass prefetches kDecodePrefetchSlots slots ahead of the one it reads, so its first rows
  // are requested here, all at once, instead of one slot at a time as it reaches them.
  auto prefetch_first_rows = [&](const void* cache) {
    for (int64_t s = 0; s < std::min(n_slots, kDecodePrefetchSlots); ++s)
      prefetch_row<Cache, 2>(cache, s * slot_elements + first_element, span);
  };

  prefetch_first_rows(a.k);
  for (int64_t s = 0; s < n_slots; ++s) {
    if (s + kDecodePrefetchSlots < n_slots)
      prefetch_row<Cache, 2>(a.k, (s + kDecodePrefetchSlots) * slot_elements + first_element, span);
    slot_scores_any<Cache>(q, k_cache + s * slot_elements, heads, group_size, head_dim, scores + s,
                           n_slots);
  }
  for (int64_t g = group_begin; g < group_end; ++g) {
    bool sees_all = true;  // the usual case: the rows only need scaling
    for (int64_t s = 0; s < n_slots && sees_all; ++s) sees_all = visible(s, g);
    for (int64_t r = (g - group_begin) * group_size; r < (g - group_begin + 1) * group_size; ++r) {
      float* p = scores + r * n_slots;
      if (sees_all) {
        scale_in_place(p, scale, n_slots);
      } else {
        for (int64_t s = 0; s < n_slots; ++s) p[s] = visible(s, g) ? p[s] * scale : kMasked;
      }
      row_max[r] = masked_softmax(p, n_slots);
    }
  }
  std::memset(out_block, 0, sizeof(float) * static_cast<size_t>(rows * head_dim));
  prefetch_first_rows(a.v);
  constexpr int64_t kStep = 4;  // slots per add_weighted_rows call where the head sees them all
  for (int64_t s0 = 0; s0 < n_slots; s0 += kStep) {
    const int64_t n = std::min(kStep, n_slots - s0);
    for (int64_t s = s0; s < s0 + n; ++s) {
      if (s + kDecodePrefetchSlots < n_slots)
        prefetch_row<Cache, 2>(a.v, (s + kDecodePrefetchSlots) * slot_elements + first_element,
                               span);
    }
    for (int64_t g = group_begin; g < group_end; ++g) {
      const int64_t r0 = (g - group_begin) * group_size;
      float* acc = out_block + r0 * head_dim;
      const float* p = scores + r0 * n_slots;
      const Element* v = v_cache + (g - group_begin) * head_dim;
      bool all = n == kStep;
      for (int64_t s = s0; s < s0 + n && all; ++s) all = visible(s, g);
      if (all) {
        add_weighted_rows<Cache, kStep>(acc, p + s0, n_slots, v + s0 * slot_elements, slot_elements,
                                        head_dim, group_size);
        continue;
      }
      for (int64_t s = s0; s < s0 + n; ++s) {
        if (visible(s, g)) {
          add_weighted_rows<Cache, 1>(acc, p + s, n_slots, v + s * slot_elements, slot_elements,
                                      head_dim, group_size);
        }
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* out_row = a.out + (group_begin * group_size + r) * head_dim;
    if (row_max[r] == kMasked) {
      std::memset(out_row, 0, sizeof(float) * static_cast<size_t>(head_dim));
    } else {
      std::memcpy(out_row, out_block + r * head_dim, sizeof(float) * static_cast<size_t>(head_dim));
    }
  }
  if (a.mass != nullptr) {
    for (int64_t g = group_begin; g < group_end; ++g) {
      float* mass = a.mass + g * n_slots;
      std::memset(mass, 0, sizeof(float) * static_cast<size_t>(n_slots));
      if (a.mass_first_query > 0) continue;  // the query is not one whose mass is exported
      for (int64_t h = 0; h < group_size; ++h) {
        const int64_t r = (g - group_begin) * group_size + h;
        if (row_max[r] != kMasked) accumulate(mass, scores + r * n_slots, n_slots);
      }
    }
  }
}

// The op for kv heads [group_begin, group_end): prefill with whole output tiles across a row takes
// the outer-product kernel (simd/prefill_attention.h); everything else (decode, other head sizes)
// the panel kernel above.
template <class Cache>
void attention(const AttentionArgs& args, int64_t group_begin, int64_t group_end) {
  const AttentionView a = attention_view(args);
  if (a.n_queries > 1 && prefill_takes(a.head_dim)) {
    prefill_attention<Cache>(a, group_begin, group_end);
  } else {
    attention_groups<Cache>(args, group_begin, group_end);
  }
}
