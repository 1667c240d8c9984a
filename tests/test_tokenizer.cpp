// Tokenizer tests: ids against the `tokenizers` package on the generated corpus
// (tests/fixtures/tokenizer, made by scripts/fixtures/make_tokenizer_fixtures.py), the GGUF
// vocabularies, invalid input, streaming decode and the chat template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "models/gguf.h"
#include "models/make_model.h"
#include "models/tokenizer.h"
#include "models/tokenizer/unicode_nfc.h"
#include "tests/temp_dir.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixtures = std::string(EDGELM_FIXTURE_DIR) + "/tokenizer";

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

std::vector<std::string> read_corpus() {
  std::vector<std::string> corpus;
  for (const std::string& line : read_lines(kFixtures + "/corpus.jsonl")) {
    corpus.push_back(json::parse(line).get<std::string>());
  }
  return corpus;
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return bytes;
}

// A scratch folder removed at the end of the test.
class TempDir : public edgelm::testing::TempDir {
 public:
  TempDir() : edgelm::testing::TempDir("edgelm_tok_") {}
};
using edgelm::testing::write_text;

const Tokenizer& llama3_style() {
  static const Tokenizer tokenizer = Tokenizer::from_hf_json(kFixtures + "/llama3-style.json");
  return tokenizer;
}

// ---- parity with `tokenizers` ----

TEST(HfParity, CorpusIdsMatchTokenizers) {
  const std::vector<std::string> corpus = read_corpus();
  const std::vector<std::string> expected = read_lines(kFixtures + "/expected_ids.txt");
  ASSERT_GE(corpus.size(), 2000u);
  ASSERT_EQ(corpus.size(), expected.size());
  int failures = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::vector<int32_t> ids = llama3_style().encode(corpus[i]);
    if (ids != parse_ids(expected[i]) && ++failures <= 5) {
      ADD_FAILURE() << "corpus line " << i << ": " << json(corpus[i]).dump().substr(0, 200);
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(HfParity, InvalidUtf8MatchesReplacementRule) {
  const std::vector<std::string> lines = read_lines(kFixtures + "/invalid_utf8.txt");
  ASSERT_GE(lines.size(), 100u);
  int failures = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t tab = lines[i].find('\t');
    ASSERT_NE(tab, std::string::npos);
    const std::string bytes = from_hex(lines[i].substr(0, tab));
    if (llama3_style().encode(bytes) != parse_ids(lines[i].substr(tab + 1)) && ++failures <= 5) {
      ADD_FAILURE() << "invalid_utf8 line " << i;
    }
  }
  EXPECT_EQ(failures, 0);
}

// GPT-2 style: ByteLevel(use_regex, add_prefix_space), merges as "a b" strings, and added tokens
// with every option (lstrip, rstrip, single_word, normalized, one that is also a model token).
TEST(HfParity, Gpt2StyleMatchesTokenizers) {
  const Tokenizer tokenizer = Tokenizer::from_hf_json(kFixtures + "/gpt2-style.json");
  const std::vector<std::string> corpus = read_corpus();
  const std::vector<std::string> expected = read_lines(kFixtures + "/gpt2_expected_ids.txt");
  ASSERT_GE(expected.size(), 300u);
  int failures = 0;
  for (const std::string& line : expected) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos);
    const size_t index = std::stoul(line.substr(0, tab));
    ASSERT_LT(index, corpus.size());
    if (tokenizer.encode(corpus[index]) != parse_ids(line.substr(tab + 1)) && ++failures <= 5) {
      ADD_FAILURE() << "corpus line " << index << ": " << json(corpus[index]).dump().substr(0, 200);
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_FALSE(tokenizer.bos_id().has_value());
  EXPECT_TRUE(tokenizer.is_special(*tokenizer.token_id("<mask>")));
  EXPECT_FALSE(tokenizer.is_special(*tokenizer.token_id("<think>")));
}

TEST(HfParity, DecodeRoundTripsEveryValidLine) {
  int failures = 0;
  for (const std::string& line : read_corpus()) {
    const std::vector<int32_t> ids = llama3_style().encode(line, /*add_bos=*/false);
    if (llama3_style().decode(ids) != line && ++failures <= 5) {
      ADD_FAILURE() << json(line).dump().substr(0, 200);
    }
  }
  EXPECT_EQ(failures, 0);
}

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

// ---- API ----

TEST(Tokenizer, VocabularyAccessors) {
  const Tokenizer& tok = llama3_style();
  EXPECT_EQ(tok.vocab_size(), 4256);  // 4,000 trained tokens and Llama 3's 256 special tokens
  EXPECT_EQ(tok.bos_id(), 4000);
  EXPECT_EQ(tok.token_id("<|begin_of_text|>"), 4000);
  EXPECT_EQ(tok.token_id("<|eot_id|>"), 4009);
  EXPECT_EQ(tok.token_text(4009), "<|eot_id|>");
  EXPECT_EQ(tok.token_id("Ġworld"), 928);  // stored byte-level form
  EXPECT_EQ(tok.token_text(928), "Ġworld");
  EXPECT_FALSE(tok.token_id("no such token").has_value());
  EXPECT_TRUE(tok.is_special(4009));
  EXPECT_FALSE(tok.is_special(928));
  EXPECT_FALSE(tok.is_special(-3));
  EXPECT_THROW(tok.token_text(4256), Error);
  EXPECT_THROW(tok.token_text(-1), Error);
  EXPECT_NE(tok.describe().find("byte-level BPE"), std::string::npos);
}

TEST(Tokenizer, KnownIds) {
  const Tokenizer& tok = llama3_style();
  // From expected_ids.txt, made by `tokenizers`.
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{4000, 39, 2813, 78, 928}));
  EXPECT_EQ(tok.encode("Hello world", false), (std::vector<int32_t>{39, 2813, 78, 928}));
  EXPECT_EQ(tok.encode(""), (std::vector<int32_t>{4000}));
  EXPECT_TRUE(tok.encode("", false).empty());
  EXPECT_EQ(tok.encode("<|eot_id|>", false), (std::vector<int32_t>{4009}));
}

