// The SentencePiece model of GGUF "llama" vocabularies, on a vocabulary small enough to work out
// the ids by hand.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.h"
#include "tests/tokenizer_test_util.h"

namespace edgelm {
namespace {

using namespace tokenizer_test;

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

}  // namespace
}  // namespace edgelm
