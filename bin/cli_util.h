// Small helpers shared by the command-line tools.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <climits>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace edgelm::cli {

// Parses the flags: true to go on, false after --help printed the usage (exit 0). A bad flag
// throws edgelm::Error with CLI11's reason, so it ends as one line on stderr with exit 1, like
// every other error of the tools.
inline bool parse_flags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return true;
  } catch (const CLI::Success& e) {  // --help
    app.exit(e);
    return false;
  } catch (const CLI::ParseError& e) {
    EDGELM_FAIL(e.what());
  }
}

// A check for unsigned 64-bit flags (seeds). CLI11 2.3 reads "-1" into such a flag as 2^64-1 and
// clamps a number past 2^64-1 to it without a word; this rejects both before the conversion.
inline const CLI::Validator kUint64(
    [](std::string& text) -> std::string {
      uint64_t value = 0;
      const char* end = text.data() + text.size();
      const auto [stop, error] = std::from_chars(text.data(), end, value);
      if (text.empty() || error != std::errc() || stop != end) {
        return "'" + text + "' is not a whole number in [0, 18446744073709551615]";
      }
      return {};
    },
    "UINT64");

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

// "0-3,6" -> {0, 1, 2, 3, 6}: CPU indices for thread pinning; throws edgelm::Error naming `flag`.
inline std::vector<int> parse_cpu_list(const std::string& text, const char* flag) {
  std::vector<int> cpus;
  std::stringstream stream(text);
  std::string item;
  auto number = [&](const std::string& part) {
    size_t used = 0;
    long value = -1;
    try {
      value = std::stol(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || value < 0 || value > 4095) {
      EDGELM_FAIL(flag, ": '", item, "' is not a CPU index or range (expected e.g. 0-3,6)");
    }
    return static_cast<int>(value);
  };
  while (std::getline(stream, item, ',')) {
    const size_t dash = item.find('-');
    const int first = number(item.substr(0, dash));
    const int last = dash == std::string::npos ? first : number(item.substr(dash + 1));
    if (last < first) EDGELM_FAIL(flag, ": range '", item, "' runs backwards");
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  if (cpus.empty()) EDGELM_FAIL(flag, ": no CPUs given");
  return cpus;
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
