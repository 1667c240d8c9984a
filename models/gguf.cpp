#include "models/gguf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "core/quant.h"

namespace edgelm {

// Files are little-endian and read with memcpy into host integers.
static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes little-endian");

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kWriterVersion = 3;
constexpr size_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// Nested arrays recurse; a hostile file could nest millions deep and exhaust the stack. Real files
// never nest at all.
constexpr int kMaxArrayDepth = 8;
// llama.cpp stores tensor names in a 64-byte buffer including the terminator.
constexpr size_t kMaxTensorNameBytes = 63;

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

// Smallest encoding of one value of each type, used to reject counts the file cannot hold before
// anything is allocated: a string is at least its u64 length, an array its u32 type + u64 count.
size_t min_value_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool:
      return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
      return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
    case GgufValueType::String:
      return 8;
    case GgufValueType::Array:
      return 12;
  }
  return 1;
}

// Bounds-checked little-endian cursor over the mapping. `where_` names what is being read, so a
// truncation says which part of the file is cut off.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size)
      : path_(path), data_(data), size_(size) {}

  size_t position() const { return position_; }
  size_t remaining() const { return size_ - position_; }
  void set_where(std::string where) { where_ = std::move(where); }
  const std::string& where() const { return where_; }

  [[noreturn]] void fail(const std::string& message) const {
    EDGELM_FAIL("[gguf] ", path_, ": ", message);
  }
  // Fails with the message prefixed by what is being read: "key 'x': invalid bool byte 7".
  [[noreturn]] void fail_here(const std::string& message) const {
    fail(str_cat(where_, ": ", message));
  }

  void need(size_t n) const {
    if (n > remaining()) {
      fail(str_cat("truncated file: ", where_, " needs ", n, " bytes at offset ", position_,
                   " but only ", remaining(), " remain (file size ", size_, ")"));
    }
  }

  template <class T>
  T read() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, data_ + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  std::string read_string() {
    const auto length = read<uint64_t>();
    // Checked before constructing the string, so a huge length never allocates.
    if (length > remaining()) {
      fail(str_cat("truncated file: ", where_, ": string of ", length, " bytes at offset ",
                   position_, " but only ", remaining(), " bytes remain (file size ", size_, ")"));
    }
    std::string text(reinterpret_cast<const char*>(data_ + position_), static_cast<size_t>(length));
    position_ += static_cast<size_t>(length);
    return text;
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
  std::string where_;
};

GgufValue read_value(Cursor& cursor, uint32_t type_id, int depth);

template <class T>
std::vector<T> read_scalar_array(Cursor& cursor, size_t count) {
  std::vector<T> values(count);
  for (T& value : values) value = cursor.read<T>();
  return values;
}

bool read_bool(Cursor& cursor) {
  const auto byte = cursor.read<uint8_t>();
  // The spec allows only 0 and 1; anything else means a corrupt file or a buggy writer.
  if (byte > 1) cursor.fail_here(str_cat("invalid bool byte ", static_cast<int>(byte)));
  return byte == 1;
}

void check_value_type(Cursor& cursor, uint32_t type_id) {
  if (type_id >= kGgufValueTypeCount) cursor.fail_here(str_cat("unknown value type ", type_id));
}

