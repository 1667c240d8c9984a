#include "tests/parity/parity.h"

#include <cmath>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"

namespace edgelm::parity {

Tensor Context::allocate_guarded(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(shape.rows()) * dtype_row_bytes(dtype, shape.last());
  auto buffer = backend_.memory().allocate(bytes + 2 * kGuardBytes);
  EDGELM_CHECK(buffer->host_ptr() != nullptr, "[parity] ", backend_.name(),
               " memory has no host mapping");
  auto* raw = static_cast<uint8_t*>(buffer->host_ptr());
  std::memset(raw, kGuardByte, kGuardBytes);
  std::memset(raw + kGuardBytes, 0xFF, bytes);
  std::memset(raw + kGuardBytes + bytes, kGuardByte, kGuardBytes);
  Tensor tensor(buffer, kGuardBytes, dtype, shape);
  guarded_.push_back({buffer, tensor});
  return tensor;
}

void Context::fill(const Tensor& tensor, const std::vector<double>& values) {
  EDGELM_CHECK(static_cast<int64_t>(values.size()) == tensor.numel(), "[parity] ", values.size(),
               " values for ", tensor.describe());
  void* raw = tensor.raw();
  EDGELM_CHECK(raw != nullptr, "[parity] ", tensor.describe(), " has no host mapping");
  const int64_t n = tensor.numel();
  switch (tensor.dtype()) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(raw)[i] = static_cast<float>(values[i]);
      break;
    case DType::I32:
      for (int64_t i = 0; i < n; ++i)
        static_cast<int32_t*>(raw)[i] = static_cast<int32_t>(values[i]);
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        static_cast<uint16_t*>(raw)[i] = f32_to_f16(static_cast<float>(values[i]));
      }
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        static_cast<uint16_t*>(raw)[i] = f32_to_bf16(static_cast<float>(values[i]));
      }
      break;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1: {
      std::vector<float> row(values.begin(), values.end());
      if (tensor.dtype() == DType::Q8_0) {
        quantize_row_q8_0(row.data(), static_cast<BlockQ8_0*>(raw), n);
      } else if (tensor.dtype() == DType::Q4_0) {
        quantize_row_q4_0(row.data(), static_cast<BlockQ4_0*>(raw), n);
      } else if (tensor.dtype() == DType::Q4_1) {
        quantize_row_q4_1(row.data(), static_cast<BlockQ4_1*>(raw), n);
      } else if (tensor.dtype() == DType::Q5_0) {
        quantize_row_q5_0(row.data(), static_cast<BlockQ5_0*>(raw), n);
      } else {
        quantize_row_q5_1(row.data(), static_cast<BlockQ5_1*>(raw), n);
      }
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {
      std::vector<float> row(values.begin(), values.end());
      if (tensor.dtype() == DType::Q4_K) {
        quantize_row_q4_K(row.data(), raw, n);
      } else if (tensor.dtype() == DType::Q5_K) {
        quantize_row_q5_K(row.data(), raw, n);
      } else {
        quantize_row_q6_K(row.data(), raw, n);
      }
      break;
    }
    case DType::Q4_0x8: {  // quantized as Q4_0 rows, then repacked
      std::vector<float> row(values.begin(), values.end());
      const int64_t K = tensor.shape().last();
      std::vector<BlockQ4_0> blocks(static_cast<size_t>(n / kQ4_0BlockSize));
      quantize_row_q4_0(row.data(), blocks.data(), n);
      repack_q4_0_x8(blocks.data(), static_cast<BlockQ4_0x8*>(raw), tensor.shape().rows(),
                     K / kQ4_0BlockSize);
      break;
    }
    case DType::F16x4: {  // rounded to F16 rows, then repacked
      std::vector<uint16_t> halves(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) halves[i] = f32_to_f16(static_cast<float>(values[i]));
      repack_f16_x4(halves.data(), static_cast<uint16_t*>(raw), tensor.shape().rows(),
                    tensor.shape().last());
      break;
    }
    case DType::Q8_0x8: {  // quantized as Q8_0 rows, then repacked
      std::vector<float> row(values.begin(), values.end());
      const int64_t K = tensor.shape().last();
      std::vector<BlockQ8_0> blocks(static_cast<size_t>(n / kQ8_0BlockSize));
      quantize_row_q8_0(row.data(), blocks.data(), n);
      repack_q8_0_x8(blocks.data(), static_cast<BlockQ8_0x8*>(raw), tensor.shape().rows(),
                     K / kQ8_0BlockSize);
      break;
    }
    case DType::Q4_Kx8:  // quantized as Q4_K / Q6_K rows, then repacked
    case DType::Q6_Kx8: {
      std::vector<float> row(values.begin(), values.end());
      const int64_t blocks = tensor.shape().last() / kKQuantBlockSize;
      const int64_t rows = tensor.shape().rows();
      if (tensor.dtype() == DType::Q4_Kx8) {
        std::vector<BlockQ4_K> stored(static_cast<size_t>(rows * blocks));
        quantize_row_q4_K(row.data(), stored.data(), n);
        repack_q4_k_x8(stored.data(), static_cast<BlockQ4_Kx8*>(raw), rows, blocks);
      } else {
        std::vector<BlockQ6_K> stored(static_cast<size_t>(rows * blocks));
        quantize_row_q6_K(row.data(), stored.data(), n);
        repack_q6_k_x8(stored.data(), static_cast<BlockQ6_Kx8*>(raw), rows, blocks);
      }
      break;
    }
    case DType::Count:
      EDGELM_FAIL("[parity] cannot fill dtype Count");
  }
}

