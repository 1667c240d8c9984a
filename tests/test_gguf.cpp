// GGUF reader and writer: writer -> reader round trips of every metadata type and of
// F32/F16/BF16/I32/Q8_0/Q4_0/K-quant tensors, with the file bytes also parsed independently here
// (dims order, alignment). The K-quant dequantizers' known answers are in test_gguf_kquants.cpp,
// malformed files in test_gguf_malformed.cpp (one executable, test_gguf).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/half.h"
#include "core/mapped_file.h"
#include "core/quant.h"
#include "models/gguf.h"
#include "models/kquants.h"
#include "tests/gguf_test_util.h"

namespace edgelm {
namespace {

using testing::read_file;
using testing::write_file;
std::string temp_path(const std::string& name) {
  return testing::gguf_temp_path(name);
}

// ---- An independent parser of the file layout, sharing no code with the reader -------------

struct FileTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // as stored: innermost first
  uint32_t type;
  uint64_t offset;
};

struct FileLayout {
  uint32_t version = 0;
  std::vector<std::string> keys;
  std::vector<uint32_t> value_types;
  std::vector<FileTensorInfo> tensors;
  size_t infos_end = 0;
};

class Walker {
 public:
  explicit Walker(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    T v{};
    EXPECT_LE(pos + sizeof(T), bytes_.size());
    if (pos + sizeof(T) <= bytes_.size()) std::memcpy(&v, bytes_.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string string() {
    const auto n = get<uint64_t>();
    EXPECT_LE(pos + n, bytes_.size());
    if (pos + n > bytes_.size()) return {};
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos), n);
    pos += n;
    return s;
  }
  void skip_value(uint32_t type) {
    static const size_t kSizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
      string();
    } else if (type == 9) {
      const auto element = get<uint32_t>();
      const auto count = get<uint64_t>();
      for (uint64_t i = 0; i < count; ++i) skip_value(element);
    } else {
      pos += kSizes[type];
    }
  }
  size_t pos = 0;

 private:
  const std::vector<uint8_t>& bytes_;
};

FileLayout parse_layout(const std::vector<uint8_t>& bytes) {
  FileLayout layout;
  Walker w(bytes);
  EXPECT_EQ(w.get<uint32_t>(), 0x46554747u);  // "GGUF"
  layout.version = w.get<uint32_t>();
  const auto n_tensors = w.get<uint64_t>();
  const auto n_kv = w.get<uint64_t>();
  for (uint64_t i = 0; i < n_kv; ++i) {
    layout.keys.push_back(w.string());
    layout.value_types.push_back(w.get<uint32_t>());
    w.skip_value(layout.value_types.back());
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    FileTensorInfo info;
    info.name = w.string();
    const auto n_dims = w.get<uint32_t>();
    for (uint32_t d = 0; d < n_dims; ++d) info.dims.push_back(w.get<uint64_t>());
    info.type = w.get<uint32_t>();
    info.offset = w.get<uint64_t>();
    layout.tensors.push_back(info);
  }
  layout.infos_end = w.pos;
  return layout;
}

// ---- Types ---------------------------------------------------------------------------------

