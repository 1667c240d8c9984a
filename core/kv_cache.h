// The per-layer KV cache. Each layer holds K and V as [capacity, n_kv_heads, head_dim] (K stored
// after RoPE) and the logical position of every (slot, kv head). Logical positions (what RoPE and
// the attention mask use) grow by one per token forever; physical slots are reused: eviction
// compacts the kept slots to the front and the next token goes to the first free slot. Capacity
// (slots allocated) and the logical context (positions allowed) are separate: with an eviction
// budget the cache allocates the budget's slots while positions run up to the context.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace edgelm {

class KvCache {
 public:
  // Allocates everything up front from backend.memory(); nothing is allocated afterwards.
  // dtype: F32 or F16. max_positions: the logical context, the most positions tokens may take
  // (-c/--ctx-size); 0: no limit, positions grow as long as eviction makes room.
  KvCache(Backend& backend, int64_t n_layers, int64_t capacity, int64_t n_kv_heads,
          int64_t head_dim, DType dtype, int64_t max_positions = 0);

  // K and V bytes of one slot over all layers: what each slot of capacity or budget costs.
  static size_t slot_bytes(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, DType dtype);

  Backend& backend() const { return *backend_; }
  // Hands the cache to another backend, whose ops append, compact and read it from the next step
  // on: the same buffers, nothing copied. First waits for the work queued on the current backend
  // (its results must be visible before the other one reads them). Throws edgelm::Error naming the
  // backend when it cannot use every buffer of the cache in place (Backend::can_use): a switch is
  // only between backends that share the cache's memory (a CPU backend over an OpenCL backend's
  // shared buffers, CpuOptions::memory).
  void set_backend(Backend& backend);
  int64_t n_layers() const { return static_cast<int64_t>(layers_.size()); }
  int64_t capacity() const { return capacity_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  DType dtype() const { return dtype_; }

  // Filled slots of `layer`.
  int64_t size(int64_t layer) const { return layers_.at(layer).size; }
  // Logical position the next token will get.
  int64_t next_position() const { return next_position_; }
  // The logical context: positions [0, max_positions()) may be taken; the largest int64_t when
  // the cache was made without a limit.
  int64_t max_positions() const { return max_positions_; }
  // Free slots left in the fullest layer.
  int64_t free_slots() const;

  // Stores n new tokens for `layer` in slots [size, size + n): k and v are F32
  // [n, n_kv_heads, head_dim] (k after RoPE); positions are their logical positions. Throws
  // edgelm::Error when the layer has fewer than n free slots or a position is past the logical
  // context.
  void append(int64_t layer, const Tensor& k, const Tensor& v, std::span<const int32_t> positions);

  // Declares that n tokens were appended to every layer: the next logical position moves on.
  void advance(int64_t n) { next_position_ += n; }

  struct View {
    Tensor k;       // [size, n_kv_heads, head_dim]
    Tensor v;       // [size, n_kv_heads, head_dim]
    Tensor kv_pos;  // I32 [size, n_kv_heads]
  };
  // The filled part of `layer`, as the attention op takes it. Views only, no copy.
  View view(int64_t layer) const;

  // Keeps, for each kv head g of `layer`, the slots keep[g, :] (I32 [n_kv_heads, n_keep],
  // strictly increasing), moved to the front in that order. Positions move with their slots, and
  // so do the rows of each tensor in `alongside` (per-slot data kept beside the cache, e.g. an
  // eviction policy's statistics: [capacity, n_kv_heads, row] of a dtype kv_compact takes, in
  // the backend's memory).
  void compact(int64_t layer, const Tensor& keep, std::span<const Tensor> alongside = {});
  // Drops the first n slots of every layer (all kv heads alike), e.g. a context shift.
  void prune_prefix(int64_t n);
  // Drops the last n slots of every layer and moves next_position() back by n, as if their tokens
  // had never been fed: speculative decoding's rollback past rejected draft tokens. Only slots
  // appended since the layer's last compaction may go (those no eviction has seen, so none was
  // moved or scored); throws edgelm::Error otherwise, or when n is negative or more than a layer
  // holds. The dropped rows are left as they are; the next append overwrites them.
  void truncate(int64_t n);
  // The most slots truncate() may drop now: the fewest any layer appended since its last
  // compaction.
  int64_t truncatable() const;
  // Empties the cache and restarts logical positions at 0.
  void clear();
  // Counts the calls to clear() and prune_prefix(), which drop or move slots outside compact():
  // per-slot data kept beside the cache (an eviction policy's statistics, compacted alongside)
  // no longer matches the slots once it changes.
  uint64_t slot_epoch() const { return slot_epoch_; }

  // Bytes of K and V storage allocated (all layers, full capacity), and of the filled slots.
  size_t memory_bytes() const;
  size_t used_bytes() const;
  // Bytes of K and V storage on pages resident in memory now (mincore): memory_bytes() from the
  // start (the cache writes all of it when made), less what release_free_slots() gave back.
  size_t resident_bytes() const;
  // Gives the memory of every layer's slots from `first_slot` on back to the system: the whole
  // pages of K, V, the position table and the attention-mass export past that slot
  // (Buffer::release_pages). Those slots must be empty (first_slot >= size(layer) for every
  // layer); appends fault the pages in again. Returns the bytes given back: 0 on memory that is
  // not the process's own to give (OpenCL shared buffers). Waits for queued work first.
  size_t release_free_slots(int64_t first_slot);
  // Logical position of slot `slot`, kv head `head` of `layer` (host read; for tests and logs).
  int32_t position(int64_t layer, int64_t slot, int64_t head) const;

  // Where the attention op of `layer` exports attention mass when a forward step asks for it:
  // F32 [n_kv_heads, size(layer)], valid after that step (see LlamaModel::forward). Allocated on
  // first use (n_kv_heads x capacity floats per layer), then reused.
  Tensor mass(int64_t layer);

 private:
  struct Layer {
    Tensor k;          // [capacity, n_kv_heads, head_dim]
    Tensor v;          // [capacity, n_kv_heads, head_dim]
    Tensor positions;  // I32 [capacity, n_kv_heads, 1] (rank 3 so kv_compact treats it like K/V)
    Tensor mass;       // F32 [n_kv_heads * capacity], allocated on first use
    int64_t size = 0;
    int64_t appended_since_compaction = 0;  // the last slots truncate() may drop
  };

  Backend* backend_;  // never null
  int64_t capacity_;
  int64_t n_kv_heads_;
  int64_t head_dim_;
  DType dtype_;
  int64_t max_positions_;
  int64_t next_position_ = 0;
  uint64_t slot_epoch_ = 0;
  std::vector<Layer> layers_;
  Tensor slots_;  // I32 [capacity]: slots_[s] = s; kv_append's slot lists are windows of it
  Tensor keep_;   // I32 [n_kv_heads, capacity]: scratch for prune_prefix
};

}  // namespace edgelm
