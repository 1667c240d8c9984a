#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "backends/cpu/portable/portable.h"
#include "core/error.h"

namespace edgelm::cpu {
namespace {

int default_thread_count() {
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

// The table entry for `dtype`, or null for a value outside the enum (supports() must not throw).
template <class Fn>
Fn entry(const std::array<Fn, kDTypeCount>& table, DType dtype) {
  const auto index = static_cast<size_t>(dtype);
  return index < table.size() ? table[index] : nullptr;
}

// Host address of a tensor's bytes; every CPU op needs one.
void* host(const Tensor& t, const char* op, const char* role) {
  EDGELM_CHECK(t.defined(), "[cpu] ", op, ": ", role, " tensor is undefined");
  void* pointer = t.raw();
  EDGELM_CHECK(pointer != nullptr, "[cpu] ", op, ": ", role, " ", t.describe(),
               " has no host mapping");
  return pointer;
}

void check_dtype(const Tensor& t, DType dtype, const char* op, const char* role) {
  EDGELM_CHECK(t.dtype() == dtype, "[cpu] ", op, ": ", role, " must be ", dtype_name(dtype),
               ", got ", t.describe());
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  EDGELM_CHECK(a.shape() == b.shape(), "[cpu] ", op, ": shape mismatch ", a.describe(), " vs ",
               b.describe());
}

// Rows of a [rows, n] problem per task: enough work per task to amortise a dispatch.
int64_t grain_for(int64_t row_cost) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_cost));
}

}  // namespace

CpuBackend::CpuBackend(CpuOptions options)
    : memory_(options.memory ? options.memory : std::make_shared<HostMemory>()),
      pool_(options.n_threads > 0 ? options.n_threads : default_thread_count(), options.cpus),
      kernels_(&select_kernels(options.isa)) {}

std::string CpuBackend::device() const {
#if defined(__x86_64__)
  const char* arch = "x86_64";
#elif defined(__aarch64__)
  const char* arch = "aarch64";
#else
  const char* arch = "cpu";
#endif
  std::string pinned;
  for (int cpu : pool_.cpus())
    pinned += (pinned.empty() ? ", pinned to CPUs " : ",") + std::to_string(cpu);
  return str_cat(arch, " (", kernels_->isa, " kernels, ", pool_.size(), " threads", pinned, ")");
}

bool CpuBackend::supports(OpKind op, std::initializer_list<DType> dtypes) const {
  // No allocation here: ops call supports() on every invocation.
  const size_t n = dtypes.size();
  const DType* d = dtypes.begin();
  auto only = [&](DType expected) { return n == 1 && d[0] == expected; };
  const bool one_valid = n == 1 && static_cast<int>(d[0]) < kDTypeCount;
  switch (op) {
    case OpKind::Embed:
      return n == 1 && entry(kernels_->row_to_f32, d[0]) != nullptr;
    case OpKind::Matmul:
      return n == 1 && entry(kernels_->matmul, d[0]) != nullptr;
    case OpKind::Attention:
      return n == 1 && entry(kernels_->attention, d[0]) != nullptr;
    case OpKind::RmsNorm:
    case OpKind::Rope:
    case OpKind::SiluMul:
    case OpKind::Add:
    case OpKind::Softmax:
      return only(DType::F32);
    case OpKind::Cast:
      return n == 2 && entry(kernels_->row_to_f32, d[0]) != nullptr &&
             entry(kernels_->row_from_f32, d[1]) != nullptr;
    case OpKind::KvAppend:
      return only(DType::F32) || only(DType::F16);
    case OpKind::KvCompact:
      return one_valid && !dtype_is_quantized(d[0]);
    case OpKind::Copy:
      return one_valid;
    case OpKind::Count:
      break;
  }
  return false;
}

