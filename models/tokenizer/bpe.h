// The byte-level BPE model (Llama 3, GPT-2 and the GGUF "gpt2" vocabularies): a word's bytes are
// the first symbols, and adjacent pairs merge in the order of the merge list.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "models/tokenizer/hash_tables.h"

namespace edgelm::tokenizer {

// Pre-token bytes → ids, bounded: cleared when full, which keeps it fast and small at the cost of
// re-merging words after a clear.
class WordCache {
 public:
  static constexpr size_t kMaxWords = 1 << 15;
  static constexpr size_t kMaxWordBytes = 256;  // longer words are merged each time

  // Appends the ids of `word` to `out` when the cache has them; false otherwise.
  bool find(std::string_view word, std::vector<int32_t>& out) const {
    const int32_t index = index_.find(word);
    if (index == kNone) return false;
    const auto [offset, count] = spans_[static_cast<size_t>(index)];
    out.insert(out.end(), ids_.begin() + offset, ids_.begin() + offset + count);
    return true;
  }
  // Remembers the `count` ids of `word` (not when the word is longer than kMaxWordBytes).
  void insert(std::string_view word, const int32_t* ids, size_t count) {
    if (word.size() > kMaxWordBytes) return;
    if (index_.size() >= kMaxWords) clear();
    index_.set(word, static_cast<int32_t>(spans_.size()));
    spans_.emplace_back(static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(count));
    ids_.insert(ids_.end(), ids, ids + count);
  }
  // Forgets every word.
  void clear() {
    index_.clear();
    spans_.clear();
    ids_.clear();
  }

 private:
  StringIdMap index_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;  // word → (offset, count) in ids_
  std::vector<int32_t> ids_;
};

// The calling thread's cache for the tokenizer `owner` (a number each loaded tokenizer gets). A
// thread keeps caches for the four tokenizers it used last, so alternating between two models does
// not thrash, and threads never share one.
WordCache& thread_word_cache(uint64_t owner);

// The model's data, filled by the loaders, and the merge loop over it.
struct BpeModel {
  StringIdMap word_ids;               // token bytes (the byte-level spelling undone) → id
  size_t max_token_bytes = 0;         // the longest entry of word_ids
  std::array<int32_t, 256> byte_ids;  // the token of each single byte, kNone when there is none
  PairMap merges;                     // (left id, right id) → (rank, merged id)
  bool ignore_merges = false;         // a word that is a token is that token (Llama 3)
  int32_t unk_id = kNone;
  bool fuse_unk = false;  // consecutive unknown symbols become one unknown token
  bool byte_fallback = false;
  std::array<int32_t, 256> fallback_ids;  // <0xNN> tokens, for byte_fallback

  BpeModel() {
    byte_ids.fill(kNone);
    fallback_ids.fill(kNone);
  }

  // Appends the ids of one pre-token to `out`, through `cache` (the calling thread's). Inline,
  // since most words are one byte or already in the cache.
  void encode_word(std::string_view word, WordCache& cache, std::vector<int32_t>& out) const {
    if (word.size() == 1 && byte_ids[static_cast<unsigned char>(word[0])] != kNone) {
      out.push_back(byte_ids[static_cast<unsigned char>(word[0])]);
      return;
    }
    // The cache first: it also holds the words that are tokens, so a repeated word costs one
    // lookup either way.
    if (cache.find(word, out)) return;
    encode_uncached(word, cache, out);
  }

 private:
  // A word the cache does not have: the token it is (ignore_merges), else the merges' result;
  // either goes into the cache.
  void encode_uncached(std::string_view word, WordCache& cache, std::vector<int32_t>& out) const;
  void push_byte_symbol(unsigned char byte, std::vector<int32_t>& symbols, bool& last_unk) const;
  void merge_linear(std::vector<int32_t>& ids) const;
  void merge_heap(std::vector<int32_t>& ids) const;
};

}  // namespace edgelm::tokenizer
