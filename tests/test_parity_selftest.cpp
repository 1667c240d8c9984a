// The harness must be able to fail: a backend that returns a wrong value, one that writes one
// element past an output, one that writes before it, one that leaves an element unwritten and one
// that throws must each be reported as failures, while the honest backend passes the same case.
// So must subtle faults: one element off by a relative 1e-3, the same in the second output of a
// two-output op (attention's mass), a read-only input changed by the op, and a case that compares
// nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "tests/parity/parity.h"

namespace edgelm::parity {
namespace {

enum class Fault {
  None,
  WrongValue,
  SlightlyWrongValue,
  WritePastEnd,
  WriteBeforeStart,
  SkipLastElement,
  Throw,
  ChangesInput,
  SlightlyWrongMass,
};

// Forwards every op to the CPU backend, then damages the output (or, for ChangesInput, the second
// input) of `add` and `matmul`, or the mass that `attention` exports.
class FaultyBackend final : public Backend {
 public:
  explicit FaultyBackend(Fault fault) : fault_(fault) {}

  std::string name() const override { return "faulty"; }
  std::string device() const override { return "cpu with injected faults"; }
  Memory& memory() override { return cpu_.memory(); }
  bool supports(OpKind op, std::initializer_list<DType> dtypes) const override {
    return cpu_.supports(op, dtypes);
  }
  void embed(const Tensor& t, const Tensor& i, const Tensor& o) override { cpu_.embed(t, i, o); }
  void matmul(const Tensor& x, const Tensor& w, const Tensor& y) override {
    cpu_.matmul(x, w, y);
    damage(y, w);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) override {
    cpu_.rms_norm(x, w, eps, y);
  }
  void rope(const Tensor& x, const Tensor& p, const Tensor& f, const Tensor& o) override {
    cpu_.rope(x, p, f, o);
  }
  void attention(const AttentionArgs& args) override {
    cpu_.attention(args);
    if (fault_ == Fault::SlightlyWrongMass && args.mass.defined()) nudge_largest(args.mass);
  }
  void silu_mul(const Tensor& g, const Tensor& u, const Tensor& o) override {
    cpu_.silu_mul(g, u, o);
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu_.add(a, b, out);
    damage(out, b);
  }
  void softmax(const Tensor& x, const Tensor& y) override { cpu_.softmax(x, y); }
  void cast(const Tensor& s, const Tensor& d) override { cpu_.cast(s, d); }
  void kv_append(const Tensor& s, const Tensor& sl, const Tensor& c) override {
    cpu_.kv_append(s, sl, c);
  }
  void kv_compact(const Tensor& c, const Tensor& k) override { cpu_.kv_compact(c, k); }
  void copy(const Tensor& s, const Tensor& d) override { cpu_.copy(s, d); }

 private:
  // Multiplies the element of largest magnitude by 1 + 1e-3. That element carries at least 1/n of
  // Σy², so the NMSE is at least 1e-6/n: above the float tolerances (1e-10 and 1e-12) for every
  // output of up to 10,000 elements, and far below the gross error of WrongValue.
  static void nudge_largest(const Tensor& out) {
    float* values = out.data<float>();
    float* largest = std::max_element(values, values + out.numel(),
                                      [](float a, float b) { return std::fabs(a) < std::fabs(b); });
    *largest *= 1.0f + 1e-3f;
  }

  void damage(const Tensor& out, const Tensor& read_only_input) {
    float* values = out.data<float>();
    const int64_t n = out.numel();
    switch (fault_) {
      case Fault::None:
      case Fault::SlightlyWrongMass:
        break;
      case Fault::SlightlyWrongValue:
        nudge_largest(out);
        break;
      // One bit of one byte, after the op computed its output from the input as it was.
      case Fault::ChangesInput:
        static_cast<uint8_t*>(read_only_input.raw())[read_only_input.nbytes() / 2] ^= 0x10;
        break;
      // One element off by 4 (outputs here have a variance of a few units): NMSE ≈ 16 / Σy², above
      // even the loosest tolerance of these cases (1e-4 for quantized matmul).
      case Fault::WrongValue:
        values[n / 2] += 4.0f;
        break;
      case Fault::WritePastEnd:
        values[n] = 0.0f;
        break;
      case Fault::WriteBeforeStart:
        values[-1] = 0.0f;
        break;
      case Fault::SkipLastElement:
        std::memset(&values[n - 1], 0xFF, sizeof(float));
        break;
      case Fault::Throw:
        throw Error("[faulty] injected failure");
    }
  }

