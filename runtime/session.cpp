#include "runtime/session.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.h"
#include "models/chat.h"

namespace edgelm {

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::Length:
      return "length";
    case StopReason::Eos:
      return "eos";
    case StopReason::ContextFull:
      return "context_full";
    case StopReason::NoRoom:
      return "no_room";
  }
  return "unknown";
}

double GenerationStats::prefill_tok_s() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerationStats::acceptance_rate() const {
  return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
}

double GenerationStats::tokens_per_target_forward() const {
  return target_forwards() > 0
             ? static_cast<double>(decode_steps) / static_cast<double>(target_forwards())
             : 0.0;
}

double GenerationStats::decode_tok_s() const {
  return decode_seconds > 0 && decode_steps > 0 ? static_cast<double>(decode_steps) / decode_seconds
                                                : 0.0;
}

GenerationSession::GenerationSession(LlamaModel& model, KvCache& cache, CacheManager* manager,
                                     GenerationSettings settings, const Tokenizer* tokenizer,
                                     Callbacks callbacks)
    : model_(model),
      cache_(cache),
      manager_(manager),
      settings_(std::move(settings)),
      callbacks_(std::move(callbacks)),
      generator_(model, cache, manager),
      sampler_(settings_.sampling, model.config().vocab_size) {
  EDGELM_CHECK(settings_.max_tokens >= 0, "[session] max_tokens ", settings_.max_tokens,
               " is negative");
  if (tokenizer != nullptr) stream_.emplace(*tokenizer);
}

bool GenerationSession::room_for(int64_t n_tokens, bool after_reset) const {
  const bool can_evict = manager_ != nullptr && manager_->policy().evicts();
  const int64_t free_slots = after_reset ? cache_.capacity() : cache_.free_slots();
  const int64_t positions_left =
      cache_.max_positions() - (after_reset ? 0 : cache_.next_position());
  return (can_evict || free_slots >= n_tokens) && positions_left >= n_tokens;
}

