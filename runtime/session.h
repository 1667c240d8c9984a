// GenerationSession: the generation loop, for every tool and test that generates text. It feeds
// prompts through a Generator (chunked prefill, eviction between steps through the CacheManager),
// samples replies with the Sampler, stops them (a stop id, the reply length, a cache or logical
// context that cannot take another token), streams each token with its text to a callback, and
// keeps the conversation in the KV cache between turns, so that a turn prefills only what the
// cache lacks.
//
//   GenerationSession session(model, cache, &manager, settings, &tokenizer,
//                             {.on_token = [](int32_t, std::string_view text) { print(text); }});
//   session.prefill(tokenizer.encode("Once upon a time"));
//   const Reply reply = session.generate();  // reply.tokens, reply.text, reply.stop
//   const GenerationStats stats = session.stats();
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv_cache.h"
#include "eviction/cache_manager.h"
#include "models/llama.h"
#include "models/tokenizer.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"

namespace edgelm {

class ChatSession;

// Why a reply ended.
enum class StopReason {
  Length,       // it reached GenerationSettings::max_tokens
  Eos,          // a stop id was sampled (an EOS id, or an end-of-turn id of the chat template)
  ContextFull,  // the next token had no room: the logical context (KvCache::max_positions) is
                // used up, or the cache is full and nothing evicts
  NoRoom,       // chat_turn only: the message's tokens did not fit what is left of the context,
                // so nothing was fed or generated and the chat is unchanged
};
// "length", "eos", "context_full", "no_room" (the names generate's --json prints).
std::string_view stop_reason_name(StopReason reason);

struct GenerationSettings {
  SamplerConfig sampling;
  int64_t max_tokens = 128;  // the most tokens of one reply (>= 0); 0: replies are empty
  // A reply ends when one of these is sampled; that token is neither part of the reply nor fed to
  // the model (the sampler's history keeps it). With a chat template: chat_stop_ids().
  std::vector<int32_t> stop_ids;
  // Never sample a stop id (they are masked to -inf) instead of stopping at one, so replies run to
  // max_tokens (or a full context): for benchmarks and long runs.
  bool ignore_eos = false;
};

struct Reply {
  std::vector<int32_t> tokens;  // the generated tokens, the stop id excluded
  std::string text;             // their text as streamed (empty without a tokenizer)
  StopReason stop = StopReason::Length;
  // chat_turn: the tokens of the turn's feed (fed, or with NoRoom, refused); else 0.
  int64_t prompt_tokens = 0;
};

// What generate's stats line and --json report, summed over every prefill and reply since the
// session was made (reset() does not clear them).
struct GenerationStats {
  int64_t prompt_tokens = 0;     // tokens fed by prefill()
  int64_t generated_tokens = 0;  // tokens of every reply
  int64_t decode_steps = 0;      // reply tokens fed one at a time, as they were sampled
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // eviction time excluded, drafting included
  // The target's decode forward steps: decode_steps without a drafter; with one, each keeps its
  // first token and the drafts it accepted, and under a policy that reads attention mass a step
  // that rejected drafts is fed again (Generator::end_draft_step).
  int64_t decode_forwards = 0;
  // Speculative decoding (all 0 without a drafter): draft tokens the target checked, those it
  // accepted, and the time the drafter took (part of decode_seconds).
  int64_t drafted = 0;
  int64_t accepted = 0;
  double draft_seconds = 0.0;
  // Eviction (all 0 without a CacheManager): see CacheManager's accessors of the same names.
  int64_t evictions = 0;
  int64_t evicted_tokens = 0;
  double eviction_seconds = 0.0;
  int64_t eviction_fallbacks = 0;
  size_t released_bytes = 0;
  size_t rss_drop_bytes = 0;
  // The KV cache now: allocated, resident and filled bytes, slots allocated and filled (layer 0),
  // the next logical position and the logical context.
  size_t kv_bytes = 0;
  size_t kv_resident_bytes = 0;
  size_t kv_used_bytes = 0;
  int64_t kv_capacity = 0;
  int64_t kv_slots = 0;
  int64_t next_position = 0;
  int64_t kv_context = 0;

  // Tokens per second of prefill and of decode; 0 when nothing was timed.
  double prefill_tok_s() const;
  double decode_tok_s() const;
  // accepted / drafted; 0 when nothing was drafted.
  double acceptance_rate() const;
  // The target's decode forward steps, and the tokens each kept on average (1 without drafts).
  int64_t target_forwards() const { return decode_forwards; }
  double tokens_per_target_forward() const;
};

class GenerationSession {
 public:
  // Everything optional: a callback left empty is not called.
  struct Callbacks {
    // Each token that joins a reply (not the stop id), with the text it completes: often empty,
    // as the bytes of a character split across tokens wait for the rest; always empty without a
    // tokenizer. Called before the token is fed to the model.
    std::function<void(int32_t token, std::string_view text)> on_token;
    // At the end of each reply, with the text still held back (an incomplete UTF-8 sequence, as
    // U+FFFD; usually empty): the on_token texts and this one make Reply::text.
    std::function<void(std::string_view text)> on_reply_end;
    // The logits the sampler draws from ([vocab], before the stop ids are masked; valid during
    // the call): after the last token of each prefill() and after each decode step.
    std::function<void(std::span<const float> logits)> on_logits;
    // Called by reset() once the cache is empty: e.g. to give the CacheManager a fresh state
    // (move-assign a new one to the object the session was given).
    std::function<void()> on_reset;
  };

