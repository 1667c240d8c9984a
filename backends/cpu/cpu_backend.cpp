#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "backends/cpu/portable/portable.h"
#include "core/error.h"
#include "core/op_checks.h"
#include "core/quant.h"

namespace edgelm::cpu {
namespace {

// The table entry for `dtype`, or an empty one for a value outside the enum (supports() must not
// throw).
template <class Entry>
Entry entry(const std::array<Entry, kDTypeCount>& table, DType dtype) {
  const auto index = static_cast<size_t>(dtype);
  return index < table.size() ? table[index] : Entry{};
}

// Host address of a tensor's bytes; every CPU op needs one.
void* host(const Tensor& t, const char* op, const char* role) {
  EDGELM_CHECK(t.defined(), "[cpu] ", op, ": ", role, " tensor is undefined");
  void* pointer = t.raw();
  EDGELM_CHECK(pointer != nullptr, "[cpu] ", op, ": ", role, " ", t.describe(),
               " has no host mapping");
  return pointer;
}

// Decode's matmul rows are cut into about this many ranges per thread (ThreadPool::
// parallel_for_dynamic): each thread streams its own share of them and then helps with the others'
// last ranges, so a thread slowed by another process or the hypervisor does less. Smaller ranges
// leave less idle time at the end of a dispatch. 32 took 1.3-1.5 % less matmul time than 8 for
// 1B Q4_0 (Q8_0 1.3 %, F16 0.9 %) on the Zen 4 VM with 2 threads, alternating in one process;
// before K segments became parts of their own, the extra segment jumps ate that gain
// (docs/performance.md).
constexpr int64_t kMatmulChunksPerThread = 32;
// Decode over weights a table reads as two streams (KernelTable::decode_pairs): units of paired
// row groups, split by ThreadPool::parallel_for_guided into this many ranges per thread. Each
// thread reads two runs through memory (its share of a weight's first half and of its second
// half), claims its own share in halves (a few atomic claims, each of which waits for the loads
// in flight), and takes single ranges from the back of another's share when it is done first.
// Before, such a kernel paired the halves of the range it was given, and each thread took its
// share in two ranges (more ranges put the halves too close together): a thread done early had
// nothing to take, and the threads finished 2-25 us apart per matmul. On the Zen 5 VM, 1B Q4_0,
// two threads, alternating token by token in the fast bandwidth phase: a layer's matmuls took
// 3.5 % less time than with the old split, and 2.1 % and 1.2 % less with single claims of 8 and 32
// ranges per thread; whole tokens 1.7-3.4 % less (docs/performance.md).
constexpr int64_t kPairRangesPerThread = 32;

// Weights one matmul_shared_x call runs in one dispatch (a layer's K, V and Q is three).
constexpr size_t kMaxSharedMatmuls = 4;
// Up to this many rows of x (decode, short steps) matmul is split dynamically. Longer prefill
// chunks keep one range per thread: alternating A/B runs of a dynamic prefill split (1B Q4_0 and
// Q8_0 pp128, 2 threads) showed no difference beyond the VM's +-10 % noise.
constexpr int64_t kDynamicMatmulRows = 4;

// Per-thread scratch of the ops: matmul's quantized x (QuantizedMatmul) and the partial products
// of K slices, and embed's unpacked row. One growing buffer per slot and thread: after the first
// prefill step each is large enough for every later step, so decoding allocates nothing.
enum ScratchSlot { kQuantizedX, kPartialY, kUnpackedRow, kScratchSlots };
void* scratch_buffer(ScratchSlot slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    size_t capacity = 0;
  };
  thread_local std::array<Buffer, kScratchSlots> buffers;
  Buffer& buffer = buffers[slot];
  if (bytes > buffer.capacity) {
    buffer.data = std::make_unique_for_overwrite<std::byte[]>(bytes);
    buffer.capacity = bytes;
  }
  return buffer.data.get();
}

// Products one matmul_shared_x dispatch runs: weights times K slices.
constexpr size_t kMaxMatmulParts = 8;

// Columns per K slice of a decode step's matmul over weights of `dtype` with K columns: the K
// segment of a layout stored in segments (core/quant.h), or K itself (one slice) for other types,
// for K within one segment, and where one weight's slices would be more parts than a dispatch
// takes (the kernels then walk the segments themselves).
int64_t slice_columns(DType dtype, int64_t K) {
  int64_t segment = K;
  switch (dtype) {
    case DType::Q4_0x8:
      segment = kQ4_0x8SegmentBlocks * kQ4_0BlockSize;
      break;
    case DType::Q8_0x8:
      segment = kQ8_0x8SegmentBlocks * kQ8_0BlockSize;
      break;
    case DType::F16x4:
      segment = kF16x4SegmentElements;
      break;
    case DType::Q4_Kx8:
    case DType::Q6_Kx8:
      segment = kKx8SegmentBlocks * kKQuantBlockSize;
      break;
    default:
      break;
  }
  if (segment >= K) return K;
  return (K + segment - 1) / segment <= static_cast<int64_t>(kMaxMatmulParts) ? segment : K;
}

// Row `row` of a [rows, cols] table in a load-time layout, in its unpacked type, into `out`.
void unpack_table_row(const void* table, DType dtype, int64_t rows, int64_t cols, int64_t row,
                      void* out) {
  switch (dtype) {
    case DType::Q4_0x8:
      unpack_row_q4_0_x8(static_cast<const BlockQ4_0x8*>(table), rows, cols / kQ4_0BlockSize, row,
                         static_cast<BlockQ4_0*>(out));
      return;
    case DType::Q8_0x8:
      unpack_row_q8_0_x8(static_cast<const BlockQ8_0x8*>(table), rows, cols / kQ8_0BlockSize, row,
                         static_cast<BlockQ8_0*>(out));
      return;
    case DType::F16x4:
      unpack_row_f16_x4(static_cast<const uint16_t*>(table), rows, cols, row,
                        static_cast<uint16_t*>(out));
      return;
    case DType::Q4_Kx8:
      unpack_row_q4_k_x8(static_cast<const BlockQ4_Kx8*>(table), rows, cols / kKQuantBlockSize, row,
                         static_cast<BlockQ4_K*>(out));
      return;
    case DType::Q6_Kx8:
      unpack_row_q6_k_x8(static_cast<const BlockQ6_Kx8*>(table), rows, cols / kKQuantBlockSize, row,
                         static_cast<BlockQ6_K*>(out));
      return;
    default:
      EDGELM_FAIL("[cpu] embed: ", dtype_name(dtype), " is not a load-time layout");
  }
}

// Rows of a [rows, n] problem per task: enough work per task to amortise a dispatch.
int64_t grain_for(int64_t row_cost) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_cost));
}

}  // namespace

