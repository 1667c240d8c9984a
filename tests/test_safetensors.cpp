// Safetensors loader and writer: round trips, layout, sharded folders, and that every kind of bad
// input gives one clear edgelm::Error (never a crash or an out-of-bounds read; run under ASan).
#include "models/safetensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the edgelm::Error that `action` throws; a test failure when it throws none.
std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no edgelm::Error was thrown";
  return {};
}

std::string le64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(value >> (8 * i));
  return bytes;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A file from a hand-written header (no padding) and `data_bytes` bytes of data.
std::string file_bytes(const std::string& header, size_t data_bytes) {
  std::string data(data_bytes, '\0');
  for (size_t i = 0; i < data_bytes; ++i) data[i] = static_cast<char>(i * 7 + 1);
  return le64(header.size()) + header + data;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

size_t nbytes_of(DType dtype, const Shape& shape) {
  return static_cast<size_t>(shape.numel()) * dtype_block_bytes(dtype);
}

// A tensor to write, owning its random contents.
struct Source {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

Source make_source(std::string name, DType dtype, Shape shape, uint32_t seed) {
  std::vector<uint8_t> bytes = random_bytes(nbytes_of(dtype, shape), seed);
  return {std::move(name), dtype, shape, std::move(bytes)};
}

std::vector<SafetensorsWriteTensor> write_list(const std::vector<Source>& sources) {
  std::vector<SafetensorsWriteTensor> list;
  for (const Source& s : sources) list.push_back({s.name, s.dtype, s.shape, s.bytes.data()});
  return list;
}

// Checks that `tensor` holds exactly `source`, inside its own mapping.
void expect_matches(const SafetensorsTensor& tensor, const Source& source) {
  SCOPED_TRACE(source.name);
  EXPECT_EQ(tensor.name, source.name);
  EXPECT_EQ(tensor.dtype, source.dtype);
  EXPECT_EQ(tensor.shape.to_string(), source.shape.to_string());
  ASSERT_EQ(tensor.nbytes, source.bytes.size());
  ASSERT_NE(tensor.file, nullptr);
  if (tensor.nbytes > 0) {
    EXPECT_EQ(std::memcmp(tensor.data, source.bytes.data(), tensor.nbytes), 0);
  }
  const uint8_t* begin = tensor.file->data();
  EXPECT_GE(tensor.data, begin);
  EXPECT_LE(tensor.data + tensor.nbytes, begin + tensor.file->size());
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           str_cat("edgelm_", info->test_suite_name(), "_", info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // A fresh, empty sub-folder.
  std::string folder(const std::string& name) const {
    const fs::path sub = dir_ / name;
    fs::remove_all(sub);
    fs::create_directories(sub);
    return sub.string();
  }

  // The error of opening `bytes` as a safetensors file; checks the "[safetensors] <path>: " prefix.
  std::string open_error(const std::string& bytes) {
    const std::string file = path("bad.safetensors");
    write_file(file, bytes);
    const std::string message = error_message([&] { SafetensorsFile::open(file); });
    const std::string prefix = str_cat("[safetensors] ", file, ": ");
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
    return message;
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, RoundTripsEveryDtypeWithMetadata) {
  // Names are not in alphabetical order, so the data order (tensors()) is what is tested.
  const std::vector<Source> sources = {
      make_source("z.f32", DType::F32, Shape{3, 5}, 1),
      make_source("a.f32", DType::F32, Shape{7}, 2),
      make_source("y.f16", DType::F16, Shape{2, 3, 4}, 3),
      make_source("b.f16", DType::F16, Shape{5, 1}, 4),
      make_source("x.bf16", DType::BF16, Shape{4, 4}, 5),
      make_source("c.bf16", DType::BF16, Shape{1, 2, 3, 1}, 6),
      make_source("w.i32", DType::I32, Shape{6}, 7),
      make_source("d.i32", DType::I32, Shape{2, 2}, 8),
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"note", "h\xc3\xa9llo \"quoted\""}};
  const std::string file = path("round.safetensors");
  write_safetensors(file, write_list(sources), metadata);

  const SafetensorsFile st = SafetensorsFile::open(file);
  EXPECT_EQ(st.path(), file);
  EXPECT_EQ(st.metadata(), metadata);
  ASSERT_EQ(st.tensors().size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    expect_matches(st.tensors()[i], sources[i]);
    const SafetensorsTensor* found = st.find(sources[i].name);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found, &st.tensors()[i]);
  }
  EXPECT_EQ(st.find("missing"), nullptr);
}

TEST_F(SafetensorsTest, RoundTripsScalarVectorFourDAndEmptyTensors) {
  const std::vector<Source> sources = {
      make_source("scalar", DType::F32, Shape{}, 11),
      make_source("vector", DType::F16, Shape{9}, 12),
      make_source("four_d", DType::BF16, Shape{2, 3, 1, 5}, 13),
      make_source("empty", DType::F32, Shape{3, 0}, 14),
      make_source("last", DType::I32, Shape{1}, 15),
  };
  const std::string file = path("ranks.safetensors");
  write_safetensors(file, write_list(sources));

  const SafetensorsFile st = SafetensorsFile::open(file);
  EXPECT_TRUE(st.metadata().empty());
  ASSERT_EQ(st.tensors().size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) expect_matches(st.tensors()[i], sources[i]);
  const SafetensorsTensor& scalar = *st.find("scalar");
  EXPECT_EQ(scalar.shape.rank(), 0);
  EXPECT_EQ(scalar.nbytes, 4u);
  EXPECT_EQ(st.find("four_d")->shape.rank(), 4);
  EXPECT_EQ(st.find("empty")->nbytes, 0u);
}

TEST_F(SafetensorsTest, WritesTheDocumentedLayout) {
  // Checked against the format itself, not against our reader.
  const std::vector<Source> sources = {
      make_source("first", DType::F16, Shape{3}, 21),
      make_source("second", DType::F32, Shape{2, 2}, 22),
  };
  const std::string file = path("layout.safetensors");
  write_safetensors(file, write_list(sources), {{"k", "v"}});
  const std::string bytes = read_file(file);

  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) {
    header_bytes |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  EXPECT_EQ(header_bytes % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + header_bytes + 6 + 16);
  const auto header = nlohmann::ordered_json::parse(bytes.substr(8, header_bytes));
  ASSERT_TRUE(header.is_object());
  EXPECT_EQ(header.begin().key(), "__metadata__");
  EXPECT_EQ(header["__metadata__"], nlohmann::ordered_json({{"k", "v"}}));
  EXPECT_EQ(header["first"]["dtype"], "F16");
  EXPECT_EQ(header["first"]["shape"], nlohmann::ordered_json::array({3}));
  EXPECT_EQ(header["first"]["data_offsets"], nlohmann::ordered_json::array({0, 6}));
  EXPECT_EQ(header["second"]["dtype"], "F32");
  EXPECT_EQ(header["second"]["shape"], nlohmann::ordered_json::array({2, 2}));
  EXPECT_EQ(header["second"]["data_offsets"], nlohmann::ordered_json::array({6, 22}));
  const std::string data = bytes.substr(8 + header_bytes);
  EXPECT_EQ(std::memcmp(data.data(), sources[0].bytes.data(), 6), 0);
  EXPECT_EQ(std::memcmp(data.data() + 6, sources[1].bytes.data(), 16), 0);
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

TEST_F(SafetensorsTest, WritesAnEmptyFileAndOverwrites) {
  const std::string file = path("empty.safetensors");
  const Source big = make_source("big", DType::F32, Shape{100}, 31);
  write_safetensors(file, write_list({big}));
  write_safetensors(file, {}, {{"only", "metadata"}});
  const SafetensorsFile st = SafetensorsFile::open(file);
  EXPECT_TRUE(st.tensors().empty());
  EXPECT_EQ(st.metadata().at("only"), "metadata");
}

TEST_F(SafetensorsTest, ReadsAHandBuiltFile) {
  // Unpadded header, entries in neither name nor data order, an unknown key, a null metadata.
  const std::string header =
      R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12],"extra":1},)"
      R"("a":{"dtype":"I32","shape":[],"data_offsets":[0,4]},"__metadata__":null})";
  std::string bytes = le64(header.size()) + header;
  const int32_t a = -7;
  const float b[2] = {1.5f, -2.25f};
  bytes.append(reinterpret_cast<const char*>(&a), 4);
  bytes.append(reinterpret_cast<const char*>(b), 8);
  const std::string file = path("hand.safetensors");
  write_file(file, bytes);

  const SafetensorsFile st = SafetensorsFile::open(file);
  EXPECT_TRUE(st.metadata().empty());
  ASSERT_EQ(st.tensors().size(), 2u);
  EXPECT_EQ(st.tensors()[0].name, "a");  // data order
  EXPECT_EQ(st.tensors()[1].name, "b");
  int32_t a_read = 0;
  std::memcpy(&a_read, st.find("a")->data, 4);
  EXPECT_EQ(a_read, a);
  float b_read[2] = {};
  std::memcpy(b_read, st.find("b")->data, 8);
  EXPECT_EQ(b_read[0], b[0]);
  EXPECT_EQ(b_read[1], b[1]);
  EXPECT_EQ(st.find("b")->data, st.tensors()[0].file->data() + 8 + header.size() + 4);
}

