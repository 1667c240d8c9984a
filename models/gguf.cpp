// The GGUF reader: a bounds-checked walk over the mapped file that validates the header, every
// metadata value and tensor info, and where each tensor's bytes lie; then typed metadata access.
#include "models/gguf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"
#include "models/gguf_layout.h"

namespace edgelm {

// Files are little-endian and read with memcpy into host integers.
static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes little-endian");

namespace {

using gguf_layout::align_up;
using gguf_layout::kDefaultAlignment;
using gguf_layout::kMaxDims;

// Nested arrays recurse; a hostile file could nest millions deep and exhaust the stack. Real files
// never nest at all.
constexpr int kMaxArrayDepth = 8;

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

}  // namespace

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
  if (magic != gguf_layout::kMagic) {
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
  if (!ggml_type_known(tensor.type)) {
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
  result.file_ = MappedFile::open(path, "gguf");
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

}  // namespace edgelm
