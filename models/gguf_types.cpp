// GGML tensor types (ids, names, block geometry, the DTypes with the same storage) and GGUF
// metadata values (type names, integer and float views).
#include <iterator>
#include <limits>

#include "core/error.h"
#include "core/quant.h"
#include "models/gguf.h"

namespace edgelm {

namespace {

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;
  int64_t block_size;  // 0 when the type is not supported
  size_t block_bytes;
};

// Block geometry of the supported types, from the block definitions: Q8_0, Q4_0, Q4_1, Q5_0 and
// Q5_1 in core/quant.h, the K types in models/kquants.h (256 elements in 144, 176 and 210 bytes).
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {GgmlType::F32, "f32", 1, 4},
    {GgmlType::F16, "f16", 1, 2},
    {GgmlType::Q4_0, "q4_0", kQ4_0BlockSize, sizeof(BlockQ4_0)},
    {GgmlType::Q4_1, "q4_1", kQ4_1BlockSize, sizeof(BlockQ4_1)},
    {GgmlType::Q5_0, "q5_0", kQ5_0BlockSize, sizeof(BlockQ5_0)},
    {GgmlType::Q5_1, "q5_1", kQ5_1BlockSize, sizeof(BlockQ5_1)},
    {GgmlType::Q8_0, "q8_0", kQ8_0BlockSize, sizeof(BlockQ8_0)},
    {GgmlType::Q8_1, "q8_1", 0, 0},
    {GgmlType::Q2_K, "q2_K", 0, 0},
    {GgmlType::Q3_K, "q3_K", 0, 0},
    {GgmlType::Q4_K, "q4_K", 256, 144},
    {GgmlType::Q5_K, "q5_K", 256, 176},
    {GgmlType::Q6_K, "q6_K", 256, 210},
    {GgmlType::Q8_K, "q8_K", 0, 0},
    {GgmlType::IQ2_XXS, "iq2_xxs", 0, 0},
    {GgmlType::IQ2_XS, "iq2_xs", 0, 0},
    {GgmlType::IQ3_XXS, "iq3_xxs", 0, 0},
    {GgmlType::IQ1_S, "iq1_s", 0, 0},
    {GgmlType::IQ4_NL, "iq4_nl", 0, 0},
    {GgmlType::IQ3_S, "iq3_s", 0, 0},
    {GgmlType::IQ2_S, "iq2_s", 0, 0},
    {GgmlType::IQ4_XS, "iq4_xs", 0, 0},
    {GgmlType::I8, "i8", 0, 0},
    {GgmlType::I16, "i16", 0, 0},
    {GgmlType::I32, "i32", 1, 4},
    {GgmlType::I64, "i64", 0, 0},
    {GgmlType::F64, "f64", 0, 0},
    {GgmlType::IQ1_M, "iq1_m", 0, 0},
    {GgmlType::BF16, "bf16", 1, 2},
};

const GgmlTypeInfo* find_type_info(GgmlType type) {
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

const GgmlTypeInfo& supported_type_info(GgmlType type) {
  const GgmlTypeInfo* info = find_type_info(type);
  if (info == nullptr || info->block_size == 0) {
    EDGELM_FAIL("[gguf] unsupported tensor type ", static_cast<uint32_t>(type), " (",
                ggml_type_name(type), ")");
  }
  return *info;
}

// Calls visitor(x) when the value holds an integer (bool is not one); otherwise returns the
// visitor's result type value-initialised (false, nullopt).
template <class Visitor>
auto visit_integer(const GgufValue::Variant& value, Visitor&& visitor) {
  return std::visit(
      [&](const auto& x) {
        using T = std::remove_cvref_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return visitor(x);
        } else {
          return decltype(visitor(int64_t{})){};
        }
      },
      value);
}

std::string array_type_string(const GgufArray& array) {
  return str_cat("array<", gguf_value_type_name(array.element_type()), ">[", array.size(), "]");
}

}  // namespace

// ---- GGML types -----------------------------------------------------------------------------

const char* ggml_type_name(GgmlType type) {
  const GgmlTypeInfo* info = find_type_info(type);
  return info != nullptr ? info->name : "unknown";
}

