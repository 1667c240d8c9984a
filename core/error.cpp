#include "core/error.h"

#include <cstring>

namespace edgelm::detail {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  // Keep only the path below the project root so messages are stable across checkouts.
  const char* short_file = file;
  for (const char* root : {"/core/", "/backends/", "/models/", "/eviction/", "/bin/", "/tests/"}) {
    if (const char* p = std::strstr(file, root)) {
      short_file = p + 1;
      break;
    }
  }
  std::string text = message.empty() ? str_cat("check failed: ", condition)
                                     : str_cat(message, " (check failed: ", condition, ")");
  throw Error(str_cat(text, " [", short_file, ":", line, "]"));
}

}  // namespace edgelm::detail