TEST_F(SafetensorsTest, DataPointsIntoTheMappingAndOutlivesTheFile) {
  const std::vector<Source> sources = {
      make_source("one", DType::F32, Shape{16, 16}, 41),
      make_source("two", DType::BF16, Shape{33}, 42),
  };
  const std::string file = path("mapped.safetensors");
  write_safetensors(file, write_list(sources));

  SafetensorsTensor kept;
  {
    const SafetensorsFile st = SafetensorsFile::open(file);
    const std::shared_ptr<MappedFile>& mapping = st.tensors()[0].file;
    ASSERT_NE(mapping, nullptr);
    EXPECT_EQ(mapping->size(), fs::file_size(file));
    for (const SafetensorsTensor& tensor : st.tensors()) {
      EXPECT_EQ(tensor.file, mapping);  // one mapping, shared
      EXPECT_GE(tensor.data, mapping->data());
      EXPECT_LE(tensor.data + tensor.nbytes, mapping->data() + mapping->size());
    }
    // The last tensor's data ends the file: nothing was copied or reordered.
    EXPECT_EQ(st.tensors()[1].data + st.tensors()[1].nbytes, mapping->data() + mapping->size());
    kept = st.tensors()[1];
  }
  expect_matches(kept, sources[1]);
}

// Releasing pages of a mapping (after a loader copied a tensor out) keeps every byte readable
// and unchanged; ranges outside the mapping are ignored.
TEST_F(SafetensorsTest, ReleasedPagesReadBackUnchanged) {
  const std::vector<Source> sources = {make_source("big", DType::F32, Shape{256, 64}, 61)};
  const std::string file = path("released.safetensors");
  write_safetensors(file, write_list(sources));
  const SafetensorsFile st = SafetensorsFile::open(file);
  const SafetensorsTensor& tensor = st.tensors()[0];
  std::vector<uint8_t> before(tensor.data, tensor.data + tensor.nbytes);
  tensor.file->release(tensor.data, tensor.nbytes);
  tensor.file->release(before.data(), before.size());  // not in the mapping: ignored
  EXPECT_EQ(std::memcmp(before.data(), tensor.data, tensor.nbytes), 0);
  expect_matches(tensor, sources[0]);
}

