// The parity cases each backend skips, kept in a committed file (tests/parity/expected_skips.txt)
// so that a combination a backend stops supporting, or starts supporting, is seen: the parity test
// compares what every backend on the machine skips with its section of the file.
//
// File format: '#' comments, then one section per backend, a "[<backend>]" line followed by the
// combinations it skips, one "<op>/<dtypes>" per line (as in case names: "matmul/i32",
// "cast/i32_to_f32"). A section may be empty (the backend skips nothing). Backends not on the
// machine (NEON on x86, OpenCL without a device) are not checked. Regenerate with
// `test_backend --update-skips tests/parity/expected_skips.txt` on each kind of machine (it
// rewrites the sections of the backends it runs and keeps the others).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"

namespace edgelm::parity {

// Backend name -> the combinations ("matmul/i32") it skips.
using SkipTable = std::map<std::string, std::set<std::string>>;

// The combinations of all_cases() that `backend` does not support.
std::set<std::string> skipped_combinations(const Backend& backend);

// Reads a skip file. Throws edgelm::Error "[parity] <path>:<line>: ..." when it cannot be read, a
// combination comes before any section, a section repeats, or a line names no case of the matrix.
SkipTable read_skip_table(const std::string& path);

// The file's text: the header comment, then every section in name order.
std::string format_skip_table(const SkipTable& table);

// One line per difference between what `backend` skips and what the table expects of it, empty
// when they agree: "cpu:avx2 now skips matmul/q4_1 (not in tests/parity/expected_skips.txt)",
// "cpu:avx2 no longer skips matmul/i32 (...)", or that the table has no section for it.
std::vector<std::string> skip_changes(const SkipTable& expected, const std::string& path,
                                      const std::string& backend,
                                      const std::set<std::string>& actual);

}  // namespace edgelm::parity
