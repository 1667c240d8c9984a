// Every tokenizer.ggml.pre name's pre-tokenizer against `tokenizers` with the Hugging Face
// structure the name stands for, from GGUF and from tokenizer.json (fixtures from
// scripts/fixtures/make_pre_tokenizer_fixtures.py).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/gguf.h"
#include "models/tokenizer.h"
#include "tests/tokenizer_test_util.h"

namespace edgelm {
namespace {

using namespace tokenizer_test;

// What make_pre_tokenizer_fixtures.py wrote: one vocabulary, and per name the Hugging Face
// structure and the reference ids.
struct PreTokenizerFixture {
  json vocab;
  json manifest;
  // reference name → (corpus line, ids)
  std::map<std::string, std::vector<std::pair<size_t, std::vector<int32_t>>>> expected;
  std::vector<std::string> corpus;

  PreTokenizerFixture() {
    vocab = json::parse(std::ifstream(kFixtures + "/pre-vocab.json"));
    manifest = json::parse(std::ifstream(kFixtures + "/pre-manifest.json"));
    for (const std::string& line : read_lines(kFixtures + "/pre-expected-ids.txt")) {
      const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
      expected[line.substr(0, tab1)].emplace_back(
          std::stoul(line.substr(tab1 + 1, tab2 - tab1 - 1)), parse_ids(line.substr(tab2 + 1)));
    }
    corpus = read_corpus();
  }

  // A vocabulary-only GGUF file with tokenizer.ggml.pre = `pre` (none when empty).
  std::string write_gguf(const TempDir& dir, const std::string& pre) const {
    GgufWriter writer;
    writer.set_string("general.architecture", "llama");
    writer.set_string("tokenizer.ggml.model", "gpt2");
    if (!pre.empty()) writer.set_string("tokenizer.ggml.pre", pre);
    const auto tokens = vocab["tokens"].get<std::vector<std::string>>();
    std::vector<int32_t> types(tokens.size(), 1);
    for (int32_t id : vocab["special"].get<std::vector<int32_t>>()) types[id] = 3;  // control
    writer.set_string_array("tokenizer.ggml.tokens", tokens);
    writer.set_i32_array("tokenizer.ggml.token_type", types);
    writer.set_string_array("tokenizer.ggml.merges",
                            vocab["merges"].get<std::vector<std::string>>());
    writer.set_bool("tokenizer.ggml.add_bos_token", false);
    const std::string path = dir.file((pre.empty() ? "no-pre" : pre) + ".gguf");
    writer.write(path);
    return path;
  }

  // A tokenizer.json with the Hugging Face structure the manifest gives for `name`.
  std::string write_hf_json(const TempDir& dir, const std::string& name) const {
    const json& entry = manifest["names"][name];
    json token_ids = json::object();
    const auto tokens = vocab["tokens"].get<std::vector<std::string>>();
    for (size_t id = 0; id < tokens.size(); ++id) token_ids[tokens[id]] = id;
    json added = json::array();
    for (int32_t id : vocab["special"].get<std::vector<int32_t>>()) {
      added.push_back(
          {{"id", id}, {"content", tokens[id]}, {"special", true}, {"normalized", false}});
    }
    const json root = {{"added_tokens", added},
                       {"normalizer", entry["normalizer"]},
                       {"pre_tokenizer", entry["pre_tokenizer"]},
                       {"decoder", {{"type", "ByteLevel"}}},
                       {"model",
                        {{"type", "BPE"},
                         {"vocab", token_ids},
                         {"merges", vocab["merges"]},
                         {"ignore_merges", entry["ignore_merges"]}}}};
    const std::string path = dir.file(name + ".json");
    write_text(path, root.dump());
    return path;
  }

  // FNV-1a 64 over the ids of corpus lines [first, first + count): each line as its id count,
  // then its ids, all little-endian uint32 (the script's chunk_digests).
  static std::string digest(const Tokenizer& tok, const std::vector<std::string>& lines,
                            size_t first, size_t count) {
    uint64_t h = 0xCBF29CE484222325ull;
    auto mix = [&](uint32_t value) {
      for (int b = 0; b < 4; ++b) h = (h ^ ((value >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
    };
    for (size_t i = first; i < first + count && i < lines.size(); ++i) {
      const std::vector<int32_t> ids = tok.encode(lines[i]);
      mix(static_cast<uint32_t>(ids.size()));
      for (int32_t id : ids) mix(static_cast<uint32_t>(id));
    }
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
    return hex;
  }

  // Every corpus line of `name` through `tok`: the lines written out in full, then the digests
  // of all lines. Returns the number of failures.
  int check(const Tokenizer& tok, const std::string& name, const std::string& how) const {
    const std::string reference = manifest["names"][name]["reference"];
    int failures = 0;
    const auto it = expected.find(reference);
    if (it == expected.end()) {
      ADD_FAILURE() << name << ": no expected ids for '" << reference << "'";
      return 1;
    }
    for (const auto& [line, ids] : it->second) {
      if (tok.encode(corpus.at(line)) != ids && ++failures <= 3) {
        ADD_FAILURE() << name << " (" << how << "): corpus line " << line << " "
                      << json(corpus[line]).dump().substr(0, 120);
      }
    }
    const json& digests = manifest["references"][reference]["chunk_digests"];
    const size_t chunk = manifest["chunk_lines"];
    for (size_t c = 0; c < digests.size(); ++c) {
      if (digest(tok, corpus, c * chunk, chunk) != digests[c].get<std::string>() &&
          ++failures <= 3) {
        ADD_FAILURE() << name << " (" << how << "): the ids of corpus lines " << c * chunk << " to "
                      << (c + 1) * chunk - 1 << " differ from tokenizers' (digest)";
      }
    }
    return failures;
  }
};

const PreTokenizerFixture& pre_fixture() {
  static const PreTokenizerFixture fixture;
  return fixture;
}

TEST(PreTokenizers, EveryGgufNameMatchesTokenizers) {
  const PreTokenizerFixture& fx = pre_fixture();
  ASSERT_EQ(fx.corpus.size(), fx.manifest["corpus_lines"].get<size_t>());
  ASSERT_GE(fx.manifest["names"].size(), 15u);
  TempDir dir;
  for (const auto& [name, entry] : fx.manifest["names"].items()) {
    const Tokenizer tok = Tokenizer::from_model_path(fx.write_gguf(dir, name));
    EXPECT_EQ(fx.check(tok, name, "GGUF"), 0) << name;
  }
}

TEST(PreTokenizers, TheSameStructuresLoadFromTokenizerJson) {
  const PreTokenizerFixture& fx = pre_fixture();
  TempDir dir;
  for (const auto& [name, entry] : fx.manifest["names"].items()) {
    if (entry["reference"] != name) continue;
    const Tokenizer tok = Tokenizer::from_hf_json(fx.write_hf_json(dir, name));
    EXPECT_EQ(fx.check(tok, name, "tokenizer.json"), 0) << name;
  }
}

TEST(PreTokenizers, MissingKeyMeansDefault) {
  const PreTokenizerFixture& fx = pre_fixture();
  TempDir dir;
  EXPECT_EQ(fx.check(Tokenizer::from_model_path(fx.write_gguf(dir, "")), "default", "no key"), 0);
}

}  // namespace
}  // namespace edgelm
