// Host side of kernels/attention.cl: attention as a split-over-slots softmax (flash decoding),
// the same kernels for prefill and decode, plus the optional attention-mass export.
#include <algorithm>

#include "backends/opencl/checks.h"
#include "backends/opencl/opencl_backend.h"

namespace edgelm::opencl {
namespace {

// Scratch slots of this op (matmul uses lower ones).
constexpr int kPartialAccSlot = 10;  // [n_queries, n_heads, n_splits, head_dim] float
constexpr int kPartialMlSlot = 11;   // [n_queries, n_heads, n_splits] (m, l) float2
constexpr int kStatsSlot = 12;       // [n_queries, n_heads] (M, L) float2

// Work-group size of every attention kernel: a power of two (group_max/group_sum) that every
// OpenCL device accepts for kernels of this size, without querying per kernel.
constexpr size_t kGroup = 64;
// Slots scored per step of a work-group (local memory: one float each); also the granularity of
// a split, so that only the last chunk of a split is partial.
constexpr int64_t kChunk = 4 * static_cast<int64_t>(kGroup);
// Splits are added until (queries x heads x splits) reaches this many work-groups, but a split
// never covers fewer than kChunk slots: decode (one query) over thousands of slots spreads over
// many groups, while prefill has enough (query, head) rows and keeps one split.
constexpr int64_t kTargetGroups = 1024;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct Splits {
  int64_t count;  // splits per (query, head), >= 1
  int64_t slots;  // slots per split, a multiple of kChunk
};

Splits choose_splits(int64_t rows, int64_t n_slots) {
  const int64_t most = std::max<int64_t>(1, ceil_div(n_slots, kChunk));
  const int64_t wanted =
      std::clamp<int64_t>(ceil_div(kTargetGroups, std::max<int64_t>(rows, 1)), 1, most);
  const int64_t slots = ceil_div(ceil_div(n_slots, wanted), kChunk) * kChunk;
  const int64_t per_split = std::max(slots, kChunk);
  return {std::max<int64_t>(1, ceil_div(n_slots, per_split)), per_split};
}

}  // namespace

void OpenClBackend::attention(const AttentionArgs& args) {
  const char* op = "attention";
  op_checks::attention("opencl", args);
  EDGELM_CHECK(supports(OpKind::Attention, {args.k.dtype()}),
               "[opencl] attention: unsupported k/v dtype ", args.k.describe());
  const int64_t n_queries = args.q.dim(0);
  const int64_t n_heads = args.q.dim(1);
  const int64_t head_dim = args.q.dim(2);
  const int64_t n_slots = args.k.dim(0);
  const int64_t n_kv_heads = args.k.dim(1);
  const bool with_mass = args.mass.defined();
  // Element offsets are ulong in the kernels; these travel as int arguments or int indices.
  check_int32(n_queries * n_heads, op, "n_queries * n_heads");
  check_int32(head_dim, op, "head_dim");
  check_int32(n_slots * n_kv_heads, op, "n_slots * n_kv_heads");

  const int64_t rows = n_queries * n_heads;
  const Splits splits = choose_splits(rows, n_slots);
  const size_t q_row_bytes = sizeof(float) * static_cast<size_t>(std::max<int64_t>(head_dim, 1));
  const bool f16 = args.k.dtype() == DType::F16;
  const char* partial_name = f16 ? "attention_partial_f16" : "attention_partial_f32";
  const char* mass_name = f16 ? "attention_mass_f16" : "attention_mass_f32";

  // Stats are also read by the mass kernel (queries from mass_first_query on).
  cl_mem stats =
      scratch(kStatsSlot, sizeof(float) * 2 * static_cast<size_t>(std::max<int64_t>(rows, 1)));
  if (rows > 0) {
    const size_t partials = static_cast<size_t>(rows * splits.count);
    cl_mem partial_acc =
        scratch(kPartialAccSlot, sizeof(float) * partials * std::max<size_t>(head_dim, 1));
    cl_mem partial_ml = scratch(kPartialMlSlot, sizeof(float) * 2 * partials);
    call(op, "attention", partial_name)
        .tensor(args.q, "q")
        .tensor(args.k, "k")
        .tensor(args.v, "v")
        .tensor(args.q_pos, "q_pos")
        .tensor(args.kv_pos, "kv_pos")
        .buffer(partial_ml)
        .buffer(partial_acc)
        .i32(n_queries)
        .i32(n_heads)
        .i32(n_kv_heads)
        .i32(head_dim)
        .i32(n_slots)
        .i32(splits.slots)
        .i32(splits.count)
        .i32(kChunk)
        .f32(args.scale)
        .local(q_row_bytes)
        .local(sizeof(float) * static_cast<size_t>(kChunk))
        .local(q_row_bytes)
        .local(sizeof(float) * kGroup)
        .run({static_cast<size_t>(splits.count) * kGroup, static_cast<size_t>(n_heads),
              static_cast<size_t>(n_queries)},
             {kGroup, 1, 1});
    // Dimension 0 is at least 1 so that stats are written for head_dim = 0 too.
    const size_t combine_width = static_cast<size_t>(std::max<int64_t>(head_dim, 1));
    call(op, "attention", "attention_combine")
        .buffer(partial_ml)
        .buffer(partial_acc)
        .tensor(args.out, "out")
        .buffer(stats)
        .i32(n_queries)
        .i32(n_heads)
        .i32(head_dim)
        .i32(splits.count)
        .run({combine_width, static_cast<size_t>(n_heads), static_cast<size_t>(n_queries)},
             {std::min(combine_width, kGroup), 1, 1});
  }
  if (with_mass && n_slots > 0) {
    call(op, "attention", mass_name)
        .tensor(args.q, "q")
        .tensor(args.k, "k")
        .tensor(args.q_pos, "q_pos")
        .tensor(args.kv_pos, "kv_pos")
        .buffer(stats)
        .tensor(args.mass, "mass")
        .i32(n_queries)
        .i32(n_heads)
        .i32(n_kv_heads)
        .i32(head_dim)
        .i32(n_slots)
        .i32(args.mass_first_query)
        .f32(args.scale)
        .local(q_row_bytes)
        .run({static_cast<size_t>(n_slots), static_cast<size_t>(n_kv_heads)}, {kGroup, 1});
  }
}

}  // namespace edgelm::opencl
