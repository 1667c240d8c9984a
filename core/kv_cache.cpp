#include "core/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace edgelm {

KvCache::KvCache(Backend& backend, int64_t n_layers, int64_t capacity, int64_t n_kv_heads,
                 int64_t head_dim, DType dtype, int64_t max_positions)
    : backend_(&backend),
      capacity_(capacity),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      dtype_(dtype),
      max_positions_(max_positions > 0 ? max_positions : std::numeric_limits<int64_t>::max()) {
  EDGELM_CHECK(n_layers > 0 && capacity > 0 && n_kv_heads > 0 && head_dim > 0,
               "[kv_cache] invalid geometry: ", n_layers, " layers, capacity ", capacity, ", ",
               n_kv_heads, " kv heads, head_dim ", head_dim);
  EDGELM_CHECK(max_positions >= 0, "[kv_cache] logical context ", max_positions,
               " must be >= 0 (0: no limit)");
  EDGELM_CHECK(dtype == DType::F32 || dtype == DType::F16, "[kv_cache] unsupported KV dtype ",
               dtype_name(dtype), " (use f32 or f16)");
  Memory& memory = backend.memory();
  layers_.resize(static_cast<size_t>(n_layers));
  for (Layer& layer : layers_) {
    layer.k = Tensor::empty(memory, dtype, {capacity, n_kv_heads, head_dim});
    layer.v = Tensor::empty(memory, dtype, {capacity, n_kv_heads, head_dim});
    layer.positions = Tensor::empty(memory, DType::I32, {capacity, n_kv_heads, 1});
    // Written once here so every page is mapped now, at load, instead of by the appends. A
    // large host allocation asks for transparent huge pages, and the first write to each 2 MiB
    // can stall for milliseconds while the kernel finds and zeroes one (most of an 8-token
    // prompt's prefill on the dev VM, and a stalled token every 2 MiB of cache growth).
    for (const Tensor* t : {&layer.k, &layer.v, &layer.positions}) {
      if (t->raw() != nullptr) std::memset(t->raw(), 0, t->nbytes());
    }
  }
  // Appends always fill slots [size, size + n), so their slot list is a window of the identity
  // table, written once here and never again: an asynchronous backend may still be reading one
  // window while the next append is queued.
  slots_ = Tensor::empty(memory, DType::I32, {capacity});
  auto* identity = slots_.data<int32_t>();
  for (int64_t slot = 0; slot < capacity; ++slot) identity[slot] = static_cast<int32_t>(slot);
  keep_ = Tensor::empty(memory, DType::I32, {n_kv_heads, capacity});
}

void KvCache::set_backend(Backend& backend) {
  if (&backend == backend_) return;
  auto check = [&](const Tensor& t, const char* what) {
    if (t.defined() && !backend.can_use(*t.buffer())) {
      EDGELM_FAIL("[kv_cache] backend ", backend.name(), " cannot use the cache's ", what,
                  " in place: the cache moves only between backends that share its buffers");
    }
  };
  for (const Layer& layer : layers_) {
    check(layer.k, "K");
    check(layer.v, "V");
    check(layer.positions, "positions");
    check(layer.mass, "attention mass");
  }
  check(slots_, "slot list");
  check(keep_, "keep list");
  backend_->synchronize();
  backend_ = &backend;
}

size_t KvCache::slot_bytes(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, DType dtype) {
  return 2 * static_cast<size_t>(n_layers) * static_cast<size_t>(n_kv_heads) *
         dtype_row_bytes(dtype, head_dim);
}

int64_t KvCache::free_slots() const {
  int64_t fullest = 0;
  for (const Layer& layer : layers_) fullest = std::max(fullest, layer.size);
  return capacity_ - fullest;
}

