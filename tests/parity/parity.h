// The op parity harness: one list of cases (op × dtypes × shape), run on any backend and compared
// with either double-precision reference math written here or another backend (the oracle).
// Every output is allocated with guard bytes on both sides and pre-filled with NaN bytes, so a
// write out of bounds or an element never written is caught; outputs are compared by normalised
// squared error (NMSE = Σ(out - expected)² / Σ expected²) against a per-case tolerance, over the
// elements expected finite; an element must be finite exactly where the expected one is. Every
// read-only input must hold the bytes it was created with after the op, and a case must compare at
// least one output.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"

namespace edgelm::parity {

// Bytes of guard on each side of every output. A multiple of 64 so outputs stay aligned.
inline constexpr size_t kGuardBytes = 64;
inline constexpr uint8_t kGuardByte = 0xA5;

// What a case builds on one backend: its inputs (with a snapshot of their bytes taken at creation,
// so in-place ops can be checked against their inputs and read-only inputs checked unchanged) and
// its guarded outputs.
class Context {
 public:
  Context(Backend& backend, uint64_t seed) : backend_(backend), rng_(seed) {}

  Backend& backend() { return backend_; }

  // Read-only random input: F32/F16/BF16 from N(0, scale²); quantized types by quantizing such
  // values. The op must leave its bytes as they are.
  Tensor random(DType dtype, Shape shape, float scale = 1.0f);
  // Read-only input with given values (converted to dtype as random() does; I32 taken as
  // integers).
  Tensor values(DType dtype, Shape shape, const std::vector<double>& values);
  // Guarded output, pre-filled with 0xFF bytes (NaN for float types).
  Tensor output(DType dtype, Shape shape);
  // Guarded tensor that is both input and output (in-place ops): filled like random(), and not
  // read-only.
  Tensor inout(DType dtype, Shape shape, float scale = 1.0f);
  // Marks `region` (a view of an output) as compared against the next expected vector.
  void compare(const Tensor& region) { compared_.push_back(region); }

  // Values of the i-th input as created, decoded independently of the library.
  std::vector<double> input(size_t i) const;
  const Tensor& input_tensor(size_t i) const { return inputs_[i].tensor; }
  std::mt19937_64& rng() { return rng_; }

  struct Guarded {
    std::shared_ptr<Buffer> buffer;  // the allocation, guards included
    Tensor tensor;                   // the output itself
  };
  const std::vector<Guarded>& guarded() const { return guarded_; }
  const std::vector<Tensor>& compared() const { return compared_; }
  // Empty when every read-only input still holds its bytes as created; else which input changed
  // and where: "read-only input #1 F32[7, 64] changed: 1 of 1792 bytes differ, the first at 12".
  std::string changed_read_only_input() const;

 private:
  struct Input {
    Tensor tensor;
    std::vector<uint8_t> bytes;  // snapshot at creation
    bool read_only;              // random()/values(), not inout()
  };
  Tensor allocate_guarded(DType dtype, Shape shape);
  void fill(const Tensor& tensor, const std::vector<double>& values);
  Tensor add_input(const Tensor& tensor, bool read_only);

  Backend& backend_;
  std::mt19937_64 rng_;
  std::vector<Input> inputs_;
  std::vector<Guarded> guarded_;
  std::vector<Tensor> compared_;
};

struct OpCase {
  OpKind op;
  std::vector<DType> dtypes;          // as passed to Backend::supports
  std::string shape;                  // identifier-safe description: "M5_N7_K64"
  double tolerance;                   // max NMSE per compared output (0: exact)
  std::function<void(Context&)> run;  // builds inputs/outputs, calls the op, marks compares
  // Expected values of each compared output, in the order marked, from the inputs in double.
  std::function<std::vector<std::vector<double>>(const Context&)> reference;

  std::string name() const;         // "matmul/q4_0/M5_N7_K64"
  std::string combination() const;  // the op and dtypes, what supports() decides: "matmul/q4_0"
};

// Whether `backend` supports the case's op and dtypes (else every backend run of it is a skip).
bool case_supported(const OpCase& op_case, const Backend& backend);

// The whole matrix; every op of the op set has at least three shapes.
const std::vector<OpCase>& all_cases();

struct CaseResult {
  enum class Status { Passed, Failed, Skipped };
  Status status = Status::Passed;
  double nmse = 0.0;  // worst over the compared outputs
  std::string detail;
};

// Runs `op_case` on `subject` and compares with `oracle` when given, else with the reference math.
// Never throws: errors from the op become a failed result.
CaseResult run_case(const OpCase& op_case, Backend& subject, Backend* oracle = nullptr,
                    uint64_t seed = 1234);

// Independent decoding of a tensor's host bytes to doubles (every DType).
std::vector<double> decode(const Tensor& tensor);
std::vector<double> decode_bytes(DType dtype, const uint8_t* bytes, Shape shape);
// Round-to-nearest-even of x to F16 / BF16, computed in double arithmetic, for references.
double round_to_f16(double x);
double round_to_bf16(double x);

const char* status_name(CaseResult::Status status);

}  // namespace edgelm::parity