TEST_F(SafetensorsTest, OpensASingleFileFolder) {
  const std::string dir = folder("single");
  const std::vector<Source> sources = {make_source("w", DType::F16, Shape{4, 2}, 51)};
  write_safetensors((fs::path(dir) / "model.safetensors").string(), write_list(sources));
  // model.safetensors wins over an index (here a broken one, which must not be read).
  write_file((fs::path(dir) / "model.safetensors.index.json").string(), "not json");

  const SafetensorsModel model = SafetensorsModel::open(dir);
  EXPECT_EQ(model.n_files(), 1u);
  EXPECT_EQ(model.names(), std::vector<std::string>{"w"});
  expect_matches(model.get("w"), sources[0]);
}

TEST_F(SafetensorsTest, ResolvesEveryTensorOfAShardedFolder) {
  const std::string dir = folder("sharded");
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";
  const std::vector<Source> sources1 = {
      make_source("model.embed_tokens.weight", DType::BF16, Shape{8, 4}, 61),
      make_source("model.layers.0.mlp.up_proj.weight", DType::F32, Shape{6, 4}, 62),
  };
  const std::vector<Source> sources2 = {
      make_source("model.layers.1.mlp.up_proj.weight", DType::F16, Shape{6, 4}, 63),
      make_source("lm_head.weight", DType::F32, Shape{8, 4}, 64),
  };
  write_safetensors((fs::path(dir) / shard1).string(), write_list(sources1));
  write_safetensors((fs::path(dir) / shard2).string(), write_list(sources2));
  nlohmann::json index = {{"metadata", {{"total_size", 400}}},
                          {"weight_map", nlohmann::json::object()}};
  for (const Source& s : sources1) index["weight_map"][s.name] = shard1;
  for (const Source& s : sources2) index["weight_map"][s.name] = shard2;
  write_file((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(2));

  const SafetensorsModel model = SafetensorsModel::open(dir);
  EXPECT_EQ(model.n_files(), 2u);
  EXPECT_EQ(model.names(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight",
                                                     "model.layers.0.mlp.up_proj.weight",
                                                     "model.layers.1.mlp.up_proj.weight"}));
  for (const Source& s : sources1) {
    expect_matches(model.get(s.name), s);
    EXPECT_EQ(model.get(s.name).file->path(), (fs::path(dir) / shard1).string());
  }
  for (const Source& s : sources2) {
    expect_matches(model.get(s.name), s);
    EXPECT_EQ(model.get(s.name).file->path(), (fs::path(dir) / shard2).string());
  }
  EXPECT_EQ(model.find("nope"), nullptr);
  EXPECT_EQ(error_message([&] { model.get("nope"); }),
            str_cat("[safetensors] ", dir, ": no tensor 'nope'"));

  // A copy stays usable after the original is gone.
  std::unique_ptr<SafetensorsModel> original = std::make_unique<SafetensorsModel>(model);
  const SafetensorsModel copy = *original;
  original.reset();
  expect_matches(copy.get("lm_head.weight"), sources2[1]);
}

