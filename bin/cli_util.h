// Small helpers shared by the command-line tools.
#pragma once

#include <climits>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace edgelm::cli {

// "1,2,3" -> {1, 2, 3}; throws edgelm::Error naming `flag` for anything else.
inline std::vector<int32_t> parse_id_list(const std::string& text, const char* flag) {
  std::vector<int32_t> ids;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    if (item.empty() || used != item.size() || value < 0 || value > INT32_MAX) {
      EDGELM_FAIL(flag, ": '", item, "' is not a token id (expected e.g. 1,2,3)");
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  if (ids.empty()) EDGELM_FAIL(flag, ": no token ids given");
  return ids;
}

// A dtype name that must be one of `allowed`; throws edgelm::Error naming `flag`.
inline DType parse_dtype(const std::string& text, const char* flag,
                         std::initializer_list<DType> allowed) {
  const auto dtype = dtype_from_name(text);
  std::string names;
  for (DType d : allowed) {
    if (dtype == d) return d;
    names += names.empty() ? dtype_name(d) : std::string("|") + dtype_name(d);
  }
  EDGELM_FAIL(flag, ": '", text, "' is not one of ", names);
}

}  // namespace edgelm::cli