TEST(GgufTypesTest, IdsNamesAndGeometry) {
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::Q4_K), 12u);
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::BF16), 30u);
  EXPECT_STREQ(ggml_type_name(GgmlType::Q4_1), "q4_1");
  EXPECT_STREQ(ggml_type_name(GgmlType::Q6_K), "q6_K");
  EXPECT_STREQ(ggml_type_name(static_cast<GgmlType>(99)), "unknown");

  struct Geometry {
    GgmlType type;
    int64_t block_size;
    size_t block_bytes;
  };
  const Geometry supported[] = {
      {GgmlType::F32, 1, 4},      {GgmlType::F16, 1, 2},      {GgmlType::BF16, 1, 2},
      {GgmlType::Q8_0, 32, 34},   {GgmlType::Q4_0, 32, 18},   {GgmlType::Q4_1, 32, 20},
      {GgmlType::Q5_0, 32, 22},   {GgmlType::Q5_1, 32, 24},   {GgmlType::Q4_K, 256, 144},
      {GgmlType::Q5_K, 256, 176}, {GgmlType::Q6_K, 256, 210}, {GgmlType::I32, 1, 4},
  };
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::Q4_1), 3u);
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::Q5_0), 6u);
  EXPECT_EQ(static_cast<uint32_t>(GgmlType::Q5_1), 7u);
  for (const Geometry& g : supported) {
    EXPECT_TRUE(ggml_type_supported(g.type)) << ggml_type_name(g.type);
    EXPECT_EQ(ggml_block_size(g.type), g.block_size) << ggml_type_name(g.type);
    EXPECT_EQ(ggml_block_bytes(g.type), g.block_bytes) << ggml_type_name(g.type);
  }
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q6_K, 512), 420u);
  EXPECT_THROW(ggml_row_bytes(GgmlType::Q4_K, 100), Error);
  EXPECT_FALSE(ggml_type_supported(GgmlType::Q8_1));
  EXPECT_THROW(ggml_block_size(GgmlType::Q8_1), Error);

  for (int i = 0; i < kDTypeCount; ++i) {
    const auto dtype = static_cast<DType>(i);
    // Load-time layouts, never in files.
    if (dtype_unpacked(dtype) != dtype) {
      EXPECT_THROW(ggml_from_dtype(dtype), Error);
      continue;
    }
    EXPECT_EQ(dtype_from_ggml(ggml_from_dtype(dtype)), dtype) << dtype_name(dtype);
    EXPECT_EQ(ggml_block_bytes(ggml_from_dtype(dtype)), dtype_block_bytes(dtype));
  }
  EXPECT_EQ(dtype_from_ggml(GgmlType::Q4_K), DType::Q4_K);
  EXPECT_EQ(dtype_from_ggml(GgmlType::Q6_K), DType::Q6_K);
  EXPECT_FALSE(dtype_from_ggml(GgmlType::Q2_K).has_value());  // no kernels: dequantized at load
}

// ---- Metadata ------------------------------------------------------------------------------

