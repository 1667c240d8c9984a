// The Backend interface: one method per op of the op set. Every backend implements all of them and
// declares through supports() which dtype combinations it really computes; a combination it does
// not support throws when called, and is never approximated.
#pragma once

#include <array>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace edgelm {

enum class OpKind : uint8_t {
  Embed,
  Matmul,
  RmsNorm,
  Rope,
  Attention,
  SiluMul,
  Add,
  Softmax,
  Cast,
  KvAppend,
  KvCompact,
  Copy,
  Count
};
inline constexpr int kOpCount = static_cast<int>(OpKind::Count);
static_assert(kOpCount == 12, "update op_name(), the docs and the parity cases for a new op");

const char* op_name(OpKind op);
std::span<const OpKind> all_ops();

// Time spent in one kernel of one op, summed over calls (device profiling events on OpenCL, each
// call's wall time on the CPU).
struct OpTiming {
  std::string op;      // op_name(): "matmul"
  std::string kernel;  // the kernel that ran: "matmul_q4_0_gemv"
  int64_t calls = 0;
  double seconds = 0.0;
  uint64_t bytes = 0;  // weight bytes the calls read (CPU matmuls); 0 where not counted
};

// Timings as backends collect them, keyed by (op, kernel); sorted_by_time lists them longest
// first, as op_timings() returns them.
using OpTimingTable = std::map<std::pair<std::string, std::string>, OpTiming>;
std::vector<OpTiming> sorted_by_time(const OpTimingTable& table);

// Arguments of attention(); see Backend::attention.
struct AttentionArgs {
  Tensor q;       // F32 [n_queries, n_heads, head_dim]
  Tensor k;       // F32|F16 [n_slots, n_kv_heads, head_dim] (a cache view: filled slots only)
  Tensor v;       // same dtype and shape as k
  Tensor q_pos;   // I32 [n_queries]: logical position of each query
  Tensor kv_pos;  // I32 [n_slots, n_kv_heads]: logical position of each cached key
  Tensor out;     // F32 [n_queries, n_heads, head_dim]
  Tensor mass;    // optional F32 [n_kv_heads, n_slots]; undefined Tensor = no export
  int64_t mass_first_query = 0;  // queries [mass_first_query, n_queries) contribute to mass
  float scale = 0.0f;            // multiplies q.k; usually 1/sqrt(head_dim)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Short name: "cpu", "opencl".
  virtual std::string name() const = 0;
  // The device in words, for logs and reports: "x86_64 (portable kernels, 2 threads)".
  virtual std::string device() const = 0;
  // The allocator whose buffers this backend's ops read and write.
  virtual Memory& memory() = 0;
  // The allocator for tensors that live as long as a model (the matrices the loader repacks for
  // matmul_weight_type). Default: memory().
  virtual Memory& weight_memory() { return memory(); }

  // True when the backend computes `op` for these dtypes; never throws. The dtype list per op:
  //   embed: {table}     matmul: {weight}    attention: {k/v}     cast: {src, dst}
  //   kv_append, kv_compact: {cache}         copy: {dtype}
  //   rms_norm, rope, silu_mul, add, softmax: {x} (F32 only in every backend so far)
  virtual bool supports(OpKind op, std::initializer_list<DType> dtypes) const = 0;

  // True when this backend's ops can read and write `buffer` in place. The CPU backend can use
  // any buffer with a host mapping; a GPU backend only its own device buffers. Loaders move
  // tensors into memory() when this is false (e.g. weights mapped from a file).
  virtual bool can_use(const Buffer& buffer) const { return buffer.host_ptr() != nullptr; }

  // The dtype this backend multiplies `dtype` weight matrices fastest in: a repacked layout of the
  // same values (the CPU's Q4_0 -> Q4_0x8; for_matmul in models/loader.cpp), never other values.
  // Default: `dtype` itself, used in place.
  virtual DType matmul_weight_type(DType dtype) const { return dtype; }

  // Waits until all work submitted so far has finished and its results are visible through
  // host_ptr(). Synchronous backends return at once.
  virtual void synchronize() {}

  // Bytes this backend has moved between host and device memory with explicit transfer commands
  // since it was created (OpenCL: write, read and copy enqueues). Zero-copy backends keep this at
  // 0 on the model path; the CPU backend never transfers.
  virtual uint64_t host_device_copy_bytes() const { return 0; }

