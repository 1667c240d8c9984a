// Strict parsers of the comma lists that flags take: token ids ("1,2,3") and CPU indices
// ("0-3,6"). In the library rather than in bin/ so that the fuzz target and the tools parse with
// the same code.
#pragma once

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/error.h"

namespace edgelm {

namespace detail {

// The items of a comma list, empty ones included ("1,,2" and "1," hold one), so that the parsers
// below can refuse them instead of skipping them as std::getline would.
inline std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> items;
  while (true) {
    const size_t comma = text.find(',');
    items.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) return items;
    text.remove_prefix(comma + 1);
  }
}

// `text` as a decimal number in [0, max], digits only: no sign, space or other character
// (std::stoll would take " 1", "+1" and "1 "). False for anything else, a value past `max`
// included.
inline bool parse_decimal(std::string_view text, int64_t max, int64_t& value) {
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  return error == std::errc() && stop == end && value <= max;
}

}  // namespace detail

// The list syntax parse_id_list takes, for help texts and errors.
inline constexpr const char* kIdListSyntax =
    "comma-separated decimal ids in [0, 2147483647], no spaces, e.g. 1,2,3";

// "1,2,3" -> {1, 2, 3}. Strict: every item is digits only, within int32; an empty item ("1,,2",
// "1,"), a sign, a space (also around a comma) or an empty list throws edgelm::Error naming `flag`
// and the item.
inline std::vector<int32_t> parse_id_list(const std::string& text, const char* flag) {
  if (text.empty()) EDGELM_FAIL(flag, ": no token ids given (", kIdListSyntax, ")");
  std::vector<int32_t> ids;
  const std::vector<std::string_view> items = detail::split_commas(text);
  for (size_t i = 0; i < items.size(); ++i) {
    int64_t value = 0;
    if (items[i].empty()) {
      EDGELM_FAIL(flag, ": item ", i + 1, " of '", text, "' is empty (", kIdListSyntax, ")");
    }
    if (!detail::parse_decimal(items[i], INT32_MAX, value)) {
      EDGELM_FAIL(flag, ": '", items[i], "' is not a token id (", kIdListSyntax, ")");
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

// "0-3,6" -> {0, 1, 2, 3, 6}: CPU indices for thread pinning, as strict as parse_id_list (digits
// only, no empty item, no spaces); throws edgelm::Error naming `flag` and the item.
inline std::vector<int> parse_cpu_list(const std::string& text, const char* flag) {
  constexpr int64_t kMaxCpu =
      4095;  // a bound far above any machine's count, that still catches typos
  if (text.empty()) EDGELM_FAIL(flag, ": no CPUs given");
  std::vector<int> cpus;
  for (const std::string_view item : detail::split_commas(text)) {
    const size_t dash = item.find('-');
    int64_t first = 0, last = 0;
    if (!detail::parse_decimal(item.substr(0, dash), kMaxCpu, first) ||
        !detail::parse_decimal(
            dash == std::string_view::npos ? item.substr(0, dash) : item.substr(dash + 1), kMaxCpu,
            last)) {
      EDGELM_FAIL(flag, ": '", item, "' is not a CPU index or range (expected e.g. 0-3,6",
                  " with no spaces; CPUs 0 to ", kMaxCpu, ")");
    }
    if (last < first) EDGELM_FAIL(flag, ": range '", item, "' runs backwards");
    for (int64_t cpu = first; cpu <= last; ++cpu) cpus.push_back(static_cast<int>(cpu));
  }
  return cpus;
}

}  // namespace edgelm