TEST(GgufMetadataTest, EveryValueTypeRoundTrips) {
  const std::string unicode =
      "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\xA6\x99";  // héllo 世界 🦙
  GgufWriter writer;
  writer.set("t.u8", uint8_t{200});
  writer.set("t.i8", int8_t{-100});
  writer.set("t.u16", uint16_t{60000});
  writer.set("t.i16", int16_t{-30000});
  writer.set_u32("t.u32", 4000000000u);
  writer.set_i32("t.i32", -2000000000);
  writer.set_u64("t.u64", 18000000000000000000ull);
  writer.set("t.i64", int64_t{-9000000000000000000});
  writer.set_f32("t.f32", 0.15625f);
  writer.set("t.f64", 1e-300);
  writer.set_bool("t.true", true);
  writer.set_bool("t.false", false);
  writer.set_string("t.string", unicode);
  writer.set_string("t.empty_string", "");
  writer.set_string_array("t.strings", {"a", "", unicode, std::string("nul\0in", 6)});
  writer.set_f32_array("t.floats", {1.5f, -2.25f, 1e30f});
  writer.set_i32_array("t.ints", {-1, 0, 7});
  writer.set_string_array("t.empty_strings", {});
  writer.set_f32_array("t.empty_floats", {});
  writer.set("t.bools", GgufArray{std::vector<bool>{true, false, true}});
  writer.set("t.u64s", GgufArray{std::vector<uint64_t>{1, 1ull << 40}});
  writer.set("t.f64s", GgufArray{std::vector<double>{0.5, -1e200}});
  writer.set("t.nested",
             GgufArray{std::vector<GgufArray>{GgufArray{std::vector<int8_t>{-1, 2}},
                                              GgufArray{std::vector<std::string>{"x"}}}});
  writer.set_u32("t.replaced", 1);
  writer.set_u32("t.replaced", 2);  // replaces in place, keeps the position
  const std::string path = temp_path("every_value_type");
  writer.write(path);

  const GgufFile file = GgufFile::open(path);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.path(), path);

  const std::vector<std::string> expected_keys = {"general.alignment",
                                                  "t.u8",
                                                  "t.i8",
                                                  "t.u16",
                                                  "t.i16",
                                                  "t.u32",
                                                  "t.i32",
                                                  "t.u64",
                                                  "t.i64",
                                                  "t.f32",
                                                  "t.f64",
                                                  "t.true",
                                                  "t.false",
                                                  "t.string",
                                                  "t.empty_string",
                                                  "t.strings",
                                                  "t.floats",
                                                  "t.ints",
                                                  "t.empty_strings",
                                                  "t.empty_floats",
                                                  "t.bools",
                                                  "t.u64s",
                                                  "t.f64s",
                                                  "t.nested",
                                                  "t.replaced"};
  ASSERT_EQ(file.metadata().size(), expected_keys.size());
  for (size_t i = 0; i < expected_keys.size(); ++i) {
    EXPECT_EQ(file.metadata()[i].first, expected_keys[i]);
  }

  // Stored types are the GGUF ids of what was set.
  EXPECT_EQ(file.find("general.alignment")->type(), GgufValueType::U32);
  EXPECT_EQ(file.find("t.u8")->type(), GgufValueType::U8);
  EXPECT_EQ(file.find("t.i8")->type(), GgufValueType::I8);
  EXPECT_EQ(file.find("t.u16")->type(), GgufValueType::U16);
  EXPECT_EQ(file.find("t.i16")->type(), GgufValueType::I16);
  EXPECT_EQ(file.find("t.i32")->type(), GgufValueType::I32);
  EXPECT_EQ(file.find("t.u64")->type(), GgufValueType::U64);
  EXPECT_EQ(file.find("t.i64")->type(), GgufValueType::I64);
  EXPECT_EQ(file.find("t.f32")->type(), GgufValueType::F32);
  EXPECT_EQ(file.find("t.f64")->type(), GgufValueType::F64);
  EXPECT_EQ(file.find("t.true")->type(), GgufValueType::Bool);
  EXPECT_EQ(file.find("t.string")->type(), GgufValueType::String);
  EXPECT_EQ(file.find("t.strings")->type(), GgufValueType::Array);
  EXPECT_EQ(file.find("t.empty_floats")->get_if<GgufArray>()->element_type(), GgufValueType::F32);
  EXPECT_EQ(file.find("t.empty_strings")->get_if<GgufArray>()->element_type(),
            GgufValueType::String);
  EXPECT_EQ(file.find("missing"), nullptr);

  // Values: exact, via the typed accessors.
  EXPECT_EQ(file.get_int("general.alignment"), 32);
  EXPECT_EQ(file.get_int("t.u8"), 200);
  EXPECT_EQ(file.get_int("t.i8"), -100);
  EXPECT_EQ(file.get_int("t.u16"), 60000);
  EXPECT_EQ(file.get_int("t.i16"), -30000);
  EXPECT_EQ(file.get_int("t.u32"), 4000000000);
  EXPECT_EQ(file.get_int("t.i32"), -2000000000);
  EXPECT_EQ(*file.find("t.u64")->get_if<uint64_t>(), 18000000000000000000ull);
  EXPECT_EQ(file.get_int("t.i64"), -9000000000000000000);
  EXPECT_EQ(file.get_float("t.f32"), 0.15625);
  EXPECT_EQ(file.get_float("t.f64"), 1e-300);
  EXPECT_EQ(file.get_float("t.i8"), -100.0);  // integers convert to float
  EXPECT_TRUE(file.get_bool("t.true"));
  EXPECT_FALSE(file.get_bool("t.false"));
  EXPECT_EQ(file.get_string("t.string"), unicode);
  EXPECT_EQ(file.get_string("t.empty_string"), "");
  EXPECT_EQ(file.get_string_array("t.strings"),
            (std::vector<std::string>{"a", "", unicode, std::string("nul\0in", 6)}));
  EXPECT_EQ(file.get_float_array("t.floats"), (std::vector<double>{1.5, -2.25, double{1e30f}}));
  EXPECT_EQ(file.get_int_array("t.ints"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(file.get_float_array("t.ints"), (std::vector<double>{-1, 0, 7}));
  EXPECT_TRUE(file.get_string_array("t.empty_strings").empty());
  EXPECT_TRUE(file.get_float_array("t.empty_floats").empty());
  EXPECT_EQ(*file.find("t.bools"), GgufValue(GgufArray{std::vector<bool>{true, false, true}}));
  EXPECT_EQ(file.get_int_array("t.u64s"), (std::vector<int64_t>{1, int64_t{1} << 40}));
  EXPECT_EQ(file.get_float_array("t.f64s"), (std::vector<double>{0.5, -1e200}));
  const auto* nested = file.find("t.nested")->get_if<GgufArray>();
  ASSERT_NE(nested, nullptr);
  const auto& inner = std::get<std::vector<GgufArray>>(nested->values);
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(std::get<std::vector<int8_t>>(inner[0].values), (std::vector<int8_t>{-1, 2}));
  EXPECT_EQ(std::get<std::vector<std::string>>(inner[1].values), std::vector<std::string>{"x"});
  EXPECT_EQ(file.get_int("t.replaced"), 2);

  // The optional variants.
  EXPECT_EQ(file.find_int("t.u16"), 60000);
  EXPECT_EQ(file.find_int("missing"), std::nullopt);
  EXPECT_EQ(file.find_float("t.f32"), 0.15625);
  EXPECT_EQ(file.find_string("t.string"), unicode);
  EXPECT_EQ(file.find_bool("t.true"), true);
  EXPECT_EQ(file.find_bool("missing"), std::nullopt);
}

TEST(GgufMetadataTest, AccessorsNameTheKeyOnError) {
  GgufWriter writer;
  writer.set_string("name", "llama");
  writer.set_u64("huge", 1ull << 63);
  writer.set_f32("eps", 1e-5f);
  writer.set_f32_array("floats", {1.0f});
  writer.set_string_array("strings", {"a"});
  writer.set("huge_elements", GgufArray{std::vector<uint64_t>{1ull << 63}});
  const std::string path = temp_path("accessor_errors");
  writer.write(path);
  const GgufFile file = GgufFile::open(path);

  const auto expect_error = [&](const std::function<void()>& call,
                                std::initializer_list<std::string> fragments) {
    try {
      call();
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.rfind("[gguf] " + path + ": ", 0), 0u) << message;
      for (const std::string& f : fragments) {
        EXPECT_NE(message.find(f), std::string::npos) << "expected '" << f << "' in: " << message;
      }
      return;
    }
    ADD_FAILURE() << "no error";
  };
  expect_error([&] { file.get_string("nope"); }, {"missing key 'nope'"});
  expect_error([&] { file.get_int("name"); }, {"key 'name'", "string", "integer"});
  expect_error([&] { file.get_int("eps"); }, {"key 'eps'", "f32"});
  expect_error([&] { file.get_int("huge"); }, {"key 'huge'", "9223372036854775808", "int64"});
  expect_error([&] { file.get_float("name"); }, {"key 'name'"});
  expect_error([&] { file.get_bool("eps"); }, {"key 'eps'", "bool"});
  expect_error([&] { file.get_string("eps"); }, {"key 'eps'", "string"});
  expect_error([&] { file.get_string_array("floats"); }, {"key 'floats'", "array<f32>"});
  expect_error([&] { file.get_float_array("strings"); }, {"key 'strings'", "array<string>"});
  expect_error([&] { file.get_int_array("floats"); }, {"key 'floats'"});
  expect_error([&] { file.get_int_array("name"); }, {"key 'name'"});
  expect_error([&] { file.get_int_array("huge_elements"); }, {"does not fit in int64"});
  // A present key of the wrong type is an error even for the optional variants.
  expect_error([&] { file.find_int("name"); }, {"key 'name'"});
  EXPECT_EQ(file.get_float("huge"), 9223372036854775808.0);
}