void KvCache::append(int64_t layer_index, const Tensor& k, const Tensor& v,
                     std::span<const int32_t> positions) {
  Layer& layer = layers_.at(static_cast<size_t>(layer_index));
  const int64_t n = k.dim(0);
  EDGELM_CHECK(static_cast<int64_t>(positions.size()) == n, "[kv_cache] ", positions.size(),
               " positions for ", n, " tokens");
  EDGELM_CHECK(layer.size + n <= capacity_, "[kv_cache] layer ", layer_index,
               " is full: ", layer.size, " + ", n, " tokens exceed the capacity of ", capacity_,
               " (raise -c/--ctx-size or enable eviction)");
  EDGELM_CHECK(n == 0 || positions.back() < max_positions_, "[kv_cache] position ",
               positions.back(), " is past the logical context of ", max_positions_,
               " positions (-c/--ctx-size)");
  // The new position rows are written from the host without waiting for the queue: nothing
  // queued reads rows past the filled slots, and compact() drains the queue before `size` drops.
  auto* kv_pos = layer.positions.data<int32_t>();
  for (int64_t t = 0; t < n; ++t) {
    const int64_t slot = layer.size + t;
    for (int64_t g = 0; g < n_kv_heads_; ++g) kv_pos[slot * n_kv_heads_ + g] = positions[t];
  }
  const Tensor slot_list = slots_.slice(layer.size, n);
  backend_->kv_append(k, slot_list, layer.k);
  backend_->kv_append(v, slot_list, layer.v);
  layer.size += n;
  layer.appended_since_compaction += n;
}

KvCache::View KvCache::view(int64_t layer_index) const {
  const Layer& layer = layers_.at(static_cast<size_t>(layer_index));
  return {layer.k.slice(0, layer.size), layer.v.slice(0, layer.size),
          layer.positions.slice(0, layer.size).reshape({layer.size, n_kv_heads_})};
}

void KvCache::compact(int64_t layer_index, const Tensor& keep, std::span<const Tensor> alongside) {
  Layer& layer = layers_.at(static_cast<size_t>(layer_index));
  EDGELM_CHECK(keep.rank() == 2 && keep.dim(0) == n_kv_heads_ && keep.dim(1) <= layer.size,
               "[kv_cache] keep ", keep.describe(), " must be [", n_kv_heads_,
               ", n <= ", layer.size, "]");
  const Tensor filled_k = layer.k.slice(0, layer.size);
  // Slots beyond `size` hold stale data; restrict the op to the filled slots so a keep index
  // pointing past them is rejected by the op's own range check.
  backend_->kv_compact(filled_k, keep);
  backend_->kv_compact(layer.v.slice(0, layer.size), keep);
  backend_->kv_compact(layer.positions.slice(0, layer.size), keep);
  for (const Tensor& rows : alongside) {
    EDGELM_CHECK(rows.rank() == 3 && rows.dim(0) >= layer.size && rows.dim(1) == n_kv_heads_,
                 "[kv_cache] rows compacted alongside ", rows.describe(),
                 " must be [>= ", layer.size, ", ", n_kv_heads_, ", row]");
    backend_->kv_compact(rows.slice(0, layer.size), keep);
  }
  // The compaction reads rows up to the old size, which the next append rewrites from the host.
  backend_->synchronize();
  layer.size = keep.dim(1);
  layer.appended_since_compaction = 0;
}

void KvCache::prune_prefix(int64_t n) {
  if (n <= 0) return;
  ++slot_epoch_;
  backend_->synchronize();
  for (int64_t l = 0; l < n_layers(); ++l) {
    const int64_t size = layers_[l].size;
    const int64_t drop = std::min(n, size);
    const int64_t n_keep = size - drop;
    Tensor keep = keep_.view(DType::I32, {n_kv_heads_, n_keep});
    auto* values = keep.data<int32_t>();
    for (int64_t g = 0; g < n_kv_heads_; ++g) {
      for (int64_t j = 0; j < n_keep; ++j) values[g * n_keep + j] = static_cast<int32_t>(drop + j);
    }
    compact(l, keep);
    backend_->synchronize();  // the next layer rewrites the same scratch list
  }
}

