#include "core/op_checks.h"

#include "core/error.h"

namespace edgelm::op_checks {
namespace {

void same_shape(const char* backend, const Tensor& a, const Tensor& b, const char* op) {
  EDGELM_CHECK(a.shape() == b.shape(), "[", backend, "] ", op, ": shape mismatch ", a.describe(),
               " vs ", b.describe());
}

}  // namespace

void dtype(const char* backend, const Tensor& t, DType expected, const char* op, const char* role) {
  EDGELM_CHECK(t.defined(), "[", backend, "] ", op, ": ", role, " tensor is undefined");
  EDGELM_CHECK(t.dtype() == expected, "[", backend, "] ", op, ": ", role, " must be ",
               dtype_name(expected), ", got ", t.describe());
}

void embed(const char* backend, const Tensor& table, const Tensor& ids, const Tensor& out) {
  EDGELM_CHECK(table.defined() && ids.defined() && out.defined(), "[", backend,
               "] embed: undefined tensor");
  EDGELM_CHECK(table.rank() == 2 && ids.rank() == 1 && out.rank() == 2, "[", backend,
               "] embed: expected table [vocab, dim], ids [n], out [n, dim]; got ",
               table.describe(), ", ", ids.describe(), ", ", out.describe());
  dtype(backend, ids, DType::I32, "embed", "ids");
  dtype(backend, out, DType::F32, "embed", "out");
  EDGELM_CHECK(out.dim(0) == ids.dim(0) && out.dim(1) == table.dim(1), "[", backend,
               "] embed: out ", out.describe(), " does not match ids ", ids.describe(),
               " and table ", table.describe());
  const int64_t vocab = table.dim(0);
  if (const auto* values = ids.data<int32_t>()) {
    for (int64_t i = 0; i < ids.dim(0); ++i) {
      EDGELM_CHECK(values[i] >= 0 && values[i] < vocab, "[", backend, "] embed: token id ",
                   values[i], " at index ", i, " is outside the vocabulary of ", vocab);
    }
  }
}

MatmulShape matmul(const char* backend, const Tensor& x, const Tensor& w, const Tensor& y) {
  dtype(backend, x, DType::F32, "matmul", "x");
  dtype(backend, y, DType::F32, "matmul", "y");
  EDGELM_CHECK(w.rank() == 2, "[", backend, "] matmul: weight must be [N, K], got ", w.describe());
  const MatmulShape shape{x.rows(), w.dim(0), w.dim(1)};
  EDGELM_CHECK(x.shape().last() == shape.K && y.shape().last() == shape.N && y.rows() == shape.M,
               "[", backend, "] matmul: shapes do not agree: x ", x.describe(), ", w ",
               w.describe(), ", y ", y.describe());
  const bool disjoint = x.buffer() != y.buffer() ||
                        x.byte_offset() + x.nbytes() <= y.byte_offset() ||
                        y.byte_offset() + y.nbytes() <= x.byte_offset();
  EDGELM_CHECK(disjoint, "[", backend, "] matmul: y may not alias x");
  return shape;
}

void rms_norm(const char* backend, const Tensor& x, const Tensor& weight, float eps,
              const Tensor& y) {
  dtype(backend, x, DType::F32, "rms_norm", "x");
  dtype(backend, weight, DType::F32, "rms_norm", "weight");
  dtype(backend, y, DType::F32, "rms_norm", "y");
  same_shape(backend, x, y, "rms_norm");
  EDGELM_CHECK(weight.rank() == 1 && weight.dim(0) == x.shape().last(), "[", backend,
               "] rms_norm: weight ", weight.describe(), " does not match x ", x.describe());
  EDGELM_CHECK(eps >= 0.0f, "[", backend, "] rms_norm: negative eps ", eps);
}

void rope(const char* backend, const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
          const Tensor& out) {
  dtype(backend, x, DType::F32, "rope", "x");
  dtype(backend, out, DType::F32, "rope", "out");
  dtype(backend, positions, DType::I32, "rope", "positions");
  dtype(backend, inv_freq, DType::F32, "rope", "inv_freq");
  same_shape(backend, x, out, "rope");
  EDGELM_CHECK(x.rank() == 3 && x.dim(2) % 2 == 0, "[", backend, "] rope: x must be [n_tokens, ",
               "n_heads, head_dim] with even head_dim, got ", x.describe());
  EDGELM_CHECK(positions.rank() == 1 && positions.dim(0) == x.dim(0), "[", backend,
               "] rope: positions ", positions.describe(), " does not match ", x.describe());
  EDGELM_CHECK(inv_freq.rank() == 1 && inv_freq.dim(0) == x.dim(2) / 2, "[", backend,
               "] rope: inv_freq ", inv_freq.describe(), " must have head_dim / 2 = ", x.dim(2) / 2,
               " entries");
}

void attention(const char* backend, const AttentionArgs& args) {
  const char* op = "attention";
  dtype(backend, args.q, DType::F32, op, "q");
  dtype(backend, args.out, DType::F32, op, "out");
  dtype(backend, args.q_pos, DType::I32, op, "q_pos");
  dtype(backend, args.kv_pos, DType::I32, op, "kv_pos");
  EDGELM_CHECK(args.k.defined() && args.v.defined(), "[", backend, "] attention: k or v is ",
               "undefined");
  EDGELM_CHECK(args.v.dtype() == args.k.dtype() && args.v.shape() == args.k.shape(), "[", backend,
               "] attention: v ", args.v.describe(), " does not match k ", args.k.describe());
  EDGELM_CHECK(args.q.rank() == 3 && args.k.rank() == 3, "[", backend,
               "] attention: q and k must be rank 3, got ", args.q.describe(), ", ",
               args.k.describe());
  same_shape(backend, args.q, args.out, op);
  const int64_t n_queries = args.q.dim(0);
  const int64_t n_heads = args.q.dim(1);
  const int64_t n_slots = args.k.dim(0);
  const int64_t n_kv_heads = args.k.dim(1);
  EDGELM_CHECK(args.k.dim(2) == args.q.dim(2), "[", backend, "] attention: head_dim of q ",
               args.q.describe(), " and k ", args.k.describe(), " differ");
  EDGELM_CHECK(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "[", backend, "] attention: ", n_heads,
               " query heads are not a multiple of ", n_kv_heads, " kv heads");
  EDGELM_CHECK(args.q_pos.rank() == 1 && args.q_pos.dim(0) == n_queries, "[", backend,
               "] attention: q_pos ", args.q_pos.describe(), " must be [", n_queries, "]");
  EDGELM_CHECK(
      args.kv_pos.rank() == 2 && args.kv_pos.dim(0) == n_slots && args.kv_pos.dim(1) == n_kv_heads,
      "[", backend, "] attention: kv_pos ", args.kv_pos.describe(), " must be [", n_slots, ", ",
      n_kv_heads, "]");
  if (!args.mass.defined()) return;
  dtype(backend, args.mass, DType::F32, op, "mass");
  EDGELM_CHECK(
      args.mass.rank() == 2 && args.mass.dim(0) == n_kv_heads && args.mass.dim(1) == n_slots, "[",
      backend, "] attention: mass ", args.mass.describe(), " must be [", n_kv_heads, ", ", n_slots,
      "]");
  EDGELM_CHECK(args.mass_first_query >= 0 && args.mass_first_query <= n_queries, "[", backend,
               "] attention: mass_first_query ", args.mass_first_query, " outside [0, ", n_queries,
               "]");
}

void elementwise(const char* backend, const char* op, const Tensor& a, const Tensor& b,
                 const Tensor& out) {
  dtype(backend, a, DType::F32, op, "first input");
  dtype(backend, b, DType::F32, op, "second input");
  dtype(backend, out, DType::F32, op, "out");
  same_shape(backend, a, b, op);
  same_shape(backend, a, out, op);
}

void softmax(const char* backend, const Tensor& x, const Tensor& y) {
  dtype(backend, x, DType::F32, "softmax", "x");
  dtype(backend, y, DType::F32, "softmax", "y");
  same_shape(backend, x, y, "softmax");
}

void cast(const char* backend, const Tensor& src, const Tensor& dst) {
  EDGELM_CHECK(src.defined() && dst.defined(), "[", backend, "] cast: undefined tensor");
  same_shape(backend, src, dst, "cast");
}

void kv_append(const char* backend, const Tensor& src, const Tensor& slots, const Tensor& cache) {
  dtype(backend, src, DType::F32, "kv_append", "src");
  dtype(backend, slots, DType::I32, "kv_append", "slots");
  EDGELM_CHECK(cache.defined(), "[", backend, "] kv_append: cache tensor is undefined");
  EDGELM_CHECK(src.rank() == 3 && cache.rank() == 3 && src.dim(1) == cache.dim(1) &&
                   src.dim(2) == cache.dim(2),
               "[", backend, "] kv_append: src ", src.describe(), " does not match cache ",
               cache.describe());
  EDGELM_CHECK(slots.rank() == 1 && slots.dim(0) == src.dim(0), "[", backend, "] kv_append: slots ",
               slots.describe(), " must have one entry per token of ", src.describe());
  const int64_t capacity = cache.dim(0);
  if (const auto* values = slots.data<int32_t>()) {
    for (int64_t t = 0; t < slots.dim(0); ++t) {
      EDGELM_CHECK(values[t] >= 0 && values[t] < capacity, "[", backend, "] kv_append: slot ",
                   values[t], " outside the cache capacity ", capacity);
    }
  }
}

void kv_compact(const char* backend, const Tensor& cache, const Tensor& keep) {
  dtype(backend, keep, DType::I32, "kv_compact", "keep");
  EDGELM_CHECK(cache.defined() && cache.rank() == 3, "[", backend,
               "] kv_compact: cache must be [capacity, n_kv_heads, row], got ", cache.describe());
  const int64_t capacity = cache.dim(0);
  const int64_t n_kv_heads = cache.dim(1);
  EDGELM_CHECK(keep.rank() == 2 && keep.dim(0) == n_kv_heads && keep.dim(1) <= capacity, "[",
               backend, "] kv_compact: keep ", keep.describe(), " must be [", n_kv_heads,
               ", n_keep <= ", capacity, "]");
  const int64_t n_keep = keep.dim(1);
  const auto* values = keep.data<int32_t>();
  if (values == nullptr) return;
  for (int64_t g = 0; g < n_kv_heads; ++g) {
    for (int64_t j = 0; j < n_keep; ++j) {
      const int32_t slot = values[g * n_keep + j];
      EDGELM_CHECK(slot >= 0 && slot < capacity && (j == 0 || slot > values[g * n_keep + j - 1]),
                   "[", backend, "] kv_compact: keep[", g, ", ", j, "] = ", slot, " must be below ",
                   capacity, " and greater than the previous entry");
    }
  }
}

void copy(const char* backend, const Tensor& src, const Tensor& dst) {
  EDGELM_CHECK(src.defined() && dst.defined(), "[", backend, "] copy: undefined tensor");
  EDGELM_CHECK(
      src.dtype() == dst.dtype() && src.numel() == dst.numel() && src.nbytes() == dst.nbytes(), "[",
      backend, "] copy: ", src.describe(), " and ", dst.describe(),
      " differ in dtype or element count");
}

}  // namespace edgelm::op_checks