// ---- Tensors -------------------------------------------------------------------------------

TEST(GgufTensorTest, TensorsRoundTripWithReversedDimsAndAlignedData) {
  // F32 1-D (odd size, so the next tensor needs padding), F16 2-D, Q8_0 2-D, Q4_0 1-D and 2-D,
  // BF16 3-D, I32 1-D.
  std::vector<float> f32_values(7);
  for (size_t i = 0; i < f32_values.size(); ++i) f32_values[i] = 0.5f * static_cast<float>(i) - 1;
  std::vector<uint16_t> f16_values(3 * 64);
  for (size_t i = 0; i < f16_values.size(); ++i) {
    f16_values[i] = f32_to_f16(static_cast<float>(i) / 8 - 10);
  }
  std::vector<float> q_source(2 * 64);
  for (size_t i = 0; i < q_source.size(); ++i) {
    q_source[i] = std::sin(static_cast<float>(i)) * 3;
  }
  std::vector<BlockQ8_0> q8_blocks(4);
  quantize_row_q8_0(q_source.data(), q8_blocks.data(), 128);
  std::vector<BlockQ4_0> q4_blocks(4);
  quantize_row_q4_0(q_source.data(), q4_blocks.data(), 128);
  std::vector<uint16_t> bf16_values(2 * 3 * 4);
  for (size_t i = 0; i < bf16_values.size(); ++i) {
    bf16_values[i] = f32_to_bf16(static_cast<float>(i) * 0.25f);
  }
  const std::vector<int32_t> i32_values = {-5, 0, 123456789};

  struct Source {
    std::string name;
    GgmlType type;
    Shape shape;
    std::vector<uint64_t> file_dims;
    const void* data;
    size_t nbytes;
  };
  const std::vector<Source> sources = {
      {"f32_1d", GgmlType::F32, Shape{7}, {7}, f32_values.data(), 28},
      {"f16_2d", GgmlType::F16, Shape{3, 64}, {64, 3}, f16_values.data(), 384},
      {"q8_0_2d", GgmlType::Q8_0, Shape{2, 64}, {64, 2}, q8_blocks.data(), 4 * 34},
      {"q4_0_1d", GgmlType::Q4_0, Shape{128}, {128}, q4_blocks.data(), 4 * 18},
      {"q4_0_2d", GgmlType::Q4_0, Shape{4, 32}, {32, 4}, q4_blocks.data(), 4 * 18},
      {"bf16_3d", GgmlType::BF16, Shape{2, 3, 4}, {4, 3, 2}, bf16_values.data(), 48},
      {"i32_1d", GgmlType::I32, Shape{3}, {3}, i32_values.data(), 12},
  };
  GgufWriter writer;
  writer.set_string("general.architecture", "test");
  for (const Source& s : sources) writer.add_tensor(s.name, s.type, s.shape, s.data, s.nbytes);
  const std::string path = temp_path("tensors");
  writer.write(path);

  // The bytes, parsed here without the reader.
  const std::vector<uint8_t> bytes = read_file(path);
  const FileLayout layout = parse_layout(bytes);
  EXPECT_EQ(layout.version, 3u);
  ASSERT_EQ(layout.keys.size(), 2u);
  EXPECT_EQ(layout.keys[0], "general.alignment");
  EXPECT_EQ(layout.value_types[0], 4u);  // u32
  ASSERT_EQ(layout.tensors.size(), sources.size());
  const size_t data_start = (layout.infos_end + 31) / 32 * 32;
  for (size_t i = 0; i < data_start - layout.infos_end; ++i) {
    EXPECT_EQ(bytes[layout.infos_end + i], 0) << "padding before the data must be zeros";
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    const FileTensorInfo& info = layout.tensors[i];
    EXPECT_EQ(info.name, sources[i].name);
    EXPECT_EQ(info.dims, sources[i].file_dims) << info.name;  // innermost first in the file
    EXPECT_EQ(info.type, static_cast<uint32_t>(sources[i].type)) << info.name;
    EXPECT_EQ(info.offset % 32, 0u) << info.name;
    ASSERT_LE(data_start + info.offset + sources[i].nbytes, bytes.size());
    EXPECT_EQ(
        std::memcmp(bytes.data() + data_start + info.offset, sources[i].data, sources[i].nbytes), 0)
        << info.name;
  }
  // Tensors are stored in insertion order, packed with padding to 32 (and padded at the end).
  EXPECT_EQ(layout.tensors[0].offset, 0u);
  EXPECT_EQ(layout.tensors[1].offset, 32u);
  EXPECT_EQ(layout.tensors[2].offset, 32u + 384u);
  EXPECT_EQ(bytes.size() % 32, 0u);
  for (size_t i = data_start + 28; i < data_start + 32; ++i) EXPECT_EQ(bytes[i], 0);

  // The reader agrees.
  GgufTensor kept;
  {
    const GgufFile file = GgufFile::open(path);
    EXPECT_EQ(file.data_offset(), data_start);
    ASSERT_EQ(file.tensors().size(), sources.size());
    const uint8_t* base = file.file()->data();
    const size_t size = file.file()->size();
    for (size_t i = 0; i < sources.size(); ++i) {
      const GgufTensor& t = file.tensors()[i];
      EXPECT_EQ(t.name, sources[i].name);
      EXPECT_EQ(t.type, sources[i].type);
      EXPECT_EQ(t.shape, sources[i].shape) << t.name << " " << t.shape.to_string();
      EXPECT_EQ(t.nbytes, sources[i].nbytes);
      EXPECT_GE(t.data, base);
      EXPECT_LE(t.data + t.nbytes, base + size);
      EXPECT_EQ(static_cast<size_t>(t.data - base), t.file_offset);
      EXPECT_EQ(t.file_offset, data_start + layout.tensors[i].offset);
      EXPECT_EQ(t.file_offset % 32, 0u);
      EXPECT_EQ(std::memcmp(t.data, sources[i].data, t.nbytes), 0) << t.name;
      EXPECT_EQ(file.find_tensor(t.name), &t);
    }
    EXPECT_EQ(file.find_tensor("absent"), nullptr);
    EXPECT_EQ(file.get_string("general.architecture"), "test");

    // Rows dequantize to what was stored.
    const GgufTensor& f16 = *file.find_tensor("f16_2d");
    std::vector<float> row(64);
    dequantize_row_ggml(f16.type, f16.data + 2 * 128, row.data(), 64);  // row 2
    for (int i = 0; i < 64; ++i) EXPECT_EQ(row[i], static_cast<float>(128 + i) / 8 - 10);
    const GgufTensor& f32 = *file.find_tensor("f32_1d");
    std::vector<float> f32_row(7);
    dequantize_row_ggml(f32.type, f32.data, f32_row.data(), 7);
    EXPECT_EQ(f32_row, f32_values);
    const GgufTensor& bf16 = *file.find_tensor("bf16_3d");
    std::vector<float> bf16_row(24);
    dequantize_row_ggml(bf16.type, bf16.data, bf16_row.data(), 24);
    for (int i = 0; i < 24; ++i) EXPECT_EQ(bf16_row[i], static_cast<float>(i) * 0.25f);
    std::vector<float> expected(128);
    std::vector<float> actual(128);
    dequantize_row_q8_0(q8_blocks.data(), expected.data(), 128);
    dequantize_row_ggml(GgmlType::Q8_0, file.find_tensor("q8_0_2d")->data, actual.data(), 128);
    EXPECT_EQ(actual, expected);
    dequantize_row_q4_0(q4_blocks.data(), expected.data(), 128);
    dequantize_row_ggml(GgmlType::Q4_0, file.find_tensor("q4_0_1d")->data, actual.data(), 128);
    EXPECT_EQ(actual, expected);
    kept = *file.find_tensor("i32_1d");
  }
  // A tensor keeps its mapping alive after the GgufFile is gone.
  int32_t last;
  std::memcpy(&last, kept.data + 8, 4);
  EXPECT_EQ(last, 123456789);
}

