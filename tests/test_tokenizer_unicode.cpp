// UTF-8 repair (the maximal-subpart rule, on known cases and random bytes through the tokenizer)
// and NFC.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/tokenizer.h"
#include "models/tokenizer/unicode_nfc.h"
#include "tests/tokenizer_test_util.h"

namespace edgelm {
namespace {

using namespace tokenizer_test;

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

}  // namespace
}  // namespace edgelm