void CpuBackend::embed(const Tensor& table, const Tensor& ids, const Tensor& out) {
  EDGELM_CHECK(supports(OpKind::Embed, {table.dtype()}), "[cpu] embed: unsupported table dtype ",
               table.describe());
  EDGELM_CHECK(table.rank() == 2 && ids.rank() == 1 && out.rank() == 2, "[cpu] embed: expected ",
               "table [vocab, dim], ids [n], out [n, dim]; got ", table.describe(), ", ",
               ids.describe(), ", ", out.describe());
  check_dtype(ids, DType::I32, "embed", "ids");
  check_dtype(out, DType::F32, "embed", "out");
  EDGELM_CHECK(out.dim(0) == ids.dim(0) && out.dim(1) == table.dim(1), "[cpu] embed: out ",
               out.describe(), " does not match ids ", ids.describe(), " and table ",
               table.describe());
  const auto* table_bytes = static_cast<const std::byte*>(host(table, "embed", "table"));
  const auto* id_values = static_cast<const int32_t*>(host(ids, "embed", "ids"));
  auto* out_values = static_cast<float*>(host(out, "embed", "out"));
  const int64_t vocab = table.dim(0);
  const int64_t dim = table.dim(1);
  for (int64_t i = 0; i < ids.dim(0); ++i) {
    EDGELM_CHECK(id_values[i] >= 0 && id_values[i] < vocab, "[cpu] embed: token id ", id_values[i],
                 " at index ", i, " is outside the vocabulary of ", vocab);
  }
  const RowToF32Fn to_f32 = entry(kernels_->row_to_f32, table.dtype());
  const size_t row_bytes = table.row_bytes();
  pool_.parallel_for(
      ids.dim(0),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          to_f32(table_bytes + static_cast<size_t>(id_values[i]) * row_bytes, out_values + i * dim,
                 dim);
        }
      },
      grain_for(dim));
}

void CpuBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& y) {
  EDGELM_CHECK(supports(OpKind::Matmul, {w.dtype()}), "[cpu] matmul: unsupported weight dtype ",
               w.describe());
  check_dtype(x, DType::F32, "matmul", "x");
  check_dtype(y, DType::F32, "matmul", "y");
  EDGELM_CHECK(w.rank() == 2, "[cpu] matmul: weight must be [N, K], got ", w.describe());
  const int64_t N = w.dim(0);
  const int64_t K = w.dim(1);
  const int64_t M = x.rows();
  EDGELM_CHECK(x.shape().last() == K && y.shape().last() == N && y.rows() == M,
               "[cpu] matmul: shapes do not agree: x ", x.describe(), ", w ", w.describe(), ", y ",
               y.describe());
  const auto* x_values = static_cast<const float*>(host(x, "matmul", "x"));
  const void* weights = host(w, "matmul", "w");
  auto* y_values = static_cast<float*>(host(y, "matmul", "y"));
  EDGELM_CHECK(y_values != x_values, "[cpu] matmul: y may not alias x");
  const MatmulFn kernel = entry(kernels_->matmul, w.dtype());
  pool_.parallel_for(
      N,
      [&](int64_t begin, int64_t end) { kernel(x_values, weights, y_values, M, N, K, begin, end); },
      grain_for(M * K));
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  check_dtype(x, DType::F32, "rms_norm", "x");
  check_dtype(weight, DType::F32, "rms_norm", "weight");
  check_dtype(y, DType::F32, "rms_norm", "y");
  check_same_shape(x, y, "rms_norm");
  const int64_t dim = x.shape().last();
  EDGELM_CHECK(weight.rank() == 1 && weight.dim(0) == dim, "[cpu] rms_norm: weight ",
               weight.describe(), " does not match x ", x.describe());
  EDGELM_CHECK(eps >= 0.0f, "[cpu] rms_norm: negative eps ", eps);
  const auto* x_values = static_cast<const float*>(host(x, "rms_norm", "x"));
  const auto* w_values = static_cast<const float*>(host(weight, "rms_norm", "weight"));
  auto* y_values = static_cast<float*>(host(y, "rms_norm", "y"));
  const RmsNormFn kernel = kernels_->rms_norm;
  pool_.parallel_for(
      x.rows(),
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          kernel(x_values + r * dim, w_values, y_values + r * dim, dim, eps);
      },
      grain_for(dim));
}