CpuBackend::CpuBackend(CpuOptions options)
    : memory_(options.memory ? options.memory : std::make_shared<HostMemory>()),
      weight_memory_(options.memory ? options.memory : std::make_shared<SlabHostMemory>()),
      thread_plan_(plan_cpu_threads(options.n_threads, options.cpus)),
      pool_(thread_plan_.n_threads, thread_plan_.cpus),
      kernels_(&select_kernels(options.isa)),
      repack_weights_(options.repack_weights),
      profile_(options.profile),
      decode_pairs_(kernels_->decode_pairs) {
  if (decode_prefetch_wanted()) {
    for (size_t d = 0; d < decode_pairs_.size(); ++d) {
      if (kernels_->decode_pairs_prefetch[d] == nullptr) continue;
      decode_pairs_[d] = kernels_->decode_pairs_prefetch[d];
      decode_prefetch_ = true;
    }
  }
}

void CpuBackend::record_op(Clock::time_point start, const char* op, std::string kernel,
                           uint64_t bytes) {
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  OpTiming& timing = timings_[{op, kernel}];
  if (timing.calls == 0) {
    timing.op = op;
    timing.kernel = std::move(kernel);
  }
  ++timing.calls;
  timing.seconds += seconds;
  timing.bytes += bytes;
}

std::vector<OpTiming> CpuBackend::op_timings() const {
  return sorted_by_time(timings_);
}

DType CpuBackend::matmul_weight_type(DType dtype) const {
  const auto index = static_cast<size_t>(dtype);
  if (!repack_weights_ || index >= kernels_->matmul_layout.size()) return dtype;
  return kernels_->matmul_layout[index];
}

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
  return str_cat(arch, " (", kernels_->isa, " kernels",
                 decode_prefetch_ ? " with decode prefetch" : "", ", ", pool_.size(), " threads",
                 pinned, thread_plan_.big_cores ? ", the big cores" : "", ")");
}

