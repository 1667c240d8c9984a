// Pieces shared by the libFuzzer targets of this folder: a scratch folder for the loaders that
// take paths, and the rule that edgelm::Error is the only acceptable failure.
//
// A target feeds its input through a public entry point of the library. An input the entry point
// refuses must end in an edgelm::Error; anything else (a crash, a sanitizer report, a leak, another
// exception type, a timeout or running out of memory) is a finding, which libFuzzer reports and
// saves as crash-*, leak-*, timeout-* or oom-*.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace edgelm::fuzz {

// A folder of this process under the temp directory ($TMPDIR), removed at normal exit. The
// loaders map files, so the input is written to a real file rather than handed over in memory:
// the same path a user's file takes (MappedFile included).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& target)
      : path_(std::filesystem::temp_directory_path() /
              ("edgelm-fuzz-" + target + "-" + std::to_string(getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Writes `bytes` to `path`, replacing the file. Aborts when it cannot (the temp folder is full):
// a fuzzer that silently tested an empty file would report a clean run it never made.
inline void write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// True for the message of an EDGELM_CHECK ("<what> (check failed: <condition>)
// [core/shape.cpp:18]", core/error.cpp), judged by its ending.
inline bool is_internal_check(std::string_view message) {
  const size_t open = message.rfind(" [");
  if (message.empty() || message.back() != ']' || open == std::string_view::npos) return false;
  const std::string_view where = message.substr(open + 2, message.size() - open - 3);
  const size_t colon = where.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == where.size()) return false;
  for (const char c : where.substr(colon + 1)) {
    if (c < '0' || c > '9') return false;
  }
  const std::string_view file = where.substr(0, colon);
  const std::string_view before = message.substr(0, open);
  return (file.ends_with(".cpp") || file.ends_with(".h")) &&
         before.find("check failed: ") != std::string_view::npos;
}

// Runs `body` on `input`. An edgelm::Error is the expected outcome of bad input and is swallowed,
// unless it has no message or comes from an internal check: a precondition deep in the library
// that the input reached unchecked, whose message names a source line rather than the file and
// field at fault. That, and any other exception, is a finding: the message is printed and the
// process aborts, which libFuzzer reports as a crash with the input saved. Parser errors quote
// the input (up to a NUL byte, where what() ends), so the fuzzer soon writes an internal check's
// words itself; inputs holding "check failed" are left out of that test.
template <class Body>
void expect_edgelm_errors_only(std::string_view input, Body&& body) {
  try {
    body();
  } catch (const Error& error) {
    const std::string_view message = error.what();
    if (message.empty() ||
        (is_internal_check(message) && input.find("check failed") == std::string_view::npos)) {
      std::fprintf(stderr, "fuzz: input reached an internal check: %s\n", error.what());
      std::abort();
    }
  } catch (const std::exception& other) {
    std::fprintf(stderr, "fuzz: exception other than edgelm::Error: %s\n", other.what());
    std::abort();
  }
}

// The input as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace edgelm::fuzz