GgufArray read_array(Cursor& cursor, int depth) {
  if (depth >= kMaxArrayDepth) {
    cursor.fail_here(str_cat("arrays nested deeper than ", kMaxArrayDepth));
  }
  const auto element_type_id = cursor.read<uint32_t>();
  check_value_type(cursor, element_type_id);
  const auto element_type = static_cast<GgufValueType>(element_type_id);
  const auto count = cursor.read<uint64_t>();
  // Each element takes at least min_value_bytes, so a count the rest of the file cannot hold is
  // rejected here, before any allocation (a count of 2^62 must not reach std::vector).
  const size_t min_bytes = min_value_bytes(element_type);
  if (count > cursor.remaining() / min_bytes) {
    cursor.fail(str_cat("truncated file: ", cursor.where(), ": array of ", count, " ",
                        gguf_value_type_name(element_type), " elements at offset ",
                        cursor.position(), " needs at least ", min_bytes, " bytes each but only ",
                        cursor.remaining(), " bytes remain"));
  }
  const auto n = static_cast<size_t>(count);
  GgufArray array;
  switch (element_type) {
    case GgufValueType::U8:
      array.values = read_scalar_array<uint8_t>(cursor, n);
      break;
    case GgufValueType::I8:
      array.values = read_scalar_array<int8_t>(cursor, n);
      break;
    case GgufValueType::U16:
      array.values = read_scalar_array<uint16_t>(cursor, n);
      break;
    case GgufValueType::I16:
      array.values = read_scalar_array<int16_t>(cursor, n);
      break;
    case GgufValueType::U32:
      array.values = read_scalar_array<uint32_t>(cursor, n);
      break;
    case GgufValueType::I32:
      array.values = read_scalar_array<int32_t>(cursor, n);
      break;
    case GgufValueType::F32:
      array.values = read_scalar_array<float>(cursor, n);
      break;
    case GgufValueType::U64:
      array.values = read_scalar_array<uint64_t>(cursor, n);
      break;
    case GgufValueType::I64:
      array.values = read_scalar_array<int64_t>(cursor, n);
      break;
    case GgufValueType::F64:
      array.values = read_scalar_array<double>(cursor, n);
      break;
    case GgufValueType::Bool: {
      std::vector<bool> values(n);
      for (size_t i = 0; i < n; ++i) values[i] = read_bool(cursor);
      array.values = std::move(values);
      break;
    }
    case GgufValueType::String: {
      std::vector<std::string> values;
      values.reserve(n);
      for (size_t i = 0; i < n; ++i) values.push_back(cursor.read_string());
      array.values = std::move(values);
      break;
    }
    case GgufValueType::Array: {
      std::vector<GgufArray> values;
      values.reserve(n);
      for (size_t i = 0; i < n; ++i) values.push_back(read_array(cursor, depth + 1));
      array.values = std::move(values);
      break;
    }
  }
  return array;
}

GgufValue read_value(Cursor& cursor, uint32_t type_id, int depth) {
  check_value_type(cursor, type_id);
  switch (static_cast<GgufValueType>(type_id)) {
    case GgufValueType::U8:
      return cursor.read<uint8_t>();
    case GgufValueType::I8:
      return cursor.read<int8_t>();
    case GgufValueType::U16:
      return cursor.read<uint16_t>();
    case GgufValueType::I16:
      return cursor.read<int16_t>();
    case GgufValueType::U32:
      return cursor.read<uint32_t>();
    case GgufValueType::I32:
      return cursor.read<int32_t>();
    case GgufValueType::F32:
      return cursor.read<float>();
    case GgufValueType::Bool:
      return read_bool(cursor);
    case GgufValueType::String:
      return cursor.read_string();
    case GgufValueType::Array:
      return read_array(cursor, depth);
    case GgufValueType::U64:
      return cursor.read<uint64_t>();
    case GgufValueType::I64:
      return cursor.read<int64_t>();
    case GgufValueType::F64:
      return cursor.read<double>();
  }
  return {};
}

std::string describe_magic(uint32_t magic) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(magic >> (8 * i));
    if (c >= 0x20 && c < 0x7f) {
      text += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      text += "\\x";
      text += kHex[c >> 4];
      text += kHex[c & 15];
    }
  }
  return text;
}

Shape shape_from_file_dims(const uint64_t* dims, uint32_t n_dims) {
  // The file lists the innermost dimension first; Shape is row-major (innermost last).
  const auto d = [&](uint32_t i) { return static_cast<int64_t>(dims[i]); };
  switch (n_dims) {
    case 0:
      return Shape{};
    case 1:
      return Shape{d(0)};
    case 2:
      return Shape{d(1), d(0)};
    case 3:
      return Shape{d(2), d(1), d(0)};
    default:
      return Shape{d(3), d(2), d(1), d(0)};
  }
}