TEST_F(SafetensorsTest, ReportsAMissingOrUnreadableFile) {
  const std::string missing = path("missing.safetensors");
  std::string message = error_message([&] { SafetensorsFile::open(missing); });
  EXPECT_EQ(message.rfind(str_cat("[safetensors] ", missing, ": cannot open"), 0), 0u) << message;

  const std::string dir = folder("a_folder");
  message = error_message([&] { SafetensorsFile::open(dir); });
  EXPECT_EQ(message.rfind(str_cat("[safetensors] ", dir, ": "), 0), 0u) << message;
  EXPECT_TRUE(contains(message, "not a regular file")) << message;
}

TEST_F(SafetensorsTest, RejectsEveryKindOfBadFile) {
  // A valid entry for tensor 'x' with the given fields.
  const auto entry = [](const std::string& dtype, const std::string& shape,
                        const std::string& offsets) {
    return str_cat(R"({"x":{"dtype":)", dtype, R"(,"shape":)", shape, R"(,"data_offsets":)",
                   offsets, "}}");
  };
  struct Case {
    const char* label;
    std::string bytes;
    std::string expected;
  };
  const uint64_t max_u64 = std::numeric_limits<uint64_t>::max();
  const std::vector<Case> cases = {
      {"empty file", "", "file is 0 bytes, shorter than the 8-byte header length"},
      {"7 bytes", std::string("\x02\0\0\0\0\0\0", 7), "file is 7 bytes"},
      {"header longer than file", le64(1000) + "{}",
       "header length 1000 is larger than the 2 bytes that follow it (file size 10)"},
      {"absurd header length", le64(uint64_t{1} << 40) + "{}",
       "header length 1099511627776 exceeds the limit of 100000000 bytes"},
      {"max header length", le64(max_u64) + "{}", "exceeds the limit of 100000000 bytes"},
      {"truncated JSON", file_bytes(R"({"x": )", 0), "malformed JSON header: parse error at"},
      {"empty header", file_bytes("", 0), "malformed JSON header"},
      {"trailing garbage", file_bytes("{} x", 0), "malformed JSON header"},
      {"invalid UTF-8", file_bytes("{\"\xff\": 1}", 0), "malformed JSON header"},
      {"NUL padding", file_bytes(std::string("{}\0\0", 4), 0),
       "malformed JSON header: NUL byte at offset 2"},
      {"header is an array", file_bytes("[1, 2]", 0), "header is not a JSON object (it is array)"},
      {"header is a string", file_bytes(R"("x")", 0), "header is not a JSON object (it is \"x\")"},
      {"entry not an object", file_bytes(R"({"x": 3})", 0),
       "tensor 'x': entry is not an object (it is 3)"},
      {"missing dtype", file_bytes(R"({"x":{"shape":[1],"data_offsets":[0,4]}})", 4),
       "tensor 'x': missing \"dtype\""},
      {"dtype not a string", file_bytes(entry("7", "[1]", "[0,4]"), 4),
       "tensor 'x': \"dtype\" is not a string (it is 7)"},
      {"unsupported dtype", file_bytes(entry(R"("F64")", "[1]", "[0,8]"), 8),
       "tensor 'x': unsupported dtype F64 (supported: F32, F16, BF16, I32)"},
      {"lower-case dtype", file_bytes(entry(R"("f32")", "[1]", "[0,4]"), 4),
       "tensor 'x': unsupported dtype f32"},
      {"missing shape", file_bytes(R"({"x":{"dtype":"F32","data_offsets":[0,4]}})", 4),
       "tensor 'x': missing \"shape\""},
      {"shape not an array", file_bytes(entry(R"("F32")", R"("2x3")", "[0,24]"), 24),
       "tensor 'x': \"shape\" is not an array (it is \"2x3\")"},
      {"rank 5", file_bytes(entry(R"("F32")", "[1,1,1,1,1]", "[0,4]"), 4),
       "tensor 'x': rank 5 exceeds the maximum of 4"},
      {"negative dim", file_bytes(entry(R"("F32")", "[2,-3]", "[0,24]"), 24),
       "tensor 'x': shape[1] is -3, not a non-negative integer"},
      {"fractional dim", file_bytes(entry(R"("F32")", "[2.5]", "[0,8]"), 8),
       "tensor 'x': shape[0] is 2.5, not a non-negative integer"},
      {"string dim", file_bytes(entry(R"("F32")", R"(["2"])", "[0,8]"), 8),
       "tensor 'x': shape[0] is \"2\", not a non-negative integer"},
      {"nested dim", file_bytes(entry(R"("F32")", "[[2]]", "[0,8]"), 8),
       "tensor 'x': shape[0] is array, not a non-negative integer"},
      {"dim beyond u64", file_bytes(entry(R"("F32")", "[18446744073709551616]", "[0,8]"), 8),
       "tensor 'x': shape[0] is "},
      {"element count overflows",
       file_bytes(entry(R"("F32")", "[4294967296,4294967296,4294967296]", "[0,8]"), 8),
       "tensor 'x': shape [4294967296, 4294967296, 4294967296] of F32 is too large"},
      {"byte size overflows", file_bytes(entry(R"("F32")", "[4611686018427387904]", "[0,8]"), 8),
       "tensor 'x': shape [4611686018427387904] of F32 is too large"},
      {"dim beyond int64", file_bytes(entry(R"("F16")", "[9223372036854775808,0]", "[0,0]"), 0),
       "tensor 'x': shape [9223372036854775808, 0] of F16 is too large"},
      {"missing data_offsets", file_bytes(R"({"x":{"dtype":"F32","shape":[1]}})", 4),
       "tensor 'x': missing \"data_offsets\""},
      {"data_offsets not an array", file_bytes(entry(R"("F32")", "[1]", "5"), 4),
       "tensor 'x': \"data_offsets\" is not an array of two offsets (it is 5)"},
      {"one data_offset", file_bytes(entry(R"("F32")", "[1]", "[0]"), 4),
       "tensor 'x': \"data_offsets\" is not an array of two offsets (it is array)"},
      {"three data_offsets", file_bytes(entry(R"("F32")", "[1]", "[0,4,8]"), 8),
       "tensor 'x': \"data_offsets\" is not an array of two offsets"},
      {"negative offset", file_bytes(entry(R"("F32")", "[1]", "[-4,0]"), 4),
       "tensor 'x': data_offsets[0] is -4, not a non-negative integer"},
      {"fractional offset", file_bytes(entry(R"("F32")", "[1]", "[0,4.0]"), 4),
       "tensor 'x': data_offsets[1] is 4.0, not a non-negative integer"},
      {"end before begin", file_bytes(entry(R"("F32")", "[1]", "[4,0]"), 4),
       "tensor 'x': data_offsets [4, 0] end before they begin"},
      {"beyond the data block", file_bytes(entry(R"("F32")", "[2,3]", "[0,24]"), 20),
       "tensor 'x': data_offsets [0, 24] exceed the data block of 20 bytes"},
      {"far beyond the data block",
       file_bytes(entry(R"("F32")", "[1]", "[18446744073709551611,18446744073709551615]"), 4),
       "exceed the data block of 4 bytes"},
      {"span too small", file_bytes(entry(R"("F32")", "[2,3]", "[0,20]"), 24),
       "tensor 'x': shape [2, 3] of F32 needs 24 bytes but data_offsets span 20"},
      {"span too large", file_bytes(entry(R"("BF16")", "[3]", "[0,8]"), 8),
       "tensor 'x': shape [3] of BF16 needs 6 bytes but data_offsets span 8"},
      {"metadata not an object", file_bytes(R"({"__metadata__":[1]})", 0),
       "\"__metadata__\" is not an object (it is array)"},
      {"metadata value not a string", file_bytes(R"({"__metadata__":{"k":1}})", 0),
       "\"__metadata__\" value of 'k' is not a string (it is 1)"},
      {"repeated tensor",
       file_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  8),
       "tensor 'x' appears twice in the header"},
      {"deeply nested header", file_bytes(std::string(100000, '[') + std::string(100000, ']'), 0),
       "header is not a JSON object (it is array)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string message = open_error(c.bytes);
    EXPECT_TRUE(contains(message, c.expected)) << message;
  }
}

