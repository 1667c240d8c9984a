#include "models/tokenizer/sentencepiece.h"

#include <algorithm>
#include <string>

#include "models/tokenizer/utf8.h"

namespace edgelm::tokenizer {
namespace {

// Scratch buffers of the merge loop, per thread, so that merging a fragment allocates little.
struct PieceScratch {
  struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t begin;   // byte offset of the piece in the fragment
    uint32_t length;  // byte length; 0 once merged away
  };
  std::vector<Symbol> symbols;
  struct Candidate {
    float score;      // the merged piece's score
    int32_t left;     // symbol index of the pair's left side
    uint32_t length;  // bytes of the merged piece
  };
  std::vector<Candidate> heap;
};

PieceScratch& piece_scratch() {
  thread_local PieceScratch scratch;
  return scratch;
}

}  // namespace

void SentencePieceModel::encode_fragment(std::string_view text, bool prefix_space,
                                         std::vector<int32_t>& out) const {
  // SentencePiece sees spaces as "▁", and a "▁" in front of the text.
  std::string normalized;
  normalized.reserve(text.size() + 16);
  if (prefix_space) normalized += kSpaceSymbol;
  for (char c : text) {
    if (c == ' ') {
      normalized += kSpaceSymbol;
    } else {
      normalized += c;
    }
  }
  PieceScratch& scratch = piece_scratch();
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  symbols.clear();
  heap.clear();
  const auto* bytes = reinterpret_cast<const unsigned char*>(normalized.data());
  for (size_t i = 0; i < normalized.size();) {
    uint32_t code;
    const size_t length = utf8::decode(bytes + i, normalized.size() - i, code);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, kNone, static_cast<uint32_t>(i), static_cast<uint32_t>(length)});
    if (index > 0) symbols[index - 1].next = index;
    i += length;
  }
  auto piece = [&](uint32_t begin, uint32_t length) {
    return std::string_view(normalized).substr(begin, length);
  };
  // Highest score first, then leftmost.
  auto later = [](const PieceScratch::Candidate& a, const PieceScratch::Candidate& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
  };
  auto propose = [&](int32_t left) {
    if (left == kNone || symbols[left].next == kNone) return;
    const PieceScratch::Symbol& a = symbols[left];
    const PieceScratch::Symbol& b = symbols[a.next];
    const int32_t id = piece_ids.find(piece(a.begin, a.length + b.length));
    if (id == kNone) return;
    heap.push_back({scores[static_cast<size_t>(id)], left, a.length + b.length});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) propose(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const PieceScratch::Candidate top = heap.back();
    heap.pop_back();
    PieceScratch::Symbol& left = symbols[top.left];
    // Symbols only grow, so an unchanged total length means neither side has merged since.
    if (left.length == 0 || left.next == kNone ||
        left.length + symbols[left.next].length != top.length) {
      continue;
    }
    PieceScratch::Symbol& right = symbols[left.next];
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next != kNone) symbols[right.next].prev = top.left;
    propose(left.prev);
    propose(top.left);
  }
  for (int32_t i = symbols.empty() ? kNone : 0; i != kNone; i = symbols[i].next) {
    const std::string_view text_piece = piece(symbols[i].begin, symbols[i].length);
    const int32_t id = piece_ids.find(text_piece);
    if (id != kNone) {
      out.push_back(id);
      continue;
    }
    // Not a piece (only single characters get here): its bytes as <0xNN>, else unknown.
    for (unsigned char byte : text_piece) {
      if (fallback_ids[byte] != kNone) {
        out.push_back(fallback_ids[byte]);
      } else if (unk_id != kNone) {
        out.push_back(unk_id);
        break;
      }
    }
  }
}

}  // namespace edgelm::tokenizer
