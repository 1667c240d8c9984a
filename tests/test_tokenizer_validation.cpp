// Tokenizers are checked when they load, not when a prompt happens to reach a bad entry: GGUF
// token types and special ids, tokenizer.json ids that two tokens share, and every id against the
// model's vocabulary (the rows of its token embedding). Each refusal is one line naming the file
// and the field; the files edgelm's tests and tools use still load.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/config.h"
#include "models/gguf.h"
#include "models/make_model.h"
#include "models/tokenizer.h"
#include "tests/tokenizer_test_util.h"

namespace edgelm {
namespace {

using namespace tokenizer_test;

// Runs `load` and expects an edgelm::Error of one line holding every one of `parts`.
void expect_error(const std::function<void()>& load, const std::vector<std::string>& parts) {
  try {
    load();
    ADD_FAILURE() << "no error; expected one mentioning '" << parts.front() << "'";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

// ---- GGUF ----

// The tokenizer keys of make_model's tiny GGUF (a gpt2 vocabulary with control tokens), copied
// into a file of metadata alone after `edit`.
class GgufTokenizerKeys : public ::testing::Test {
 protected:
  void SetUp() override {
    made_ = make_model({.preset = "tiny", .format = "gguf", .out_dir = dir_.file("made")});
  }
  std::string write(const std::function<void(GgufWriter&)>& edit) {
    const GgufFile made = GgufFile::open(made_);
    GgufWriter writer;
    for (const auto& [key, value] : made.metadata()) {
      if (key.starts_with("tokenizer.")) writer.set(key, value);
    }
    edit(writer);
    const std::string path = dir_.file("edited.gguf");
    writer.write(path);
    return path;
  }
  int32_t n_tokens() const {
    return static_cast<int32_t>(
        GgufFile::open_metadata(made_).get_string_array("tokenizer.ggml.tokens").size());
  }
  std::vector<int32_t> types() const {
    std::vector<int32_t> out;
    for (int64_t t : GgufFile::open_metadata(made_).get_int_array("tokenizer.ggml.token_type"))
      out.push_back(static_cast<int32_t>(t));
    return out;
  }

  TempDir dir_;
  std::string made_;
};

TEST_F(GgufTokenizerKeys, TheMadeFileLoads) {
  EXPECT_NO_THROW(Tokenizer::from_model_path(write([](GgufWriter&) {})));
}

TEST_F(GgufTokenizerKeys, TokenTypeOutOfRange) {
  for (int32_t bad : {99, -1, 0, 7}) {
    SCOPED_TRACE(bad);
    std::vector<int32_t> edited = types();
    edited[5] = bad;
    const std::string path =
        write([&](GgufWriter& w) { w.set_i32_array("tokenizer.ggml.token_type", edited); });
    expect_error([&] { Tokenizer::from_model_path(path); },
                 {"[tokenizer] " + path + ": tokenizer.ggml.token_type[5] = " +
                  std::to_string(bad) + " is not a token type"});
  }
}

TEST_F(GgufTokenizerKeys, SpecialIdsOutOfRange) {
  const int32_t n = n_tokens();
  struct Case {
    const char* key;
    std::function<void(GgufWriter&, const char*)> set;
    std::string value;
  };
  const std::vector<Case> cases = {
      {"tokenizer.ggml.eot_token_id", [](GgufWriter& w, const char* k) { w.set_i32(k, -1); }, "-1"},
      {"tokenizer.ggml.eos_token_id", [&](GgufWriter& w, const char* k) { w.set_u32(k, n); },
       std::to_string(n)},
      {"tokenizer.ggml.bos_token_id", [](GgufWriter& w, const char* k) { w.set_u32(k, 1u << 30); },
       std::to_string(1u << 30)},
      // Keys edgelm does not use are still ids of this vocabulary.
      {"tokenizer.ggml.padding_token_id",
       [&](GgufWriter& w, const char* k) { w.set_u32(k, n + 5); }, std::to_string(n + 5)},
      {"tokenizer.ggml.unknown_token_id", [](GgufWriter& w, const char* k) { w.set_i32(k, -7); },
       "-7"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    const std::string path = write([&](GgufWriter& w) { c.set(w, c.key); });
    expect_error([&] { Tokenizer::from_model_path(path); },
                 {"[tokenizer] " + path + ": " + c.key + " = " + c.value,
                  "outside the vocabulary of " + std::to_string(n)});
  }
  const std::string text =
      write([](GgufWriter& w) { w.set_string("tokenizer.ggml.eom_token_id", "7"); });
  expect_error([&] { Tokenizer::from_model_path(text); },
               {"tokenizer.ggml.eom_token_id is a string, not a token id"});
}

// llama.cpp's "none" (the u32 all-ones) is not an id and loads.
TEST_F(GgufTokenizerKeys, AllOnesMeansNone) {
  const std::string path = write([](GgufWriter& w) {
    w.set_u32("tokenizer.ggml.eot_token_id", 0xffffffffu);
    w.set_u32("tokenizer.ggml.bos_token_id", 0xffffffffu);
  });
  const Tokenizer tokenizer = Tokenizer::from_model_path(path);
  EXPECT_FALSE(tokenizer.bos_id().has_value());
}

// A model whose embedding has fewer rows than its GGUF vocabulary has tokens.
TEST_F(GgufTokenizerKeys, VocabularyPastTheModelsIsRefused) {
  const int32_t n = n_tokens();
  const std::string path = write([](GgufWriter&) {});
  expect_error(
      [&] { Tokenizer::from_model_path(path, {.model_vocab_size = n - 1}); },
      {"[tokenizer] " + path + ": tokenizer.ggml.tokens[" + std::to_string(n - 1) + "]: id " +
           std::to_string(n - 1) + " is outside the model's vocabulary of " + std::to_string(n - 1),
       "token embedding"});
  expect_error(
      [&] { Tokenizer::from_gguf(GgufFile::open_metadata(path), {.model_vocab_size = 8}); },
      {"is outside the model's vocabulary of 8"});
  // Equal or larger (a padded embedding) is fine.
  EXPECT_NO_THROW(Tokenizer::from_model_path(path, {.model_vocab_size = n}));
  EXPECT_NO_THROW(Tokenizer::from_model_path(path, {.model_vocab_size = n + 64}));
}

// ---- tokenizer.json ----

class HfTokenizerIds : public ::testing::Test {
 protected:
  // gpt2-style.json (600 model tokens, added tokens 327 and 600..605) after `edit`.
  std::string write(const std::function<void(json&)>& edit) {
    std::ifstream in(kFixtures + "/gpt2-style.json");
    json root = json::parse(in);
    edit(root);
    const std::string path = dir_.file("tokenizer.json");
    write_text(path, root.dump());
    return path;
  }
  // The index in added_tokens of the token with `content`.
  static size_t added_index(const json& root, const std::string& content) {
    for (size_t i = 0; i < root["added_tokens"].size(); ++i) {
      if (root["added_tokens"][i]["content"] == content) return i;
    }
    throw std::runtime_error("no added token " + content);
  }
  TempDir dir_;
};

TEST_F(HfTokenizerIds, TwoModelTokensWithOneId) {
  const std::string path = write([](json& root) { root["model"]["vocab"]["zzz_extra"] = 17; });
  expect_error([&] { Tokenizer::from_hf_json(path); },
               {"[tokenizer] " + path + ": model.vocab['", "have the same id 17"});
}

TEST_F(HfTokenizerIds, AddedTokenWithAnotherModelTokensId) {
  // "ing" is a model token (327) and an added one; given id 328 it would take another's place.
  std::string path;
  size_t ing = 0;
  path = write([&](json& root) {
    ing = added_index(root, "ing");
    root["added_tokens"][ing]["id"] = 328;
  });
  expect_error([&] { Tokenizer::from_hf_json(path); },
               {"added_tokens[" + std::to_string(ing) + "].id 328: 'ing' is model.vocab's id 327"});
  // A new added token on a model token's id.
  size_t think = 0;
  path = write([&](json& root) {
    think = added_index(root, "<think>");
    root["added_tokens"][think]["id"] = 5;
  });
  expect_error([&] { Tokenizer::from_hf_json(path); },
               {"added_tokens[" + std::to_string(think) + "].id 5 of '<think>' is model.vocab['"});
  // Two added tokens on one id.
  path = write([&](json& root) {
    think = added_index(root, "<think>");
    root["added_tokens"][think]["id"] = 600;
  });
  expect_error([&] { Tokenizer::from_hf_json(path); }, {"id 600 of '<think>' is also the id of '"});
}

TEST_F(HfTokenizerIds, IdsPastTheModelsVocabularyAreRefused) {
  size_t think = 0;
  const std::string path = write([&](json& root) {
    think = added_index(root, "<think>");
    root["added_tokens"][think]["id"] = 70000;
  });
  // Alone, a sparse vocabulary is legal (ids no token has decode to nothing).
  EXPECT_EQ(Tokenizer::from_hf_json(path).vocab_size(), 70001);
  expect_error([&] { Tokenizer::from_model_path(path, {.model_vocab_size = 606}); },
               {"[tokenizer] " + path + ": added_tokens[" + std::to_string(think) +
                    "].id: id 70000 is outside the model's vocabulary of 606",
                "token embedding"});
  const std::string model_token = write([](json& root) { root["model"]["vocab"]["far"] = 1000; });
  expect_error([&] { Tokenizer::from_model_path(model_token, {.model_vocab_size = 606}); },
               {"model.vocab['far']: id 1000 is outside the model's vocabulary of 606"});
}

// The fixtures and the made models load against their own vocabularies.
TEST(TokenizerValidation, FixturesAndMadeModelsLoad) {
  for (const char* name : {"gpt2-style.json", "llama3-style.json"}) {
    SCOPED_TRACE(name);
    const Tokenizer tokenizer = Tokenizer::from_hf_json(kFixtures + "/" + name);
    EXPECT_NO_THROW(Tokenizer::from_model_path(kFixtures + "/" + name,
                                               {.model_vocab_size = tokenizer.vocab_size()}));
  }
  TempDir dir;
  for (const char* format : {"hf", "gguf"}) {
    SCOPED_TRACE(format);
    const std::string path =
        make_model({.preset = "tiny", .format = format, .out_dir = dir.file(format)});
    const LlamaConfig config =
        std::string(format) == "hf" ? load_hf_config(path) : load_gguf_config(GgufFile::open(path));
    EXPECT_NO_THROW(Tokenizer::from_model_path(path, {.model_vocab_size = config.vocab_size}));
  }
}

}  // namespace
}  // namespace edgelm
