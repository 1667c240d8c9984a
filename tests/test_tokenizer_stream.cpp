// TokenStreamDecoder: characters split across tokens, U+FFFD as soon as it is certain, and push +
// finish equal to decode for byte-level BPE and SentencePiece.
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
