// KvCache: slots and logical positions are separate; appends fill slots in order, compaction and
// prefix pruning move kept rows (and their positions) to the front, and the logical position
// never goes back.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/half.h"
#include "core/kv_cache.h"

namespace edgelm {
namespace {

cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2});
  return cpu;
}

// K/V rows whose every element encodes (position, head, dim) so moves can be traced.
Tensor rows_for(const std::vector<int32_t>& positions, int64_t n_kv_heads, int64_t head_dim,
                float sign) {
  Tensor t = Tensor::empty(backend().memory(), DType::F32,
                           {static_cast<int64_t>(positions.size()), n_kv_heads, head_dim});
  float* values = t.data<float>();
  for (size_t i = 0; i < positions.size(); ++i) {
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      for (int64_t d = 0; d < head_dim; ++d) {
        values[(i * n_kv_heads + g) * head_dim + d] =
            sign * (positions[i] * 100.0f + g * 10.0f + d);
      }
    }
  }
  return t;
}

void append_positions(KvCache& cache, const std::vector<int32_t>& positions) {
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    cache.append(l, rows_for(positions, cache.n_kv_heads(), cache.head_dim(), 1.0f),
                 rows_for(positions, cache.n_kv_heads(), cache.head_dim(), -1.0f), positions);
  }
  cache.advance(static_cast<int64_t>(positions.size()));
}

float k_at(const KvCache& cache, int64_t layer, int64_t slot, int64_t head, int64_t d) {
  const Tensor k = cache.view(layer).k;
  const int64_t index = (slot * cache.n_kv_heads() + head) * cache.head_dim() + d;
  return cache.dtype() == DType::F32 ? k.data<float>()[index]
                                     : f16_to_f32(k.data<uint16_t>()[index]);
}

TEST(KvCache, AppendFillsSlotsWithPositions) {
  KvCache cache(backend(), 2, 16, 2, 4, DType::F32);
  append_positions(cache, {0, 1, 2});
  append_positions(cache, {3});
  EXPECT_EQ(cache.size(0), 4);
  EXPECT_EQ(cache.size(1), 4);
  EXPECT_EQ(cache.next_position(), 4);
  EXPECT_EQ(cache.free_slots(), 12);
  for (int64_t slot = 0; slot < 4; ++slot) {
    EXPECT_EQ(cache.position(1, slot, 1), slot);
    EXPECT_EQ(k_at(cache, 1, slot, 1, 3), slot * 100.0f + 13.0f);
  }
  const KvCache::View view = cache.view(0);
  EXPECT_EQ(view.k.shape(), (Shape{4, 2, 4}));
  EXPECT_EQ(view.kv_pos.shape(), (Shape{4, 2}));
  EXPECT_EQ(view.v.data<float>()[0], -0.0f);
}

TEST(KvCache, CompactKeepsDifferentSlotsPerHead) {
  KvCache cache(backend(), 1, 8, 2, 4, DType::F16);
  append_positions(cache, {0, 1, 2, 3, 4, 5});
  Tensor keep = Tensor::empty(backend().memory(), DType::I32, {2, 3});
  const int32_t kept[6] = {0, 2, 5, 1, 3, 4};  // head 0 keeps 0,2,5; head 1 keeps 1,3,4
  std::copy(kept, kept + 6, keep.data<int32_t>());
  cache.compact(0, keep);
  EXPECT_EQ(cache.size(0), 3);
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_EQ(cache.position(0, j, 0), kept[j]);
    EXPECT_EQ(cache.position(0, j, 1), kept[3 + j]);
    EXPECT_EQ(k_at(cache, 0, j, 0, 2), kept[j] * 100.0f + 2.0f);
    EXPECT_EQ(k_at(cache, 0, j, 1, 2), kept[3 + j] * 100.0f + 12.0f);
  }
  // Logical positions continue where they were; new tokens go to the first free slot.
  EXPECT_EQ(cache.next_position(), 6);
  append_positions(cache, {6});
  EXPECT_EQ(cache.size(0), 4);
  EXPECT_EQ(cache.position(0, 3, 0), 6);
}

TEST(KvCache, PrunePrefixDropsOldestSlotsInEveryLayer) {
  KvCache cache(backend(), 3, 10, 1, 2, DType::F32);
  append_positions(cache, {0, 1, 2, 3, 4, 5, 6});
  cache.prune_prefix(4);
  for (int64_t l = 0; l < 3; ++l) {
    EXPECT_EQ(cache.size(l), 3);
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(cache.position(l, j, 0), 4 + j);
      EXPECT_EQ(k_at(cache, l, j, 0, 1), (4 + j) * 100.0f + 1.0f);
    }
  }
  EXPECT_EQ(cache.next_position(), 7);
  cache.prune_prefix(100);  // more than held: empties the layers
  EXPECT_EQ(cache.size(0), 0);
  cache.clear();
  EXPECT_EQ(cache.next_position(), 0);
}

TEST(KvCache, MemoryBytesAndErrors) {
  KvCache f32(backend(), 2, 16, 2, 8, DType::F32);
  EXPECT_EQ(f32.memory_bytes(), 2u * 2u * 16u * 2u * 8u * 4u);
  KvCache f16(backend(), 2, 16, 2, 8, DType::F16);
  EXPECT_EQ(f16.memory_bytes(), f32.memory_bytes() / 2);
  append_positions(f16, {0, 1});
  EXPECT_EQ(f16.used_bytes(), 2u * 2u * 2u * 2u * 8u * 2u);

  KvCache small(backend(), 1, 2, 1, 2, DType::F32);
  append_positions(small, {0, 1});
  EXPECT_THROW(append_positions(small, {2}), Error);
  EXPECT_THROW(KvCache(backend(), 1, 4, 1, 2, DType::Q4_0), Error);
  Tensor bad_keep = Tensor::empty(backend().memory(), DType::I32, {1, 2});
  bad_keep.data<int32_t>()[0] = 1;
  bad_keep.data<int32_t>()[1] = 0;  // not increasing
  EXPECT_THROW(small.compact(0, bad_keep), Error);
}

}  // namespace
}  // namespace edgelm