bool CpuBackend::supports(OpKind op, std::initializer_list<DType> dtypes) const {
  // No allocation here: ops call supports() on every invocation.
  const size_t n = dtypes.size();
  const DType* d = dtypes.begin();
  auto only = [&](DType expected) { return n == 1 && d[0] == expected; };
  const bool one_valid = n == 1 && static_cast<int>(d[0]) < kDTypeCount;
  switch (op) {
    case OpKind::Embed:
      return n == 1 && entry(kernels_->row_to_f32, dtype_unpacked(d[0])) != nullptr;
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
  op_checks::embed("cpu", table, ids, out);
  const auto start = op_start();
  const auto* table_bytes = static_cast<const std::byte*>(host(table, "embed", "table"));
  const auto* id_values = static_cast<const int32_t*>(host(ids, "embed", "ids"));
  auto* out_values = static_cast<float*>(host(out, "embed", "out"));
  const int64_t dim = table.dim(1);
  const DType unpacked = dtype_unpacked(table.dtype());
  const RowToF32Fn to_f32 = entry(kernels_->row_to_f32, unpacked);
  if (unpacked != table.dtype()) {
    // Rows of a layout's groups are interleaved: unpack each one, then decode it.
    const size_t unpacked_bytes =
        static_cast<size_t>(dim / dtype_block_size(unpacked)) * dtype_block_bytes(unpacked);
    pool_.parallel_for(
        ids.dim(0),
        [&](int64_t begin, int64_t end) {
          void* row = scratch_buffer(kUnpackedRow, unpacked_bytes);
          for (int64_t i = begin; i < end; ++i) {
            unpack_table_row(table_bytes, table.dtype(), table.dim(0), dim, id_values[i], row);
            to_f32(row, out_values + i * dim, dim);
          }
        },
        grain_for(dim));
  } else {
    const size_t row_bytes = table.row_bytes();
    pool_.parallel_for(
        ids.dim(0),
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            to_f32(table_bytes + static_cast<size_t>(id_values[i]) * row_bytes,
                   out_values + i * dim, dim);
          }
        },
        grain_for(dim));
  }
  op_end(start, "embed", [&] { return str_cat(kernels_->isa, " ", dtype_name(table.dtype())); });
}

void CpuBackend::matmul(const Tensor& x, const Tensor& w, const Tensor& y) {
  matmul_shared_x(x, {w}, {y});
}

