#include "models/tokenizer/added_tokens.h"

#include <algorithm>

#include "models/tokenizer/regex.h"
#include "models/tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

// Unicode's White_Space property: what `\s` means to Oniguruma (the engine of the `tokenizers`
// package) and to Rust's regex crate.
bool is_white_space(uint32_t code) {
  return (code >= 0x09 && code <= 0x0D) || code == 0x20 || code == 0x85 || code == 0xA0 ||
         code == 0x1680 || (code >= 0x2000 && code <= 0x200A) || code == 0x2028 || code == 0x2029 ||
         code == 0x202F || code == 0x205F || code == 0x3000;
}

// Matches a word character at the start of the subject, in the sense of Rust's regex `\w`
// (Alphabetic, marks, decimal digits, connector punctuation, Join_Control), which `tokenizers`
// uses to decide whether a single_word token stands alone.
const Regex& word_char_regex() {
  static const Regex regex("^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]",
                           "[tokenizer] word-character regex");
  return regex;
}

bool starts_with_word_char(std::string_view text) {
  return !text.empty() && word_char_regex().match_at_start(text) > 0;
}

}  // namespace

void TokenMatcher::add(std::string_view content, int32_t index) {
  if (content.empty()) return;
  if (nodes_.empty()) nodes_.emplace_back();
  int32_t node = 0;
  for (unsigned char byte : content) {
    auto& children = nodes_[node].children;
    const auto it =
        std::lower_bound(children.begin(), children.end(), byte,
                         [](const auto& child, unsigned char b) { return child.first < b; });
    if (it != children.end() && it->first == byte) {
      node = it->second;
      continue;
    }
    const auto next = static_cast<int32_t>(nodes_.size());
    children.insert(it, {byte, next});
    nodes_.emplace_back();  // may move `children`, which is not used after this
    node = next;
  }
  nodes_[node].index = index;
  first_byte_[static_cast<unsigned char>(content[0])] = true;
}

bool TokenMatcher::find(std::string_view text, size_t from, Match& match) const {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[p[i]]) continue;
    int32_t node = 0;
    int32_t best = kNone;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const auto& children = nodes_[node].children;
      auto it =
          std::lower_bound(children.begin(), children.end(), p[j],
                           [](const auto& child, unsigned char b) { return child.first < b; });
      if (it == children.end() || it->first != p[j]) break;
      node = it->second;
      if (nodes_[node].index != kNone) {
        best = nodes_[node].index;
        best_end = j + 1;
      }
    }
    if (best != kNone) {
      match = {i, best_end, best};
      return true;
    }
  }
  return false;
}

void AddedTokens::add(AddedToken token, Pass pass) {
  (pass == Pass::Raw ? raw_ : normalized_).add(token.content, static_cast<int32_t>(tokens_.size()));
  tokens_.push_back(std::move(token));
}

void AddedTokens::mark(Vocabulary& vocab) const {
  for (const AddedToken& token : tokens_) {
    vocab.flags[static_cast<size_t>(token.id)] |= kMatchedInText;
    if (token.special) vocab.flags[static_cast<size_t>(token.id)] |= kSpecial;
  }
}

bool AddedTokens::next(const TokenMatcher& matcher, std::string_view text, bool parse_special,
                       size_t text_start, size_t& search_from, Taken& taken) const {
  TokenMatcher::Match match;
  while (matcher.find(text, search_from, match)) {
    // A rejected match is not searched again for shorter tokens inside it, as in `tokenizers`.
    search_from = match.end;
    const AddedToken& token = tokens_[static_cast<size_t>(match.index)];
    if (!parse_special && token.special) continue;
    size_t begin = match.begin, end = match.end;
    if (token.single_word) {
      const bool word_before = begin > 0 && [&] {
        // The character that ends text[0, begin).
        size_t i = begin - 1;
        while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
        return starts_with_word_char(text.substr(i, begin - i));
      }();
      const bool word_after = end < text.size() && starts_with_word_char(text.substr(end));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t new_begin = begin;
      while (new_begin > text_start) {
        size_t i = new_begin - 1;
        while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
        uint32_t code;
        utf8::decode(reinterpret_cast<const unsigned char*>(text.data()) + i, text.size() - i,
                     code);
        if (!is_white_space(code)) break;
        new_begin = i;
      }
      begin = std::max(new_begin, text_start);
    }
    if (token.rstrip) {
      while (end < text.size()) {
        uint32_t code;
        const size_t length = utf8::decode(
            reinterpret_cast<const unsigned char*>(text.data()) + end, text.size() - end, code);
        if (!is_white_space(code)) break;
        end += length;
      }
    }
    taken = {begin, end, token.id};
    return true;
  }
  return false;
}

}  // namespace edgelm::tokenizer
