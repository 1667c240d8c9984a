// Parity cases of the position-dependent ops: rope (plain and Llama-3 scaled frequencies) and
// attention (decode, prefill, prompt chunks and evicted caches, per-head masks, exported mass).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/rope.h"
#include "tests/parity/cases.h"

namespace edgelm::parity {

namespace {

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

}  // namespace

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

}  // namespace edgelm::parity