// The reference implementation's layout rule: sorted by offset, the tensors tile the data block
// exactly. Shared bytes, bytes of no tensor between or after them, are refused, naming the tensors.
TEST_F(SafetensorsTest, RejectsTensorsThatDoNotTileTheDataBlock) {
  const auto f32 = [](const std::string& name, int count, int begin) {
    return str_cat(R"(")", name, R"(":{"dtype":"F32","shape":[)", count, R"(],"data_offsets":[)",
                   begin, ",", begin + 4 * count, "]}");
  };
  struct Case {
    const char* label;
    std::string bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"all at offset 0", file_bytes("{" + f32("a", 1, 0) + "," + f32("b", 1, 0) + "}", 4),
       "tensors 'a' [0, 4] and 'b' [0, 4] overlap"},
      {"one inside another", file_bytes("{" + f32("a", 2, 0) + "," + f32("b", 1, 4) + "}", 8),
       "tensors 'a' [0, 8] and 'b' [4, 8] overlap"},
      {"shifted by a byte", file_bytes("{" + f32("a", 2, 0) + "," + f32("b", 2, 7) + "}", 15),
       "tensors 'a' [0, 8] and 'b' [7, 15] overlap"},
      {"gap between", file_bytes("{" + f32("a", 1, 0) + "," + f32("b", 1, 8) + "}", 12),
       "bytes [4, 8) of the data block, between tensors 'a' and 'b', belong to no tensor"},
      {"gap before", file_bytes("{" + f32("a", 1, 4) + "}", 8),
       "the data block's first 4 bytes belong to no tensor (the first, 'a', begins at 4)"},
      {"bytes after", file_bytes("{" + f32("a", 1, 0) + "}", 8),
       "the data block's last 4 bytes, after tensor 'a' ends at 4, belong to no tensor"},
      {"data but no tensor", file_bytes("{}", 4), "the data block holds 4 bytes but no tensor"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string message = open_error(c.bytes);
    EXPECT_TRUE(contains(message, c.expected)) << message;
  }
  // Empty tensors take no bytes: at the start, between two tensors, at the end.
  const std::string file = path("empties.safetensors");
  write_file(file, file_bytes("{" + f32("e0", 0, 0) + "," + f32("a", 1, 0) + "," + f32("e1", 0, 4) +
                                  "," + f32("b", 1, 4) + "," + f32("e2", 0, 8) + "}",
                              8));
  EXPECT_EQ(SafetensorsFile::open(file).tensors().size(), 5u);
}

