#include <cstddef>
#include <cstring>

#include "backends/cpu/portable/portable.h"

namespace edgelm::cpu {

void kv_compact__portable(void* cache, int64_t n_kv_heads, size_t row_bytes, const int32_t* keep,
                          int64_t n_keep, int64_t group_begin, int64_t group_end) {
  auto* bytes = static_cast<std::byte*>(cache);
  for (int64_t g = group_begin; g < group_end; ++g) {
    for (int64_t j = 0; j < n_keep; ++j) {
      const int64_t source = keep[g * n_keep + j];
      if (source == j) continue;
      std::memcpy(bytes + (j * n_kv_heads + g) * row_bytes,
                  bytes + (source * n_kv_heads + g) * row_bytes, row_bytes);
    }
  }
}

}  // namespace edgelm::cpu
