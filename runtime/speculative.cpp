#include "runtime/speculative.h"

#include <algorithm>

#include "core/error.h"
#include "core/process_stats.h"
#include "runtime/session.h"
#include "runtime/setup.h"

namespace edgelm {
namespace {

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

PromptLookupDrafter::PromptLookupDrafter(Options options) : options_(options) {
  EDGELM_CHECK(options.ngram_min >= 1 && options.ngram_min <= options.ngram_max,
               "[speculative] lookup n-gram sizes must satisfy 1 <= min <= max, got min ",
               options.ngram_min, ", max ", options.ngram_max);
}

std::vector<int32_t> PromptLookupDrafter::draft(std::span<const int32_t> context,
                                                int64_t max_tokens) {
  const auto size = static_cast<int64_t>(context.size());
  for (int64_t n = std::min(options_.ngram_max, size - 1); n >= options_.ngram_min; --n) {
    const std::span<const int32_t> suffix = context.subspan(static_cast<size_t>(size - n));
    // The latest earlier occurrence: the text being repeated is most likely the nearest one.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min(max_tokens, size - from);
      return {context.begin() + from, context.begin() + from + count};
    }
  }
  return {};
}

ModelDrafter::ModelDrafter(LlamaModel& model, KvCache& cache, CacheManager* manager,
                           const SamplerConfig& sampling)
    : cache_(cache),
      generator_(model, cache, manager),
      evicts_(manager != nullptr && manager->policy().evicts()),
      sampler_(sampling, model.config().vocab_size),
      rng_(sampling.seed) {}

Sampler::Distribution ModelDrafter::proposal(size_t i) const {
  if (i >= proposal_ids_.size()) return {};
  return {.ids = proposal_ids_[i], .probs = proposal_probs_[i]};
}

int32_t ModelDrafter::next_draft(std::span<const float> logits, std::span<const int32_t> history) {
  if (sampler_.config().greedy || sampler_.config().temperature <= 0.0f) return argmax(logits);
  const Sampler::Distribution q = sampler_.distribution(logits, history);
  proposal_ids_.emplace_back(q.ids.begin(), q.ids.end());
  proposal_probs_.emplace_back(q.probs.begin(), q.probs.end());
  // The same 53-bit uniform as the sampler's own draws.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double cumulative = 0.0;
  for (size_t i = 0; i < q.ids.size(); ++i) {
    cumulative += q.probs[i];
    if (u < cumulative) return q.ids[i];
  }
  return q.ids.back();  // rounding: the sum fell short of u
}

std::vector<int32_t> ModelDrafter::draft(std::span<const int32_t> context, int64_t max_tokens) {
  proposal_ids_.clear();
  proposal_probs_.clear();
  if (context.empty() || max_tokens <= 0) return {};
  // Keep the longest prefix of what the cache holds that the context shares; at least the last
  // context token is fed again, so that there are logits to draft from.
  size_t common = static_cast<size_t>(
      std::mismatch(fed_.begin(), fed_.end(), context.begin(), context.end()).first - fed_.begin());
  common = std::min(common, context.size() - 1);
  const auto dropped = static_cast<int64_t>(fed_.size() - common);
  // Only slots fed since the last eviction can be dropped; past one (a chat that went back
  // before the last drafts), the cache starts over.
  if (common == 0 || dropped > cache_.truncatable()) {
    cache_.clear();
    common = 0;
  } else {
    generator_.rollback(dropped);
  }
  fed_.resize(common);
  const std::span<const int32_t> missing = context.subspan(common);
  const auto n_missing = static_cast<int64_t>(missing.size());
  // The drafts after the first are fed one at a time, without an eviction between them (made
  // room for below), so that the next call can drop any of them.
  max_tokens = std::min(max_tokens, 1 + generator_.max_step());
  const int64_t needed = n_missing + max_tokens - 1;
  if (needed > cache_.max_positions() - cache_.next_position() ||
      (!evicts_ && needed > cache_.free_slots()))
    return {};  // the draft model's context is full: no guess
  const auto chunk = generator_.max_step();
  forwards_ += n_missing == 1 ? 1 : (n_missing + chunk - 1) / chunk;
  std::span<const float> logits =
      n_missing == 1 ? generator_.decode(missing[0]) : generator_.prefill(missing);
  fed_.insert(fed_.end(), missing.begin(), missing.end());
  generator_.make_room(max_tokens - 1);
  std::vector<int32_t> drafts;
  // The repetition penalty's window of the context, and the drafts after it.
  const auto window =
      std::min(context.size(), static_cast<size_t>(sampler_.config().repetition_window));
  std::vector<int32_t> history(context.end() - static_cast<std::ptrdiff_t>(window), context.end());
  for (int64_t i = 0; i < max_tokens; ++i) {
    drafts.push_back(next_draft(logits, history));
    history.push_back(drafts.back());
    if (i + 1 == max_tokens) break;  // the last draft is not fed: nothing follows it yet
    logits = generator_.decode(drafts.back());
    ++forwards_;
    fed_.push_back(drafts.back());
  }
  return drafts;
}

void check_same_vocabulary(const Runtime& target, const std::string& target_path,
                           const Runtime& draft, const std::string& draft_path) {
  auto fail = [&](const std::string& why) {
    EDGELM_FAIL("[speculative] draft model ", draft_path, " has another vocabulary than ",
                target_path, ": ", why);
  };
  const int64_t target_vocab = target.model().config().vocab_size;
  const int64_t draft_vocab = draft.model().config().vocab_size;
  if (target_vocab != draft_vocab) {
    fail(std::to_string(draft_vocab) + " tokens against " + std::to_string(target_vocab));
  }
  const Tokenizer* a = target.tokenizer();
  const Tokenizer* b = draft.tokenizer();
  if (a == nullptr || b == nullptr) return;
  if (a->vocab_size() != b->vocab_size()) {
    fail("tokenizers of " + std::to_string(b->vocab_size()) + " tokens against " +
         std::to_string(a->vocab_size()));
  }
  for (int32_t id = 0; id < static_cast<int32_t>(a->vocab_size()); ++id) {
    if (a->token_text(id) != b->token_text(id)) {
      fail("token " + std::to_string(id) + " is '" + b->token_text(id) + "' against '" +
           a->token_text(id) + "'");
    }
  }
}

DraftLength::DraftLength(int64_t max) : max_(max), current_(max) {
  EDGELM_CHECK(max >= 1, "[speculative] the draft length must be >= 1, got ", max);
}

void DraftLength::update(int64_t drafted, int64_t accepted) {
  if (accepted == 0) current_ = std::max<int64_t>(1, current_ - 1);
  if (accepted == drafted) current_ = std::min(max_, current_ + 1);
}

// The greedy loop of GenerationSession::generate() with drafts: `ahead` holds the drafts the
// target has been fed past the last sampled token, and `rows` the logits after each of them. A
// sampled token equal to the next draft was fed already, so its logits are the next row; the
// first that differs ends the target's step (the drafts left are dropped), and is fed with new
// drafts. Eviction runs only between steps, as plain decoding runs it before that token, and a
// step takes no more drafts than plain decoding could feed before it evicts again
// (Generator::begin_draft_step), so every row sees the cache plain decoding gives its token.
Reply GenerationSession::generate_speculative(Reply reply) {
  const int64_t vocab = model_.config().vocab_size;
  std::vector<int32_t> ahead;
  size_t next_draft = 0;
  bool stepping = false;        // a step was fed and not yet ended
  std::span<const float> rows;  // [1 + ahead.size(), vocab]
  // Ends the step: drops the drafts not (yet) accepted, and adapts the draft length.
  auto settle = [&] {
    if (!stepping) return;
    const auto drafted = static_cast<int64_t>(ahead.size());
    const auto accepted = static_cast<int64_t>(next_draft);
    if (drafted > 0) draft_length_->update(drafted, accepted);
    generator_.end_draft_step(1 + accepted);
    ahead.clear();
    next_draft = 0;
    stepping = false;
  };
  for (int64_t i = 0; i < settings_.max_tokens; ++i) {
    // The next draft is kept or replaced by rejection sampling (greedy: kept if it is the argmax).
    const bool drafted = next_draft < ahead.size();
    if (!take_token(reply, drafted ? &ahead[next_draft] : nullptr,
                    drafted ? drafter_->proposal(next_draft) : Sampler::Distribution{}))
      break;
    const int32_t token = reply.tokens.back();
    if (i + 1 == settings_.max_tokens) {
      pending_ = token;  // a draft equal to it is dropped below, and it is fed again later
      break;
    }
    if (next_draft < ahead.size() && ahead[next_draft] == token) {
      ++next_draft;
      ++accepted_;
      logits_ = rows.subspan(next_draft * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
      emit_logits(logits_);
      continue;
    }
    settle();
    if (!room_for(1 + generator_.replay_tokens())) {
      pending_ = token;
      reply.stop = StopReason::ContextFull;
      break;
    }
    // Drafts past the reply's last fed token would be dropped anyway, and each needs a slot.
    const int64_t headroom = generator_.begin_draft_step();  // evicts as decode() would
    int64_t k = std::min({draft_length_->current(), settings_.max_tokens - i - 2, headroom,
                          generator_.max_step() - 1});
    while (k > 0 && !room_for(1 + k)) --k;
    std::vector<int32_t> drafts;
    if (k > 0) {
      const Stopwatch stopwatch;
      drafts = drafter_->draft(history_, k);
      draft_seconds_ += stopwatch.seconds();
    }
    if (static_cast<int64_t>(drafts.size()) > k) drafts.resize(static_cast<size_t>(k));
    ahead = std::move(drafts);
    drafted_ += static_cast<int64_t>(ahead.size());
    std::vector<int32_t> feed{token};
    feed.insert(feed.end(), ahead.begin(), ahead.end());
    rows = generator_.decode_draft(feed);
    stepping = true;
    logits_ = rows.first(static_cast<size_t>(vocab));
    emit_logits(logits_);
  }
  settle();
  generator_.flush_replay();
  generated_tokens_ += static_cast<int64_t>(reply.tokens.size());
  const std::string rest = stream_ ? stream_->finish() : std::string();
  reply.text += rest;
  if (callbacks_.on_reply_end) callbacks_.on_reply_end(rest);
  return reply;
}

}  // namespace edgelm