Tensor Context::add_input(const Tensor& tensor, bool read_only) {
  const auto* raw = static_cast<const uint8_t*>(tensor.raw());
  inputs_.push_back({tensor, std::vector<uint8_t>(raw, raw + tensor.nbytes()), read_only});
  return tensor;
}

std::string Context::changed_read_only_input() const {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Input& in = inputs_[i];
    if (!in.read_only) continue;
    const auto* now = static_cast<const uint8_t*>(in.tensor.raw());
    size_t differing = 0;
    size_t first = 0;
    for (size_t b = 0; b < in.bytes.size(); ++b) {
      if (now[b] == in.bytes[b]) continue;
      if (differing++ == 0) first = b;
    }
    if (differing > 0) {
      return str_cat("read-only input #", i, " ", in.tensor.describe(), " changed: ", differing,
                     " of ", in.bytes.size(), " bytes differ, the first at ", first);
    }
  }
  return {};
}

Tensor Context::random(DType dtype, Shape shape, float scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values(static_cast<size_t>(shape.numel()));
  for (double& v : values) v = normal(rng_);
  return this->values(dtype, shape, values);
}

Tensor Context::values(DType dtype, Shape shape, const std::vector<double>& values) {
  Tensor tensor = Tensor::empty(backend_.memory(), dtype, shape);
  fill(tensor, values);
  return add_input(tensor, /*read_only=*/true);
}

Tensor Context::output(DType dtype, Shape shape) {
  return allocate_guarded(dtype, shape);
}

Tensor Context::inout(DType dtype, Shape shape, float scale) {
  Tensor tensor = allocate_guarded(dtype, shape);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values(static_cast<size_t>(shape.numel()));
  for (double& v : values) v = dtype == DType::I32 ? std::round(normal(rng_) * 1000) : normal(rng_);
  fill(tensor, values);
  return add_input(tensor, /*read_only=*/false);
}

std::vector<double> Context::input(size_t i) const {
  const Input& in = inputs_.at(i);
  return decode_bytes(in.tensor.dtype(), in.bytes.data(), in.tensor.shape());
}

std::string OpCase::name() const {
  return combination() + "/" + shape;
}

std::string OpCase::combination() const {
  std::string text = op_name(op);
  text += "/";
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i > 0) text += "_to_";
    text += dtype_name(dtypes[i]);
  }
  return text;
}

bool case_supported(const OpCase& op_case, const Backend& backend) {
  const std::vector<DType>& d = op_case.dtypes;
  switch (d.size()) {
    case 1:
      return backend.supports(op_case.op, {d[0]});
    case 2:
      return backend.supports(op_case.op, {d[0], d[1]});
    default:
      return false;
  }
}

