// Model hyper-parameters from config.json and from GGUF metadata: a good config loads, and each
// value a Llama model cannot run with (or that a narrowing conversion would silently change) is
// rejected with an error naming the file and the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/config.h"
#include "models/gguf.h"
#include "models/make_model.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path temp_dir(const std::string& name) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_config_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs `load` and expects an edgelm::Error whose text holds every one of `parts`.
void expect_error(const std::function<void()>& load, const std::vector<std::string>& parts) {
  try {
    load();
    ADD_FAILURE() << "no error; expected one mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// ---- config.json ----

class HfConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("hf");
    make_model({.preset = "tiny", .format = "hf", .out_dir = dir_.string()});
    std::ifstream in(dir_ / "config.json");
    good_ = json::parse(in);
    fs::remove(dir_ / "generation_config.json");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `config` (raw text, so values JSON cannot hold, such as 1e999, can be written).
  std::string write(const std::string& text) {
    std::ofstream(dir_ / "config.json") << text;
    return dir_.string();
  }
  std::string write(const json& config) { return write(config.dump()); }

  fs::path dir_;
  json good_;
};

TEST_F(HfConfigTest, GoodConfigLoads) {
  const LlamaConfig c = load_hf_config(write(good_));
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope.scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(c.max_position_embeddings, 4096);
}

TEST_F(HfConfigTest, RejectsValuesTheModelCannotRunWith) {
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"bos id past int32",
       [](json& c) { c["bos_token_id"] = 2147483648LL; },
       {"bos_token_id 2147483648 is not a token id"}},
      {"bos id below -1", [](json& c) { c["bos_token_id"] = -2; }, {"bos_token_id -2"}},
      {"eos id past int32",
       [](json& c) {
         c["eos_token_id"] = json::array({1, 4294967296LL});
       },
       {"eos_token_id 4294967296 is not a token id"}},
      {"eos id -1", [](json& c) { c["eos_token_id"] = -1; }, {"eos_token_id -1 outside"}},
      {"context length 0",
       [](json& c) { c["max_position_embeddings"] = 0; },
       {"max_position_embeddings must be positive"}},
      {"rope context 1e30",
       [](json& c) { c["rope_scaling"]["original_max_position_embeddings"] = 1e30; },
       {"original_max_position_embeddings", "positive whole number"}},
      {"rope context 0",
       [](json& c) { c["rope_scaling"]["original_max_position_embeddings"] = 0; },
       {"original_max_position_embeddings 0"}},
      {"rope context 64.5",
       [](json& c) { c["rope_scaling"]["original_max_position_embeddings"] = 64.5; },
       {"original_max_position_embeddings 64.5"}},
      {"rope factor 0",
       [](json& c) { c["rope_scaling"]["factor"] = 0; },
       {"rope_scaling factor 0 must be positive and finite"}},
      {"rope low >= high",
       [](json& c) { c["rope_scaling"]["low_freq_factor"] = 4.0; },
       {"low_freq_factor 4 must be below high_freq_factor 4"}},
      {"eps 0", [](json& c) { c["rms_norm_eps"] = 0; }, {"rms_norm_eps 0 must be positive"}},
      {"theta negative", [](json& c) { c["rope_theta"] = -1; }, {"rope_theta -1 must be positive"}},
      {"eps 1", [](json& c) { c["rms_norm_eps"] = 1; }, {"rms_norm_eps 1 must be below 1"}},
      {"rope scaling without a type",
       [](json& c) {
         c["rope_scaling"] = {{"factor", 8.0}};
       },
       {"rope_scaling sets 'factor' but names no 'rope_type'"}},
      {"rope type not a string",
       [](json& c) { c["rope_scaling"]["rope_type"] = 3; },
       {"rope_scaling 'rope_type' must be a string, got 3"}},
      {"rope types disagree",
       [](json& c) { c["rope_scaling"]["type"] = "linear"; },
       {"rope_scaling 'rope_type' 'llama3' and 'type' 'linear' disagree"}},
      {"linear rope scaling",
       [](json& c) {
         c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
       },
       {"unsupported rope_scaling type 'linear' (supported: default, llama3)"}},
      {"model_type not a string",
       [](json& c) { c["model_type"] = 1e-06; },
       {"model_type must be a string, got 1e-06"}},
      {"rope_parameters without a type",
       [](json& c) {
         c.erase("rope_scaling");
         c["rope_parameters"] = {{"rope_theta", 10000.0}, {"factor", 4.0}};
       },
       {"rope_scaling sets 'factor' but names no 'rope_type'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    json config = good_;
    c.edit(config);
    const std::string dir = write(config);
    expect_error([&] { load_hf_config(dir); }, c.parts);
    expect_error([&] { load_hf_config(dir); }, {"[config] ", "config.json"});
  }
}

// generation_config.json's do_sample decides whether its sampling settings apply: anything but a
// boolean (or null) is refused rather than read as one.
TEST_F(HfConfigTest, RejectsADoSampleThatIsNotABoolean) {
  const std::string dir = write(good_);
  std::ofstream(dir_ / "generation_config.json") << R"({"do_sample": "yes", "temperature": 0.5})";
  expect_error([&] { load_hf_config(dir); }, {"[config] ", "generation_config.json",
                                              "do_sample must be true or false, got \"yes\""});
  std::ofstream(dir_ / "generation_config.json") << R"({"do_sample": true, "temperature": 0.5})";
  EXPECT_EQ(load_hf_config(dir).default_temperature, 0.5f);
}

// transformers 5's rope_parameters holds rope_theta with or without a type; neither is an error.
TEST_F(HfConfigTest, RopeParametersWithThetaOnlyLoad) {
  for (const json& parameters :
       {json{{"rope_theta", 250000.0}}, json{{"rope_theta", 250000.0}, {"rope_type", "default"}}}) {
    SCOPED_TRACE(parameters.dump());
    json config = good_;
    config.erase("rope_scaling");
    config["rope_parameters"] = parameters;
    const LlamaConfig c = load_hf_config(write(config));
    EXPECT_EQ(c.rope.theta, 250000.0f);
    EXPECT_EQ(c.rope.scaling.type, RopeScaling::Type::None);
  }
}

// A number past double (1e999) is malformed JSON to the parser; it once escaped as the parser's own
// exception, without the file's name.
TEST_F(HfConfigTest, RejectsNumbersPastDouble) {
  for (const char* key : {"rms_norm_eps", "rope_theta"}) {
    SCOPED_TRACE(key);
    json config = good_;
    config[key] = 12345.0;
    std::string text = config.dump();
    text.replace(text.find("12345.0"), 7, "1e999");
    const std::string dir = write(text);
    expect_error([&] { load_hf_config(dir); }, {"config.json: malformed JSON", "1e999"});
  }
}

// ---- GGUF metadata ----

// A GGUF file holding only the metadata load_gguf_config reads (tiny's shapes), changed by `edit`,
// and optionally a rope_freqs.weight tensor.
std::string write_gguf(const fs::path& dir, const std::function<void(GgufWriter&)>& edit,
                       const std::vector<float>& rope_freqs = {}) {
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_u32("llama.context_length", 4096);
  writer.set_u32("llama.embedding_length", 64);
  writer.set_u32("llama.block_count", 2);
  writer.set_u32("llama.feed_forward_length", 128);
  writer.set_u32("llama.attention.head_count", 4);
  writer.set_u32("llama.attention.head_count_kv", 2);
  writer.set_u32("llama.attention.key_length", 16);
  writer.set_u32("llama.attention.value_length", 16);
  writer.set_u32("llama.rope.dimension_count", 16);
  writer.set_f32("llama.rope.freq_base", 500000.0f);
  writer.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  writer.set_u32("llama.vocab_size", 320);
  writer.set_u32("tokenizer.ggml.bos_token_id", 312);
  writer.set_u32("tokenizer.ggml.eos_token_id", 313);
  edit(writer);
  if (!rope_freqs.empty()) {
    writer.add_tensor("rope_freqs.weight", GgmlType::F32, {static_cast<int64_t>(rope_freqs.size())},
                      rope_freqs.data(), rope_freqs.size() * sizeof(float));
  }
  const std::string path = (dir / "config.gguf").string();
  writer.write(path);
  return path;
}

class GgufConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("gguf"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(GgufConfigTest, GoodMetadataLoads) {
  const LlamaConfig c = load_gguf_config(GgufFile::open(write_gguf(
      dir_, [](GgufWriter&) {}, std::vector(8, 2.0f))));
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.bos_token_id, 312);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{313});
  EXPECT_EQ(c.rope.freq_factors, std::vector(8, 2.0f));
}

