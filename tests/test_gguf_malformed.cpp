// Malformed GGUF files, built byte by byte: each must throw one edgelm::Error that names the file
// and the problem, without allocating what a hostile count or length announces.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "models/gguf.h"
#include "tests/gguf_test_util.h"

namespace edgelm {
namespace {

using testing::read_file;
using testing::write_file;
std::string temp_path(const std::string& name) {
  return testing::gguf_temp_path(name);
}

// Opens `path` expecting one edgelm::Error, one line that starts "[gguf] <path>: ", names the path
// only there, and contains every fragment. Any other exception escapes and fails the test.
void expect_open_error(const std::string& path, std::initializer_list<std::string> fragments) {
  try {
    GgufFile::open(path);
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("[gguf] " + path + ": ", 0), 0u) << message;
    EXPECT_EQ(message.find(path, message.find(path) + path.size()), std::string::npos)
        << "the path twice: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "expected '" << fragment << "' in: " << message;
    }
    return;
  }
  ADD_FAILURE() << "no error opening " << path;
}

// Little-endian byte builder for hand-made files.
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& f32(float v) { return put(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& zeros(size_t n) {
    data.resize(data.size() + n, 0);
    return *this;
  }
  Bytes& pad_to(size_t alignment) {
    data.resize((data.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  std::vector<uint8_t> data;

 private:
  template <class T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
};

Bytes header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  Bytes b;
  b.u8('G').u8('G').u8('U').u8('F').u32(version).u64(n_tensors).u64(n_kv);
  return b;
}

// A file with no metadata and one tensor info followed by `data_bytes` bytes of data.
std::vector<uint8_t> one_tensor_file(const std::string& name, std::vector<uint64_t> dims,
                                     uint32_t type, uint64_t offset, size_t data_bytes) {
  Bytes b = header(3, 1, 0);
  b.str(name).u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) b.u64(d);
  b.u32(type).u64(offset).pad_to(32).zeros(data_bytes);
  return b.data;
}

// ---- Malformed files -----------------------------------------------------------------------

TEST(GgufMalformedTest, BadMagicAndVersions) {
  const std::string path = temp_path("bad_header");
  Bytes ggml;
  ggml.u8('G').u8('G').u8('M').u8('L').u32(3).u64(0).u64(0);
  write_file(path, ggml.data);
  expect_open_error(path, {"bad magic 'GGML'", "expected 'GGUF'"});

  write_file(path, header(1, 0, 0).data);
  expect_open_error(path, {"unsupported version 1"});
  write_file(path, header(4, 0, 0).data);
  expect_open_error(path, {"unsupported version 4"});
  write_file(path, header(0x03000000, 0, 0).data);  // version 3 written big-endian
  expect_open_error(path, {"big-endian"});

  write_file(path, {});
  expect_open_error(path, {"truncated file", "header"});
  write_file(path, header(3, 0, 0).data);
  EXPECT_NO_THROW(GgufFile::open(path));  // an empty but valid file

  expect_open_error(temp_path("does_not_exist"), {"cannot open"});
  expect_open_error(::testing::TempDir(), {"not a regular file"});  // a folder
}

TEST(GgufMalformedTest, HugeLengthsAndCountsDoNotAllocate) {
  const std::string path = temp_path("huge");
  const uint64_t huge = uint64_t{1} << 62;
  // A key whose length is 2^62.
  write_file(path, header(3, 0, 1).u64(huge).zeros(16).data);
  expect_open_error(path, {"truncated file", "string of 4611686018427387904 bytes"});
  // A string value whose length is 2^62.
  write_file(path, header(3, 0, 1).str("k").u32(8).u64(huge).u8('x').data);
  expect_open_error(path, {"key 'k'", "string of 4611686018427387904 bytes"});
  // An array of 2^62 u8, and of 2^62 strings.
  write_file(path, header(3, 0, 1).str("k").u32(9).u32(0).u64(huge).zeros(16).data);
  expect_open_error(path, {"key 'k'", "array of 4611686018427387904 u8"});
  write_file(path, header(3, 0, 1).str("k").u32(9).u32(8).u64(huge).zeros(16).data);
  expect_open_error(path, {"array of 4611686018427387904 string"});
  // Header counts of 2^62.
  write_file(path, header(3, 0, huge).zeros(64).data);
  expect_open_error(path, {"4611686018427387904 metadata entries"});
  write_file(path, header(3, huge, 0).zeros(64).data);
  expect_open_error(path, {"4611686018427387904 tensors"});
}

TEST(GgufMalformedTest, BadValues) {
  const std::string path = temp_path("bad_values");
  write_file(path, header(3, 0, 1).str("general.name").u32(99).zeros(8).data);
  expect_open_error(path, {"key 'general.name'", "unknown value type 99"});
  write_file(path, header(3, 0, 1).str("k").u32(9).u32(99).u64(1).zeros(8).data);
  expect_open_error(path, {"key 'k'", "unknown value type 99"});
  write_file(path, header(3, 0, 1).str("k").u32(7).u8(2).data);
  expect_open_error(path, {"key 'k'", "invalid bool byte 2"});
  write_file(path, header(3, 0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).data);
  expect_open_error(path, {"duplicate key 'k'"});
  // Arrays of arrays nested 100 deep.
  Bytes deep = header(3, 0, 1).str("k").u32(9);
  for (int i = 0; i < 100; ++i) deep.u32(9).u64(1);
  deep.u32(0).u64(0);
  write_file(path, deep.data);
  expect_open_error(path, {"key 'k'", "nested deeper"});
  // general.alignment that is not a power of two.
  write_file(path, header(3, 0, 1).str("general.alignment").u32(4).u32(48).data);
  expect_open_error(path, {"general.alignment 48 is not a power of two"});
  write_file(path, header(3, 0, 1).str("general.alignment").u32(8).str("x").data);
  expect_open_error(path, {"general.alignment has type string"});
}

TEST(GgufMalformedTest, BadTensorInfos) {
  const std::string path = temp_path("bad_tensors");
  write_file(path, one_tensor_file("blk.0.attn_q.weight", {32, 2}, 9, 0, 72));
  expect_open_error(path, {"tensor 'blk.0.attn_q.weight': unsupported type 9 (q8_1)"});
  write_file(path, one_tensor_file("w", {32}, 77, 0, 128));
  expect_open_error(path, {"tensor 'w': unknown type 77"});
  write_file(path, one_tensor_file("w", {1, 1, 1, 1, 1}, 0, 0, 4));
  expect_open_error(path, {"tensor 'w'", "n_dims 5"});
  write_file(path, one_tensor_file("w", {16}, 8, 0, 34));
  expect_open_error(path, {"tensor 'w'", "row length 16 is not a multiple", "32"});
  write_file(path, one_tensor_file("w", {8}, 0, 4, 64));
  expect_open_error(path, {"tensor 'w'", "offset 4 is not a multiple of the alignment 32"});
  write_file(path, one_tensor_file("w", {uint64_t{1} << 62, 8}, 0, 0, 4));
  expect_open_error(path, {"tensor 'w'", "overflow"});

  // A scalar (n_dims 0) is valid: rank 0, one element.
  write_file(path, one_tensor_file("s", {}, 0, 0, 4));
  const GgufFile scalar = GgufFile::open(path);
  EXPECT_EQ(scalar.tensors()[0].shape.rank(), 0);
  EXPECT_EQ(scalar.tensors()[0].nbytes, 4u);

  // Data past the end: 8 floats need 32 bytes, 16 are there.
  write_file(path, one_tensor_file("w", {8}, 0, 0, 16));
  expect_open_error(path, {"tensor 'w'", "truncated data", "16 bytes missing"});
  // Offsets far beyond the end of the file, one so large that offset + size wraps around.
  write_file(path, one_tensor_file("w", {8}, 0, uint64_t{1} << 63, 32));
  expect_open_error(path, {"tensor 'w'", "truncated data", "9223372036854775"});
  write_file(path, one_tensor_file("w", {8}, 0, std::numeric_limits<uint64_t>::max() - 31, 32));
  expect_open_error(path, {"tensor 'w'", "beyond the end of the file"});

  // Duplicate tensor names.
  Bytes twice = header(3, 2, 0);
  for (int i = 0; i < 2; ++i) twice.str("w").u32(1).u64(8).u32(0).u64(32 * i);
  twice.pad_to(32).zeros(64);
  write_file(path, twice.data);
  expect_open_error(path, {"duplicate tensor name 'w'"});
}

// Tensors whose data ranges share bytes are refused, naming both; padding between tensors, any
// order of the data, and an empty tensor anywhere are fine.
TEST(GgufMalformedTest, OverlappingTensorData) {
  struct Info {
    std::string name;
    uint64_t n_floats;
    uint64_t offset;
  };
  const auto file = [](const std::vector<Info>& infos, size_t data_bytes) {
    Bytes b = header(3, infos.size(), 0);
    for (const Info& info : infos)
      b.str(info.name).u32(1).u64(info.n_floats).u32(0).u64(info.offset);
    b.pad_to(32).zeros(data_bytes);
    return b.data;
  };
  const std::string path = temp_path("overlap");
  write_file(path, file({{"a", 8, 0}, {"b", 8, 0}}, 32));
  expect_open_error(path,
                    {"tensors 'a' (data bytes [0, 32)) and 'b' (data bytes [0, 32)) overlap"});
  write_file(path, file({{"a", 16, 0}, {"b", 8, 32}}, 64));
  expect_open_error(path,
                    {"tensors 'a' (data bytes [0, 64)) and 'b' (data bytes [32, 64)) overlap"});
  // The empty tensor points inside 'early' but holds no byte of it.
  write_file(path, file({{"late", 8, 64}, {"early", 16, 0}, {"empty", 0, 32}}, 96));
  const GgufFile reordered = GgufFile::open(path);
  EXPECT_EQ(reordered.find_tensor("late")->file_offset - reordered.data_offset(), 64u);
  write_file(path, file({{"a", 8, 0}, {"b", 8, 64}}, 96));  // 32 bytes of padding between them
  EXPECT_EQ(GgufFile::open(path).tensors().size(), 2u);
}

TEST(GgufMalformedTest, EveryTruncationThrows) {
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_u32("llama.block_count", 2);
  writer.set_string_array("tokenizer.ggml.tokens", {"<s>", "", "hello"});
  writer.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.5f});
  std::vector<uint16_t> f16(2 * 8, 0x3c00);
  std::vector<float> f32(8, 1.0f);
  writer.add_tensor("a", GgmlType::F16, Shape{2, 8}, f16.data(), 32);
  // The last tensor fills its 32-byte slot exactly, so the file has no trailing padding and every
  // proper prefix cuts off something the reader needs.
  writer.add_tensor("b", GgmlType::F32, Shape{8}, f32.data(), 32);
  const std::string full_path = temp_path("truncation_full");
  writer.write(full_path);
  const std::vector<uint8_t> bytes = read_file(full_path);
  ASSERT_NO_THROW(GgufFile::open(full_path));

  const std::string path = temp_path("truncated");
  for (size_t size = 0; size < bytes.size(); ++size) {
    write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + size));
    SCOPED_TRACE("prefix of " + std::to_string(size) + " of " + std::to_string(bytes.size()));
    expect_open_error(path, {});
  }
  // Cut inside the data of tensor "b": the message says which tensor and how much is missing.
  write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.end() - 5));
  expect_open_error(path, {"tensor 'b'", "5 bytes missing"});
}

}  // namespace
}  // namespace edgelm