TEST_F(SafetensorsTest, RejectsATruncatedFileAtEveryLength) {
  const std::vector<Source> sources = {
      make_source("a", DType::F32, Shape{3, 2}, 71),
      make_source("b", DType::F16, Shape{5}, 72),
      make_source("c", DType::I32, Shape{}, 73),
  };
  const std::string whole_path = path("whole.safetensors");
  write_safetensors(whole_path, write_list(sources), {{"k", "v"}});
  const std::string whole = read_file(whole_path);
  ASSERT_NO_THROW(SafetensorsFile::open(whole_path));
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    SCOPED_TRACE(str_cat("cut at ", cut, " of ", whole.size()));
    const std::string message = open_error(whole.substr(0, cut));
    EXPECT_FALSE(message.empty());
  }
}

TEST_F(SafetensorsTest, CorruptedHeaderBytesNeverCrash) {
  // Every byte of the length and header replaced by JSON-significant and invalid values: opening
  // either throws edgelm::Error or yields tensors that lie inside the mapping (ASan checks reads).
  const std::vector<Source> sources = {
      make_source("a", DType::F32, Shape{2, 2}, 81),
      make_source("b", DType::BF16, Shape{3}, 82),
  };
  const std::string whole_path = path("whole.safetensors");
  write_safetensors(whole_path, write_list(sources), {{"k", "v"}});
  const std::string whole = read_file(whole_path);
  const size_t data_start = whole.size() - 16 - 6;
  const std::string file = path("mutated.safetensors");
  const char replacements[] = {'\0', ' ', '"', '{', '}', '[', ']', ',', ':', '-', '9', 'e', '\xff'};
  size_t opened = 0;
  for (size_t pos = 0; pos < data_start; ++pos) {
    for (char replacement : replacements) {
      std::string bytes = whole;
      bytes[pos] = replacement;
      write_file(file, bytes);
      try {
        const SafetensorsFile st = SafetensorsFile::open(file);
        for (const SafetensorsTensor& tensor : st.tensors()) {
          EXPECT_GE(tensor.data, tensor.file->data());
          EXPECT_LE(tensor.data + tensor.nbytes, tensor.file->data() + tensor.file->size());
          EXPECT_EQ(tensor.nbytes, nbytes_of(tensor.dtype, tensor.shape));
        }
        ++opened;
      } catch (const Error& error) {
        EXPECT_EQ(std::string(error.what()).rfind("[safetensors] " + file + ": ", 0), 0u)
            << error.what();
      }
    }
  }
  EXPECT_GT(opened, 0u);  // harmless changes (e.g. a space in the padding) still open
}