void CpuBackend::matmul_shared_x(const Tensor& x, std::initializer_list<Tensor> ws,
                                 std::initializer_list<Tensor> ys) {
  EDGELM_CHECK(ws.size() == ys.size(), "[cpu] matmul_shared_x: ", ws.size(), " weights for ",
               ys.size(), " outputs");
  if (ws.size() == 0) return;
  const DType dtype = ws.begin()->dtype();
  const int64_t group = dtype_row_group(dtype);
  if (ws.size() > 1) {
    bool one_dispatch = ws.size() <= kMaxSharedMatmuls;
    for (const Tensor& w : ws) {
      one_dispatch = one_dispatch && w.defined() && w.dtype() == dtype && w.shape().rank() == 2 &&
                     w.dim(0) % group == 0;
    }
    if (one_dispatch && x.shape().rank() == 2 && x.dim(0) == 1) {
      // A decode step: each weight takes a part per K slice.
      const int64_t K = ws.begin()->dim(1);
      const int64_t columns = slice_columns(dtype, K);
      one_dispatch =
          ws.size() * static_cast<size_t>((K + columns - 1) / columns) <= kMaxMatmulParts;
    }
    if (!one_dispatch) {
      // Mixed weight types, or more weights or K slices than one dispatch takes: one matmul at a
      // time.
      const Tensor* y = ys.begin();
      for (const Tensor& w : ws) matmul_shared_x(x, {w}, {*y++});
      return;
    }
  }
  EDGELM_CHECK(supports(OpKind::Matmul, {dtype}), "[cpu] matmul: unsupported weight dtype ",
               ws.begin()->describe());
  const auto start = op_start();
  const auto* x_values = static_cast<const float*>(host(x, "matmul", "x"));
  const MatmulFn kernel = entry(kernels_->matmul, dtype);
  const QuantizedMatmul quantized = entry(kernels_->quantized_matmul, dtype);
  int64_t M = 0, K = 0;
  {
    const Tensor* y = ys.begin();
    for (const Tensor& w : ws) {
      const auto shape = op_checks::matmul("cpu", x, w, *y++);
      M = shape.M;
      K = shape.K;
    }
  }
  // The K slices multiplied separately: one, or for a decode step over a layout stored in K
  // segments, each segment (slice_columns).
  const int64_t columns = M == 1 ? slice_columns(dtype, K) : K;
  const int64_t n_slices = (K + columns - 1) / columns;
  // x for each slice: the float row itself, or quantized once (its rows split over the threads
  // when there are many) into consecutive buffers, one per slice, shared by every range of every
  // weight (instead of each range quantizing all of it again).
  std::array<const void*, kMaxMatmulParts> xq{};
  if (quantized.matmul != nullptr) {
    auto* buffer = static_cast<std::byte*>(scratch_buffer(kQuantizedX, quantized_x_bytes(M, K)));
    for (int64_t s = 0; s < n_slices; ++s) {
      const int64_t first = s * columns, length = std::min(columns, K - first);
      xq[static_cast<size_t>(s)] = buffer;
      if (n_slices == 1) {
        pool_.parallel_for(
            M,
            [&](int64_t begin, int64_t end) {
              quantized.quantize_x(x_values, buffer, M, K, begin, end);
            },
            grain_for(K));
      } else {
        quantized.quantize_x(x_values + first, buffer, 1, length, 0, 1);
      }
      buffer += quantized_x_bytes(1, length);
    }
  }
  // The products laid end to end, a K slice of a weight each: part i covers rows [first, first + N)
  // of that sequence. The first slice of a weight writes its y; each later one writes rows of
  // `partials`, added to y once every part is done. A thread's share of the sequence is thus one
  // run through memory even when the weight is stored in K segments: with the segments inside
  // each range instead, a thread jumped between them every range, and the hardware prefetchers
  // started over at each jump.
  struct Part {
    const void* w;
    const void* xq;
    const float* x;
    float* y;
    int64_t N;
    int64_t K;
    int64_t first;
  };
  std::array<Part, kMaxMatmulParts> parts{};
  size_t n_parts = 0;
  int64_t total = 0, partial_rows = 0;
  float* partials = nullptr;
  if (n_slices > 1) {
    for (const Tensor& w : ws) partial_rows += (n_slices - 1) * w.dim(0);
    partials = static_cast<float*>(
        scratch_buffer(kPartialY, static_cast<size_t>(partial_rows) * sizeof(float)));
  }
  float* next_partial = partials;
  const Tensor* y = ys.begin();
  for (const Tensor& w : ws) {
    const int64_t N = w.dim(0);
    const auto* bytes = static_cast<const std::byte*>(host(w, "matmul", "w"));
    auto* y_values = static_cast<float*>(host(*y++, "matmul", "y"));
    for (int64_t s = 0; s < n_slices; ++s) {
      const int64_t first = s * columns;
      float* out = s == 0 ? y_values : std::exchange(next_partial, next_partial + N);
      // A segment's records are laid out as the matrix of its columns alone (core/quant.h).
      parts[n_parts++] = {bytes + static_cast<size_t>(N) * dtype_row_bytes(dtype, first),
                          xq[static_cast<size_t>(s)],
                          x_values + first,
                          out,
                          N,
                          std::min(columns, K - first),
                          total};
      total += N;
    }
  }
  // Rows [begin, end) of the sequence, cut at the parts' boundaries. Every N is a whole number
  // of row groups and every range starts on a group (the kernels for interleaved layouts take a
  // group of rows at a time).
  auto rows = [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < n_parts; ++i) {
      const Part& p = parts[i];
      const int64_t lo = std::max(begin, p.first) - p.first;
      const int64_t hi = std::min(end, p.first + p.N) - p.first;
      if (lo >= hi) continue;
      if (quantized.matmul != nullptr) {
        quantized.matmul(p.xq, p.w, p.y, M, p.N, p.K, lo, hi);
      } else {
        kernel(p.x, p.w, p.y, M, p.N, p.K, lo, hi);
      }
    }
  };
  const int64_t grain = (grain_for(M * K) + group - 1) / group * group;
  const DecodePairsFn decode_pairs = M == 1 ? entry(decode_pairs_, dtype) : nullptr;
  if (decode_pairs != nullptr) {
    // Units of work over the parts laid end to end: in a part of G row groups whose halves lie
    // far enough apart, unit j < G/2 is the pair of groups j and G/2 + j and an odd last group is
    // a unit of its own; in a smaller part every group is a unit.
    struct Units {
      int64_t first;  // the part's first unit
      int64_t half;   // pairs in the part (0: every group alone)
      int64_t count;  // units in the part
    };
    std::array<Units, kMaxMatmulParts> units{};
    int64_t n_units = 0;
    for (size_t i = 0; i < n_parts; ++i) {
      const int64_t groups = parts[i].N / group;
      const int64_t half = groups / 2;
      const auto apart = static_cast<int64_t>(static_cast<size_t>(half * group) *
                                              dtype_row_bytes(dtype, parts[i].K));
      units[i].first = n_units;
      units[i].half = apart >= kernels_->decode_pair_min_bytes ? half : 0;
      units[i].count = groups - units[i].half;
      n_units += units[i].count;
    }
    auto run_units = [&](int64_t begin, int64_t end) {
      for (size_t i = 0; i < n_parts; ++i) {
        const Part& p = parts[i];
        const Units& u = units[i];
        const int64_t lo = std::max(begin, u.first) - u.first;
        const int64_t hi = std::min(end, u.first + u.count) - u.first;
        if (lo >= hi) continue;
        const void* x_row = quantized.matmul != nullptr ? p.xq : static_cast<const void*>(p.x);
        // Pairs [lo, min(hi, half)), then the units past them: unit half + j is group 2·half + j.
        const int64_t pairs_end = std::min(hi, u.half);
        if (lo < pairs_end) {
          decode_pairs(x_row, p.w, p.y, p.N, p.K, lo * group, (u.half + lo) * group,
                       (pairs_end - lo) * group);
        }
        const int64_t alone = std::max(lo, u.half);
        if (alone < hi)
          decode_pairs(x_row, p.w, p.y, p.N, p.K, (u.half + alone) * group, -1,
                       (hi - alone) * group);
      }
    };
    pool_.parallel_for_guided(
        n_units, run_units, std::max<int64_t>(1, n_units / (kPairRangesPerThread * pool_.size())));
  } else if (M > kDynamicMatmulRows) {
    pool_.parallel_for(total, rows, grain);
  } else {
    const int64_t per_chunk = total / (kMatmulChunksPerThread * pool_.size());
    pool_.parallel_for_dynamic(total, rows, std::max(grain, per_chunk / grain * grain));
  }
  // y += each later slice's product, in slice order.
  for (size_t i = 0; i < n_parts; ++i) {
    const size_t slice = i % static_cast<size_t>(n_slices);
    if (slice == 0) continue;
    float* out = parts[i - slice].y;
    const float* partial = parts[i].y;
    for (int64_t n = 0; n < parts[i].N; ++n) out[n] += partial[n];
  }
  // Rows are labelled by weight type, the x rows' kind (one: gemv) and the weights' [N, K]; their
  // bytes are the weights read, so op_timings gives each shape's streaming rate.
  uint64_t weight_bytes = 0;
  for (const Tensor& w : ws) weight_bytes += w.nbytes();
  op_end(
      start, "matmul",
      [&] {
        return str_cat(kernels_->isa, " ", dtype_name(dtype), M == 1 ? " gemv " : " gemm ",
                       total / n_slices, "x", K,
                       ws.size() > 1 ? str_cat(" (", ws.size(), " weights)") : std::string());
      },
      weight_bytes);
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  op_checks::rms_norm("cpu", x, weight, eps, y);
  const auto start = op_start();
  const int64_t dim = x.shape().last();
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
  op_end(start, "rms_norm", [&] { return std::string(kernels_->isa); });
}

