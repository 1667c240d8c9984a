#include "models/tokenizer/bpe.h"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <string>

#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

// Scratch buffers of the merge loops, per thread, so that merging a word allocates nothing.
struct MergeScratch {
  std::vector<int32_t> ids;
  std::vector<int32_t> ranks;
  std::vector<int32_t> merged;
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool merged_away;  // the right side of a merge, no longer in the list
  };
  std::vector<Symbol> symbols;
  struct Candidate {
    int32_t rank;  // the merge's rank
    int32_t left;  // symbol index of the pair's left side
  };
  std::vector<Candidate> heap;
};

MergeScratch& merge_scratch() {
  thread_local MergeScratch scratch;
  return scratch;
}

// Words up to this many symbols are merged by rescanning an array of pair ranks (quadratic, but
// cache-friendly and allocation-free); longer ones through a heap (n log n).
constexpr size_t kLinearMergeLimit = 48;

}  // namespace

WordCache& thread_word_cache(uint64_t owner) {
  struct Entry {
    uint64_t owner = 0;
    uint64_t last_use = 0;
    std::unique_ptr<WordCache> cache;
  };
  thread_local std::array<Entry, 4> entries;
  thread_local uint64_t clock = 0;
  ++clock;
  Entry* victim = &entries[0];
  for (Entry& entry : entries) {
    if (entry.owner == owner && entry.cache) {
      entry.last_use = clock;
      return *entry.cache;
    }
    if (entry.last_use < victim->last_use) victim = &entry;
  }
  if (!victim->cache) victim->cache = std::make_unique<WordCache>();
  victim->cache->clear();
  victim->owner = owner;
  victim->last_use = clock;
  return *victim->cache;
}

void BpeModel::push_byte_symbol(unsigned char byte, std::vector<int32_t>& symbols,
                                bool& last_unk) const {
  if (byte_ids[byte] != kNone) {
    symbols.push_back(byte_ids[byte]);
    last_unk = false;
    return;
  }
  // The byte's character is not in the vocabulary. `tokenizers` then tries <0xNN> tokens for the
  // UTF-8 bytes of that character, then the unknown token, and otherwise drops it.
  if (byte_fallback) {
    std::string character;
    utf8::append(character, byte_level_table().byte_to_code[byte]);
    bool all = true;
    for (unsigned char b : character) all = all && fallback_ids[b] != kNone;
    if (all) {
      for (unsigned char b : character) symbols.push_back(fallback_ids[b]);
      last_unk = false;
      return;
    }
  }
  if (unk_id != kNone && !(fuse_unk && last_unk)) {
    symbols.push_back(unk_id);
    last_unk = true;
  }
}

void BpeModel::merge_linear(std::vector<int32_t>& ids) const {
  MergeScratch& scratch = merge_scratch();
  std::vector<int32_t>& ranks = scratch.ranks;
  std::vector<int32_t>& merged = scratch.merged;
  size_t n = ids.size();
  constexpr int32_t kNoMerge = std::numeric_limits<int32_t>::max();
  ranks.resize(n);
  merged.resize(n);
  auto look_up = [&](size_t i) {  // the pair (ids[i], ids[i + 1])
    const PairMap::Merge merge = merges.find(ids[i], ids[i + 1]);
    ranks[i] = merge.rank == kNone ? kNoMerge : merge.rank;
    merged[i] = merge.id;
  };
  for (size_t i = 0; i + 1 < n; ++i) look_up(i);
  while (n > 1) {
    // The lowest rank, leftmost on ties: the order `tokenizers`' merge queue pops them in.
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoMerge) break;
    ids[best] = merged[best];
    ids.erase(ids.begin() + static_cast<ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<ptrdiff_t>(best));
    merged.erase(merged.begin() + static_cast<ptrdiff_t>(best));
    --n;
    if (best > 0) look_up(best - 1);
    if (best + 1 < n) look_up(best);
  }
}

void BpeModel::merge_heap(std::vector<int32_t>& ids) const {
  MergeScratch& scratch = merge_scratch();
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  const auto n = static_cast<int32_t>(ids.size());
  symbols.resize(ids.size());
  for (int32_t i = 0; i < n; ++i) symbols[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : kNone, false};
  heap.clear();
  // Lowest rank first, then leftmost: as `tokenizers` orders its queue.
  auto later = [](const MergeScratch::Candidate& a, const MergeScratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  auto propose = [&](int32_t left) {
    if (left == kNone || symbols[left].next == kNone) return;
    const PairMap::Merge merge = merges.find(symbols[left].id, symbols[symbols[left].next].id);
    if (merge.rank == kNone) return;
    heap.push_back({merge.rank, left});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) propose(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const MergeScratch::Candidate top = heap.back();
    heap.pop_back();
    MergeScratch::Symbol& left = symbols[top.left];
    if (left.merged_away || left.next == kNone) continue;
    // Stale when either side has merged with something else since the candidate was queued.
    const PairMap::Merge merge = merges.find(left.id, symbols[left.next].id);
    if (merge.rank != top.rank) continue;
    MergeScratch::Symbol& right = symbols[left.next];
    left.id = merge.id;
    right.merged_away = true;
    left.next = right.next;
    if (right.next != kNone) symbols[right.next].prev = top.left;
    propose(left.prev);
    propose(top.left);
  }
  ids.clear();
  for (int32_t i = 0; i != kNone; i = symbols[i].next) ids.push_back(symbols[i].id);
}

void BpeModel::encode_uncached(std::string_view word, WordCache& cache,
                               std::vector<int32_t>& out) const {
  if (ignore_merges && word.size() <= max_token_bytes) {
    // Llama 3: a word that is a token is that token, whatever the merges would make of it.
    const int32_t id = word_ids.find(word);
    if (id != kNone) {
      out.push_back(id);
      cache.insert(word, &id, 1);
      return;
    }
  }
  std::vector<int32_t>& ids = merge_scratch().ids;
  ids.clear();
  bool last_unk = false;
  for (unsigned char byte : word) push_byte_symbol(byte, ids, last_unk);
  if (ids.size() <= kLinearMergeLimit) {
    merge_linear(ids);
  } else {
    merge_heap(ids);
  }
  cache.insert(word, ids.data(), ids.size());
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace edgelm::tokenizer
