#include "eval/eviction_eval_retrieval.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

#include "core/error.h"
#include "models/chat.h"
#include "models/tokenizer.h"
#include "runtime/generator.h"

namespace edgelm {

const std::vector<std::string> kPasskeyFiller = {
    "The morning train left the station on time.",
    "A light rain fell on the quiet streets of the town.",
    "The baker set out fresh loaves on the wooden shelves.",
    "Children walked to school along the river path.",
    "An old clock in the square struck the hour.",
    "The market stalls filled with apples, pears and plums.",
    "A cat slept in the sun on a low stone wall.",
    "The ferry crossed the bay twice before noon.",
    "Farmers brought their carts in from the fields.",
    "The library opened its doors at nine o'clock.",
};

namespace {

constexpr std::string_view kInstructions =
    "There is a pass key hidden in the following text. Find it and remember it.";
constexpr std::string_view kQuestion = "What is the pass key?";
// Written after the question (plain) or as the start of the assistant's reply (chat), so that the
// key is the next thing the model writes, whichever way it would phrase an answer.
constexpr std::string_view kAnswerCue = "The pass key is";

std::string needle(const std::string& key) {
  return "The pass key is " + key + ". Remember it. " + key + " is the pass key.";
}

// The haystack's sentences: whitespace runs become one space, and a sentence ends after '.', '!'
// or '?' followed by a space.
std::vector<std::string> split_sentences(std::string_view text) {
  std::string flat;
  for (const char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (space) {
      if (!flat.empty() && flat.back() != ' ') flat += ' ';
    } else {
      flat += c;
    }
  }
  std::vector<std::string> sentences;
  size_t start = 0;
  for (size_t i = 0; i + 1 < flat.size(); ++i) {
    if ((flat[i] == '.' || flat[i] == '!' || flat[i] == '?') && flat[i + 1] == ' ') {
      sentences.push_back(flat.substr(start, i + 1 - start));
      start = i + 2;
    }
  }
  if (start < flat.size()) sentences.push_back(flat.substr(start));
  std::erase_if(sentences, [](const std::string& s) { return s.empty() || s == " "; });
  return sentences;
}

// The document of n filler sentences (cycled) with the needle after round(depth * n) of them.
std::string document(const std::vector<std::string>& filler, int64_t n, double depth,
                     const std::string& key) {
  const auto at = static_cast<int64_t>(std::llround(depth * static_cast<double>(n)));
  std::string text;
  const auto append = [&](const std::string& sentence) {
    if (!text.empty()) text += ' ';
    text += sentence;
  };
  for (int64_t i = 0; i <= n; ++i) {
    if (i == at) append(needle(key));
    if (i < n) append(filler[static_cast<size_t>(i) % filler.size()]);
  }
  return text;
}

std::string draw_key(std::mt19937_64& rng, int64_t digits) {
  std::string key;
  for (int64_t d = 0; d < digits; ++d) {
    // The first digit is never 0, so the key reads as the number it is.
    const uint64_t range = d == 0 ? 9 : 10;
    key += static_cast<char>('0' + (d == 0 ? 1 : 0) + rng() % range);
  }
  return key;
}

}  // namespace

std::vector<PasskeyCase> make_passkey_cases(const Tokenizer& tokenizer, const ChatTemplate* chat,
                                            const PasskeyOptions& options) {
  EDGELM_CHECK(!options.lengths.empty(), "[passkey] --passkey-lengths: no length given");
  EDGELM_CHECK(!options.depths.empty(), "[passkey] --passkey-depths: no depth given");
  EDGELM_CHECK(!options.placements.empty(), "[passkey] --passkey-placements: none given");
  for (const int64_t length : options.lengths) {
    EDGELM_CHECK(length >= 16, "[passkey] --passkey-lengths ", length,
                 ": a document needs at least 16 tokens");
  }
  for (const double depth : options.depths) {
    EDGELM_CHECK(depth >= 0.0 && depth <= 1.0, "[passkey] --passkey-depths ", depth,
                 ": a depth is a share of the document, in [0, 1]");
  }
  for (const std::string& placement : options.placements) {
    EDGELM_CHECK(std::find(std::begin(kPasskeyPlacements), std::end(kPasskeyPlacements),
                           placement) != std::end(kPasskeyPlacements),
                 "[passkey] --passkey-placements: '", placement, "' is not end or both");
  }
  EDGELM_CHECK(options.trials >= 1, "[passkey] --passkey-trials ", options.trials,
               " must be at least 1");
  EDGELM_CHECK(options.digits >= 1 && options.digits <= 18, "[passkey] --passkey-digits ",
               options.digits, " must be in [1, 18]");
  const std::vector<std::string> filler =
      options.haystack.empty() ? kPasskeyFiller : split_sentences(options.haystack);
  EDGELM_CHECK(!filler.empty(), "[passkey] --haystack: the text holds no sentence");

  const auto tokens_of = [&](const std::string& text) {
    return static_cast<int64_t>(tokenizer.encode(text, /*add_bos=*/false).size());
  };
  double filler_tokens = 0.0;  // mean tokens per sentence, for the first guess of a length
  for (const std::string& s : filler) filler_tokens += static_cast<double>(tokens_of(" " + s));
  filler_tokens = std::max(1.0, filler_tokens / static_cast<double>(filler.size()));

  std::vector<PasskeyCase> cases;
  for (const int64_t length : options.lengths) {
    for (const double depth : options.depths) {
      // One generator per (length, depth): its keys stay the same when other lengths or depths
      // are added, and are shared by the placements.
      std::mt19937_64 rng(options.seed ^ (static_cast<uint64_t>(length) * 0x9e3779b97f4a7c15ULL) ^
                          static_cast<uint64_t>(std::llround(depth * 1e6)));
      for (int64_t trial = 0; trial < options.trials; ++trial) {
        const std::string key = draw_key(rng, options.digits);
        const int64_t needle_tokens = tokens_of(needle(key));
        // The fewest sentences whose document reaches the length.
        auto n = std::max<int64_t>(
            1, static_cast<int64_t>(static_cast<double>(length - needle_tokens) / filler_tokens));
        while (tokens_of(document(filler, n, depth, key)) < length) ++n;
        while (n > 1 && tokens_of(document(filler, n - 1, depth, key)) >= length) --n;
        const std::string text = document(filler, n, depth, key);
        for (const std::string& placement : options.placements) {
          std::string message(kInstructions);
          if (placement == "both") message.append(" ").append(kQuestion);
          message.append("\n\n").append(text).append("\n\n").append(kQuestion);
          PasskeyCase passkey;
          passkey.length = length;
          passkey.depth = depth;
          passkey.placement = placement;
          passkey.trial = trial;
          passkey.key = key;
          passkey.document_tokens = tokens_of(text);
          if (chat != nullptr) {
            const ChatMessage user{"user", message};
            const std::string rendered = chat->render(std::span<const ChatMessage>(&user, 1),
                                                      /*add_generation_prompt=*/true);
            passkey.prompt = tokenizer.encode(rendered + std::string(kAnswerCue),
                                              /*add_bos=*/false);
          } else {
            passkey.prompt = tokenizer.encode(message + " " + std::string(kAnswerCue),
                                              /*add_bos=*/true, /*parse_special=*/false);
          }
          cases.push_back(std::move(passkey));
        }
      }
    }
  }
  return cases;
}

bool passkey_answer_matches(std::string_view answer, std::string_view key) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const auto first = std::find_if(answer.begin(), answer.end(), digit);
  const auto last = std::find_if_not(first, answer.end(), digit);
  return !key.empty() && std::string_view(first, last) == key;
}

PasskeyTrial answer_passkey(Generator& generator, const Tokenizer& tokenizer,
                            const PasskeyCase& passkey, const PasskeyAnswerOptions& options) {
  EDGELM_CHECK(options.max_tokens >= 1, "[passkey] an answer of ", options.max_tokens,
               " tokens cannot hold a key");
  KvCache& cache = generator.cache();
  const auto slots = [&] {
    int64_t most = 0;
    for (int64_t l = 0; l < cache.n_layers(); ++l) most = std::max(most, cache.size(l));
    return most;
  };
  PasskeyTrial trial;
  std::span<const float> logits = generator.prefill(passkey.prompt);
  trial.max_slots = slots();
  std::vector<int32_t> answer;
  for (int64_t i = 0; i < options.max_tokens; ++i) {
    const auto token =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), token) !=
        options.stop_ids.end())
      break;
    answer.push_back(token);
    if (i + 1 == options.max_tokens) break;  // the last token needs no logits after it
    logits = generator.decode(token);
    trial.max_slots = std::max(trial.max_slots, slots());
  }
  trial.answer = tokenizer.decode(answer, /*skip_special=*/false);
  trial.correct = passkey_answer_matches(trial.answer, passkey.key);
  return trial;
}

}  // namespace edgelm