size_t align_up(size_t offset, size_t alignment) {
  return offset + (alignment - offset % alignment) % alignment;
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
    case DType::I32:
      return GgmlType::I32;
    case DType::Q4_0x8:  // load-time layouts of the CPU backend; files hold Q4_0, Q8_0 and F16
    case DType::Q8_0x8:
    case DType::F16x4:
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

// ---- Reader ---------------------------------------------------------------------------------

namespace {

struct Header {
  uint32_t version;
  uint64_t tensor_count;
  uint64_t kv_count;
};

Header read_header(Cursor& cursor) {
  cursor.set_where("header");
  const auto magic = cursor.read<uint32_t>();
  if (magic != kGgufMagic) {
    cursor.fail(str_cat("bad magic '", describe_magic(magic), "', expected 'GGUF'"));
  }
  Header header{};
  header.version = cursor.read<uint32_t>();
  const uint32_t version = header.version;
  if (version != 2 && version != 3) {
    // A big-endian file stores its version byte-swapped: 2 or 3 in the high byte.
    const uint32_t swapped = (version >> 24) | ((version >> 8) & 0xff00u) |
                             ((version << 8) & 0xff0000u) | (version << 24);
    if (swapped == 2 || swapped == 3) {
      cursor.fail(str_cat("version field reads 0x", std::hex, version, std::dec,
                          ", a byte-swapped ", swapped,
                          ": big-endian GGUF files are not supported"));
    }
    if (version == 1) {
      cursor.fail(
          "unsupported version 1 (GGUF v1 has 32-bit counts; supported versions are 2 "
          "and 3, re-convert the model)");
    }
    cursor.fail(str_cat("unsupported version ", version, " (supported: 2, 3)"));
  }
  header.tensor_count = cursor.read<uint64_t>();
  header.kv_count = cursor.read<uint64_t>();
  // Counts are checked against the smallest possible entry before anything is reserved: a
  // key/value pair takes at least 13 bytes (u64 key length, u32 type, 1-byte value), a tensor
  // info 24 (u64 name length, u32 n_dims, u32 type, u64 offset).
  if (header.kv_count > cursor.remaining() / 13) {
    cursor.fail(str_cat("truncated file: header announces ", header.kv_count,
                        " metadata entries but only ", cursor.remaining(), " bytes remain"));
  }
  if (header.tensor_count > cursor.remaining() / 24) {
    cursor.fail(str_cat("truncated file: header announces ", header.tensor_count,
                        " tensors but only ", cursor.remaining(), " bytes remain"));
  }
  return header;
}

size_t alignment_from(const GgufValue* value, const Cursor& cursor) {
  if (value == nullptr) return kDefaultAlignment;
  const std::optional<int64_t> alignment = value->as_int();
  if (!alignment) {
    cursor.fail(
        str_cat("general.alignment has type ", value->type_string(), ", expected an integer"));
  }
  if (*alignment <= 0 || !std::has_single_bit(static_cast<uint64_t>(*alignment))) {
    cursor.fail(str_cat("general.alignment ", *alignment, " is not a power of two"));
  }
  return static_cast<size_t>(*alignment);
}

struct TensorInfo {
  GgufTensor tensor;  // data and file_offset not set yet
  uint64_t offset;    // from the start of the data section, as stored
};

// Reads and checks one tensor info: rank, dims, type, block multiple, size, offset alignment.
TensorInfo read_tensor_info(Cursor& cursor, uint64_t index, size_t alignment) {
  TensorInfo info{};
  GgufTensor& tensor = info.tensor;
  cursor.set_where(str_cat("name of tensor info ", index));
  tensor.name = cursor.read_string();
  const std::string label = str_cat("tensor '", tensor.name, "'");
  cursor.set_where(str_cat("info of ", label));
  const auto n_dims = cursor.read<uint32_t>();
  if (n_dims > kMaxDims) {
    cursor.fail(str_cat(label, ": n_dims ", n_dims, " exceeds the maximum of ", kMaxDims));
  }
  uint64_t dims[kMaxDims] = {};
  int64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    dims[d] = cursor.read<uint64_t>();
    if (dims[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, static_cast<int64_t>(dims[d]), &numel)) {
      cursor.fail(
          str_cat(label, ": dimension ", d, " = ", dims[d], " makes the element count overflow"));
    }
  }
  const auto type_id = cursor.read<uint32_t>();
  tensor.type = static_cast<GgmlType>(type_id);
  if (find_type_info(tensor.type) == nullptr) {
    cursor.fail(str_cat(label, ": unknown type ", type_id));
  }
  if (!ggml_type_supported(tensor.type)) {
    cursor.fail(
        str_cat(label, ": unsupported type ", type_id, " (", ggml_type_name(tensor.type), ")"));
  }
  const int64_t row_length = n_dims == 0 ? 1 : static_cast<int64_t>(dims[0]);
  const int64_t block_size = ggml_block_size(tensor.type);
  if (row_length % block_size != 0) {
    cursor.fail(str_cat(label, ": row length ", row_length, " is not a multiple of the ",
                        ggml_type_name(tensor.type), " block size ", block_size));
  }
  // numel fits in int64, so the block count does; the byte count may still overflow.
  const auto blocks = static_cast<uint64_t>(numel / block_size);
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(blocks, uint64_t{ggml_block_bytes(tensor.type)}, &nbytes)) {
    cursor.fail(str_cat(label, ": size in bytes overflows"));
  }
  info.offset = cursor.read<uint64_t>();
  if (info.offset % alignment != 0) {
    cursor.fail(str_cat(label, ": data offset ", info.offset,
                        " is not a multiple of the alignment ", alignment));
  }
  tensor.shape = shape_from_file_dims(dims, n_dims);
  tensor.nbytes = static_cast<size_t>(nbytes);
  return info;
}

}  // namespace

