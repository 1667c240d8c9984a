// Shared by the tokenizer tests: the fixtures of tests/fixtures/tokenizer (made by
// scripts/fixtures/make_tokenizer_fixtures.py and make_pre_tokenizer_fixtures.py; see the README
// there), scratch folders, and a hand-made SentencePiece vocabulary.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "models/gguf.h"
#include "models/tokenizer.h"
#include "tests/temp_dir.h"

namespace edgelm::tokenizer_test {

using nlohmann::json;

inline const std::string kFixtures = std::string(EDGELM_FIXTURE_DIR) + "/tokenizer";

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

inline std::vector<std::string> read_corpus() {
  std::vector<std::string> corpus;
  for (const std::string& line : read_lines(kFixtures + "/corpus.jsonl")) {
    corpus.push_back(json::parse(line).get<std::string>());
  }
  return corpus;
}

// A scratch folder removed at the end of the test.
class TempDir : public edgelm::testing::TempDir {
 public:
  TempDir() : edgelm::testing::TempDir("edgelm_tok_") {}
};
using edgelm::testing::write_text;

inline const Tokenizer& llama3_style() {
  static const Tokenizer tokenizer = Tokenizer::from_hf_json(kFixtures + "/llama3-style.json");
  return tokenizer;
}

// A GGUF file holding only tokenizer keys.
struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  int32_t add(const std::string& text, float score, int32_t type = 1) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size()) - 1;
  }
};

// A SentencePiece vocabulary small enough to work out the expected ids by hand.
inline GgufVocab spm_vocab(bool with_bytes) {
  GgufVocab v;
  v.add("<unk>", 0, 2);
  v.add("<s>", 0, 3);
  v.add("</s>", 0, 3);
  for (int b = 0; b < 256 && with_bytes; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.add(name, 0, 6);
  }
  for (const auto& [piece, score] :
       std::vector<std::pair<std::string, float>>{{"\xE2\x96\x81", -1.0f},
                                                  {"h", -2.0f},
                                                  {"e", -2.0f},
                                                  {"l", -2.0f},
                                                  {"o", -2.0f},
                                                  {"a", -2.0f},
                                                  {"ll", -0.5f},
                                                  {"llo", -0.7f},
                                                  {"he", -1.5f},
                                                  {"\xE2\x96\x81he", -1.0f},
                                                  {"hello", -0.1f},
                                                  {"\xE2\x96\x81hello", -0.2f},
                                                  {"aa", -1.0f}}) {
    v.add(piece, score);
  }
  v.add("[X]", 0, 4);  // user-defined: found in text, not special
  return v;
}

inline std::string write_spm_gguf(const TempDir& dir, const GgufVocab& v,
                                  bool space_prefix = true) {
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string_array("tokenizer.ggml.tokens", v.tokens);
  writer.set_f32_array("tokenizer.ggml.scores", v.scores);
  writer.set_i32_array("tokenizer.ggml.token_type", v.types);
  writer.set_u32("tokenizer.ggml.bos_token_id", 1);
  writer.set_u32("tokenizer.ggml.eos_token_id", 2);
  writer.set_u32("tokenizer.ggml.unknown_token_id", 0);
  if (!space_prefix) writer.set_bool("tokenizer.ggml.add_space_prefix", false);
  const std::string path = dir.file(space_prefix ? "spm.gguf" : "spm_nospace.gguf");
  writer.write(path);
  return path;
}

}  // namespace edgelm::tokenizer_test
