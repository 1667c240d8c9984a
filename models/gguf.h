// GGUF model files: a validating reader over a read-only mapping, and a writer.
//
// Layout (GGUF v2/v3, little-endian; see docs/gguf.md in the ggml repository):
//   header        "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count
//   metadata      key (u64 length + bytes), u32 value type, value
//   tensor infos  name, u32 n_dims, u64 dims[n_dims] (innermost first), u32 ggml type, u64 offset
//   padding       zeros up to a multiple of general.alignment (32 when the key is absent)
//   tensor data   each tensor at data_start + offset, offset a multiple of the alignment
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace edgelm {

class MappedFile;

// Tensor element types, with the ids GGUF files store. Only some are supported (can be loaded and
// dequantized); the others are named so that errors can say what a file contains.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
};

// Lower-case name as ggml prints it ("f32", "q4_0", "q6_K"); "unknown" for ids not listed above.
const char* ggml_type_name(GgmlType type);
// True for the ids listed above, supported or not (a reader tells an unknown id from a known type
// it cannot load).
bool ggml_type_known(GgmlType type);
// True for the types this library reads and dequantizes: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K, I32.
bool ggml_type_supported(GgmlType type);
// Elements per block (1 for plain types, 32 for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1, 256 for the K
// types). Throws
// edgelm::Error for an unsupported type.
int64_t ggml_block_size(GgmlType type);
// Bytes per block. Throws edgelm::Error for an unsupported type.
size_t ggml_block_bytes(GgmlType type);
// Bytes of a row of n elements. Throws edgelm::Error for an unsupported type or when n is negative
// or not a multiple of the block size.
size_t ggml_row_bytes(GgmlType type, int64_t n);

// The DType that has the same storage as a GGML type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, I32), so its tensors map in place; nullopt for the others (K types are dequantized on
// load).
std::optional<DType> dtype_from_ggml(GgmlType type);
GgmlType ggml_from_dtype(DType dtype);

// Metadata value types; the numbering is the one GGUF stores.
enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
inline constexpr uint32_t kGgufValueTypeCount = 13;

// "u8", "i32", "f32", "bool", "string", "array", ...; "unknown" outside the enum.
const char* gguf_value_type_name(GgufValueType type);

struct GgufArray;

// An array value: one typed vector whose alternative index is the element type's GGUF id, so a
// 150,000-entry vocabulary costs its strings, not 150,000 variants. Arrays nest (each inner array
// has its own element type).
struct GgufArray {
  using Values = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                              std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                              std::vector<float>, std::vector<bool>, std::vector<std::string>,
                              std::vector<GgufArray>, std::vector<uint64_t>, std::vector<int64_t>,
                              std::vector<double>>;

  Values values;  // default: an empty u8 array

  GgufValueType element_type() const { return static_cast<GgufValueType>(values.index()); }
  size_t size() const;
  bool operator==(const GgufArray& other) const = default;
};

// One metadata value of any GGUF type. The variant's alternative index is the GGUF type id.
class GgufValue {
 public:
  using Variant = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;

  GgufValue() = default;  // u8 0
  // Implicit from any alternative: GgufValue(uint32_t{4096}), GgufValue(std::string("llama")),
  // GgufValue(GgufArray{std::vector<float>{1, 2}}). Plain `int` selects int32_t.
  template <class T>
  GgufValue(T&& value) requires(!std::is_same_v<std::remove_cvref_t<T>, GgufValue> &&
                                std::is_constructible_v<Variant, T&&>)
      : value_(std::forward<T>(value)) {}

  GgufValueType type() const { return static_cast<GgufValueType>(value_.index()); }
  const Variant& variant() const { return value_; }
  // Pointer to the alternative T, null when the value holds another type.
  template <class T>
  const T* get_if() const {
    return std::get_if<T>(&value_);
  }

  bool is_integer() const;
  // The value of any integer type; nullopt for other types or a u64 above INT64_MAX.
  std::optional<int64_t> as_int() const;
  // The value of f32, f64 or any integer type; nullopt otherwise.
  std::optional<double> as_float() const;
  // Type name for messages: "u32", "string", "array<string>".
  std::string type_string() const;

  bool operator==(const GgufValue& other) const = default;

 private:
  Variant value_;
};

