#include "models/tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "models/tokenizer/utf8.h"

namespace edgelm {
namespace {

struct CombiningRun {
  uint32_t first;
  uint32_t last;
  uint8_t combining_class;
};

struct Decomposition {
  uint32_t code;
  uint32_t first;
  uint32_t second;  // 0 for a singleton
  bool recomposes;
};

#include "models/tokenizer/unicode_nfc.inc"

// Hangul syllables decompose and compose by arithmetic (Unicode's section 3.12).
constexpr uint32_t kHangulBase = 0xAC00, kLeadBase = 0x1100, kVowelBase = 0x1161,
                   kTrailBase = 0x11A7;
constexpr uint32_t kLeadCount = 19, kVowelCount = 21, kTrailCount = 28;
constexpr uint32_t kSyllableCount = kLeadCount * kVowelCount * kTrailCount;

// Every code point below this one has combining class 0, no canonical decomposition that changes
// under NFC, and composes with nothing before it: text made only of them is already NFC.
constexpr uint32_t kFirstNonTrivial = 0x300;

int combining_class(uint32_t code) {
  if (code < kFirstNonTrivial) return 0;
  const auto* end = std::end(kCombiningRuns);
  const auto* it =
      std::upper_bound(std::begin(kCombiningRuns), end, code,
                       [](uint32_t c, const CombiningRun& run) { return c < run.first; });
  if (it == std::begin(kCombiningRuns)) return 0;
  --it;
  return code <= it->last ? it->combining_class : 0;
}

const Decomposition* find_decomposition(uint32_t code) {
  const auto* end = std::end(kDecompositions);
  const auto* it = std::lower_bound(std::begin(kDecompositions), end, code,
                                    [](const Decomposition& d, uint32_t c) { return d.code < c; });
  return it != end && it->code == code ? it : nullptr;
}

void decompose(uint32_t code, std::vector<uint32_t>& out) {
  if (code >= kHangulBase && code < kHangulBase + kSyllableCount) {
    const uint32_t index = code - kHangulBase;
    out.push_back(kLeadBase + index / (kVowelCount * kTrailCount));
    out.push_back(kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount);
    if (index % kTrailCount != 0) out.push_back(kTrailBase + index % kTrailCount);
    return;
  }
  // U+00C0 (À) is the first code point with a canonical decomposition.
  const Decomposition* d = code < 0xC0 ? nullptr : find_decomposition(code);
  if (d == nullptr) {
    out.push_back(code);
    return;
  }
  decompose(d->first, out);
  if (d->second != 0) decompose(d->second, out);
}

// (first << 21 | second) → the primary composite, sorted by key.
const std::vector<std::pair<uint64_t, uint32_t>>& composition_table() {
  static const std::vector<std::pair<uint64_t, uint32_t>> table = [] {
    std::vector<std::pair<uint64_t, uint32_t>> pairs;
    for (const Decomposition& d : kDecompositions) {
      if (d.recomposes) pairs.emplace_back((uint64_t{d.first} << 21) | d.second, d.code);
    }
    std::sort(pairs.begin(), pairs.end());
    return pairs;
  }();
  return table;
}

// The primary composite of (first, second), or 0 when there is none.
uint32_t compose(uint32_t first, uint32_t second) {
  if (first >= kLeadBase && first < kLeadBase + kLeadCount && second >= kVowelBase &&
      second < kVowelBase + kVowelCount) {
    return kHangulBase + ((first - kLeadBase) * kVowelCount + (second - kVowelBase)) * kTrailCount;
  }
  if (first >= kHangulBase && first < kHangulBase + kSyllableCount &&
      (first - kHangulBase) % kTrailCount == 0 && second > kTrailBase &&
      second < kTrailBase + kTrailCount) {
    return first + (second - kTrailBase);
  }
  const auto& table = composition_table();
  const uint64_t key = (uint64_t{first} << 21) | second;
  const auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(key, uint32_t{0}));
  return it != table.end() && it->first == key ? it->second : 0;
}

}  // namespace

std::string nfc_normalize(std::string_view text) {
  // A lead byte of 0xCC or more starts a code point at or above U+0300.
  if (std::none_of(text.begin(), text.end(),
                   [](char c) { return static_cast<unsigned char>(c) >= 0xCC; })) {
    return std::string(text);
  }
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::vector<uint32_t> codes;
  codes.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t code;
    i += utf8::decode_valid(p + i, code);
    decompose(code, codes);
  }
  // Canonical ordering: each run of non-starters sorted by combining class, stably.
  for (size_t i = 0; i < codes.size();) {
    if (combining_class(codes[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < codes.size() && combining_class(codes[end]) != 0) ++end;
    std::stable_sort(codes.begin() + static_cast<std::ptrdiff_t>(i),
                     codes.begin() + static_cast<std::ptrdiff_t>(end), [](uint32_t a, uint32_t b) {
                       return combining_class(a) < combining_class(b);
                     });
    i = end;
  }
  // Canonical composition: a character joins the last starter unless something between them
  // blocks it (a starter, or a mark of the same or a higher class).
  std::vector<uint32_t> composed;
  composed.reserve(codes.size());
  std::ptrdiff_t starter = -1;  // index in `composed`
  int last_class = 0;           // class of the last character kept after the starter
  for (uint32_t code : codes) {
    const int klass = combining_class(code);
    if (starter >= 0) {
      const bool adjacent = static_cast<std::ptrdiff_t>(composed.size()) - 1 == starter;
      if (adjacent || (last_class != 0 && last_class < klass)) {
        if (const uint32_t joined = compose(composed[static_cast<size_t>(starter)], code)) {
          composed[static_cast<size_t>(starter)] = joined;
          continue;
        }
      }
    }
    if (klass == 0) {
      starter = static_cast<std::ptrdiff_t>(composed.size());
      last_class = 0;
    } else {
      last_class = klass;
    }
    composed.push_back(code);
  }
  std::string out;
  out.reserve(text.size());
  for (uint32_t code : composed) utf8::append(out, code);
  return out;
}

}  // namespace edgelm
