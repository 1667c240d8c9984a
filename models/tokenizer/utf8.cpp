#include "models/tokenizer/utf8.h"

#include <cstring>

#include "models/tokenizer.h"

namespace edgelm {

namespace utf8 {

bool is_valid(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // Eight ASCII bytes at a time: most text is mostly ASCII.
    if (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const Sequence sequence = classify(p + i, n - i);
    if (sequence.status != Status::Valid) return false;
    i += sequence.length;
  }
  return true;
}

}  // namespace utf8

size_t append_utf8_repaired(std::string& out, std::string_view bytes, bool final) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t run_start = 0;  // start of the valid run not yet appended
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const utf8::Sequence sequence = utf8::classify(p + i, n - i);
    if (sequence.status == utf8::Status::Valid) {
      i += sequence.length;
      continue;
    }
    out.append(bytes.substr(run_start, i - run_start));
    if (sequence.status == utf8::Status::Incomplete && !final) return i;
    out += kReplacement;
    i += sequence.length;
    run_start = i;
  }
  out.append(bytes.substr(run_start, n - run_start));
  return n;
}

}  // namespace edgelm
