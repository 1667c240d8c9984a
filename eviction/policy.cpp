#include "eviction/policy.h"

namespace edgelm {

void score_recent(const LayerSlots& slots, int64_t protected_count, float* scores) {
  for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
    for (int64_t s = 0; s < slots.n_slots; ++s) {
      const int32_t position = slots.positions[s * slots.n_kv_heads + g];
      scores[g * slots.n_slots + s] =
          position < protected_count ? kAlwaysKeep : static_cast<float>(position);
    }
  }
}

}  // namespace edgelm
