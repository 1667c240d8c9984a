#include "backends/cpu/rope_table.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace edgelm::cpu {

const float* rope_rotation(int32_t position, const float* inv_freq, int64_t half) {
  struct Table {
    int32_t position = 0;
    int64_t half = -1;          // none yet
    std::vector<float> freq;    // [half] the inv_freq it was computed from
    std::vector<float> values;  // [2 · half] cosines, then sines
  };
  thread_local Table table;
  const auto n = static_cast<size_t>(half);
  if (table.half == half && table.position == position &&
      std::memcmp(table.freq.data(), inv_freq, sizeof(float) * n) == 0) {
    return table.values.data();
  }
  // Grows only when a model with wider heads comes along; decoding allocates nothing.
  table.freq.assign(inv_freq, inv_freq + n);
  table.values.resize(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    table.values[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    table.values[n + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }
  table.position = position;
  table.half = half;
  return table.values.data();
}

}  // namespace edgelm::cpu