  // model, cache and manager must outlive the session, and the model must run no other forward
  // step between the session's calls (the session samples from the model's logits buffer).
  // manager may be null (no eviction: the cache must then hold the whole conversation); tokenizer
  // may be null: no text is decoded (token ids only). Throws edgelm::Error for sampler settings
  // the Sampler refuses.
  GenerationSession(LlamaModel& model, KvCache& cache, CacheManager* manager,
                    GenerationSettings settings, const Tokenizer* tokenizer = nullptr,
                    Callbacks callbacks = {});

  // Feeds `tokens` after what the cache holds (first the last reply's final token, when a reply
  // ended before feeding it: see pending_tokens()) and returns the logits after the last one
  // (valid until the next forward step). Throws edgelm::Error "[session] ..." for an id outside
  // the vocabulary, or more tokens than the logical context or, without eviction, the cache has
  // room for; nothing is fed then.
  std::span<const float> prefill(std::span<const int32_t> tokens);
  // Samples a reply after what was fed, streaming it through the callbacks. A reply that follows
  // another without a prefill() between them continues it. Throws edgelm::Error when nothing was
  // fed yet.
  Reply generate();
  // One turn of a chat kept in the cache: adds `message` to `chat` as the user's, encodes what the
  // cache lacks (ChatSession::add_user; when the template renders the conversation anew, reset()
  // runs first and the whole conversation is fed), runs `before_feed` on those ids (to declare
  // positions to an eviction policy), prefills them, generates the reply and records its text in
  // `chat`. When those ids do not fit (see fits(); with a policy that evicts, only the logical
  // context limits them), nothing is fed, `chat` is left as it was and the reply is empty with
  // StopReason::NoRoom: a long conversation ends in a message the caller can act on (reset(),
  // which empties the cache; a larger context), not in an error.
  Reply chat_turn(
      ChatSession& chat, const Tokenizer& tokenizer, std::string message,
      const std::function<void(std::span<const int32_t> ids, bool from_scratch)>& before_feed = {});
  // Drafts every reply's tokens with `drafter` from now on, at most `max_draft` (>= 1) per target
  // step, the length adapted as DraftLength says (runtime/speculative.h); null: plain decoding.
  // Greedy, the reply is the same as without a drafter, with eviction too; sampled, its tokens
  // are distributed as without one (rejection sampling; docs/speculative.md). The drafter must
  // outlive its use. Throws edgelm::Error "[speculative] ..." for max_draft < 1.
  void set_drafter(Drafter* drafter, int64_t max_draft);
  // Empties the cache and forgets the conversation (the sampler's history, a pending token), then
  // runs Callbacks::on_reset.
  void reset();

  // Whether `n_tokens` more tokens can be fed now, after the pending one (pending_tokens()): the
  // logical context has that many positions left, and the cache that many free slots or a policy
  // that evicts. prefill() throws where this is false.
  bool fits(int64_t n_tokens) const { return room_for(n_tokens + pending_tokens()); }
  // 1 when the last reply ended before feeding its final token (at max_tokens, or with no room
  // for it): the next prefill() or generate() feeds it first. Else 0.
  int64_t pending_tokens() const { return pending_ ? 1 : 0; }
  // Every token fed or sampled since the last reset(), oldest first (the repetition penalty's
  // history): prompts, reply tokens and sampled stop ids.
  const std::vector<int32_t>& history() const { return history_; }
  GenerationStats stats() const;
  const GenerationSettings& settings() const { return settings_; }
  Generator& generator() { return generator_; }
  KvCache& cache() const { return cache_; }

 private:
  // Whether `n_tokens` can be fed: the logical context has the positions left, and the cache the
  // free slots or a policy that evicts; `after_reset`: once the cache is emptied.
  bool room_for(int64_t n_tokens, bool after_reset = false) const;
  // The logits for the sampler: `logits` with the stop ids at -inf under ignore_eos.
  std::span<const float> choices(std::span<const float> logits);
  void emit_logits(std::span<const float> logits) const;
  // generate()'s loop with a drafter (runtime/speculative.cpp), after the pending token is fed.
  Reply generate_speculative(Reply reply);
  // Samples the next token from logits_ into the history (with `draft`: keeps it or draws
  // another by rejection sampling, `proposal` being what it was drawn from; Sampler::sample_draft);
  // false when it is a stop id (the reply ends with StopReason::Eos), else adds it to `reply`,
  // streams its text and calls on_token.
  bool take_token(Reply& reply, const int32_t* draft = nullptr,
                  Sampler::Distribution proposal = {});

  LlamaModel& model_;
  KvCache& cache_;
  CacheManager* manager_;
  GenerationSettings settings_;
  Callbacks callbacks_;
  Generator generator_;
  Sampler sampler_;
  std::optional<TokenStreamDecoder> stream_;
  std::vector<int32_t> history_;
  std::optional<int32_t> pending_;  // sampled, part of a reply, not yet fed
  std::span<const float> logits_;   // after the last token fed; empty when nothing was fed
  std::vector<float> masked_;       // (vocab) the logits with the stop ids masked (ignore_eos)
  std::vector<int32_t> feed_;       // the pending token and a prompt, fed as one
  int64_t generated_tokens_ = 0;
  Drafter* drafter_ = nullptr;
  std::optional<DraftLength> draft_length_;
  int64_t drafted_ = 0;
  int64_t accepted_ = 0;
  double draft_seconds_ = 0.0;
};

}  // namespace edgelm