GgufFile GgufFile::open(const std::string& path) {
  return open_impl(path, /*with_tensors=*/true);
}

GgufFile GgufFile::open_metadata(const std::string& path) {
  return open_impl(path, /*with_tensors=*/false);
}

GgufFile GgufFile::open_impl(const std::string& path, bool with_tensors) {
  GgufFile result;
  result.path_ = path;
  try {
    result.file_ = MappedFile::open(path);
  } catch (const Error& error) {
    EDGELM_FAIL("[gguf] ", path, ": ", error.what());
  }
  const MappedFile& mapping = *result.file_;
  Cursor cursor(path, mapping.data(), mapping.size());

  const Header header = read_header(cursor);
  result.version_ = header.version;

  result.metadata_.reserve(static_cast<size_t>(header.kv_count));
  for (uint64_t i = 0; i < header.kv_count; ++i) {
    cursor.set_where(str_cat("key of metadata entry ", i));
    std::string key = cursor.read_string();
    cursor.set_where(str_cat("key '", key, "'"));
    if (result.key_index_.count(key) != 0) cursor.fail(str_cat("duplicate key '", key, "'"));
    const auto type_id = cursor.read<uint32_t>();
    GgufValue value = read_value(cursor, type_id, 0);
    result.key_index_.emplace(key, result.metadata_.size());
    result.metadata_.emplace_back(std::move(key), std::move(value));
  }
  // Tensor offsets are checked against the alignment, so it is needed before the tensor infos.
  result.alignment_ = alignment_from(result.find("general.alignment"), cursor);
  const size_t alignment = result.alignment_;
  if (!with_tensors) return result;

  std::vector<uint64_t> offsets;
  offsets.reserve(static_cast<size_t>(header.tensor_count));
  result.tensors_.reserve(static_cast<size_t>(header.tensor_count));
  for (uint64_t i = 0; i < header.tensor_count; ++i) {
    TensorInfo info = read_tensor_info(cursor, i, alignment);
    if (result.tensor_index_.count(info.tensor.name) != 0) {
      cursor.fail(str_cat("duplicate tensor name '", info.tensor.name, "'"));
    }
    info.tensor.file = result.file_;
    offsets.push_back(info.offset);
    result.tensor_index_.emplace(info.tensor.name, result.tensors_.size());
    result.tensors_.push_back(std::move(info.tensor));
  }

  // The data section starts at the first aligned offset after the tensor infos.
  result.data_offset_ = align_up(cursor.position(), alignment);
  const size_t file_size = mapping.size();
  for (size_t i = 0; i < result.tensors_.size(); ++i) {
    GgufTensor& tensor = result.tensors_[i];
    const uint64_t offset = offsets[i];
    uint64_t start = 0;
    uint64_t end = 0;
    if (__builtin_add_overflow(uint64_t{result.data_offset_}, offset, &start) ||
        __builtin_add_overflow(start, uint64_t{tensor.nbytes}, &end)) {
      cursor.fail(str_cat("tensor '", tensor.name, "': data offset ", offset, " plus ",
                          tensor.nbytes, " bytes is beyond the end of the file (size ", file_size,
                          ")"));
    }
    if (end > file_size) {
      cursor.fail(str_cat("tensor '", tensor.name, "': truncated data: needs ", tensor.nbytes,
                          " bytes at file offset ", start, " but the file ends at ", file_size,
                          " (", end - file_size, " bytes missing)"));
    }
    tensor.file_offset = static_cast<size_t>(start);
    tensor.data = mapping.data() + tensor.file_offset;
  }
  // No two tensors may share bytes: a header whose offsets alias (all zero, or one range inside
  // another) describes a file whose tensors are not what their names say. Padding between tensors
  // is allowed, and so is any order; ggml's writer lays them out in info order, packed to the
  // alignment.
  std::vector<const GgufTensor*> by_offset;
  by_offset.reserve(result.tensors_.size());
  for (const GgufTensor& tensor : result.tensors_) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(), [](const GgufTensor* a, const GgufTensor* b) {
    return a->file_offset != b->file_offset ? a->file_offset < b->file_offset
                                            : a->nbytes < b->nbytes;
  });
  const GgufTensor* previous = nullptr;  // the last non-empty tensor in data order
  for (const GgufTensor* tensor : by_offset) {
    if (tensor->nbytes == 0) continue;  // shares no bytes, wherever it points
    if (previous != nullptr && tensor->file_offset < previous->file_offset + previous->nbytes) {
      const auto range = [&](const GgufTensor& t) {
        const size_t begin = t.file_offset - result.data_offset_;
        return str_cat("[", begin, ", ", begin + t.nbytes, ")");
      };
      cursor.fail(str_cat("tensors '", previous->name, "' (data bytes ", range(*previous),
                          ") and '", tensor->name, "' (data bytes ", range(*tensor), ") overlap"));
    }
    previous = tensor;
  }
  return result;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::require(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) EDGELM_FAIL("[gguf] ", path_, ": missing key '", key, "'");
  return *value;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, const std::string& key,
                             const GgufValue& value, const char* expected) {
  EDGELM_FAIL("[gguf] ", path, ": key '", key, "' has type ", value.type_string(), ", expected ",
              expected);
}