bool ggml_type_known(GgmlType type) {
  return find_type_info(type) != nullptr;
}

bool ggml_type_supported(GgmlType type) {
  const GgmlTypeInfo* info = find_type_info(type);
  return info != nullptr && info->block_size != 0;
}

int64_t ggml_block_size(GgmlType type) {
  return supported_type_info(type).block_size;
}

size_t ggml_block_bytes(GgmlType type) {
  return supported_type_info(type).block_bytes;
}

size_t ggml_row_bytes(GgmlType type, int64_t n) {
  const GgmlTypeInfo& info = supported_type_info(type);
  EDGELM_CHECK(n >= 0 && n % info.block_size == 0, "[gguf] ", info.name, ": row of ", n,
               " elements is not a multiple of the block size ", info.block_size);
  return static_cast<size_t>(n / info.block_size) * info.block_bytes;
}

std::optional<DType> dtype_from_ggml(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return DType::F32;
    case GgmlType::F16:
      return DType::F16;
    case GgmlType::BF16:
      return DType::BF16;
    case GgmlType::Q8_0:
      return DType::Q8_0;
    case GgmlType::Q4_0:
      return DType::Q4_0;
    case GgmlType::Q4_1:
      return DType::Q4_1;
    case GgmlType::Q5_0:
      return DType::Q5_0;
    case GgmlType::Q5_1:
      return DType::Q5_1;
    case GgmlType::Q4_K:
      return DType::Q4_K;
    case GgmlType::Q5_K:
      return DType::Q5_K;
    case GgmlType::Q6_K:
      return DType::Q6_K;
    case GgmlType::I32:
      return DType::I32;
    default:
      return std::nullopt;
  }
}

GgmlType ggml_from_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return GgmlType::F32;
    case DType::F16:
      return GgmlType::F16;
    case DType::BF16:
      return GgmlType::BF16;
    case DType::Q8_0:
      return GgmlType::Q8_0;
    case DType::Q4_0:
      return GgmlType::Q4_0;
    case DType::Q4_1:
      return GgmlType::Q4_1;
    case DType::Q5_0:
      return GgmlType::Q5_0;
    case DType::Q5_1:
      return GgmlType::Q5_1;
    case DType::Q4_K:
      return GgmlType::Q4_K;
    case DType::Q5_K:
      return GgmlType::Q5_K;
    case DType::Q6_K:
      return GgmlType::Q6_K;
    case DType::I32:
      return GgmlType::I32;
    case DType::Q4_0x8:  // load-time layouts of the CPU backend; files hold the stored types
    case DType::Q8_0x8:
    case DType::F16x4:
    case DType::Q4_Kx8:
    case DType::Q6_Kx8:
    case DType::Count:
      break;
  }
  EDGELM_FAIL("[gguf] no GGML type for dtype ",
              static_cast<int>(dtype) < kDTypeCount ? dtype_name(dtype) : "(invalid)");
}

// ---- Values ---------------------------------------------------------------------------------

const char* gguf_value_type_name(GgufValueType type) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  static_assert(std::size(kNames) == kGgufValueTypeCount, "one name per value type");
  const auto index = static_cast<uint32_t>(type);
  return index < kGgufValueTypeCount ? kNames[index] : "unknown";
}

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

bool GgufValue::is_integer() const {
  return visit_integer(value_, [](auto) { return true; });
}

std::optional<int64_t> GgufValue::as_int() const {
  return visit_integer(value_, [](auto x) -> std::optional<int64_t> {
    if constexpr (std::is_same_v<decltype(x), uint64_t>) {
      if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    }
    return static_cast<int64_t>(x);
  });
}

std::optional<double> GgufValue::as_float() const {
  if (const auto* f = get_if<float>()) return *f;
  if (const auto* d = get_if<double>()) return *d;
  return visit_integer(value_,
                       [](auto x) -> std::optional<double> { return static_cast<double>(x); });
}

std::string GgufValue::type_string() const {
  if (const auto* array = get_if<GgufArray>()) return array_type_string(*array);
  return gguf_value_type_name(type());
}

}  // namespace edgelm
