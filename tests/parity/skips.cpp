#include "tests/parity/skips.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tests/parity/parity.h"

namespace edgelm::parity {

std::set<std::string> skipped_combinations(const Backend& backend) {
  std::set<std::string> skipped;
  for (const OpCase& op_case : all_cases()) {
    if (!case_supported(op_case, backend)) skipped.insert(op_case.combination());
  }
  return skipped;
}

SkipTable read_skip_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) EDGELM_FAIL("[parity] ", path, ": cannot open the expected skips");
  std::set<std::string> known;
  for (const OpCase& op_case : all_cases()) known.insert(op_case.combination());
  SkipTable table;
  std::set<std::string>* section = nullptr;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (line.front() == '[' && line.back() == ']') {
      const std::string backend = line.substr(1, line.size() - 2);
      const auto [it, inserted] = table.try_emplace(backend);
      if (!inserted)
        EDGELM_FAIL("[parity] ", path, ":", number, ": section [", backend, "] repeats");
      section = &it->second;
    } else if (section == nullptr) {
      EDGELM_FAIL("[parity] ", path, ":", number, ": '", line, "' before any [backend] line");
    } else if (known.count(line) == 0) {
      EDGELM_FAIL("[parity] ", path, ":", number, ": '", line,
                  "' is no op/dtypes combination of the parity cases");
    } else {
      section->insert(line);
    }
  }
  return table;
}

std::string format_skip_table(const SkipTable& table) {
  std::ostringstream out;
  out << "# Parity combinations (op/dtypes) each backend does not support, so its parity cases "
         "are\n"
         "# skipped. The parity test (OpParityCoverage.SkipsAreTheExpectedOnes) fails when a "
         "backend\n"
         "# on the machine skips anything else. Regenerate on each kind of machine (x86 with an\n"
         "# OpenCL device, AArch64 under qemu: scripts/test_aarch64.sh) with\n"
         "#   build/bin/test_backend --update-skips tests/parity/expected_skips.txt\n"
         "# which rewrites the sections of the backends it runs and keeps the others.\n";
  for (const auto& [backend, skipped] : table) {
    out << "\n[" << backend << "]\n";
    for (const std::string& combination : skipped) out << combination << "\n";
  }
  return out.str();
}

std::vector<std::string> skip_changes(const SkipTable& expected, const std::string& path,
                                      const std::string& backend,
                                      const std::set<std::string>& actual) {
  const auto it = expected.find(backend);
  if (it == expected.end()) {
    return {str_cat(path, " has no section [", backend, "]: run test_backend --update-skips ", path,
                    " on this machine")};
  }
  std::vector<std::string> changes;
  for (const std::string& combination : actual) {
    if (it->second.count(combination) == 0) {
      changes.push_back(
          str_cat(backend, " now skips ", combination, " (not in ", path, "'s [", backend, "])"));
    }
  }
  for (const std::string& combination : it->second) {
    if (actual.count(combination) == 0) {
      changes.push_back(str_cat(backend, " no longer skips ", combination, " (listed in ", path,
                                "'s [", backend, "])"));
    }
  }
  return changes;
}

}  // namespace edgelm::parity
