#include "eviction/token_record.h"

#include <algorithm>

#include "core/error.h"

namespace edgelm {

// Room for this many special positions is reserved up front, so that recording allocates only in
// a conversation with more template tokens than that (amortised, never per token).
constexpr size_t kReservedSpecialPositions = 4096;

void TokenRecord::set_special_ids(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  special_ids_ = std::move(ids);
  special_positions_.reserve(kReservedSpecialPositions);
}

void TokenRecord::set_system_prompt(int64_t begin, int64_t end) {
  EDGELM_CHECK(begin >= 0 && end >= begin, "[eviction] system prompt positions [", begin, ", ", end,
               ") are not a range");
  system_begin_ = begin;
  system_end_ = end;
}

void TokenRecord::record(int64_t first_position, std::span<const int32_t> tokens) {
  if (special_ids_.empty()) return;
  special_positions_.erase(
      std::lower_bound(special_positions_.begin(), special_positions_.end(), first_position),
      special_positions_.end());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (std::binary_search(special_ids_.begin(), special_ids_.end(), tokens[i])) {
      special_positions_.push_back(first_position + static_cast<int64_t>(i));
    }
  }
}

bool TokenRecord::special(int64_t position) const {
  return std::binary_search(special_positions_.begin(), special_positions_.end(), position);
}

}  // namespace edgelm
