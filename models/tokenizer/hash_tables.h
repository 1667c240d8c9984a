// The hash tables of the tokenizer's lookups: token text → id (vocabulary, BPE words,
// SentencePiece pieces, the word cache's index) and (left id, right id) → merge (BPE merges).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace edgelm::tokenizer {

// "No id": what lookups return for a missing key, and the value of unset id fields.
inline constexpr int32_t kNone = -1;

// A 64-bit finalizer (splitmix64's): spreads every input bit over the whole hash.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A hash of a byte string, eight bytes per step.
inline uint64_t hash_bytes(std::string_view key) {
  const char* p = key.data();
  size_t n = key.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    h = (h ^ word) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t word = 0;
    std::memcpy(&word, p, n);
    h = (h ^ word) * 0x94d049bb133111ebull;
  }
  return mix64(h);
}

// Byte string → non-negative int32, open addressing with linear probing. Keys live in one arena,
// so a 128k-token vocabulary is two allocations and a lookup touches one slot in the common case.
class StringIdMap {
 public:
  StringIdMap() { rehash(16); }

  // Stores key → value (value >= 0), replacing the value of an existing key.
  void set(std::string_view key, int32_t value) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    const uint64_t hash = hash_bytes(key);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.value < 0) {
        slot = {hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()),
                value};
        keys_.append(key);
        ++count_;
        return;
      }
      if (slot.hash == hash && key_of(slot) == key) {
        slot.value = value;
        return;
      }
    }
  }
  // The value of `key`, or kNone.
  int32_t find(std::string_view key) const {
    const uint64_t hash = hash_bytes(key);
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.value < 0) return kNone;
      if (slot.hash == hash && key_of(slot) == key) return slot.value;
    }
  }
  // The number of keys.
  size_t size() const { return count_; }
  // Removes every key; the capacity stays.
  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    count_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t length = 0;
    int32_t value = kNone;  // kNone: empty
  };

  std::string_view key_of(const Slot& slot) const {
    return std::string_view(keys_).substr(slot.offset, slot.length);
  }
  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& slot : old) {
      if (slot.value < 0) continue;
      size_t i = slot.hash & mask_;
      while (slots_[i].value >= 0) i = (i + 1) & mask_;
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_;
  std::string keys_;
  size_t count_ = 0;
  size_t mask_ = 0;
};

// (left id, right id) → (merge rank, merged id): the BPE merge table.
class PairMap {
 public:
  struct Merge {
    int32_t rank = kNone;  // position in the merge list: lower merges first
    int32_t id = kNone;    // the token the pair becomes
  };

  // Makes room for `count` merges at once, so that loading a merge list rehashes once.
  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    rehash(capacity);
  }
  // Later merges of the same pair replace earlier ones, as when `tokenizers` collects them.
  void set(int32_t left, int32_t right, Merge merge) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
    const uint64_t key = pack(left, right);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, merge};
        ++count_;
        return;
      }
      if (slots_[i].key == key) {
        slots_[i].merge = merge;
        return;
      }
    }
  }
  // The merge of the pair, or a Merge with rank kNone when the pair does not merge.
  Merge find(int32_t left, int32_t right) const {
    if (count_ == 0) return {};
    const uint64_t key = pack(left, right);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].merge;
      if (slots_[i].key == kEmpty) return {};
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are < 2^31, so no pair packs to this
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge;
  };
  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    for (const Slot& slot : old) {
      if (slot.key == kEmpty) continue;
      size_t i = mix64(slot.key) & mask_;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_;
  size_t count_ = 0;
  size_t mask_ = 0;
};

}  // namespace edgelm::tokenizer