// GGUF stores ids as u32; 4294967295 means none, as llama.cpp reads it.
TEST_F(GgufConfigTest, AllOnesTokenIdMeansNone) {
  const LlamaConfig c = load_gguf_config(GgufFile::open(write_gguf(dir_, [](GgufWriter& w) {
    w.set_u32("tokenizer.ggml.bos_token_id", 0xffffffffu);
    w.set_u32("tokenizer.ggml.eot_token_id", 0xffffffffu);
  })));
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{313});
}

TEST_F(GgufConfigTest, RejectsValuesTheModelCannotRunWith) {
  struct Case {
    const char* name;
    std::function<void(GgufWriter&)> edit;
    std::vector<float> rope_freqs;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"partial rotary",
       [](GgufWriter& w) { w.set_u32("llama.rope.dimension_count", 8); },
       {},
       {"llama.rope.dimension_count 8", "partial rotary"}},
      {"value head size",
       [](GgufWriter& w) { w.set_u32("llama.attention.value_length", 32); },
       {},
       {"llama.attention.value_length 32"}},
      {"infinite eps",
       [](GgufWriter& w) { w.set_f32("llama.attention.layer_norm_rms_epsilon", INFINITY); },
       {},
       {"rms_norm_eps inf must be positive and finite"}},
      {"eps 1",
       [](GgufWriter& w) { w.set_f32("llama.attention.layer_norm_rms_epsilon", 1.0f); },
       {},
       {"rms_norm_eps 1 must be below 1"}},
      {"infinite theta",
       [](GgufWriter& w) { w.set_f32("llama.rope.freq_base", INFINITY); },
       {},
       {"rope_theta inf"}},
      {"context length 0",
       [](GgufWriter& w) { w.set_u32("llama.context_length", 0); },
       {},
       {"max_position_embeddings must be positive"}},
      {"bos id past int32",
       [](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 3000000000u); },
       {},
       {"tokenizer.ggml.bos_token_id 3000000000 is not a token id"}},
      {"eos id past the vocabulary",
       [](GgufWriter& w) { w.set_u32("tokenizer.ggml.eot_token_id", 320); },
       {},
       {"eos_token_id 320 outside"}},
      {"signed eot id -1",
       [](GgufWriter& w) { w.set_i32("tokenizer.ggml.eot_token_id", -1); },
       {},
       {"tokenizer.ggml.eot_token_id -1 is not a token id", "4294967295 means none"}},
      {"rope frequency factor 0",
       [](GgufWriter&) {},
       {1, 1, 1, 0, 1, 1, 1, 1},
       {"rope frequency factor 3 is 0"}},
      {"rope frequency factor NaN",
       [](GgufWriter&) {},
       {1, 1, 1, 1, 1, 1, 1, std::nanf("")},
       {"rope frequency factor 7 is nan"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = write_gguf(dir_, c.edit, c.rope_freqs);
    expect_error([&] { load_gguf_config(GgufFile::open(path)); }, c.parts);
    expect_error([&] { load_gguf_config(GgufFile::open(path)); }, {"config.gguf"});
  }
}

}  // namespace
}  // namespace edgelm
