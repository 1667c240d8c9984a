// KvCache: slots and logical positions are separate; appends fill slots in order, compaction and
// prefix pruning move kept rows (and their positions) to the front, and the logical position
// never goes back, up to the logical context; the memory of free slots can be given back.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <limits>
#include <vector>

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

TEST(KvCache, TruncateDropsTheLastAppendedSlotsAsIfNeverFed) {
  KvCache cache(backend(), 2, 16, 2, 4, DType::F32);
  append_positions(cache, {0, 1, 2, 3});
  append_positions(cache, {4, 5, 6});  // a step of a token and two drafts
  cache.truncate(2);                   // both drafts rejected
  EXPECT_EQ(cache.next_position(), 5);
  EXPECT_EQ(cache.free_slots(), 11);
  for (int64_t l = 0; l < 2; ++l) EXPECT_EQ(cache.size(l), 5);
  // The next token takes the first dropped slot and position, with its own rows.
  append_positions(cache, {5});
  EXPECT_EQ(cache.size(1), 6);
  EXPECT_EQ(cache.position(1, 5, 1), 5);
  EXPECT_EQ(k_at(cache, 1, 5, 1, 3), 513.0f);
  EXPECT_EQ(k_at(cache, 0, 4, 0, 0), 400.0f);
  cache.truncate(0);
  EXPECT_EQ(cache.next_position(), 6);
  EXPECT_THROW(cache.truncate(-1), Error);
  EXPECT_THROW(cache.truncate(7), Error);
}

TEST(KvCache, TruncateRefusesSlotsThatACompactionSaw) {
  KvCache cache(backend(), 1, 16, 1, 2, DType::F32);
  append_positions(cache, {0, 1, 2, 3, 4, 5});
  cache.prune_prefix(2);  // compacts: slots 0..3 now hold positions 2..5
  EXPECT_THROW(cache.truncate(1), Error);
  append_positions(cache, {6, 7});
  EXPECT_THROW(cache.truncate(3), Error);
  cache.truncate(2);
  EXPECT_EQ(cache.size(0), 4);
  EXPECT_EQ(cache.next_position(), 6);
  EXPECT_EQ(cache.position(0, 3, 0), 5);
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

// The capacity is what is allocated; the logical context is how far positions may go. A cache of
// 4 slots takes positions up to its context of 10 while compaction keeps it within 4 slots, then
// refuses position 10 with an error that names -c.
TEST(KvCache, LogicalContextIsSeparateFromCapacity) {
  KvCache unlimited(backend(), 1, 4, 1, 2, DType::F32);
  EXPECT_EQ(unlimited.max_positions(), std::numeric_limits<int64_t>::max());
  KvCache cache(backend(), 1, 4, 1, 2, DType::F32, 10);
  EXPECT_EQ(cache.capacity(), 4);
  EXPECT_EQ(cache.max_positions(), 10);
  for (int32_t position = 0; position < 10; ++position) {
    if (cache.free_slots() == 0) cache.prune_prefix(1);
    append_positions(cache, {position});
  }
  EXPECT_EQ(cache.next_position(), 10);
  EXPECT_EQ(cache.position(0, 3, 0), 9);
  cache.prune_prefix(1);
  try {
    append_positions(cache, {10});
    FAIL() << "position 10 was taken past a context of 10";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("logical context of 10 positions (-c/--ctx-size)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(KvCache(backend(), 1, 4, 1, 2, DType::F32, -1), Error);
}

TEST(KvCache, SlotBytesIsWhatEachSlotOfCapacityCosts) {
  for (const DType dtype : {DType::F32, DType::F16}) {
    KvCache cache(backend(), 3, 20, 2, 8, dtype);
    EXPECT_EQ(KvCache::slot_bytes(3, 2, 8, dtype) * 20, cache.memory_bytes());
  }
  EXPECT_EQ(KvCache::slot_bytes(30, 3, 64, DType::F16), 2u * 30u * 3u * 64u * 2u);
}

// Bytes of [data, data + size) on resident pages, asked of the kernel directly (mincore), so the
// check does not go through the code it checks.
size_t resident_by_mincore(const void* data, size_t size) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = begin / page * page;
  const size_t n_pages = (begin + size - first + page - 1) / page;
  std::vector<unsigned char> status(n_pages);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(first), n_pages * page, status.data()), 0);
  size_t resident = 0;
  for (size_t i = 0; i < n_pages; ++i) {
    if (status[i] & 1) resident += page;
  }
  return resident;
}

// Giving back the memory of free slots: on a cache of 4096 slots (4 MiB each for K and V, so
// hundreds of pages), after compaction to 50 slots the pages past slot 64 leave the resident set
// of the process, the kept rows are intact, and appends fault pages in again where needed.
TEST(KvCache, ReleaseFreeSlotsGivesPagesBack) {
  KvCache cache(backend(), 1, 4096, 4, 64, DType::F32);
  const size_t row = 4 * 64 * sizeof(float);                // one slot of K (or V)
  ASSERT_EQ(cache.resident_bytes(), cache.memory_bytes());  // written when made
  std::vector<int32_t> positions(100);
  for (int32_t p = 0; p < 100; ++p) positions[static_cast<size_t>(p)] = p;
  append_positions(cache, positions);
  cache.prune_prefix(50);  // slots 0..49 hold positions 50..99
  const KvCache::View before = cache.view(0);
  const float* k = before.k.data<float>();
  const size_t k_bytes = 4096 * row;
  const size_t resident_before = resident_by_mincore(k, k_bytes);
  ASSERT_GE(resident_before, k_bytes);  // every page (the ends may spill over page bounds)

  EXPECT_THROW(cache.release_free_slots(49), Error);  // slot 49 is filled
  const size_t released = cache.release_free_slots(64);
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t past = (4096 - 64) * row;  // K bytes past slot 64, likewise V
  EXPECT_GE(released, 2 * (past - page));
  const size_t resident_after = resident_by_mincore(k, k_bytes);
  EXPECT_LE(resident_after, resident_before - (past - page));
  // Nothing past slot 64 is resident, but the pages at either end of that range, which may hold
  // other bytes too (on the C heap in sanitizer builds).
  EXPECT_EQ(resident_by_mincore(k + (64 * row + page) / sizeof(float), past - 2 * page), 0u);
  EXPECT_LE(cache.resident_bytes(), cache.memory_bytes() - 2 * (past - page));
  // What was kept is intact; what comes next is stored and read back as usual.
  for (int64_t slot = 0; slot < 50; ++slot) {
    EXPECT_EQ(cache.position(0, slot, 2), 50 + slot);
    EXPECT_EQ(k_at(cache, 0, slot, 2, 7), (50 + slot) * 100.0f + 27.0f);
  }
  std::vector<int32_t> more(3000);
  for (int32_t i = 0; i < 3000; ++i) more[static_cast<size_t>(i)] = 100 + i;
  append_positions(cache, more);
  EXPECT_EQ(cache.position(0, 3049, 1), 3099);
  EXPECT_EQ(k_at(cache, 0, 3049, 1, 5), 3099 * 100.0f + 15.0f);
  EXPECT_GT(resident_by_mincore(k, k_bytes), resident_after + 2000 * row);
}

}  // namespace
}  // namespace edgelm