void CpuBackend::rope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                      const Tensor& out) {
  op_checks::rope("cpu", x, positions, inv_freq, out);
  const auto start = op_start();
  const int64_t n_tokens = x.dim(0);
  const int64_t n_heads = x.dim(1);
  const int64_t head_dim = x.dim(2);
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
  op_end(start, "rope", [&] { return std::string(kernels_->isa); });
}

void CpuBackend::attention(const AttentionArgs& args) {
  const char* op = "attention";
  op_checks::attention("cpu", args);
  EDGELM_CHECK(supports(OpKind::Attention, {args.k.dtype()}), "[cpu] attention: unsupported k/v ",
               "dtype ", args.k.describe());
  const auto start = op_start();
  const int64_t n_kv_heads = args.k.dim(1);
  for (const Tensor* t : {&args.q, &args.k, &args.v, &args.q_pos, &args.kv_pos, &args.out}) {
    host(*t, op, "input/output");
  }
  if (args.mass.defined()) host(args.mass, op, "mass");
  const AttentionFn kernel = entry(kernels_->attention, args.k.dtype());
  pool_.parallel_for(n_kv_heads, [&](int64_t begin, int64_t end) { kernel(args, begin, end); });
  op_end(start, "attention", [&] {
    return str_cat(kernels_->isa, " ", dtype_name(args.k.dtype()),
                   args.q.dim(0) == 1 ? " decode" : " prefill");
  });
}