const char* status_name(CaseResult::Status status) {
  switch (status) {
    case CaseResult::Status::Passed:
      return "pass";
    case CaseResult::Status::Failed:
      return "FAIL";
    case CaseResult::Status::Skipped:
      return "skip";
  }
  return "?";
}

namespace {

CaseResult failed(std::string detail, double nmse = 0.0) {
  return {CaseResult::Status::Failed, nmse, std::move(detail)};
}

// Returns an empty string when every guard byte around every output is intact.
std::string check_guards(const Context& ctx) {
  for (size_t k = 0; k < ctx.guarded().size(); ++k) {
    const Context::Guarded& g = ctx.guarded()[k];
    const auto* base = static_cast<const uint8_t*>(g.buffer->host_ptr());
    const size_t bytes = g.tensor.nbytes();
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (base[i] != kGuardByte) {
        return str_cat("wrote before output #", k, " ", g.tensor.describe(), " (", kGuardBytes - i,
                       " bytes before its start)");
      }
      if (base[kGuardBytes + bytes + i] != kGuardByte) {
        return str_cat("wrote past the end of output #", k, " ", g.tensor.describe(),
                       " (guard byte ", i, " after its end)");
      }
    }
  }
  return {};
}

}  // namespace

CaseResult run_case(const OpCase& op_case, Backend& subject, Backend* oracle, uint64_t seed) {
  try {
    if (!case_supported(op_case, subject)) {
      return {CaseResult::Status::Skipped, 0.0, subject.name() + " does not support it"};
    }
    if (oracle != nullptr && !case_supported(op_case, *oracle)) {
      return {CaseResult::Status::Skipped, 0.0,
              "oracle " + oracle->name() + " does not support it"};
    }

    Context ctx(subject, seed);
    try {
      op_case.run(ctx);
      subject.synchronize();
    } catch (const std::exception& e) {
      return failed(str_cat("op threw: ", e.what()));
    }

    std::vector<std::vector<double>> expected;
    if (oracle != nullptr) {
      Context oracle_ctx(*oracle, seed);
      op_case.run(oracle_ctx);
      oracle->synchronize();
      for (const Tensor& region : oracle_ctx.compared()) expected.push_back(decode(region));
    } else {
      expected = op_case.reference(ctx);
    }
    // A case that marks nothing to compare would pass whatever the op did.
    if (ctx.compared().empty()) return failed("harness error: the case compares no output");
    if (expected.size() != ctx.compared().size()) {
      return failed(str_cat("harness error: ", ctx.compared().size(), " outputs but ",
                            expected.size(), " expected vectors"));
    }
    if (std::string guard = check_guards(ctx); !guard.empty()) return failed(guard);
    if (std::string changed = ctx.changed_read_only_input(); !changed.empty()) {
      return failed(changed);
    }

    double worst = 0.0;
    for (size_t k = 0; k < expected.size(); ++k) {
      const std::vector<double> actual = decode(ctx.compared()[k]);
      const std::vector<double>& want = expected[k];
      if (actual.size() != want.size()) {
        return failed(
            str_cat("output #", k, " has ", actual.size(), " values, expected ", want.size()));
      }
      double error = 0.0;
      double norm = 0.0;
      for (size_t i = 0; i < actual.size(); ++i) {
        // Finiteness must agree both ways: a NaN or an infinity the reference produces (a cast
        // that overflows on purpose, a product with a non-finite input) must not come out as
        // some finite number.
        if (std::isfinite(actual[i]) != std::isfinite(want[i])) {
          return failed(
              str_cat("output #", k, " element ", i, " is ", actual[i], ", expected ", want[i]));
        }
        if (!std::isfinite(want[i])) continue;
        error += (actual[i] - want[i]) * (actual[i] - want[i]);
        norm += want[i] * want[i];
      }
      const double nmse = norm > 0.0 ? error / norm : (error > 0.0 ? INFINITY : 0.0);
      worst = std::max(worst, nmse);
      if (!(nmse <= op_case.tolerance)) {
        return failed(
            str_cat("output #", k, " NMSE ", nmse, " exceeds tolerance ", op_case.tolerance), nmse);
      }
    }
    return {CaseResult::Status::Passed, worst, {}};
  } catch (const std::exception& e) {
    return failed(str_cat("harness error: ", e.what()));
  }
}

}  // namespace edgelm::parity
