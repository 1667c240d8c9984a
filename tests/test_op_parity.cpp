// The op parity matrix as GoogleTest cases: every case of tests/parity/cases.cpp on every backend
// registered on this machine. Until a second backend exists, each is compared with the
// double-precision reference math of the harness; afterwards backends other than cpu:portable are
// also compared with cpu:portable, the oracle. What each backend skips is checked against
// tests/parity/expected_skips.txt.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <sstream>
#include <string>

#include "backends/registry.h"
#include "tests/parity/parity.h"
#include "tests/parity/skips.h"

namespace edgelm::parity {
namespace {

struct Param {
  const OpCase* op_case;
  std::string backend;
};

// How gtest and ctest show a parameter.
void PrintTo(const Param& param, std::ostream* out) {
  *out << param.op_case->name() << " on " << param.backend;
}

// Every case on every backend; `except` leaves one backend out.
std::vector<Param> all_params(const std::string& except = "") {
  std::vector<Param> params;
  for (const std::string& backend : backend_names()) {
    if (backend == "cpu" || backend == except) continue;  // "cpu" aliases the best cpu:<isa>
    for (const OpCase& op_case : all_cases()) params.push_back({&op_case, backend});
  }
  return params;
}

Backend& backend_named(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Backend>> backends;
  auto& slot = backends[name];
  if (!slot) slot = create_backend(name, {.n_threads = 2});
  return *slot;
}

class OpParity : public ::testing::TestWithParam<Param> {};

TEST_P(OpParity, MatchesReference) {
  const Param& param = GetParam();
  Backend& subject = backend_named(param.backend);
  const CaseResult result = run_case(*param.op_case, subject);
  if (result.status == CaseResult::Status::Skipped) GTEST_SKIP() << result.detail;
  EXPECT_EQ(result.status, CaseResult::Status::Passed)
      << param.op_case->name() << " on " << param.backend << ": " << result.detail;
  RecordProperty("nmse", std::to_string(result.nmse));
}

// Backends other than the oracle also match it (tighter than the reference for shared rounding).
class OpParityVsOracle : public ::testing::TestWithParam<Param> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OpParityVsOracle);

TEST_P(OpParityVsOracle, MatchesPortableOracle) {
  const Param& param = GetParam();
  Backend& subject = backend_named(param.backend);
  const CaseResult result = run_case(*param.op_case, subject, &backend_named("cpu:portable"));
  if (result.status == CaseResult::Status::Skipped) GTEST_SKIP() << result.detail;
  EXPECT_EQ(result.status, CaseResult::Status::Passed)
      << param.op_case->name() << " on " << param.backend << " vs cpu:portable: " << result.detail;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string name = info.param.op_case->name() + "__" + info.param.backend;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Matrix, OpParity, ::testing::ValuesIn(all_params()), param_name);
INSTANTIATE_TEST_SUITE_P(Matrix, OpParityVsOracle, ::testing::ValuesIn(all_params("cpu:portable")),
                         param_name);

// The matrix must cover the whole op set, each op with at least three shapes that some backend
// here really runs (not only skipped dtype combinations).
TEST(OpParityCoverage, EveryOpHasThreeRunnableShapes) {
  Backend& cpu = backend_named("cpu:portable");
  std::map<OpKind, std::set<std::string>> runnable_shapes;
  for (const OpCase& op_case : all_cases()) {
    if (case_supported(op_case, cpu)) runnable_shapes[op_case.op].insert(op_case.shape);
  }
  for (OpKind op : all_ops()) {
    EXPECT_GE(runnable_shapes[op].size(), 3u) << op_name(op) << " has too few parity shapes";
  }
}

// Every backend on this machine skips exactly the combinations its section of the committed file
// lists: a kernel entry that goes missing (a new skip) or appears (a skip gone) is a failure that
// says which, until the file is regenerated (tests/parity/skips.h says how).
TEST(OpParityCoverage, SkipsAreTheExpectedOnes) {
  const std::string path = EDGELM_PARITY_EXPECTED_SKIPS;
  const SkipTable expected = read_skip_table(path);
  int checked = 0;
  for (const std::string& backend : backend_names()) {
    if (backend == "cpu") continue;  // an alias of the best cpu:<isa>
    for (const std::string& change :
         skip_changes(expected, path, backend, skipped_combinations(backend_named(backend)))) {
      ADD_FAILURE() << change;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// The matrix runs on the cpu:<isa> backends backend_names() lists, which come from the CPU's own
// feature checks (cpuid, getauxval). So that a table whose check goes wrong cannot drop out of the
// matrix unnoticed (its cases would simply not exist), the list must be what the kernel reports
// in /proc/cpuinfo: avx2 with FMA and F16C, avx512 with F, BW, VL, DQ and VNNI as well; on
// AArch64 neon always and neon_dotprod with asimddp.
TEST(OpParityCoverage, TheTablesTheCpuOffersAreTheOnesTested) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo.good()) GTEST_SKIP() << "no /proc/cpuinfo";
#if defined(__aarch64__)
  const std::string key = "Features";
#else
  const std::string key = "flags";
#endif
  std::set<std::string> flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string flag; words >> flag;) flags.insert(flag);
    break;
  }
  // QEMU's user mode shows the host's file, of another architecture.
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no '" << key << "' line";
  auto has = [&](std::initializer_list<const char*> names) {
    for (const char* name : names)
      if (flags.count(name) == 0) return false;
    return true;
  };
  std::set<std::string> expected = {"cpu:portable"};
#if defined(__x86_64__)  // every x86-64 build has the x86 tables (CMakeLists.txt)
  if (has({"avx2", "fma", "f16c"})) expected.insert("cpu:avx2");
  if (has({"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}))
    expected.insert("cpu:avx512");
#endif
#if defined(__aarch64__)  // every AArch64 build has the NEON tables
  expected.insert("cpu:neon");
  if (has({"asimddp"})) expected.insert("cpu:neon_dotprod");
#endif
  std::set<std::string> offered;
  for (const std::string& backend : backend_names())
    if (backend.rfind("cpu:", 0) == 0) offered.insert(backend);
  EXPECT_EQ(offered, expected);
}

// Without a device the matrix has no OpenCL cases at all, so a filtered run of them (ctest's
// op_parity_opencl_own_gemm) would pass with none: EDGELM_REQUIRE_OPENCL (scripts/test.sh, CI)
// makes that a failure here, and that run includes this test.
TEST(OpParityCoverage, OpenClIsInTheMatrixWhenRequired) {
  bool opencl = false;
  for (const std::string& backend : backend_names()) opencl = opencl || backend == "opencl";
  if (!opencl && std::getenv("EDGELM_REQUIRE_OPENCL") != nullptr)
    FAIL() << "EDGELM_REQUIRE_OPENCL is set but the matrix has no opencl backend";
  if (!opencl) GTEST_SKIP() << "no OpenCL device";
}

TEST(OpParityCoverage, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const OpCase& op_case : all_cases()) {
    EXPECT_TRUE(names.insert(op_case.name()).second) << "duplicate case " << op_case.name();
  }
}

}  // namespace
}  // namespace edgelm::parity