void CpuBackend::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  op_checks::elementwise("cpu", "silu_mul", gate, up, out);
  const auto start = op_start();
  const auto* g = static_cast<const float*>(host(gate, "silu_mul", "gate"));
  const auto* u = static_cast<const float*>(host(up, "silu_mul", "up"));
  auto* o = static_cast<float*>(host(out, "silu_mul", "out"));
  const SiluMulFn kernel = kernels_->silu_mul;
  pool_.parallel_for(
      gate.numel(),
      [&](int64_t begin, int64_t end) { kernel(g + begin, u + begin, o + begin, end - begin); },
      4096);
  op_end(start, "silu_mul", [&] { return std::string(kernels_->isa); });
}

void CpuBackend::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  op_checks::elementwise("cpu", "add", a, b, out);
  const auto start = op_start();
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
  op_end(start, "add", [&] { return std::string(kernels_->isa); });
}

void CpuBackend::softmax(const Tensor& x, const Tensor& y) {
  op_checks::softmax("cpu", x, y);
  const auto start = op_start();
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
  op_end(start, "softmax", [&] { return std::string(kernels_->isa); });
}

void CpuBackend::cast(const Tensor& src, const Tensor& dst) {
  EDGELM_CHECK(supports(OpKind::Cast, {src.dtype(), dst.dtype()}), "[cpu] cast: unsupported ",
               dtype_name(src.dtype()), " -> ", dtype_name(dst.dtype()));
  op_checks::cast("cpu", src, dst);
  const auto start = op_start();
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
  op_end(start, "cast", [&] {
    return str_cat(kernels_->isa, " ", dtype_name(src.dtype()), " -> ", dtype_name(dst.dtype()));
  });
}

void CpuBackend::kv_append(const Tensor& src, const Tensor& slots, const Tensor& cache) {
  EDGELM_CHECK(supports(OpKind::KvAppend, {cache.dtype()}), "[cpu] kv_append: unsupported cache ",
               cache.describe());
  op_checks::kv_append("cpu", src, slots, cache);
  const auto start = op_start();
  const auto* src_values = static_cast<const float*>(host(src, "kv_append", "src"));
  const auto* slot_values = static_cast<const int32_t*>(host(slots, "kv_append", "slots"));
  auto* cache_bytes = static_cast<std::byte*>(host(cache, "kv_append", "cache"));
  const int64_t row = src.dim(1) * src.dim(2);
  const size_t cache_row = static_cast<size_t>(cache.dim(1)) * cache.row_bytes();
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
  op_end(start, "kv_append",
         [&] { return str_cat(kernels_->isa, " ", dtype_name(cache.dtype())); });
}

void CpuBackend::kv_compact(const Tensor& cache, const Tensor& keep) {
  EDGELM_CHECK(supports(OpKind::KvCompact, {cache.dtype()}), "[cpu] kv_compact: unsupported cache ",
               cache.describe());
  op_checks::kv_compact("cpu", cache, keep);
  const auto start = op_start();
  const int64_t n_kv_heads = cache.dim(1);
  const int64_t n_keep = keep.dim(1);
  const auto* keep_values = static_cast<const int32_t*>(host(keep, "kv_compact", "keep"));
  void* cache_bytes = host(cache, "kv_compact", "cache");
  const size_t row_bytes = cache.row_bytes();
  pool_.parallel_for(n_kv_heads, [&](int64_t begin, int64_t end) {
    kv_compact__portable(cache_bytes, n_kv_heads, row_bytes, keep_values, n_keep, begin, end);
  });
  op_end(start, "kv_compact", [&] { return str_cat("portable ", dtype_name(cache.dtype())); });
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  op_checks::copy("cpu", src, dst);
  const auto start = op_start();
  const void* from = host(src, "copy", "src");
  void* to = host(dst, "copy", "dst");
  if (from != to) std::memmove(to, from, src.nbytes());
  op_end(start, "copy", [&] { return std::string("memmove"); });
}

}  // namespace edgelm::cpu
