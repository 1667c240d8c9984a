// Synthetic retrieval for eviction experiments: passkey documents (filler sentences with a
// numeric key planted at a chosen depth) that end with the question, or also ask it before the
// document, at several lengths; the greedy answer is correct when its first run of digits is the
// key. The full cache and every (policy, budget) cell answer through the same function,
// answer_passkey, so a cell's answer is compared with the full cache's on equal terms.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace edgelm {

class ChatTemplate;
class Generator;
class Tokenizer;

// Where the question goes: "end" (after the document only) or "both" (also before it).
inline constexpr std::string_view kPasskeyPlacements[] = {"end", "both"};

struct PasskeyOptions {
  std::vector<int64_t> lengths;  // document tokens (filler and key), each at least 16
  std::vector<double> depths;    // where the key sits, as a share of the document, in [0, 1]
  std::vector<std::string> placements = {"end", "both"};
  int64_t trials = 2;  // keys per (length, depth); the same keys for every placement
  int64_t digits = 5;  // digits of a key, 1 to 18
  uint64_t seed = 0;   // draws the keys
  // Filler text, split into sentences; empty: the built-in sentences (kPasskeyFiller).
  std::string haystack;
};

// The built-in filler sentences, cycled in order.
extern const std::vector<std::string> kPasskeyFiller;

struct PasskeyCase {
  int64_t length = 0;  // requested document tokens
  double depth = 0.0;
  std::string placement;
  int64_t trial = 0;
  std::string key;
  int64_t document_tokens = 0;  // the document's tokens as built (>= length, close to it)
  std::vector<int32_t> prompt;  // the whole prompt: instructions, document, question, answer cue
};

// Builds every (length, depth, placement, trial) case, in that nesting order. With `chat`, the
// instructions, document and question are the user message of a conversation rendered by the
// template (its default system message included), and the answer cue "The pass key is" starts the
// assistant's reply; without, the same text is plain, encoded with the tokenizer's add-BOS setting.
// Throws edgelm::Error naming the setting for lengths, depths, placements, trials or digits out of
// range, or a haystack without a sentence.
std::vector<PasskeyCase> make_passkey_cases(const Tokenizer& tokenizer, const ChatTemplate* chat,
                                            const PasskeyOptions& options);

// True when the first run of ASCII digits in `answer` is exactly `key`.
bool passkey_answer_matches(std::string_view answer, std::string_view key);

struct PasskeyAnswerOptions {
  int64_t max_tokens = 8;         // greedy tokens generated at most
  std::vector<int32_t> stop_ids;  // tokens that end the answer (not part of it)
};

struct PasskeyTrial {
  std::string answer;  // the greedy continuation, decoded
  bool correct = false;
  // The most slots the cache held while answering, as seen after each step (run_retrieval adds
  // what a policy held before its evictions, such as a whole prompt before compressing it).
  int64_t max_slots = 0;
};

// Prefills the case's prompt through `generator` (its cache empty, its CacheManager evicting as it
// does), then decodes greedily (the first largest logit) up to max_tokens or a stop token, and
// scores the decoded text with passkey_answer_matches.
PasskeyTrial answer_passkey(Generator& generator, const Tokenizer& tokenizer,
                            const PasskeyCase& passkey, const PasskeyAnswerOptions& options);

}  // namespace edgelm