void CpuBackend::rope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                      const Tensor& out) {
  check_dtype(x, DType::F32, "rope", "x");
  check_dtype(out, DType::F32, "rope", "out");
  check_dtype(positions, DType::I32, "rope", "positions");
  check_dtype(inv_freq, DType::F32, "rope", "inv_freq");
  check_same_shape(x, out, "rope");
  EDGELM_CHECK(x.rank() == 3 && x.dim(2) % 2 == 0, "[cpu] rope: x must be [n_tokens, n_heads, ",
               "head_dim] with even head_dim, got ", x.describe());
  const int64_t n_tokens = x.dim(0);
  const int64_t n_heads = x.dim(1);
  const int64_t head_dim = x.dim(2);
  EDGELM_CHECK(positions.rank() == 1 && positions.dim(0) == n_tokens, "[cpu] rope: positions ",
               positions.describe(), " does not match ", x.describe());
  EDGELM_CHECK(inv_freq.rank() == 1 && inv_freq.dim(0) == head_dim / 2, "[cpu] rope: inv_freq ",
               inv_freq.describe(), " must have head_dim / 2 = ", head_dim / 2, " entries");
  const auto* x_values = static_cast<const float*>(host(x, "rope", "x"));
  const auto* pos = static_cast<const int32_t*>(host(positions, "rope", "positions"));
  const auto* freq = static_cast<const float*>(host(inv_freq, "rope", "inv_freq"));
  auto* out_values = static_cast<float*>(host(out, "rope", "out"));
  const RopeFn kernel = kernels_->rope;
  const int64_t token_size = n_heads * head_dim;
  pool_.parallel_for(
      n_tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          kernel(x_values + t * token_size, out_values + t * token_size, n_heads, head_dim, pos[t],
                 freq);
        }
      },
      grain_for(token_size * 4));
}

void CpuBackend::attention(const AttentionArgs& args) {
  const char* op = "attention";
  check_dtype(args.q, DType::F32, op, "q");
  check_dtype(args.out, DType::F32, op, "out");
  check_dtype(args.q_pos, DType::I32, op, "q_pos");
  check_dtype(args.kv_pos, DType::I32, op, "kv_pos");
  EDGELM_CHECK(supports(OpKind::Attention, {args.k.dtype()}), "[cpu] attention: unsupported k/v ",
               "dtype ", args.k.describe());
  EDGELM_CHECK(args.v.dtype() == args.k.dtype() && args.v.shape() == args.k.shape(),
               "[cpu] attention: v ", args.v.describe(), " does not match k ", args.k.describe());
  EDGELM_CHECK(args.q.rank() == 3 && args.k.rank() == 3, "[cpu] attention: q and k must be rank 3,",
               " got ", args.q.describe(), ", ", args.k.describe());
  check_same_shape(args.q, args.out, op);
  const int64_t n_queries = args.q.dim(0);
  const int64_t n_heads = args.q.dim(1);
  const int64_t n_slots = args.k.dim(0);
  const int64_t n_kv_heads = args.k.dim(1);
  EDGELM_CHECK(args.k.dim(2) == args.q.dim(2), "[cpu] attention: head_dim of q ", args.q.describe(),
               " and k ", args.k.describe(), " differ");
  EDGELM_CHECK(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "[cpu] attention: ", n_heads,
               " query heads are not a multiple of ", n_kv_heads, " kv heads");
  EDGELM_CHECK(args.q_pos.rank() == 1 && args.q_pos.dim(0) == n_queries, "[cpu] attention: q_pos ",
               args.q_pos.describe(), " must be [", n_queries, "]");
  EDGELM_CHECK(
      args.kv_pos.rank() == 2 && args.kv_pos.dim(0) == n_slots && args.kv_pos.dim(1) == n_kv_heads,
      "[cpu] attention: kv_pos ", args.kv_pos.describe(), " must be [", n_slots, ", ", n_kv_heads,
      "]");
  if (args.mass.defined()) {
    check_dtype(args.mass, DType::F32, op, "mass");
    EDGELM_CHECK(
        args.mass.rank() == 2 && args.mass.dim(0) == n_kv_heads && args.mass.dim(1) == n_slots,
        "[cpu] attention: mass ", args.mass.describe(), " must be [", n_kv_heads, ", ", n_slots,
        "]");
    EDGELM_CHECK(args.mass_first_query >= 0 && args.mass_first_query <= n_queries,
                 "[cpu] attention: mass_first_query ", args.mass_first_query, " outside [0, ",
                 n_queries, "]");
  }
  for (const Tensor* t : {&args.q, &args.k, &args.v, &args.q_pos, &args.kv_pos, &args.out}) {
    host(*t, op, "input/output");
  }
  if (args.mass.defined()) host(args.mass, op, "mass");
  const AttentionFn kernel = entry(kernels_->attention, args.k.dtype());
  pool_.parallel_for(n_kv_heads, [&](int64_t begin, int64_t end) { kernel(args, begin, end); });
}