std::span<const float> GenerationSession::choices(std::span<const float> logits) {
  if (!settings_.ignore_eos || settings_.stop_ids.empty()) return logits;
  masked_.assign(logits.begin(), logits.end());
  for (int32_t id : settings_.stop_ids) {
    if (id >= 0 && static_cast<size_t>(id) < masked_.size())
      masked_[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
  }
  return masked_;
}

void GenerationSession::emit_logits(std::span<const float> logits) const {
  if (callbacks_.on_logits) callbacks_.on_logits(logits);
}

std::span<const float> GenerationSession::prefill(std::span<const int32_t> tokens) {
  const int64_t vocab = model_.config().vocab_size;
  for (int32_t id : tokens) {
    if (id < 0 || id >= vocab)
      EDGELM_FAIL("[session] token id ", id, " is outside the vocabulary of ", vocab);
  }
  feed_.clear();
  if (pending_) feed_.push_back(*pending_);
  feed_.insert(feed_.end(), tokens.begin(), tokens.end());
  EDGELM_CHECK(!feed_.empty(), "[session] prefill of no tokens");
  const auto n = static_cast<int64_t>(feed_.size());
  const bool can_evict = manager_ != nullptr && manager_->policy().evicts();
  if (!can_evict && n > cache_.free_slots()) {
    EDGELM_FAIL("[session] ", n, " tokens do not fit: the KV cache has ", cache_.free_slots(),
                " free slots and no eviction policy");
  }
  if (n > cache_.max_positions() - cache_.next_position()) {
    EDGELM_FAIL("[session] ", n, " tokens do not fit: the logical context of ",
                cache_.max_positions(), " positions has ",
                cache_.max_positions() - cache_.next_position(), " left");
  }
  history_.insert(history_.end(), tokens.begin(), tokens.end());  // the pending one is there
  pending_.reset();
  logits_ = generator_.prefill(feed_);
  emit_logits(logits_);
  return logits_;
}

void GenerationSession::set_drafter(Drafter* drafter, int64_t max_draft) {
  if (drafter == nullptr) {
    drafter_ = nullptr;
    draft_length_.reset();
    return;
  }
  draft_length_.emplace(max_draft);
  drafter_ = drafter;
}

bool GenerationSession::take_token(Reply& reply, const int32_t* draft,
                                   Sampler::Distribution proposal) {
  const int32_t token = draft != nullptr
                            ? sampler_.sample_draft(choices(logits_), history_, *draft, proposal)
                            : sampler_.sample(choices(logits_), history_);
  history_.push_back(token);
  if (!settings_.ignore_eos && std::find(settings_.stop_ids.begin(), settings_.stop_ids.end(),
                                         token) != settings_.stop_ids.end()) {
    reply.stop = StopReason::Eos;
    return false;
  }
  reply.tokens.push_back(token);
  const std::string text = stream_ ? stream_->push(token) : std::string();
  reply.text += text;
  if (callbacks_.on_token) callbacks_.on_token(token, text);
  return true;
}

Reply GenerationSession::generate() {
  Reply reply;
  if (pending_) {  // a reply continued: its last token goes in first
    if (!room_for(1)) {
      reply.stop = StopReason::ContextFull;
      if (callbacks_.on_reply_end) callbacks_.on_reply_end({});
      return reply;
    }
    logits_ = generator_.decode(*pending_);
    pending_.reset();
    emit_logits(logits_);
  }
  EDGELM_CHECK(!logits_.empty(), "[session] generate() before any prefill()");
  if (drafter_ != nullptr) return generate_speculative(std::move(reply));
  for (int64_t i = 0; i < settings_.max_tokens; ++i) {
    if (!take_token(reply)) break;
    const int32_t token = reply.tokens.back();
    // The reply's last token is fed only when something follows it (the next prefill() or
    // generate()), so a reply of n tokens costs n - 1 decode steps.
    if (i + 1 == settings_.max_tokens) {
      pending_ = token;
      break;
    }
    if (!room_for(1)) {
      pending_ = token;
      reply.stop = StopReason::ContextFull;
      break;
    }
    logits_ = generator_.decode(token);
    emit_logits(logits_);
  }
  generated_tokens_ += static_cast<int64_t>(reply.tokens.size());
  const std::string rest = stream_ ? stream_->finish() : std::string();
  reply.text += rest;
  if (callbacks_.on_reply_end) callbacks_.on_reply_end(rest);
  return reply;
}

Reply GenerationSession::chat_turn(
    ChatSession& chat, const Tokenizer& tokenizer, std::string message,
    const std::function<void(std::span<const int32_t>, bool)>& before_feed) {
  ChatSession before = chat;  // restored when the turn does not fit
  const ChatSession::Feed feed = chat.add_user(std::move(message));
  const std::vector<int32_t> ids = tokenizer.encode(feed.text, /*add_bos=*/false);
  const auto n = static_cast<int64_t>(ids.size());
  // From scratch, the pending token is dropped with the cache.
  if (feed.from_scratch ? !room_for(n, /*after_reset=*/true) : !fits(n)) {
    chat = std::move(before);
    return Reply{.stop = StopReason::NoRoom, .prompt_tokens = n};
  }
  if (feed.from_scratch) reset();
  if (before_feed) before_feed(ids, feed.from_scratch);
  prefill(ids);
  Reply reply = generate();
  reply.prompt_tokens = n;
  // Decoded without skipping special tokens: the text of the tokens the cache holds (or will,
  // with the pending one), which the next rendering must continue.
  chat.add_reply(tokenizer.decode(reply.tokens));
  return reply;
}

void GenerationSession::reset() {
  cache_.clear();
  history_.clear();
  pending_.reset();
  logits_ = {};
  if (stream_) stream_->finish();
  if (callbacks_.on_reset) callbacks_.on_reset();
}

GenerationStats GenerationSession::stats() const {
  GenerationStats stats;
  stats.prompt_tokens = generator_.prefill_tokens();
  stats.generated_tokens = generated_tokens_;
  stats.decode_steps = generator_.decode_steps();
  stats.decode_forwards = generator_.decode_forwards();
  stats.prefill_seconds = generator_.prefill_seconds();
  stats.decode_seconds = generator_.decode_seconds() + draft_seconds_;
  stats.drafted = drafted_;
  stats.accepted = accepted_;
  stats.draft_seconds = draft_seconds_;
  if (manager_ != nullptr) {
    stats.evictions = manager_->evictions();
    stats.evicted_tokens = manager_->evicted_tokens();
    stats.eviction_seconds = manager_->eviction_seconds();
    stats.eviction_fallbacks = manager_->fallback_count();
    stats.released_bytes = manager_->released_bytes();
    stats.rss_drop_bytes = manager_->rss_drop_bytes();
  }
  stats.kv_bytes = cache_.memory_bytes();
  stats.kv_resident_bytes = cache_.resident_bytes();
  stats.kv_used_bytes = cache_.used_bytes();
  stats.kv_capacity = cache_.capacity();
  stats.kv_slots = cache_.size(0);
  stats.next_position = cache_.next_position();
  stats.kv_context = cache_.max_positions();
  return stats;
}

}  // namespace edgelm