void KvCache::truncate(int64_t n) {
  EDGELM_CHECK(n >= 0 && n <= next_position_, "[kv_cache] cannot drop ", n,
               " slots: the next position is ", next_position_);
  for (int64_t l = 0; l < n_layers(); ++l) {
    EDGELM_CHECK(n <= layers_[l].appended_since_compaction, "[kv_cache] layer ", l,
                 ": cannot drop the last ", n, " slots, only ",
                 layers_[l].appended_since_compaction, " were appended since its last compaction");
  }
  if (n == 0) return;
  backend_->synchronize();  // queued work may still read rows the next append rewrites
  for (Layer& layer : layers_) {
    layer.size -= n;
    layer.appended_since_compaction -= n;
  }
  next_position_ -= n;
}

int64_t KvCache::truncatable() const {
  int64_t n = std::numeric_limits<int64_t>::max();
  for (const Layer& layer : layers_) n = std::min(n, layer.appended_since_compaction);
  return layers_.empty() ? 0 : n;
}

void KvCache::clear() {
  backend_->synchronize();  // queued work may still read rows the next append rewrites
  for (Layer& layer : layers_) {
    layer.size = 0;
    layer.appended_since_compaction = 0;
  }
  ++slot_epoch_;
  next_position_ = 0;
}

size_t KvCache::memory_bytes() const {
  size_t bytes = 0;
  for (const Layer& layer : layers_) bytes += layer.k.nbytes() + layer.v.nbytes();
  return bytes;
}

size_t KvCache::used_bytes() const {
  size_t bytes = 0;
  for (const Layer& layer : layers_)
    bytes += 2 * static_cast<size_t>(layer.size) * layer.k.row_bytes() * n_kv_heads_;
  return bytes;
}

size_t KvCache::resident_bytes() const {
  size_t bytes = 0;
  for (const Layer& layer : layers_) {
    for (const Tensor* t : {&layer.k, &layer.v})
      bytes += t->buffer()->resident_bytes(t->byte_offset(), t->nbytes());
  }
  return bytes;
}

size_t KvCache::release_free_slots(int64_t first_slot) {
  EDGELM_CHECK(first_slot >= 0 && first_slot <= capacity_, "[kv_cache] slot ", first_slot,
               " is outside the capacity of ", capacity_);
  for (int64_t l = 0; l < n_layers(); ++l) {
    EDGELM_CHECK(layers_[l].size <= first_slot, "[kv_cache] layer ", l, " holds ", layers_[l].size,
                 " slots: slots from ", first_slot, " on are not free");
  }
  backend_->synchronize();  // queued appends or compactions may still touch those rows
  // The bytes of `t` from element row `first_row` of `rows` on, given back.
  auto release_rows = [](const Tensor& t, int64_t first_row, int64_t rows) {
    if (!t.defined()) return size_t{0};
    const size_t row = t.nbytes() / static_cast<size_t>(rows);
    const size_t from = static_cast<size_t>(first_row) * row;
    return t.buffer()->release_pages(t.byte_offset() + from, t.nbytes() - from);
  };
  size_t released = 0;
  for (Layer& layer : layers_) {
    released += release_rows(layer.k, first_slot, capacity_);
    released += release_rows(layer.v, first_slot, capacity_);
    released += release_rows(layer.positions, first_slot, capacity_);
    // The mass export is [n_kv_heads, size] packed from the start of its buffer.
    released += release_rows(layer.mass, first_slot * n_kv_heads_, n_kv_heads_ * capacity_);
  }
  return released;
}

Tensor KvCache::mass(int64_t layer_index) {
  Layer& layer = layers_.at(static_cast<size_t>(layer_index));
  if (!layer.mass.defined()) {
    layer.mass = Tensor::empty(backend_->memory(), DType::F32, {n_kv_heads_ * capacity_});
  }
  return layer.mass.view(DType::F32, {n_kv_heads_, layer.size});
}

int32_t KvCache::position(int64_t layer_index, int64_t slot, int64_t head) const {
  const Layer& layer = layers_.at(static_cast<size_t>(layer_index));
  EDGELM_CHECK(slot >= 0 && slot < layer.size && head >= 0 && head < n_kv_heads_,
               "[kv_cache] slot ", slot, ", head ", head, " out of range");
  backend_->synchronize();
  return layer.positions.data<int32_t>()[slot * n_kv_heads_ + head];
}

}  // namespace edgelm