TEST(GgufTensorTest, ReadsVersion2AndCustomAlignment) {
  std::vector<float> values(5, 2.0f);
  GgufWriter writer;
  writer.set_u32("general.alignment", 64);
  writer.add_tensor("a", GgmlType::F32, Shape{5}, values.data(), 20);
  writer.add_tensor("b", GgmlType::F32, Shape{1, 5}, values.data(), 20);
  const std::string path = temp_path("alignment64");
  writer.write(path);
  {
    const GgufFile file = GgufFile::open(path);
    EXPECT_EQ(file.alignment(), 64u);
    EXPECT_EQ(file.metadata().size(), 1u);  // the explicit key is not written twice
    EXPECT_EQ(file.data_offset() % 64, 0u);
    EXPECT_EQ(file.tensors()[1].file_offset - file.tensors()[0].file_offset, 64u);
  }
  // Version 2 has the same layout as version 3 for little-endian files.
  std::vector<uint8_t> bytes = read_file(path);
  bytes[4] = 2;
  write_file(path, bytes);
  EXPECT_EQ(GgufFile::open(path).version(), 2u);
}

TEST(GgufTensorTest, KQuantTensorsRoundTrip) {
  std::vector<uint8_t> blocks(2 * 210);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<uint8_t>(i * 37 + 11);
  // Keep the fp16 d finite: the last two bytes of each Q6_K block.
  for (size_t b = 0; b < 2; ++b) {
    blocks[b * 210 + 208] = 0x00;
    blocks[b * 210 + 209] = 0x3c;
  }
  GgufWriter writer;
  writer.add_tensor("q6", GgmlType::Q6_K, Shape{2, 256}, blocks.data(), blocks.size());
  writer.add_tensor("q4", GgmlType::Q4_K, Shape{1, 256}, blocks.data(), 144);
  writer.add_tensor("q5", GgmlType::Q5_K, Shape{256}, blocks.data(), 176);
  const std::string path = temp_path("kquant_tensors");
  writer.write(path);
  const GgufFile file = GgufFile::open(path);
  const GgufTensor& q6 = *file.find_tensor("q6");
  EXPECT_EQ(q6.shape, (Shape{2, 256}));
  EXPECT_EQ(q6.nbytes, 420u);
  std::vector<float> expected(512);
  std::vector<float> actual(512);
  dequantize_row_q6_K(blocks.data(), expected.data(), 512);
  dequantize_row_ggml(GgmlType::Q6_K, q6.data, actual.data(), 512);
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(file.find_tensor("q4")->nbytes, 144u);
  EXPECT_EQ(file.find_tensor("q5")->nbytes, 176u);
}