int64_t to_int(const std::string& path, const std::string& key, const GgufValue& value) {
  if (const std::optional<int64_t> result = value.as_int()) return *result;
  if (value.is_integer()) {
    EDGELM_FAIL("[gguf] ", path, ": key '", key, "': value ", *value.get_if<uint64_t>(),
                " does not fit in int64");
  }
  wrong_type(path, key, value, "an integer");
}

double to_float(const std::string& path, const std::string& key, const GgufValue& value) {
  if (const std::optional<double> result = value.as_float()) return *result;
  wrong_type(path, key, value, "a number");
}

bool to_bool(const std::string& path, const std::string& key, const GgufValue& value) {
  if (const auto* result = value.get_if<bool>()) return *result;
  wrong_type(path, key, value, "bool");
}

std::string to_string(const std::string& path, const std::string& key, const GgufValue& value) {
  if (const auto* result = value.get_if<std::string>()) return *result;
  wrong_type(path, key, value, "string");
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  return to_string(path_, key, require(key));
}

int64_t GgufFile::get_int(const std::string& key) const {
  return to_int(path_, key, require(key));
}

double GgufFile::get_float(const std::string& key) const {
  return to_float(path_, key, require(key));
}

bool GgufFile::get_bool(const std::string& key) const {
  return to_bool(path_, key, require(key));
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& value = require(key);
  const auto* array = value.get_if<GgufArray>();
  const auto* strings =
      array != nullptr ? std::get_if<std::vector<std::string>>(&array->values) : nullptr;
  if (strings == nullptr) wrong_type(path_, key, value, "array<string>");
  return *strings;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& value = require(key);
  const auto* array = value.get_if<GgufArray>();
  if (array == nullptr) wrong_type(path_, key, value, "an array of numbers");
  return std::visit(
      [&](const auto& elements) -> std::vector<double> {
        using T = typename std::remove_cvref_t<decltype(elements)>::value_type;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          return std::vector<double>(elements.begin(), elements.end());
        } else {
          wrong_type(path_, key, value, "an array of numbers");
        }
      },
      array->values);
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& value = require(key);
  const auto* array = value.get_if<GgufArray>();
  if (array == nullptr) wrong_type(path_, key, value, "an array of integers");
  return std::visit(
      [&](const auto& elements) -> std::vector<int64_t> {
        using T = typename std::remove_cvref_t<decltype(elements)>::value_type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          std::vector<int64_t> result;
          result.reserve(elements.size());
          for (const T element : elements) {
            if constexpr (std::is_same_v<T, uint64_t>) {
              if (element > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                EDGELM_FAIL("[gguf] ", path_, ": key '", key, "': element ", element,
                            " does not fit in int64");
              }
            }
            result.push_back(static_cast<int64_t>(element));
          }
          return result;
        } else {
          wrong_type(path_, key, value, "an array of integers");
        }
      },
      array->values);
}

