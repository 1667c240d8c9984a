// The tokenizer end to end on tokenizer.json fixtures (byte-level BPE): ids against the
// `tokenizers` package on the generated corpus, invalid UTF-8, the public accessors, long inputs
// and concurrent encodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "models/tokenizer.h"
#include "tests/tokenizer_test_util.h"

namespace edgelm {
namespace {

using namespace tokenizer_test;

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return bytes;
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

// ---- API, long inputs, threads ----

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

}  // namespace
}  // namespace edgelm