  cpu::CpuBackend cpu_{cpu::CpuOptions{.n_threads = 2}};
  Fault fault_;
};

const OpCase& find_case(const std::string& name) {
  for (const OpCase& op_case : all_cases()) {
    if (op_case.name() == name) return op_case;
  }
  throw std::runtime_error("no parity case " + name);
}

class ParitySelfTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParitySelfTest, HonestBackendPasses) {
  FaultyBackend honest(Fault::None);
  const CaseResult result = run_case(find_case(GetParam()), honest);
  EXPECT_EQ(result.status, CaseResult::Status::Passed) << result.detail;
}

TEST_P(ParitySelfTest, CatchesWrongValue) {
  FaultyBackend faulty(Fault::WrongValue);
  const CaseResult result = run_case(find_case(GetParam()), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed);
  EXPECT_NE(result.detail.find("NMSE"), std::string::npos) << result.detail;
}

TEST_P(ParitySelfTest, CatchesWritePastEnd) {
  FaultyBackend faulty(Fault::WritePastEnd);
  const CaseResult result = run_case(find_case(GetParam()), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed);
  EXPECT_NE(result.detail.find("past the end"), std::string::npos) << result.detail;
}

TEST_P(ParitySelfTest, CatchesWriteBeforeStart) {
  FaultyBackend faulty(Fault::WriteBeforeStart);
  const CaseResult result = run_case(find_case(GetParam()), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed);
  EXPECT_NE(result.detail.find("before output"), std::string::npos) << result.detail;
}

TEST_P(ParitySelfTest, CatchesUnwrittenElement) {
  FaultyBackend faulty(Fault::SkipLastElement);
  const CaseResult result = run_case(find_case(GetParam()), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed);
  EXPECT_NE(result.detail.find("nan"), std::string::npos) << result.detail;
}

TEST_P(ParitySelfTest, CatchesChangedReadOnlyInput) {
  FaultyBackend faulty(Fault::ChangesInput);
  const CaseResult result = run_case(find_case(GetParam()), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed);
  EXPECT_NE(result.detail.find("read-only input #1"), std::string::npos) << result.detail;
}

TEST_P(ParitySelfTest, ReportsThrowingOpAsFailure) {
  FaultyBackend faulty(Fault::Throw);
  const CaseResult result = run_case(find_case(GetParam()), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed);
  EXPECT_NE(result.detail.find("injected failure"), std::string::npos) << result.detail;
}

// One element off by a relative 1e-3, on the cases with float tolerances (a quantized matmul's
// 3e-4, the error of rounding x to 8 bits, is far above what one such element adds).
class ParitySelfTestSubtle : public ::testing::TestWithParam<const char*> {};

TEST_P(ParitySelfTestSubtle, CatchesOneElementOffByARelative1e3) {
  FaultyBackend faulty(Fault::SlightlyWrongValue);
  const CaseResult result = run_case(find_case(GetParam()), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed) << "NMSE " << result.nmse;
  EXPECT_NE(result.detail.find("output #0 NMSE"), std::string::npos) << result.detail;
}

TEST_P(ParitySelfTestSubtle, CatchesItAgainstTheOracle) {
  FaultyBackend faulty(Fault::SlightlyWrongValue);
  cpu::CpuBackend oracle(cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  const CaseResult result = run_case(find_case(GetParam()), faulty, &oracle);
  EXPECT_EQ(result.status, CaseResult::Status::Failed) << "NMSE " << result.nmse;
}

// Attention with mass compares two outputs; a subtle fault in the second alone must fail.
constexpr const char* kAttentionWithMass = "attention/f32/decode_q1_heads4_kv2_slots37_dim64_mass";

TEST(ParitySelfTestSecondOutput, HonestAttentionPasses) {
  FaultyBackend honest(Fault::None);
  const CaseResult result = run_case(find_case(kAttentionWithMass), honest);
  EXPECT_EQ(result.status, CaseResult::Status::Passed) << result.detail;
}

TEST(ParitySelfTestSecondOutput, CatchesSubtleFaultInTheMass) {
  FaultyBackend faulty(Fault::SlightlyWrongMass);
  const CaseResult result = run_case(find_case(kAttentionWithMass), faulty);
  EXPECT_EQ(result.status, CaseResult::Status::Failed) << "NMSE " << result.nmse;
  EXPECT_NE(result.detail.find("output #1 NMSE"), std::string::npos) << result.detail;
}

// A case that runs the op but marks no output to compare must fail, not pass vacuously.
TEST(ParitySelfTestHarness, CaseThatComparesNothingFails) {
  const OpCase compares_nothing{OpKind::Add,
                                {DType::F32},
                                "rows1_n8_uncompared",
                                0.0,
                                [](Context& ctx) {
                                  Tensor a = ctx.random(DType::F32, {1, 8});
                                  Tensor b = ctx.random(DType::F32, {1, 8});
                                  Tensor out = ctx.output(DType::F32, {1, 8});
                                  ctx.backend().add(a, b, out);
                                },
                                [](const Context&) { return std::vector<std::vector<double>>{}; }};
  FaultyBackend honest(Fault::None);
  const CaseResult result = run_case(compares_nothing, honest);
  EXPECT_EQ(result.status, CaseResult::Status::Failed);
  EXPECT_NE(result.detail.find("compares no output"), std::string::npos) << result.detail;
}

// Faults against both the reference math and the portable oracle.
TEST(ParitySelfTestOracle, CatchesWrongValueAgainstOracle) {
  FaultyBackend faulty(Fault::WrongValue);
  cpu::CpuBackend oracle(cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  const CaseResult result = run_case(find_case("matmul/q4_0/M5_N7_K64"), faulty, &oracle);
  EXPECT_EQ(result.status, CaseResult::Status::Failed) << result.detail;
}

TEST(ParitySelfTestOracle, HonestBackendMatchesOracleExactly) {
  FaultyBackend honest(Fault::None);
  cpu::CpuBackend oracle(cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  const CaseResult result = run_case(find_case("matmul/q4_0/M5_N7_K64"), honest, &oracle);
  EXPECT_EQ(result.status, CaseResult::Status::Passed) << result.detail;
}

TEST(ParitySelfTestSkips, UnsupportedCombinationIsSkipped) {
  FaultyBackend honest(Fault::None);
  const CaseResult result = run_case(find_case("matmul/i32/M5_N7_K64"), honest);
  EXPECT_EQ(result.status, CaseResult::Status::Skipped) << result.detail;
}

INSTANTIATE_TEST_SUITE_P(Cases, ParitySelfTest,
                         ::testing::Values("add/f32/rows3_n64", "add/f32/rows2_n1000",
                                           "matmul/f32/M5_N7_K64", "matmul/q4_0/M5_N7_K64"));
// In place (the output is the first input) and not; float GEMM shapes with tails.
INSTANTIATE_TEST_SUITE_P(Cases, ParitySelfTestSubtle,
                         ::testing::Values("add/f32/rows3_n64", "add/f32/rows2_n1000",
                                           "add/f32/rows4_n33_inplace", "matmul/f32/M5_N7_K64",
                                           "matmul/f32/M33_N65_K256"));

}  // namespace
}  // namespace edgelm::parity