TEST_F(SafetensorsTest, RejectsBadModelFolders) {
  const std::string missing_dir = path("no_such_folder");
  std::string message = error_message([&] { SafetensorsModel::open(missing_dir); });
  EXPECT_EQ(message.rfind(str_cat("[safetensors] ", missing_dir, ": no such folder"), 0), 0u)
      << message;
  EXPECT_TRUE(contains(message, "model.safetensors or model.safetensors.index.json")) << message;

  const std::string a_file = path("a_file");
  write_file(a_file, "x");
  message = error_message([&] { SafetensorsModel::open(a_file); });
  EXPECT_EQ(message.rfind(str_cat("[safetensors] ", a_file, ": not a folder"), 0), 0u) << message;

  const std::string empty_dir = folder("empty");
  message = error_message([&] { SafetensorsModel::open(empty_dir); });
  EXPECT_EQ(message, str_cat("[safetensors] ", empty_dir,
                             ": holds neither model.safetensors nor model.safetensors.index.json"));

  // A bad single file reports that file.
  const std::string bad_single = folder("bad_single");
  const std::string bad_single_file = (fs::path(bad_single) / "model.safetensors").string();
  write_file(bad_single_file, "short");
  message = error_message([&] { SafetensorsModel::open(bad_single); });
  EXPECT_EQ(message.rfind(str_cat("[safetensors] ", bad_single_file, ": file is 5 bytes"), 0), 0u)
      << message;
}

