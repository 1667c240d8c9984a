// The tokenizer.json loader: both merge formats, model folders, and an error naming the field for
// each malformed or unsupported part.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "models/tokenizer.h"
#include "tests/tokenizer_test_util.h"

namespace edgelm {
namespace {

using namespace tokenizer_test;

namespace fs = std::filesystem;

TEST(HfParity, BothMergeFormatsLoad) {
  // The fixture stores merges as ["a", "b"] pairs; the same tokenizer with "a b" strings must give
  // the same ids.
  std::ifstream in(kFixtures + "/llama3-style.json");
  json root = json::parse(in);
  ASSERT_TRUE(root["model"]["merges"][0].is_array());
  for (json& merge : root["model"]["merges"]) {
    merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  }
  TempDir dir;
  write_text(dir.file("tokenizer.json"), root.dump());
  const Tokenizer legacy = Tokenizer::from_hf_json(dir.file("tokenizer.json"));
  for (const std::string& line : read_corpus()) {
    ASSERT_EQ(legacy.encode(line), llama3_style().encode(line)) << json(line).dump();
  }
}

TEST(Tokenizer, ModelPathFindsTokenizerJson) {
  TempDir dir;
  fs::copy_file(kFixtures + "/llama3-style.json", dir.file("tokenizer.json"));
  const Tokenizer from_dir = Tokenizer::from_model_path(dir.path().string());
  EXPECT_EQ(from_dir.encode("Hello world"), llama3_style().encode("Hello world"));
  const Tokenizer from_file = Tokenizer::from_model_path(dir.file("tokenizer.json"));
  EXPECT_EQ(from_file.encode("Hello world"), llama3_style().encode("Hello world"));
  fs::create_directories(dir.path() / "empty");
  try {
    Tokenizer::from_model_path((dir.path() / "empty").string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
  }
}

// ---- malformed tokenizer.json ----

json small_tokenizer_json() {
  std::ifstream in(kFixtures + "/gpt2-style.json");
  return json::parse(in);
}

// Loading `root` must throw an edgelm::Error whose message holds `expected`.
void expect_load_error(const json& root, const std::string& expected) {
  TempDir dir;
  write_text(dir.file("tokenizer.json"), root.dump());
  try {
    Tokenizer::from_hf_json(dir.file("tokenizer.json"));
    ADD_FAILURE() << "no error; expected '" << expected << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_NE(message.find("[tokenizer]"), std::string::npos) << message;
  }
}

TEST(TokenizerErrors, MalformedJsonNamesTheField) {
  json root = small_tokenizer_json();
  root["model"]["type"] = "WordPiece";
  expect_load_error(root, "model.type 'WordPiece' is not supported");
  root["model"]["type"] = "Unigram";
  expect_load_error(root, "model.type 'Unigram' is not supported");

  root = small_tokenizer_json();
  root["model"].erase("merges");
  expect_load_error(root, "model.merges is missing");
  root = small_tokenizer_json();
  root["model"].erase("vocab");
  expect_load_error(root, "model.vocab is missing");
  root = small_tokenizer_json();
  root.erase("model");
  expect_load_error(root, "model is missing");

  root = small_tokenizer_json();
  root["model"]["merges"][3] = "nospace";
  expect_load_error(root, "model.merges[3]");
  root["model"]["merges"][3] = "Ġ zzzz";
  expect_load_error(root, "model.merges[3]: token 'zzzz' is not in model.vocab");
  root["model"]["merges"][3] = 42;
  expect_load_error(root, "model.merges[3] is neither");

  root = small_tokenizer_json();
  root["model"]["vocab"]["a"] = "seven";
  expect_load_error(root, "model.vocab['a'] is not an integer id");

  root = small_tokenizer_json();
  root["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"},
                              {"pattern", {{"Regex", "(\\p{L}+"}}},
                              {"behavior", "Isolated"},
                              {"invert", false}},
                             {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  expect_load_error(root, "pre_tokenizer.pretokenizers[0].pattern: bad regex");
  root["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "\\p{L}+"}};
  root["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  expect_load_error(root, "pre_tokenizer.pretokenizers[0].behavior 'Removed' is not supported");
  root["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_load_error(root, "pre_tokenizer.type 'Whitespace' is not supported");

  root = small_tokenizer_json();
  root["normalizer"] = {{"type", "NFKC"}};
  expect_load_error(root, "normalizer type 'NFKC' is not supported");
  root = small_tokenizer_json();
  root["decoder"] = {{"type", "WordPiece"}};
  expect_load_error(root, "decoder type 'WordPiece' is not supported");
  root = small_tokenizer_json();
  root["added_tokens"][0]["id"] = "x";
  expect_load_error(root, "added_tokens[0].id is not an integer id");
  root = small_tokenizer_json();
  root["post_processor"] = {{"type", "BertProcessing"}};
  expect_load_error(root, "post_processor.type 'BertProcessing' is not supported");
  root = small_tokenizer_json();
  root["model"]["unk_token"] = "<nope>";
  expect_load_error(root, "model.unk_token '<nope>' is not in model.vocab");
}

TEST(TokenizerErrors, UnreadableFiles) {
  TempDir dir;
  write_text(dir.file("bad.json"), "{\"model\": {");
  EXPECT_THROW(Tokenizer::from_hf_json(dir.file("bad.json")), Error);
  try {
    Tokenizer::from_hf_json(dir.file("bad.json"));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  write_text(dir.file("empty.json"), "");
  EXPECT_THROW(Tokenizer::from_hf_json(dir.file("empty.json")), Error);
  write_text(dir.file("array.json"), "[1, 2]");
  EXPECT_THROW(Tokenizer::from_hf_json(dir.file("array.json")), Error);
  EXPECT_THROW(Tokenizer::from_hf_json(dir.file("missing.json")), Error);
  EXPECT_THROW(Tokenizer::from_model_path(dir.file("missing")), Error);
}

}  // namespace
}  // namespace edgelm