// Q4_1, Q5_0 and Q5_1 tensors are written and read back byte for byte, their sizes follow the block
// geometry, and dequantize_row_ggml decodes them as the core dequantizers do.
TEST(GgufTensorTest, OffsetAndFiveBitTensorsRoundTrip) {
  std::vector<float> values(3 * 64);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f + static_cast<float>(i % 5);
  std::vector<BlockQ4_1> q41(6);
  std::vector<BlockQ5_0> q50(6);
  std::vector<BlockQ5_1> q51(6);
  quantize_row_q4_1(values.data(), q41.data(), 192);
  quantize_row_q5_0(values.data(), q50.data(), 192);
  quantize_row_q5_1(values.data(), q51.data(), 192);
  GgufWriter writer;
  writer.add_tensor("q4_1", GgmlType::Q4_1, Shape{3, 64}, q41.data(), 120);
  writer.add_tensor("q5_0", GgmlType::Q5_0, Shape{3, 64}, q50.data(), 132);
  writer.add_tensor("q5_1", GgmlType::Q5_1, Shape{3, 64}, q51.data(), 144);
  const std::string path = temp_path("offset_tensors");
  writer.write(path);
  const GgufFile file = GgufFile::open(path);
  struct Stored {
    const char* name;
    DType dtype;
    const void* bytes;
    size_t nbytes;
    void (*dequantize)(const void*, float*, int64_t);
  };
  const Stored stored[] = {
      {"q4_1", DType::Q4_1, q41.data(), 120,
       [](const void* b, float* y, int64_t n) {
         dequantize_row_q4_1(static_cast<const BlockQ4_1*>(b), y, n);
       }},
      {"q5_0", DType::Q5_0, q50.data(), 132,
       [](const void* b, float* y, int64_t n) {
         dequantize_row_q5_0(static_cast<const BlockQ5_0*>(b), y, n);
       }},
      {"q5_1", DType::Q5_1, q51.data(), 144,
       [](const void* b, float* y, int64_t n) {
         dequantize_row_q5_1(static_cast<const BlockQ5_1*>(b), y, n);
       }},
  };
  for (const Stored& s : stored) {
    const GgufTensor& t = *file.find_tensor(s.name);
    EXPECT_EQ(t.shape, (Shape{3, 64})) << s.name;
    ASSERT_EQ(t.nbytes, s.nbytes) << s.name;
    EXPECT_EQ(std::memcmp(t.data, s.bytes, s.nbytes), 0) << s.name;
    EXPECT_EQ(dtype_from_ggml(t.type), s.dtype) << s.name;
    std::vector<float> expected(192), actual(192);
    s.dequantize(s.bytes, expected.data(), 192);
    dequantize_row_ggml(t.type, t.data, actual.data(), 192);
    EXPECT_EQ(actual, expected) << s.name;
  }
}