TEST_F(SafetensorsTest, RejectsBadIndexesAndShards) {
  const std::string shard1 = "model-00001-of-00002.safetensors";
  const std::string shard2 = "model-00002-of-00002.safetensors";
  const std::vector<Source> sources1 = {make_source("a", DType::F32, Shape{2}, 91),
                                        make_source("b", DType::F32, Shape{2}, 92)};
  const std::vector<Source> sources2 = {make_source("b", DType::F32, Shape{2}, 93),
                                        make_source("c", DType::F32, Shape{2}, 94)};
  struct Case {
    const char* label;
    std::string index;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", R"({"weight_map": {)", "malformed JSON index: parse error at"},
      {"empty index", "", "malformed JSON index"},
      {"index not an object", "[]", "index is not a JSON object (it is array)"},
      {"missing weight_map", R"({"metadata": {}})", "missing \"weight_map\""},
      {"weight_map not an object", R"({"weight_map": []})",
       "\"weight_map\" is not an object (it is array)"},
      {"empty weight_map", R"({"weight_map": {}})", "\"weight_map\" lists no tensors"},
      {"shard not a string", R"({"weight_map": {"a": 1}})",
       "\"weight_map\" entry of tensor 'a' is not a string (it is 1)"},
      {"shard outside the folder", R"({"weight_map": {"a": "../model.safetensors"}})",
       "\"weight_map\" entry of tensor 'a': shard '../model.safetensors' is not a file name inside "
       "the folder"},
      {"missing shard",
       R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)"
       R"( "z": "model-00003-of-00003.safetensors"}})",
       "shard 'model-00003-of-00003.safetensors' (listed for tensor 'z') does not exist"},
      {"tensor absent from its shard",
       R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)"
       R"( "c": "model-00001-of-00002.safetensors"}})",
       "tensor 'c' is listed in shard 'model-00001-of-00002.safetensors' but absent from it"},
      {"tensor in two shards",
       R"({"weight_map": {"a": "model-00001-of-00002.safetensors",)"
       R"( "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})",
       "tensor 'b' is in two shards, 'model-00001-of-00002.safetensors' and "
       "'model-00002-of-00002.safetensors'"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string dir = folder(str_cat("case_", n++));
    write_safetensors((fs::path(dir) / shard1).string(), write_list(sources1));
    write_safetensors((fs::path(dir) / shard2).string(), write_list(sources2));
    const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
    write_file(index_path, c.index);
    const std::string message = error_message([&] { SafetensorsModel::open(dir); });
    EXPECT_EQ(message.rfind(str_cat("[safetensors] ", index_path, ": "), 0), 0u) << message;
    EXPECT_TRUE(contains(message, c.expected)) << message;
  }

  // A corrupt shard reports the shard itself.
  const std::string dir = folder("corrupt_shard");
  const std::string shard_path = (fs::path(dir) / shard1).string();
  write_file(shard_path, le64(3) + "{x}");
  write_file((fs::path(dir) / "model.safetensors.index.json").string(),
             R"({"weight_map": {"a": "model-00001-of-00002.safetensors"}})");
  const std::string message = error_message([&] { SafetensorsModel::open(dir); });
  EXPECT_EQ(message.rfind(str_cat("[safetensors] ", shard_path, ": malformed JSON header"), 0), 0u)
      << message;
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  const float value = 1.0f;
  const std::string file = path("out.safetensors");
  struct Case {
    const char* label;
    std::vector<SafetensorsWriteTensor> tensors;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"quantized dtype",
       {{"q", DType::Q4_0, Shape{32}, &value}},
       "tensor 'q': cannot write dtype q4_0 (supported: F32, F16, BF16, I32)"},
      {"repeated name",
       {{"a", DType::F32, Shape{1}, &value}, {"a", DType::F32, Shape{1}, &value}},
       "tensor 'a' is given twice"},
      {"reserved name",
       {{"__metadata__", DType::F32, Shape{1}, &value}},
       "tensor name '__metadata__' is reserved"},
      {"empty name", {{"", DType::F32, Shape{1}, &value}}, "a tensor has an empty name"},
      {"null data", {{"a", DType::F32, Shape{1}, nullptr}}, "tensor 'a': no data"},
      {"name not UTF-8", {{"\xff", DType::F32, Shape{1}, &value}}, "cannot encode the header"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string message = error_message([&] { write_safetensors(file, c.tensors); });
    EXPECT_EQ(message.rfind(str_cat("[safetensors] ", file, ": "), 0), 0u) << message;
    EXPECT_TRUE(contains(message, c.expected)) << message;
    EXPECT_FALSE(fs::exists(file));
    EXPECT_FALSE(fs::exists(file + ".tmp"));
  }

  const std::string unwritable = path("no_such_folder/out.safetensors");
  const std::string message = error_message([&] {
    write_safetensors(unwritable, {{"a", DType::F32, Shape{1}, &value}});
  });
  EXPECT_EQ(message.rfind(str_cat("[safetensors] ", unwritable, ": cannot open"), 0), 0u)
      << message;
}

}  // namespace
}  // namespace edgelm
