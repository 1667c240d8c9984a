// The GGUF loader with "gpt2" vocabularies: make_model's GGUF against its Hugging Face folder,
// unknown tokenizer.ggml.pre names, and malformed tokenizer keys.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "models/gguf.h"
#include "models/make_model.h"
#include "models/tokenizer.h"
#include "tests/tokenizer_test_util.h"

namespace edgelm {
namespace {

using namespace tokenizer_test;

TEST(Gguf, Gpt2VocabMatchesHfPathOfMadeModel) {
  TempDir dir;
  MakeModelOptions options;
  options.preset = "tiny";
  options.format = "hf";
  options.out_dir = dir.file("hf");
  const Tokenizer hf = Tokenizer::from_model_path(make_model(options));
  options.format = "gguf";
  options.out_dir = dir.file("gguf");
  const std::string gguf_path = make_model(options);
  const Tokenizer gguf = Tokenizer::from_model_path(gguf_path);
  EXPECT_EQ(hf.vocab_size(), gguf.vocab_size());
  EXPECT_EQ(hf.bos_id(), gguf.bos_id());
  ASSERT_TRUE(hf.bos_id().has_value());
  for (const std::string& line : read_corpus()) {
    const std::vector<int32_t> ids = hf.encode(line);
    ASSERT_EQ(ids, gguf.encode(line)) << json(line).dump();
    ASSERT_EQ(hf.decode(ids), gguf.decode(ids));
  }
  for (int32_t id = 0; id < hf.vocab_size(); ++id) {
    ASSERT_EQ(hf.is_special(id), gguf.is_special(id)) << id;
  }
}

TEST(Gguf, UnknownPreNameNeedsTheOption) {
  TempDir dir;
  MakeModelOptions options;
  options.preset = "tiny";
  options.format = "gguf";
  options.out_dir = dir.file("gguf");
  const GgufFile made = GgufFile::open(make_model(options));  // tokenizer.ggml.pre = llama-bpe
  const Tokenizer reference = Tokenizer::from_gguf(made);
  GgufWriter writer;  // the same tokenizer keys, an unknown pre-tokenizer name, no tensors
  for (const auto& [key, value] : made.metadata()) {
    if (key.starts_with("tokenizer.")) writer.set(key, value);
  }
  writer.set_string("tokenizer.ggml.pre", "some-future-model");
  const std::string path = dir.file("renamed.gguf");
  writer.write(path);
  try {
    Tokenizer::from_model_path(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find("tokenizer.ggml.pre 'some-future-model'"), std::string::npos) << message;
    EXPECT_NE(message.find("smollm"), std::string::npos) << message;  // the known names
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // Allowed: the Llama 3 pre-tokenizer, so the ids are those of the made model (llama-bpe).
  const Tokenizer renamed =
      Tokenizer::from_model_path(path, TokenizerOptions{.allow_unknown_pre_tokenizer = true});
  for (const std::string& line : read_corpus()) {
    ASSERT_EQ(renamed.encode(line), reference.encode(line)) << json(line).dump();
  }
}

TEST(Gguf, Errors) {
  TempDir dir;
  GgufWriter writer;
  writer.set_string("tokenizer.ggml.model", "bert");
  writer.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  writer.write(dir.file("bert.gguf"));
  try {
    Tokenizer::from_gguf(GgufFile::open(dir.file("bert.gguf")));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model 'bert'"), std::string::npos)
        << e.what();
  }
  GgufWriter missing;
  missing.set_string("tokenizer.ggml.model", "llama");
  missing.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  missing.write(dir.file("noscores.gguf"));
  try {
    Tokenizer::from_gguf(GgufFile::open(dir.file("noscores.gguf")));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.scores"), std::string::npos) << e.what();
  }
  GgufWriter merges;
  merges.set_string("tokenizer.ggml.model", "gpt2");
  merges.set_string("tokenizer.ggml.pre", "llama-bpe");
  merges.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  merges.set_string_array("tokenizer.ggml.merges", {"a c"});
  merges.write(dir.file("merges.gguf"));
  try {
    Tokenizer::from_gguf(GgufFile::open(dir.file("merges.gguf")));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.merges[0]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace edgelm
