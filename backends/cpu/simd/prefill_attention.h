// Prefill attention (several queries) as outer products, written once for the SIMD kernel files
// that take it (x86/avx512.cpp for head_dim a multiple of 64; x86/avx2.cpp and arm/neon.cpp for a
// multiple of 16).
// Textual header: each includes it inside its own anonymous namespace, after simd/elementwise.h,
// so every instruction set compiles a private copy with its own flags. The including file defines
// first:
//   struct PrefillVector: the ISA's vector contract (simd/vec_*.h: Reg, kLanes, zero, load, store,
//     set1, fma, add, sub, mul, div, max, sum, visible, seen_or_zero) with the tile sizes
//     kScoreSlots, kScoreVectors   the score tile: slots x vectors of rows (accumulators: the
//                                  product)
//     kValueRows, kValueVectors    the output tile: rows x vectors of columns
//   a Cache type per cache dtype (prefill_attention's template argument) with
//     static const float* row(const void* cache, int64_t offset, int64_t n, float* buffer)
//                                                                       // a K/V row as floats
//   scratch(Scratch, bytes) with Scratch::kScores, kAccumulators and kActivations (per-thread)
// and attention_view() comes from backends/cpu/attention_view.h.
//
// The panel kernel of simd/attention.h multiplies Q by K^T with the float GEMM, whose tiles end
// every score in a horizontal sum: one per head_dim multiply-adds. Here both products are outer
// products and the scores are kept transposed (slot-major, one vector per kLanes rows), so nothing
// is summed across lanes and the softmax runs down the slots in vertical vector operations. A kv
// head's rows (each query's query heads of the group, query after query) are taken kPrefillRows at
// a time; per block:
//   scores^T [slots, 64] = K Q^T: K rows are converted kPrefillPanelSlots at a time into a float
//   panel; per tile of kScoreSlots slots and kScoreVectors vectors of rows, each dimension adds a
//   broadcast of each slot's element times the rows' vectors of Q^T for that dimension;
//   mask by position, scale, softmax down each column;
//   out [64, head_dim] += P V: V rows converted the same way; per tile of kValueRows rows and
//   kValueVectors vectors of columns, each slot adds a broadcast of each row's weight times the
//   slot's vectors of V, over kPrefillValueSlots slots of the panel at a time (in L1).
// Slots past the last one that a row of the block sees are left out (in a prompt chunk, the
// chunk's later tokens for its earlier queries). Padding rows (past the last block's own) and
// slots that no row sees but come before one that does take part in the products as zeros, which
// cannot turn a zero weight into NaN.
// Against the panel kernel on the Zen 5 VM, micro_bench (64 queries, F16 cache, one thread, 512
// and 2048 slots): the AVX-512 build 58-66 -> 171-193 GFLOP/s with the 1B shape, 73-80 -> 183-207
// with the 3B shape, two threads twice that; the AVX2 build 62-80 -> 82-102. In the model (1B Q4_0,
// 512-token prompt, two threads, AVX-512) attention went from 15-18 % of the prefill to 7 %
// (docs/performance.md). The NEON build is estimated, not yet measured on a device: 1.45-1.51x
// fewer instructions than the panel kernel, 1.43-1.66x fewer cycles in LLVM's Cortex-A53, A55 and
// A57 pipeline models (arm/neon.cpp, docs/android.md).

constexpr int64_t kPrefillRows = 64;         // rows per block
constexpr int64_t kPrefillPanelSlots = 256;  // K or V rows converted at a time (stay in L2)
constexpr int64_t kPrefillValueSlots = 64;   // V panel rows per pass over the rows (stay in L1)

// Whether the kernel takes this head size: whole output tiles across a row.
constexpr bool prefill_takes(int64_t head_dim) {
  return head_dim % (PrefillVector::kLanes * PrefillVector::kValueVectors) == 0;
}

// f(std::integral_constant<int, i>{}) for i = 0 .. N-1, written out: every index into a tile of
// accumulators is then a constant from the start, so the compiler keeps the tile in registers.
// (With plain loops GCC 12 for AArch64 kept the score tile in memory and stored all of it on every
// step of the loop over head_dim; the x86 builds moved those stores out of the loop.)
template <class F, int... I>
inline void unrolled_over(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}