void CpuBackend::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check_dtype(gate, DType::F32, "silu_mul", "gate");
  check_dtype(up, DType::F32, "silu_mul", "up");
  check_dtype(out, DType::F32, "silu_mul", "out");
  check_same_shape(gate, up, "silu_mul");
  check_same_shape(gate, out, "silu_mul");
  const auto* g = static_cast<const float*>(host(gate, "silu_mul", "gate"));
  const auto* u = static_cast<const float*>(host(up, "silu_mul", "up"));
  auto* o = static_cast<float*>(host(out, "silu_mul", "out"));
  const SiluMulFn kernel = kernels_->silu_mul;
  pool_.parallel_for(
      gate.numel(),
      [&](int64_t begin, int64_t end) { kernel(g + begin, u + begin, o + begin, end - begin); },
      4096);
}

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  check_dtype(a, DType::F32, "add", "a");
  check_dtype(b, DType::F32, "add", "b");
  check_dtype(out, DType::F32, "add", "out");
  check_same_shape(a, b, "add");
  check_same_shape(a, out, "add");
  const auto* a_values = static_cast<const float*>(host(a, "add", "a"));
  const auto* b_values = static_cast<const float*>(host(b, "add", "b"));
  auto* o = static_cast<float*>(host(out, "add", "out"));
  const AddFn kernel = kernels_->add;
  pool_.parallel_for(
      a.numel(),
      [&](int64_t begin, int64_t end) {
        kernel(a_values + begin, b_values + begin, o + begin, end - begin);
      },
      4096);
}

void CpuBackend::softmax(const Tensor& x, const Tensor& y) {
  check_dtype(x, DType::F32, "softmax", "x");
  check_dtype(y, DType::F32, "softmax", "y");
  check_same_shape(x, y, "softmax");
  const int64_t n = x.shape().last();
  const auto* x_values = static_cast<const float*>(host(x, "softmax", "x"));
  auto* y_values = static_cast<float*>(host(y, "softmax", "y"));
  const SoftmaxFn kernel = kernels_->softmax;
  pool_.parallel_for(
      x.rows(),
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) kernel(x_values + r * n, y_values + r * n, n);
      },
      grain_for(n));
}

void CpuBackend::cast(const Tensor& src, const Tensor& dst) {
  EDGELM_CHECK(supports(OpKind::Cast, {src.dtype(), dst.dtype()}), "[cpu] cast: unsupported ",
               dtype_name(src.dtype()), " -> ", dtype_name(dst.dtype()));
  check_same_shape(src, dst, "cast");
  const auto* src_bytes = static_cast<const std::byte*>(host(src, "cast", "src"));
  auto* dst_bytes = static_cast<std::byte*>(host(dst, "cast", "dst"));
  const int64_t n = src.shape().last();
  const size_t src_row = src.row_bytes();
  const size_t dst_row = dst.row_bytes();
  const RowToF32Fn to_f32 = entry(kernels_->row_to_f32, src.dtype());
  const RowFromF32Fn from_f32 = entry(kernels_->row_from_f32, dst.dtype());
  pool_.parallel_for(
      src.rows(),
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> row;  // one F32 row of scratch per thread, reused
        row.resize(static_cast<size_t>(n));
        for (int64_t r = begin; r < end; ++r) {
          to_f32(src_bytes + r * src_row, row.data(), n);
          from_f32(row.data(), dst_bytes + r * dst_row, n);
        }
      },
      grain_for(n));
}

