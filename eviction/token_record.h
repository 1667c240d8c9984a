// What the cached positions hold, for policies that keep some tokens whatever they score
// (eviction/protect_policy.h): which positions hold special tokens (the chat template's boundary
// tokens: <|im_start|>, <|im_end|>, <|eot_id|>, ...) and where the system prompt lies. The
// CacheManager keeps one, fed by the Generator with every token it feeds and by the caller with
// the special ids and the system prompt's positions; policies read it through LayerSlots::tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace edgelm {

class TokenRecord {
 public:
  // The ids that count as special (e.g. every id Tokenizer::is_special accepts). Until this is
  // called with a non-empty list, record() keeps nothing.
  void set_special_ids(std::vector<int32_t> ids);
  bool tracks_special() const { return !special_ids_.empty(); }
  // The system prompt occupies logical positions [begin, end); an empty range: none.
  void set_system_prompt(int64_t begin, int64_t end);
  int64_t system_begin() const { return system_begin_; }
  int64_t system_end() const { return system_end_; }

  // The tokens fed at logical positions [first_position, first_position + tokens.size()).
  // Positions at or past first_position recorded before are forgotten first (the cache was
  // cleared, or a turn rewound), so the record always describes the sequence as last fed.
  void record(int64_t first_position, std::span<const int32_t> tokens);

  // Whether the token at `position` is one of the special ids.
  bool special(int64_t position) const;
  // Whether `position` lies in the system prompt.
  bool in_system_prompt(int64_t position) const {
    return position >= system_begin_ && position < system_end_;
  }

 private:
  std::vector<int32_t> special_ids_;        // sorted
  std::vector<int64_t> special_positions_;  // increasing
  int64_t system_begin_ = 0;
  int64_t system_end_ = 0;
};

}  // namespace edgelm