template <int N, class F>
inline void unrolled(F&& f) {
  unrolled_over(f, std::make_integer_sequence<int, N>{});
}

// scores^T rows [s0, s0 + kScoreSlots), row vectors [rv0, rv0 + kScoreVectors) of the block:
// panel rows j0.. against q_t [head_dim, kPrefillRows], masked by position and scaled. The whole
// tile is stored, also rows past the panel's last slot: scores_t and slot_pos have kScoreSlots
// rows of room past the last slot, and a row past a panel's end is the next panel's, computed
// again with it.
void prefill_score_tile(const float* panel, const float* q_t, int64_t head_dim, int64_t j0,
                        int64_t rv0, int64_t s0, const int32_t* slot_pos, const int32_t* row_pos,
                        float scale, float* scores_t) {
  using P = PrefillVector;
  using V = typename P::Reg;
  constexpr int kSlots = P::kScoreSlots;
  constexpr int kVectors = P::kScoreVectors;
  V acc[kSlots][kVectors];
  unrolled<kSlots>([&](auto t) { unrolled<kVectors>([&](auto v) { acc[t][v] = P::zero(); }); });
  const float* rows = panel + j0 * head_dim;
  const float* q_rows = q_t + rv0 * P::kLanes;
  for (int64_t d = 0; d < head_dim; ++d) {
    V q[kVectors];
    unrolled<kVectors>([&](auto v) { q[v] = P::load(q_rows + d * kPrefillRows + P::kLanes * v); });
    unrolled<kSlots>([&](auto t) {
      const V k = P::set1(rows[t * head_dim + d]);
      unrolled<kVectors>([&](auto v) { acc[t][v] = P::fma(k, q[v], acc[t][v]); });
    });
  }
  const V factor = P::set1(scale);
  unrolled<kSlots>([&](auto t) {
    float* out = scores_t + (s0 + t) * kPrefillRows + rv0 * P::kLanes;
    unrolled<kVectors>([&](auto v) {
      const int64_t lane0 = (rv0 + v) * P::kLanes;
      P::store(out + P::kLanes * v,
               P::visible(P::mul(acc[t][v], factor), slot_pos[s0 + t], row_pos + lane0));
    });
  });
}

// out [kPrefillRows, head_dim] += P V over panel rows [0, n) of slots [s0, s0 + n).
void prefill_value_tiles(const float* panel, const float* scores_t, int64_t head_dim, int64_t s0,
                         int64_t n, float* out) {
  using P = PrefillVector;
  constexpr int kRows = P::kValueRows;
  constexpr int kVectors = P::kValueVectors;
  constexpr int64_t kColumns = P::kLanes * kVectors;
  for (int64_t c0 = 0; c0 < n; c0 += kPrefillValueSlots) {
    const int64_t c1 = std::min(c0 + kPrefillValueSlots, n);
    for (int64_t d0 = 0; d0 < head_dim; d0 += kColumns) {
      for (int64_t r0 = 0; r0 < kPrefillRows; r0 += kRows) {
        typename P::Reg acc[kRows][kVectors];
        for (int i = 0; i < kRows; ++i)
          for (int v = 0; v < kVectors; ++v)
            acc[i][v] = P::load(out + (r0 + i) * head_dim + d0 + P::kLanes * v);
        for (int64_t j = c0; j < c1; ++j) {
          const float* row = panel + j * head_dim + d0;
          const float* weights = scores_t + (s0 + j) * kPrefillRows + r0;
          typename P::Reg value[kVectors];
          for (int v = 0; v < kVectors; ++v) value[v] = P::load(row + P::kLanes * v);
          for (int i = 0; i < kRows; ++i) {
            const typename P::Reg w = P::set1(weights[i]);
            for (int v = 0; v < kVectors; ++v) acc[i][v] = P::fma(w, value[v], acc[i][v]);
          }
        }
        for (int i = 0; i < kRows; ++i)
          for (int v = 0; v < kVectors; ++v)
            P::store(out + (r0 + i) * head_dim + d0 + P::kLanes * v, acc[i][v]);
      }
    }
  }
}