TEST(GgufWriterTest, RejectsBadTensorsAndAlignment) {
  std::vector<float> values(64);
  GgufWriter writer;
  writer.add_tensor("w", GgmlType::F32, Shape{64}, values.data(), 256);
  EXPECT_THROW(writer.add_tensor("w", GgmlType::F32, Shape{64}, values.data(), 256), Error);
  EXPECT_THROW(writer.add_tensor("x", GgmlType::F32, Shape{64}, values.data(), 255), Error);
  EXPECT_THROW(writer.add_tensor("x", GgmlType::Q8_0, Shape{16}, values.data(), 17), Error);
  EXPECT_THROW(writer.add_tensor("x", GgmlType::Q8_1, Shape{32}, values.data(), 36), Error);
  EXPECT_THROW(writer.add_tensor("x", GgmlType::Q4_1, Shape{32}, values.data(), 18), Error);
  EXPECT_THROW(writer.add_tensor("x", GgmlType::F32, Shape{}, values.data(), 4), Error);
  EXPECT_THROW(writer.add_tensor(std::string(64, 'n'), GgmlType::F32, Shape{1}, values.data(), 4),
               Error);
  writer.set_u32("general.alignment", 48);
  EXPECT_THROW(writer.write(temp_path("bad_alignment")), Error);
  writer.set_u64("general.alignment", 64);
  EXPECT_THROW(writer.write(temp_path("bad_alignment")), Error);
}

}  // namespace
}  // namespace edgelm