TEST(Tokenizer, SpecialTokensAsPlainText) {
  const Tokenizer& tok = llama3_style();
  const std::string text = "a<|eot_id|>b<|start_header_id|>";
  const std::vector<int32_t> parsed = tok.encode(text, false);
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 4009), 1);
  const std::vector<int32_t> plain = tok.encode(text, false, /*parse_special=*/false);
  for (int32_t id : plain) EXPECT_LT(id, 4000) << "special id in " << json(plain).dump();
  EXPECT_EQ(tok.decode(plain), text);
}

TEST(Tokenizer, DecodeSkipsSpecialTokens) {
  const Tokenizer& tok = llama3_style();
  const std::vector<int32_t> ids = tok.encode("Hi<|eot_id|> there");
  EXPECT_EQ(tok.decode(ids), "<|begin_of_text|>Hi<|eot_id|> there");
  EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), "Hi there");
  const std::vector<int32_t> bad = {39, 4256};
  EXPECT_THROW(tok.decode(bad), Error);
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

// ---- invalid and extreme input ----

TEST(Utf8, RepairFollowsMaximalSubpartRule) {
  auto repaired = [](std::string_view bytes) {
    std::string out;
    EXPECT_EQ(append_utf8_repaired(out, bytes), bytes.size());
    return out;
  };
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(repaired("plain ascii"), "plain ascii");
  EXPECT_EQ(repaired("a\x80"
                     "b"),
            "a" + r + "b");                                // lone continuation byte
  EXPECT_EQ(repaired("\xF0\x9F\x98"), r);                  // truncated: one U+FFFD
  EXPECT_EQ(repaired("\xE0\x80\xAF"), r + r + r);          // overlong
  EXPECT_EQ(repaired("\xC0\xAF"), r + r);                  // overlong two-byte form
  EXPECT_EQ(repaired("\xED\xA0\x80"), r + r + r);          // surrogate
  EXPECT_EQ(repaired("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(repaired("\xC3\xC3\xA9"), r + "\xC3\xA9");     // a lead byte cut short
  EXPECT_EQ(repaired("\xE2\x28\xA1"), r + "(" + r);
  EXPECT_EQ(repaired("\xFF\xFE"), r + r);
  // Not final: an incomplete tail waits, an impossible one does not.
  std::string out;
  EXPECT_EQ(append_utf8_repaired(out, "ab\xE2\x82", false), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_utf8_repaired(out, "\xE2\x28", false), 2u);
  EXPECT_EQ(out, r + "(");
}

TEST(Utf8, RandomBytesNeverCrashAndRoundTripAsRepaired) {
  std::mt19937 rng(123);
  const std::vector<std::string> fragments = {
      "\xF0\x9F\x98", "\xE2\x82",         "\xC3",     "\x80", "\xBF", "\xC0\xAF", "\xE0\x80\xAF",
      "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFE\xFF", " ",    "a",    "'s",       "\n",
      "<|eot_id|>",   "\xE4\xB8\xAD"};
  for (int i = 0; i < 3000; ++i) {
    std::string bytes;
    const int length = static_cast<int>(rng() % 120);
    for (int k = 0; k < length; ++k) {
      if (rng() % 2) {
        bytes += static_cast<char>(rng() % 256);
      } else {
        bytes += fragments[rng() % fragments.size()];
      }
    }
    std::string expected;
    append_utf8_repaired(expected, bytes);
    const std::vector<int32_t> ids = llama3_style().encode(bytes, false);
    ASSERT_EQ(ids, llama3_style().encode(expected, false));
    ASSERT_EQ(llama3_style().decode(ids), expected);
  }
}

TEST(Tokenizer, LongInputsStayFast) {
  // One pre-token of a million bytes goes through the heap merge; runs of one class through the
  // regex without exhausting PCRE2's JIT stack.
  const Tokenizer& tok = llama3_style();
  for (const std::string& text :
       {std::string(1 << 20, 'a'), std::string(1 << 20, ' '), std::string(1 << 20, '7'),
        std::string(1 << 19, '\n') + std::string(1 << 19, ' '), std::string(1 << 20, '!')}) {
    const std::vector<int32_t> ids = tok.encode(text, false);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(tok.decode(ids), text);
  }
  std::string cjk;
  for (int i = 0; i < 100000; ++i) cjk += "\xE4\xB8\xAD\xE6\x96\x87";  // 中文, no spaces: one word
  EXPECT_EQ(tok.decode(tok.encode(cjk, false)), cjk);
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  const std::vector<std::string> corpus = read_corpus();
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& line : corpus) expected.push_back(llama3_style().encode(line));
  // A second tokenizer in the same threads checks that per-thread caches do not mix them up.
  const Tokenizer gpt2 = Tokenizer::from_hf_json(kFixtures + "/gpt2-style.json");
  std::vector<std::vector<int32_t>> expected_gpt2;
  for (const std::string& line : corpus) expected_gpt2.push_back(gpt2.encode(line));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int pass = 0; pass < 2; ++pass) {
        for (size_t i = t; i < corpus.size() + t; ++i) {
          const size_t index = i % corpus.size();
          mismatches[t] += llama3_style().encode(corpus[index]) != expected[index];
          mismatches[t] += gpt2.encode(corpus[index]) != expected_gpt2[index];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
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

// ---- GGUF vocabularies ----

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

// Results worked out with Python's unicodedata.normalize("NFC", ...).
TEST(Nfc, KnownCases) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plain ASCII, caf\xC3\xA9", "plain ASCII, caf\xC3\xA9"},
      {"e\xCC\x81", "\xC3\xA9"},                                 // e + U+0301 -> U+00E9
      {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"},  // Hangul L V T -> U+AC01
      {"a\xCC\x81\xCC\xA3", "\xE1\xBA\xA1\xCC\x81"},             // reordered: U+1EA1 U+0301
      {"\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC"},              // U+0958 is excluded
      {"\xE2\x84\xAB", "\xC3\x85"},                              // U+212B -> U+00C5
      {"A\xCC\x8A\xCC\x81", "\xC7\xBA"},                         // two steps -> U+01FA
      {"x\xCC\x81\xCC\x81", "x\xCC\x81\xCC\x81"},                // nothing to compose
  };
  for (const auto& [input, expected] : cases) EXPECT_EQ(nfc_normalize(input), expected) << input;
}

// ---- every tokenizer.ggml.pre name against `tokenizers` ----

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
GgufVocab spm_vocab(bool with_bytes) {
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

std::string write_spm_gguf(const TempDir& dir, const GgufVocab& v, bool space_prefix = true) {
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

TEST(Gguf, SentencePieceKnownIds) {
  TempDir dir;
  const GgufVocab v = spm_vocab(true);
  const Tokenizer tok = Tokenizer::from_model_path(write_spm_gguf(dir, v));
  auto id = [&](const std::string& text) { return *tok.token_id(text); };
  const int32_t space = id("\xE2\x96\x81"), hello = id("\xE2\x96\x81hello");
  auto byte = [](int b) { return 3 + b; };
  EXPECT_EQ(tok.vocab_size(), static_cast<int64_t>(v.tokens.size()));
  EXPECT_EQ(tok.bos_id(), 1);
  // "▁hello": ll (-0.5), then llo (-0.7), he (-1.5), hello (-0.1), ▁hello (-0.2).
  EXPECT_EQ(tok.encode("hello"), (std::vector<int32_t>{1, hello}));
  EXPECT_EQ(tok.encode("hello hello", false), (std::vector<int32_t>{hello, hello}));
  // 'i' is no piece: byte fallback.
  EXPECT_EQ(tok.encode("hi", false), (std::vector<int32_t>{space, id("h"), byte('i')}));
  EXPECT_EQ(tok.encode("\xC3\xA9", false), (std::vector<int32_t>{space, byte(0xC3), byte(0xA9)}));
  // Equal scores: the leftmost pair merges first (▁ aa a, not ▁ a aa).
  EXPECT_EQ(tok.encode("aaa", false), (std::vector<int32_t>{space, id("aa"), id("a")}));
  // Special and user-defined tokens split the text; each fragment after one gets a "▁" again.
  EXPECT_EQ(tok.encode("hello</s>hello[X]hello", false),
            (std::vector<int32_t>{hello, 2, hello, id("[X]"), hello}));
  EXPECT_EQ(tok.encode("hello</s>hello", false, /*parse_special=*/false).size(), 6u);
  EXPECT_TRUE(tok.is_special(2));
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_FALSE(tok.is_special(id("[X]")));

  for (const std::string_view text :
       {"hello hello", "hi  there\xC3\xA9", " hello", "hello</s>hello", "a[X]hello ", "", "   "}) {
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text) << text;
  }
  EXPECT_EQ(tok.decode(tok.encode("hello</s>hello")), "<s>hello</s>hello");
  EXPECT_EQ(tok.decode(tok.encode("hello</s>hello"), true), "hellohello");

  std::mt19937 rng(5);
  for (int trial = 0; trial < 1000; ++trial) {  // any bytes: no crash, round trip as repaired
    std::string bytes;
    for (unsigned k = rng() % 60; k > 0; --k)
      bytes += static_cast<char>(rng() % 3 ? rng() % 256 : ' ');
    std::string repaired;
    append_utf8_repaired(repaired, bytes);
    if (repaired.find("\xE2\x96\x81") != std::string::npos) continue;  // "▁" decodes as a space
    ASSERT_EQ(tok.decode(tok.encode(bytes, false)), repaired);
  }

  const Tokenizer no_prefix = Tokenizer::from_model_path(write_spm_gguf(dir, v, false));
  EXPECT_EQ(no_prefix.encode("hello", false), (std::vector<int32_t>{id("hello")}));
  EXPECT_EQ(no_prefix.decode(no_prefix.encode(" hello hello", false)), " hello hello");
}

TEST(Gguf, SentencePieceWithoutByteTokensUsesUnknown) {
  TempDir dir;
  const Tokenizer tok = Tokenizer::from_model_path(write_spm_gguf(dir, spm_vocab(false)));
  const int32_t space = *tok.token_id("\xE2\x96\x81");
  EXPECT_EQ(tok.encode("\xC3\xA9h", false), (std::vector<int32_t>{space, 0, *tok.token_id("h")}));
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

// ---- streaming decode ----

// GPT-2's byte-to-character table, to name single-byte tokens.
std::string byte_token(unsigned char b) {
  uint32_t code = b;
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  if (!printable) {
    uint32_t next = 256;
    for (uint32_t c = 0; c < b; ++c) {
      if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++next;
    }
    code = next;
  }
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
  return out;
}

std::vector<int32_t> byte_ids(const Tokenizer& tok, std::string_view bytes) {
  std::vector<int32_t> ids;
  for (unsigned char b : bytes) ids.push_back(*tok.token_id(byte_token(b)));
  return ids;
}

TEST(StreamDecoder, HoldsCharactersSplitAcrossTokens) {
  const Tokenizer& tok = llama3_style();
  TokenStreamDecoder stream(tok);
  // 😀 (4 bytes), é (2), 中 (3), one byte per token.
  const std::vector<int32_t> ids = byte_ids(tok, "\xF0\x9F\x98\x80\xC3\xA9\xE4\xB8\xAD");
  const std::vector<std::string> expected = {"",         "", "", "\xF0\x9F\x98\x80", "",
                                             "\xC3\xA9", "", "", "\xE4\xB8\xAD"};
  const std::vector<size_t> pending = {1, 2, 3, 0, 1, 0, 1, 2, 0};
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(stream.push(ids[i]), expected[i]) << i;
    EXPECT_EQ(stream.pending_bytes(), pending[i]) << i;
  }
  EXPECT_EQ(stream.finish(), "");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementWhenCertain) {
  const Tokenizer& tok = llama3_style();
  const std::string r = "\xEF\xBF\xBD";
  TokenStreamDecoder stream(tok);
  EXPECT_EQ(stream.push(byte_ids(tok, "\x80")[0]), r);  // can never become valid: at once
  EXPECT_EQ(stream.push(byte_ids(tok, "\xE2")[0]), "");
  EXPECT_EQ(stream.push(*tok.token_id("a")), r + "a");  // the lead byte is cut short
  EXPECT_EQ(stream.push(byte_ids(tok, "\xF0")[0]), "");
  EXPECT_EQ(stream.push(byte_ids(tok, "\x9F")[0]), "");
  EXPECT_EQ(stream.finish(), r);  // incomplete at the end
  EXPECT_EQ(stream.push(*tok.token_id("a")), "a");
}

TEST(StreamDecoder, ConcatenationEqualsDecode) {
  const Tokenizer& tok = llama3_style();
  std::mt19937 rng(7);
  for (bool skip : {false, true}) {
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<int32_t> ids;
      const int length = static_cast<int>(rng() % 40);
      for (int i = 0; i < length; ++i) {
        ids.push_back(static_cast<int32_t>(rng() % 8 == 0 ? 4000 + rng() % 256 : rng() % 4000));
      }
      TokenStreamDecoder stream(tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string piece = stream.push(id);
        std::string valid;
        append_utf8_repaired(valid, piece);
        ASSERT_EQ(valid, piece) << "push returned invalid UTF-8";
        streamed += piece;
      }
      streamed += stream.finish();
      ASSERT_EQ(streamed, tok.decode(ids, skip));
    }
  }
  // Real tokens of text with multi-byte characters.
  for (const std::string& line : read_corpus()) {
    TokenStreamDecoder stream(tok, false);
    std::string streamed;
    for (int32_t id : tok.encode(line, false)) streamed += stream.push(id);
    streamed += stream.finish();
    ASSERT_EQ(streamed, line);
  }
}

TEST(StreamDecoder, SentencePieceDropsTheFragmentSpace) {
  TempDir dir;
  const Tokenizer tok = Tokenizer::from_model_path(write_spm_gguf(dir, spm_vocab(true)));
  TokenStreamDecoder stream(tok);
  std::string streamed;
  for (int32_t id : tok.encode("hello hello</s>hello")) streamed += stream.push(id);
  streamed += stream.finish();
  EXPECT_EQ(streamed, "hello hellohello");  // skip_special defaults to true for streams
  EXPECT_EQ(streamed, tok.decode(tok.encode("hello hello</s>hello"), true));
}

}  // namespace
}  // namespace edgelm
