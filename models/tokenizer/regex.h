// The pre-tokenizer's regexes: PCRE2 in UTF + UCP mode with `\s` as Oniguruma reads it, so that
// patterns written for the `tokenizers` package split text as it does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "models/tokenizer/utf8.h"

namespace edgelm::tokenizer {

// A compiled regex (JIT-compiled when PCRE2 has a JIT). The compiled pattern is shared read-only;
// the match data is per thread, so one Regex may match in many threads at once.
class Regex {
 public:
  // Throws edgelm::Error "<where>: bad regex '<pattern>' at offset N: <reason>".
  Regex(std::string_view pattern, const std::string& where);

  // Calls emit(begin, end) for every piece of `text` in order, covering all of it: each match,
  // and each stretch between matches (the Split pre-tokenizer's Isolated behaviour). Empty
  // matches produce no piece, as with Oniguruma's iterator in `tokenizers`. `text` must be valid
  // UTF-8.
  template <class Emit>
  void split(std::string_view text, Emit&& emit) const {
    const size_t n = text.size();
    size_t piece_start = 0;  // start of the not-yet-emitted stretch
    size_t search_from = 0;
    Scratch& scratch = thread_scratch();
    Match match;
    while (search_from < n && find(scratch, text, search_from, match)) {
      if (match.begin > piece_start) emit(piece_start, match.begin);
      if (match.end == match.begin) {
        // Step over one character so that the search moves on.
        uint32_t code;
        search_from =
            match.begin +
            utf8::decode(reinterpret_cast<const unsigned char*>(text.data()) + match.begin,
                         n - match.begin, code);
        piece_start = match.begin;
        continue;
      }
      emit(match.begin, match.end);
      piece_start = search_from = match.end;
    }
    if (piece_start < n) emit(piece_start, n);
  }

  // The length of a match starting at text[0]; 0 when there is none.
  size_t match_at_start(std::string_view text) const;

 private:
  struct Match {
    size_t begin = 0;
    size_t end = 0;
  };
  struct Compiled;
  struct Scratch;  // PCRE2's match data and JIT stack

  // The calling thread's scratch, shared by every Regex.
  static Scratch& thread_scratch();
  // PCRE2's return code for a match at or after `from`.
  int run(Scratch& scratch, std::string_view text, size_t from) const;
  // The first match in `text` starting at or after `from`; false when there is none. Throws
  // edgelm::Error when PCRE2 fails (its JIT stack exhausted, for one).
  bool find(Scratch& scratch, std::string_view text, size_t from, Match& match) const;

  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace edgelm::tokenizer