// A tensor in a mapped GGUF file. The bytes are used in place; `file` keeps the mapping alive.
struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  // Row-major: GGUF stores dims innermost first (ne[0] is the row length), so this is the file's
  // dims reversed. A file tensor with dims [4096, 32000] has shape [32000, 4096].
  Shape shape;
  const uint8_t* data = nullptr;  // inside file->data()
  size_t nbytes = 0;
  size_t file_offset = 0;  // of `data` from the start of the file
  std::shared_ptr<MappedFile> file;
};

// A validated, memory-mapped GGUF file. Every problem found by open() is reported as one
// edgelm::Error whose message starts "[gguf] <path>: ".
class GgufFile {
 public:
  // Maps and validates the whole file structure: header, metadata, tensor infos, tensor extents.
  // Tensor bytes are not read (they stay in the page cache until used).
  static GgufFile open(const std::string& path);
  // Maps the file and validates only the header and the metadata: tensors() is empty. For readers
  // of metadata alone (the tokenizer), which should not fail on a tensor type they never use.
  static GgufFile open_metadata(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  // general.alignment, or 32 when the file does not set it.
  size_t alignment() const { return alignment_; }
  // Offset of the tensor data section from the start of the file.
  size_t data_offset() const { return data_offset_; }
  const std::shared_ptr<MappedFile>& file() const { return file_; }

  // All key/value pairs, in file order (keys are unique).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  // Null when the key is absent.
  const GgufValue* find(const std::string& key) const;

  // Typed accessors. Each throws edgelm::Error naming the key when it is missing or its value has
  // a type that does not convert:
  //   get_int    any integer type (a u64 above INT64_MAX throws)
  //   get_float  f32, f64 or any integer type
  //   get_*_array  an array whose elements convert as above (get_string_array: strings only)
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;

  // Optional variants: nullopt when the key is absent; a present key of the wrong type still
  // throws, because that is a broken file rather than a missing setting.
  std::optional<std::string> find_string(const std::string& key) const;
  std::optional<int64_t> find_int(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<bool> find_bool(const std::string& key) const;

  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // Null when there is no tensor of that name.
  const GgufTensor* find_tensor(const std::string& name) const;

 private:
  GgufFile() = default;
  static GgufFile open_impl(const std::string& path, bool with_tensors);
  const GgufValue& require(const std::string& key) const;

  std::string path_;
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string, size_t> key_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// Writes GGUF v3 files in the standard layout (readable by llama.cpp): metadata in insertion
// order, tensor infos, then each tensor's bytes at an offset aligned to general.alignment, padded
// with zeros. general.alignment is written as the first key with value 32 unless set explicitly.
class GgufWriter {
 public:
  // Adds a key, or replaces the value of an existing key in place (keeping its position).
  void set(const std::string& key, GgufValue value);
  void set_u32(const std::string& key, uint32_t value) { set(key, value); }
  void set_i32(const std::string& key, int32_t value) { set(key, value); }
  void set_u64(const std::string& key, uint64_t value) { set(key, value); }
  void set_f32(const std::string& key, float value) { set(key, value); }
  void set_bool(const std::string& key, bool value) { set(key, value); }
  void set_string(const std::string& key, std::string value) { set(key, std::move(value)); }
  void set_string_array(const std::string& key, std::vector<std::string> values);
  void set_f32_array(const std::string& key, std::vector<float> values);
  void set_i32_array(const std::string& key, std::vector<int32_t> values);

  // Adds a tensor of a supported type. `shape` is row-major (its last dimension is the row length,
  // written first in the file); nbytes must equal the shape's size in `type`. The bytes are
  // copied. Throws edgelm::Error on a duplicate name, a name of 64 bytes or more (llama.cpp's
  // limit), rank 0 or above 4, a row length that is not a multiple of the block size, or a size
  // mismatch.
  void add_tensor(const std::string& name, GgmlType type, const Shape& shape, const void* data,
                  size_t nbytes);

  // Writes the file (replacing it). Throws edgelm::Error "[gguf] <path>: ..." on I/O failure or
  // when an explicitly set general.alignment is not a u32 power of two.
  void write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    Shape shape;
    std::vector<uint8_t> bytes;
  };

  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace edgelm