void CpuBackend::kv_append(const Tensor& src, const Tensor& slots, const Tensor& cache) {
  EDGELM_CHECK(supports(OpKind::KvAppend, {cache.dtype()}), "[cpu] kv_append: unsupported cache ",
               cache.describe());
  check_dtype(src, DType::F32, "kv_append", "src");
  check_dtype(slots, DType::I32, "kv_append", "slots");
  EDGELM_CHECK(src.rank() == 3 && cache.rank() == 3 && src.dim(1) == cache.dim(1) &&
                   src.dim(2) == cache.dim(2),
               "[cpu] kv_append: src ", src.describe(), " does not match cache ", cache.describe());
  EDGELM_CHECK(slots.rank() == 1 && slots.dim(0) == src.dim(0), "[cpu] kv_append: slots ",
               slots.describe(), " must have one entry per token of ", src.describe());
  const auto* src_values = static_cast<const float*>(host(src, "kv_append", "src"));
  const auto* slot_values = static_cast<const int32_t*>(host(slots, "kv_append", "slots"));
  auto* cache_bytes = static_cast<std::byte*>(host(cache, "kv_append", "cache"));
  const int64_t capacity = cache.dim(0);
  const int64_t row = src.dim(1) * src.dim(2);
  const size_t cache_row = static_cast<size_t>(cache.dim(1)) * cache.row_bytes();
  for (int64_t t = 0; t < src.dim(0); ++t) {
    EDGELM_CHECK(slot_values[t] >= 0 && slot_values[t] < capacity, "[cpu] kv_append: slot ",
                 slot_values[t], " outside the cache capacity ", capacity);
  }
  const RowFromF32Fn from_f32 = entry(kernels_->row_from_f32, cache.dtype());
  pool_.parallel_for(
      src.dim(0),
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          from_f32(src_values + t * row,
                   cache_bytes + static_cast<size_t>(slot_values[t]) * cache_row, row);
        }
      },
      grain_for(row));
}

void CpuBackend::kv_compact(const Tensor& cache, const Tensor& keep) {
  EDGELM_CHECK(supports(OpKind::KvCompact, {cache.dtype()}), "[cpu] kv_compact: unsupported cache ",
               cache.describe());
  check_dtype(keep, DType::I32, "kv_compact", "keep");
  EDGELM_CHECK(cache.rank() == 3, "[cpu] kv_compact: cache must be [capacity, n_kv_heads, row], ",
               "got ", cache.describe());
  const int64_t capacity = cache.dim(0);
  const int64_t n_kv_heads = cache.dim(1);
  EDGELM_CHECK(keep.rank() == 2 && keep.dim(0) == n_kv_heads && keep.dim(1) <= capacity,
               "[cpu] kv_compact: keep ", keep.describe(), " must be [", n_kv_heads,
               ", n_keep <= ", capacity, "]");
  const int64_t n_keep = keep.dim(1);
  const auto* keep_values = static_cast<const int32_t*>(host(keep, "kv_compact", "keep"));
  for (int64_t g = 0; g < n_kv_heads; ++g) {
    for (int64_t j = 0; j < n_keep; ++j) {
      const int32_t slot = keep_values[g * n_keep + j];
      EDGELM_CHECK(
          slot >= 0 && slot < capacity && (j == 0 || slot > keep_values[g * n_keep + j - 1]),
          "[cpu] kv_compact: keep[", g, ", ", j, "] = ", slot, " must be below ", capacity,
          " and greater than the previous entry");
    }
  }
  void* cache_bytes = host(cache, "kv_compact", "cache");
  const size_t row_bytes = cache.row_bytes();
  pool_.parallel_for(n_kv_heads, [&](int64_t begin, int64_t end) {
    kv_compact__portable(cache_bytes, n_kv_heads, row_bytes, keep_values, n_keep, begin, end);
  });
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  EDGELM_CHECK(
      src.dtype() == dst.dtype() && src.numel() == dst.numel() && src.nbytes() == dst.nbytes(),
      "[cpu] copy: ", src.describe(), " and ", dst.describe(), " differ in dtype or element count");
  const void* from = host(src, "copy", "src");
  void* to = host(dst, "copy", "dst");
  if (from != to) std::memmove(to, from, src.nbytes());
}

}  // namespace edgelm::cpu