  // Per-kernel time since creation or the last reset, when the backend was created with profiling
  // on (BackendOptions::profile, --profile): device time on OpenCL, each op call's wall time on
  // the CPU. Empty otherwise. Call after synchronize().
  virtual std::vector<OpTiming> op_timings() const { return {}; }
  virtual void reset_op_timings() {}

  // Op preconditions (shapes, dtypes, index ranges) are checked with EDGELM_CHECK and throw
  // edgelm::Error. Outputs are written through the const handles; they may not alias inputs
  // unless the op says so.

  // out[i, :] = dequantize(table[ids[i], :]).
  // table: any weight dtype [vocab, dim]; ids: I32 [n]; out: F32 [n, dim]. Ids out of range throw.
  virtual void embed(const Tensor& table, const Tensor& ids, const Tensor& out) = 0;

  // y = x · Wᵀ. x: F32 [M, K]; w: F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1 (CPU: also the load-time
  // layouts Q4_0x8|Q8_0x8|F16x4) [N, K]; y: F32 [M, N].
  virtual void matmul(const Tensor& x, const Tensor& w, const Tensor& y) = 0;

  // ys[i] = x · ws[i]ᵀ for every i: matmuls that read the same x (a layer's K, V and Q
  // projections, or its gate and up projections), each with matmul's contract. The result is the
  // same as calling matmul for each pair in turn, which is what this default does; a backend may
  // run them as one (the CPU backend quantizes x once and splits the rows of all the weights over
  // its threads in one dispatch). ys must not alias x or each other.
  virtual void matmul_shared_x(const Tensor& x, std::initializer_list<Tensor> ws,
                               std::initializer_list<Tensor> ys);

  // y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) * weight. x, y: F32 [rows, dim] (any rank,
  // normalised over the last dimension); weight: F32 [dim]. y may alias x.
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) = 0;

  // Rotary embedding, rotate-half layout (HF): within each head, element i and i + head_dim/2
  // rotate by angle positions[t] * inv_freq[i], the angle formed in float32.
  // x, out: F32 [n_tokens, n_heads, head_dim]; positions: I32 [n_tokens];
  // inv_freq: F32 [head_dim / 2] (see rope_inv_freq). out may alias x.
  virtual void rope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                    const Tensor& out) = 0;

  // Scaled dot-product attention with grouped K/V heads (query head h reads kv head
  // h / (n_heads / n_kv_heads)). Query i sees slot s of kv head g iff kv_pos[s, g] <= q_pos[i]:
  // this is the causal mask of prefill over logical positions, and for decode it admits every
  // cached slot. A query that sees no slot gets zeros. When args.mass is defined,
  // mass[g, s] = sum over queries i >= mass_first_query and the query heads h of group g of
  // softmax weight p(i, h, s) — the per-(kv-head, slot) attention mass eviction policies score.
  virtual void attention(const AttentionArgs& args) = 0;

  // out = silu(gate) * up, silu(x) = x / (1 + e^-x). All F32, same shape. out may alias either.
  virtual void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;

  // out = a + b. All F32, same shape. out may alias either.
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // Row-wise softmax over the last dimension. F32, same shape; y may alias x.
  virtual void softmax(const Tensor& x, const Tensor& y) = 0;

  // Converts src to dst's dtype, same shape. Float types convert with round-to-nearest-even;
  // F32 -> Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 quantizes with the reference quantizers (core/quant.h); those
  // types -> F32 dequantize.
  virtual void cast(const Tensor& src, const Tensor& dst) = 0;

  // cache[slots[t], :, :] = src[t, :, :], converted to the cache dtype.
  // src: F32 [n_tokens, n_kv_heads, head_dim]; cache: F32|F16 [capacity, n_kv_heads, head_dim];
  // slots: I32 [n_tokens], each < capacity.
  virtual void kv_append(const Tensor& src, const Tensor& slots, const Tensor& cache) = 0;

  // In place, per kv head g: cache[j, g, :] = cache[keep[g, j], g, :] for j < n_keep. keep:
  // I32 [n_kv_heads, n_keep], strictly increasing in each row and below capacity, so no row is
  // overwritten before it is read. cache: [capacity, n_kv_heads, row] of any non-quantized dtype
  // (I32 with row = 1 compacts the position table the same way).
  virtual void kv_compact(const Tensor& cache, const Tensor& keep) = 0;

  // dst = src, byte for byte. Same dtype and element count (shapes may differ).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
};

}  // namespace edgelm