// The op for kv heads [group_begin, group_end), n_queries > 1 and prefill_takes(head_dim).
template <class Cache>
void prefill_attention(const AttentionView& a, int64_t group_begin, int64_t group_end) {
  using P = PrefillVector;
  using V = typename P::Reg;
  constexpr int64_t kLanes = P::kLanes;
  constexpr int64_t kRowVectors = kPrefillRows / kLanes;
  static_assert(kPrefillRows % (kLanes * P::kScoreVectors) == 0 &&
                kPrefillRows % P::kValueRows == 0);
  const int64_t group = a.n_heads / a.n_kv_heads;
  const int64_t head_dim = a.head_dim;
  const int64_t n_slots = a.n_slots;
  const int64_t n_rows = a.n_queries * group;  // per kv head

  // Per thread: the panel [kPrefillPanelSlots + kScoreSlots, head_dim] (rows past a panel's slots
  // are zeros: the last score tile reads them); scores^T [n_slots + kScoreSlots, kPrefillRows] and
  // slot positions [n_slots + kScoreSlots] (the last score tile's rows past the last slot, seen by
  // no row), and the kv head's mass [n_slots]; Q^T [head_dim, kPrefillRows] and the outputs
  // [kPrefillRows, head_dim].
  const int64_t panel_rows = kPrefillPanelSlots + P::kScoreSlots;
  const int64_t score_rows = n_slots + P::kScoreSlots;
  auto* panel = static_cast<float*>(
      scratch(Scratch::kActivations, sizeof(float) * static_cast<size_t>(panel_rows * head_dim)));
  auto* scores_t = static_cast<float*>(
      scratch(Scratch::kScores,
              sizeof(float) * static_cast<size_t>((kPrefillRows + 1) * score_rows + n_slots)));
  auto* slot_pos = reinterpret_cast<int32_t*>(scores_t + kPrefillRows * score_rows);
  float* group_mass = reinterpret_cast<float*>(slot_pos + score_rows);
  for (int64_t s = n_slots; s < score_rows; ++s) slot_pos[s] = INT32_MAX;
  auto* q_t = static_cast<float*>(scratch(
      Scratch::kAccumulators, sizeof(float) * static_cast<size_t>(2 * kPrefillRows * head_dim)));
  float* out = q_t + kPrefillRows * head_dim;

  // Rows [s0, s0 + n) of kv head g of `cache` into the panel, as floats; rows of slots past
  // `visible_until`, and the rows past n up to a whole score tile (which the last tile reads), are
  // zeros.
  auto load_panel = [&](const void* cache, int64_t g, int64_t s0, int64_t n,
                        int32_t visible_until) {
    const int64_t tiled = (n + P::kScoreSlots - 1) / P::kScoreSlots * P::kScoreSlots;
    for (int64_t j = 0; j < tiled; ++j) {
      float* panel_row = panel + j * head_dim;
      const int64_t s = s0 + j;
      if (j >= n || slot_pos[s] > visible_until) {
        std::memset(panel_row, 0, sizeof(float) * static_cast<size_t>(head_dim));
        continue;
      }
      const float* row = Cache::row(cache, (s * a.n_kv_heads + g) * head_dim, head_dim, panel_row);
      if (row != panel_row)
        std::memcpy(panel_row, row, sizeof(float) * static_cast<size_t>(head_dim));
    }
  };

  for (int64_t g = group_begin; g < group_end; ++g) {
    std::memset(group_mass, 0, sizeof(float) * static_cast<size_t>(n_slots));
    for (int64_t s = 0; s < n_slots; ++s) slot_pos[s] = a.kv_pos[s * a.n_kv_heads + g];
    // Row r of the block is row r0 + r of the kv head: query (r0 + r) / group, query head
    // (r0 + r) % group of the group (a query's heads may fall into two blocks).
    for (int64_t r0 = 0; r0 < n_rows; r0 += kPrefillRows) {
      const int64_t rows = std::min(kPrefillRows, n_rows - r0);
      // Q^T and each row's position; padding rows are zeros at the lowest position, which sees
      // no slot.
      alignas(64) int32_t positions[kPrefillRows];
      int32_t last_position = INT32_MIN;
      for (int64_t r = 0; r < kPrefillRows; ++r) {
        if (r >= rows) {
          positions[r] = INT32_MIN;
          for (int64_t d = 0; d < head_dim; ++d) q_t[d * kPrefillRows + r] = 0.0f;
          continue;
        }
        const int64_t i = (r0 + r) / group;
        positions[r] = a.q_pos[i];
        last_position = std::max(last_position, a.q_pos[i]);
        const float* q_row = a.q + (i * a.n_heads + g * group + (r0 + r) % group) * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) q_t[d * kPrefillRows + r] = q_row[d];
      }
      // Slots from seen_slots on are seen by no row of the block.
      int64_t seen_slots = 0;
      for (int64_t s = 0; s < n_slots; ++s)
        seen_slots = slot_pos[s] <= last_position ? s + 1 : seen_slots;

      for (int64_t s0 = 0; s0 < seen_slots; s0 += kPrefillPanelSlots) {
        const int64_t n = std::min(kPrefillPanelSlots, seen_slots - s0);
        load_panel(a.k, g, s0, n, last_position);
        for (int64_t rv0 = 0; rv0 < kRowVectors; rv0 += P::kScoreVectors) {
          for (int64_t j = 0; j < n; j += P::kScoreSlots) {
            prefill_score_tile(panel, q_t, head_dim, j, rv0, s0 + j, slot_pos, positions, a.scale,
                               scores_t);
          }
        }
      }

      // Softmax down each column of scores^T; a column that sees no slot gets zero weights.
      alignas(64) float row_seen[kPrefillRows];  // 1: the row sees a slot
      for (int64_t v = 0; v < kRowVectors; ++v) {
        V max_value = P::set1(-INFINITY);
        for (int64_t s = 0; s < seen_slots; ++s)
          max_value = P::max(max_value, P::load(scores_t + s * kPrefillRows + kLanes * v));
        const V shift = P::seen_or_zero(max_value, max_value);
        V total = P::zero();
        for (int64_t s = 0; s < seen_slots; ++s) {
          float* p = scores_t + s * kPrefillRows + kLanes * v;
          const V e = vec_exp<P>(P::sub(P::load(p), shift));
          P::store(p, e);
          total = P::add(total, e);
        }
        // 1 / total, or 0 for a row that sees nothing (whose total is 0).
        const V inverse = P::seen_or_zero(max_value, P::div(P::set1(1.0f), total));
        for (int64_t s = 0; s < seen_slots; ++s) {
          float* p = scores_t + s * kPrefillRows + kLanes * v;
          P::store(p, P::mul(P::load(p), inverse));
        }
        P::store(row_seen + kLanes * v, P::seen_or_zero(max_value, P::set1(1.0f)));
      }

      std::memset(out, 0, sizeof(float) * static_cast<size_t>(kPrefillRows * head_dim));
      for (int64_t s0 = 0; s0 < seen_slots; s0 += kPrefillPanelSlots) {
        const int64_t n = std::min(kPrefillPanelSlots, seen_slots - s0);
        load_panel(a.v, g, s0, n, last_position);
        prefill_value_tiles(panel, scores_t, head_dim, s0, n, out);
      }

      // The rows out (zeros for a query head that sees nothing), and the mass of the queries
      // from mass_first_query on (the rows whose weight in `mass_rows` is 1).
      alignas(64) float mass_rows[kPrefillRows] = {};
      bool any_mass = false;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = (r0 + r) / group;
        float* out_row = a.out + (i * a.n_heads + g * group + (r0 + r) % group) * head_dim;
        if (row_seen[r] == 0.0f) {
          std::memset(out_row, 0, sizeof(float) * static_cast<size_t>(head_dim));
          continue;
        }
        std::memcpy(out_row, out + r * head_dim, sizeof(float) * static_cast<size_t>(head_dim));
        if (i >= a.mass_first_query) {
          mass_rows[r] = 1.0f;
          any_mass = true;
        }
      }
      if (a.mass != nullptr && any_mass) {
        for (int64_t s = 0; s < seen_slots; ++s) {
          const float* p = scores_t + s * kPrefillRows;
          V sum = P::zero();
          for (int64_t v = 0; v < kRowVectors; ++v)
            sum = P::fma(P::load(p + kLanes * v), P::load(mass_rows + kLanes * v), sum);
          group_mass[s] += P::sum(sum);
        }
      }
    }
    if (a.mass != nullptr) {
      std::memcpy(a.mass + g * n_slots, group_mass, sizeof(float) * static_cast<size_t>(n_slots));
    }
  }
}
