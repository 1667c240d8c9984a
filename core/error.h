// Errors: one exception type for the whole library, and a check macro that stays on in release.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace edgelm {

// Thrown for every failure the library reports: bad input files, bad arguments, violated op
// preconditions. The message names the component and the offending value, e.g.
// "[gguf] tensor 'blk.0.attn_q.weight': unsupported type 14".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates any streamable values into one string.
template <class... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* condition,
                               const std::string& message);
}  // namespace detail

}  // namespace edgelm

// EDGELM_CHECK(cond, "what", value, ...) throws edgelm::Error when cond is false. The message
// arguments are evaluated only on failure. Used for shape/dtype preconditions at op entry, so it
// is never compiled out.
#define EDGELM_CHECK(cond, ...)                                                         \
  do {                                                                                  \
    if (!(cond)) [[unlikely]] {                                                         \
      ::edgelm::detail::check_failed(__FILE__, __LINE__, #cond,                         \
                                     ::edgelm::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                   \
  } while (0)

// Throws edgelm::Error with the concatenated message; for I/O and parse errors where the message
// alone is what the user needs (no file/line of the library).
#define EDGELM_FAIL(...) throw ::edgelm::Error(::edgelm::str_cat(__VA_ARGS__))