std::optional<std::string> GgufFile::find_string(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  return to_string(path_, key, *value);
}

std::optional<int64_t> GgufFile::find_int(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  return to_int(path_, key, *value);
}

std::optional<double> GgufFile::find_float(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  return to_float(path_, key, *value);
}

std::optional<bool> GgufFile::find_bool(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  return to_bool(path_, key, *value);
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// ---- Writer ---------------------------------------------------------------------------------

namespace {

class ByteSink {
 public:
  template <class T>
  void put(T value) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), bytes, bytes + sizeof(T));
  }
  void put_string(const std::string& text) {
    put<uint64_t>(text.size());
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
  void pad_to(size_t alignment) { bytes_.resize(align_up(bytes_.size(), alignment), 0); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

void put_array(ByteSink& sink, const GgufArray& array);

void put_value(ByteSink& sink, const GgufValue::Variant& value) {
  std::visit(
      [&](const auto& x) {
        using T = std::remove_cvref_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          sink.put_string(x);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          put_array(sink, x);
        } else if constexpr (std::is_same_v<T, bool>) {
          sink.put<uint8_t>(x ? 1 : 0);
        } else {
          sink.put<T>(x);
        }
      },
      value);
}

void put_array(ByteSink& sink, const GgufArray& array) {
  sink.put<uint32_t>(static_cast<uint32_t>(array.element_type()));
  sink.put<uint64_t>(array.size());
  std::visit(
      [&](const auto& elements) {
        using T = typename std::remove_cvref_t<decltype(elements)>::value_type;
        for (const auto& element : elements) {
          if constexpr (std::is_same_v<T, std::string>) {
            sink.put_string(element);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            put_array(sink, element);
          } else if constexpr (std::is_same_v<T, bool>) {
            sink.put<uint8_t>(element ? 1 : 0);
          } else {
            sink.put<T>(element);
          }
        }
      },
      array.values);
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& entry : metadata_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::set_string_array(const std::string& key, std::vector<std::string> values) {
  set(key, GgufArray{std::move(values)});
}

void GgufWriter::set_f32_array(const std::string& key, std::vector<float> values) {
  set(key, GgufArray{std::move(values)});
}

void GgufWriter::set_i32_array(const std::string& key, std::vector<int32_t> values) {
  set(key, GgufArray{std::move(values)});
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const Shape& shape,
                            const void* data, size_t nbytes) {
  const std::string label = str_cat("[gguf] writer: tensor '", name, "': ");
  EDGELM_CHECK(!name.empty() && name.size() <= kMaxTensorNameBytes, label, "name of ", name.size(),
               " bytes (must be 1..", kMaxTensorNameBytes, ")");
  for (const PendingTensor& tensor : tensors_) {
    EDGELM_CHECK(tensor.name != name, label, "duplicate name");
  }
  EDGELM_CHECK(ggml_type_supported(type), label, "unsupported type ", static_cast<uint32_t>(type),
               " (", ggml_type_name(type), ")");
  EDGELM_CHECK(shape.rank() >= 1 && shape.rank() <= static_cast<int>(kMaxDims), label, "rank ",
               shape.rank(), " of ", shape.to_string(), " (must be 1..", kMaxDims, ")");
  EDGELM_CHECK(shape.last() % ggml_block_size(type) == 0, label, "row length ", shape.last(),
               " is not a multiple of the ", ggml_type_name(type), " block size ",
               ggml_block_size(type));
  const size_t expected = static_cast<size_t>(shape.rows()) * ggml_row_bytes(type, shape.last());
  EDGELM_CHECK(nbytes == expected, label, nbytes, " bytes given, ", ggml_type_name(type),
               shape.to_string(), " has ", expected);
  EDGELM_CHECK(nbytes == 0 || data != nullptr, label, "null data");
  const auto* bytes = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, type, shape, std::vector<uint8_t>(bytes, bytes + nbytes)});
}

