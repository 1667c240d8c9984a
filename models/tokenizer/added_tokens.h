// Added tokens (tokenizer.json's added_tokens; a GGUF's control and user-defined tokens): found in
// the text before anything else, so that "<|eot_id|>" written in text becomes its id and no regex
// or merge ever sees across it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/tokenizer/hash_tables.h"
#include "models/tokenizer/vocabulary.h"

namespace edgelm::tokenizer {

struct AddedToken {
  int32_t id = kNone;
  std::string content;
  bool single_word = false;  // only where no word character is on either side
  bool lstrip = false;       // takes the White_Space before it
  bool rstrip = false;       // takes the White_Space after it
  bool special = false;      // skipped by decode(skip_special); plain text without parse_special
};

// Finds added tokens in text: the leftmost match, and the longest one starting there (the
// Aho-Corasick LeftmostLongest rule of `tokenizers`). A byte trie, walked only from positions
// whose byte can start a token.
class TokenMatcher {
 public:
  // True when no token has been added.
  bool empty() const { return nodes_.size() <= 1; }
  // Adds `content` (ignored when empty), reported as `index` when found.
  void add(std::string_view content, int32_t index);

  struct Match {
    size_t begin = 0;
    size_t end = 0;
    int32_t index = kNone;
  };
  // The leftmost-longest match starting at or after `from`; false when there is none.
  bool find(std::string_view text, size_t from, Match& match) const;

 private:
  struct Node {
    int32_t index = kNone;
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
  };
  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};
};

// The added tokens of one tokenizer: first those matched on the raw text, then the "normalized"
// ones on what the normalizer makes of the text between them (with no normalizer, that only
// changes which one wins an overlap, as in `tokenizers`).
class AddedTokens {
 public:
  enum class Pass { Raw, Normalized };

  // Adds `token`, to be found in the raw text or, with Pass::Normalized, after the normalizer.
  void add(AddedToken token, Pass pass);
  size_t size() const { return tokens_.size(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // Sets kMatchedInText, and kSpecial for special ones, on every added token's id.
  void mark(Vocabulary& vocab) const;

  // Cuts `text` at the added tokens of `pass`: on_text(piece) for each non-empty stretch between
  // them and on_token(id) for each token, in order. With parse_special false, special tokens stay
  // text. single_word, lstrip and rstrip apply as in `tokenizers`.
  template <class OnText, class OnToken>
  void split(Pass pass, std::string_view text, bool parse_special, OnText&& on_text,
             OnToken&& on_token) const {
    const TokenMatcher& matcher = pass == Pass::Raw ? raw_ : normalized_;
    if (matcher.empty()) {
      if (!text.empty()) on_text(text);
      return;
    }
    size_t text_start = 0;  // end of the last token taken
    size_t search_from = 0;
    Taken taken;
    while (next(matcher, text, parse_special, text_start, search_from, taken)) {
      if (taken.begin > text_start) on_text(text.substr(text_start, taken.begin - text_start));
      on_token(taken.id);
      text_start = taken.end;
    }
    if (text_start < text.size()) on_text(text.substr(text_start));
  }

 private:
  struct Taken {
    size_t begin = 0;  // with the White_Space lstrip took
    size_t end = 0;    // with the White_Space rstrip took
    int32_t id = kNone;
  };
  // The next token to take at or after `search_from` (which moves past every match looked at),
  // never reaching back before `text_start`; false when there is none.
  bool next(const TokenMatcher& matcher, std::string_view text, bool parse_special,
            size_t text_start, size_t& search_from, Taken& taken) const;

  std::vector<AddedToken> tokens_;
  TokenMatcher raw_;
  TokenMatcher normalized_;
};

}  // namespace edgelm::tokenizer