void GgufWriter::write(const std::string& path) const {
  size_t alignment = kDefaultAlignment;
  bool has_alignment_key = false;
  for (const auto& [key, value] : metadata_) {
    if (key != "general.alignment") continue;
    const auto* explicit_alignment = value.get_if<uint32_t>();
    if (explicit_alignment == nullptr) {
      EDGELM_FAIL("[gguf] ", path, ": general.alignment must be a u32, got ", value.type_string());
    }
    if (!std::has_single_bit(*explicit_alignment)) {
      EDGELM_FAIL("[gguf] ", path, ": general.alignment ", *explicit_alignment,
                  " is not a power of two");
    }
    alignment = *explicit_alignment;
    has_alignment_key = true;
  }

  ByteSink head;
  head.put<uint32_t>(kGgufMagic);
  head.put<uint32_t>(kWriterVersion);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(metadata_.size() + (has_alignment_key ? 0 : 1));
  if (!has_alignment_key) {
    head.put_string("general.alignment");
    head.put<uint32_t>(static_cast<uint32_t>(GgufValueType::U32));
    head.put<uint32_t>(static_cast<uint32_t>(alignment));
  }
  for (const auto& [key, value] : metadata_) {
    head.put_string(key);
    head.put<uint32_t>(static_cast<uint32_t>(value.type()));
    put_value(head, value.variant());
  }
  uint64_t offset = 0;
  for (const PendingTensor& tensor : tensors_) {
    head.put_string(tensor.name);
    const int rank = tensor.shape.rank();
    head.put<uint32_t>(static_cast<uint32_t>(rank));
    for (int d = rank - 1; d >= 0; --d) head.put<uint64_t>(tensor.shape[d]);  // innermost first
    head.put<uint32_t>(static_cast<uint32_t>(tensor.type));
    head.put<uint64_t>(offset);
    offset = align_up(offset + tensor.bytes.size(), alignment);
  }
  head.pad_to(alignment);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) EDGELM_FAIL("[gguf] ", path, ": cannot open for writing: ", std::strerror(errno));
  out.write(reinterpret_cast<const char*>(head.bytes().data()),
            static_cast<std::streamsize>(head.bytes().size()));
  // Every tensor, the last included, is padded to the alignment as ggml's own writer does, so
  // readers that load the data section as a whole find all of it.
  static const char kZeros[256] = {};
  for (const PendingTensor& tensor : tensors_) {
    out.write(reinterpret_cast<const char*>(tensor.bytes.data()),
              static_cast<std::streamsize>(tensor.bytes.size()));
    size_t padding = align_up(tensor.bytes.size(), alignment) - tensor.bytes.size();
    while (padding > 0) {
      const size_t chunk = padding < sizeof(kZeros) ? padding : sizeof(kZeros);
      out.write(kZeros, static_cast<std::streamsize>(chunk));
      padding -= chunk;
    }
  }
  out.close();
  if (!out) EDGELM_FAIL("[gguf] ", path, ": write failed: ", std::strerror(errno));
}

}  // namespace edgelm
