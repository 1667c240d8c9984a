// Generator: feeds a model through its KV cache step by step — chunked prefill, then one token per
// decode step — and lets a CacheManager evict between steps (before each one, so that the step
// never takes the cache past its limit), so generation can run far past the cache's capacity.
// The teacher-forced path (eval/teacher_forcing.h) feeds its chunks through prefill_step(), so
// eviction runs between them the same way. Timing of prefill, decode and eviction is kept for
// reports.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/kv_cache.h"
#include "eviction/cache_manager.h"
#include "models/llama.h"

namespace edgelm {

// Picks, before each forward step, which of several models over the same weights and KV cache runs
// it, and hears how long it took: two backends taking turns on one generation (runtime/hybrid.h,
// generate_hybrid). The router hands the cache to the model's backend (KvCache::set_backend)
// before returning it.
class StepRouter {
 public:
  virtual ~StepRouter() = default;
  // The model that runs the next step, `n_tokens` tokens of `phase` (evictions before the step
  // run on its backend too).
  virtual LlamaModel& route(Phase phase, int64_t n_tokens) = 0;
  // The step has run: its forward time in seconds (eviction excluded).
  virtual void finished(Phase phase, int64_t n_tokens, double seconds) = 0;
};

class Generator {
 public:
  // manager may be null: no eviction (the cache must then hold the whole sequence).
  Generator(LlamaModel& model, KvCache& cache, CacheManager* manager = nullptr);

  // Runs the prompt in chunks of the model's max_chunk, evicting between chunks when the cache
  // needs room, then applies the policy's end-of-prefill step (SnapKV). Returns the logits after
  // the last prompt token. Can be called again later to append more tokens (a new chat turn).
  std::span<const float> prefill(std::span<const int32_t> tokens);
  // Feeds one token and returns the logits after it (evicting first when a trigger fires).
  std::span<const float> decode(int32_t token);

  // Speculative decoding's verification step, in three calls. begin_draft_step() runs the
  // eviction decode() runs before feeding one token, and returns how many drafts may follow that
  // token in the step: as many as plain decoding could feed one at a time after it without
  // evicting again (CacheManager::decode_headroom), so that every row of the step sees the cache
  // plain decoding gives its token; the largest int64_t without eviction; 0 while tokens wait to
  // be fed again (replay_tokens()).
  int64_t begin_draft_step();
  // Feeds a sampled token and at most begin_draft_step() drafts after it (after the tokens
  // waiting to be fed again) as one decode step, without evicting, and returns the logits after
  // each of `tokens`: [tokens.size(), vocab] row-major, valid until the model's next forward step.
  // The policy hears of the step in end_draft_step().
  std::span<const float> decode_draft(std::span<const int32_t> tokens);
  // Ends the step: its first `kept` (1 to tokens.size()) tokens stay, the rest are dropped from
  // the cache (KvCache::truncate) and count as never decoded. The policy hears of the kept rows
  // only: their queries one row at a time, as one-token decode steps hand them over; the step's
  // attention mass when every row was kept. When a policy that reads attention mass in decode
  // (H2O, TOVA) saw drafts rejected, the mass of the kept rows alone cannot be had from the step:
  // the kept tokens are dropped too and wait to be fed again, in front of the next step's token
  // (replay_tokens(), flush_replay()).
  void end_draft_step(int64_t kept);
  // Tokens end_draft_step() dropped that must be fed again before anything else.
  int64_t replay_tokens() const { return static_cast<int64_t>(replay_.size()); }
  // Feeds the tokens waiting to be fed again on their own (at the end of a reply), so that the
  // cache and the policy hold what plain decoding would. A no-op when there are none.
  void flush_replay();
  // Evicts now, as before a step of n_tokens (at most max_step()), so that n_tokens one-token
  // decode steps can follow without an eviction between them, and rollback() can drop them all:
  // a draft model's own drafts.
  void make_room(int64_t n_tokens);
  // Drops the last n tokens fed from the cache (KvCache::truncate), which then count as never
  // decoded; the policy forgets their slots' statistics (what it heard of their steps stays).
  void rollback(int64_t n);

  // For callers that feed a prompt chunk by chunk themselves (a teacher-forced stream): declares
  // that the next n_tokens are one prompt, so the policy knows where it ends (SnapKV's window).
  void begin_prefill(int64_t n_tokens);
  // Feeds one chunk of at most max_step() tokens as a prefill step (evicting first when a trigger
  // fires) and returns the logits of its positions from index logits_from on: [n - logits_from,
  // vocab] row-major, empty when logits_from == n (ForwardOptions::all_logits). Valid until the
  // model's next forward step.
  std::span<const float> prefill_step(std::span<const int32_t> tokens, int64_t logits_from);
  // The most tokens one step may feed: the model's max_chunk and, with a manager, the most that
  // eviction can always make room for (CacheManager::max_step_tokens).
  int64_t max_step() const;

  // Lets `router` choose the model of every step from now on (null: the model given at
  // construction runs them all). It must outlive the generator or be unset first.
  void set_router(StepRouter* router) { router_ = router; }

  LlamaModel& model() const { return model_; }
  KvCache& cache() const { return cache_; }

  double prefill_seconds() const { return prefill_seconds_; }
  double decode_seconds() const { return decode_seconds_; }  // eviction time excluded
  int64_t prefill_tokens() const { return prefill_tokens_; }
  int64_t decode_steps() const { return decode_steps_; }  // tokens decoded and kept
  // Forward steps of decode (each decode() and decode_draft(), and each replay fed on its own).
  int64_t decode_forwards() const { return decode_forwards_; }

 private:
  // Runs one forward step, evicting first when `evict` (a trigger fires); logits_from set: the
  // logits of every position from there on. The policy hears of it in observe().
  std::span<const float> step(std::span<const int32_t> tokens, Phase phase,
                              std::optional<int64_t> logits_from = std::nullopt, bool evict = true);
  // Hands the last step's exports to the manager: its attention mass when `mass`, and the
  // queries of its first `rows` rows (a decode step's one row at a time).
  void observe(bool mass, int64_t rows);

  // The last step, for observe().
  struct LastStep {
    LlamaModel* model = nullptr;
    Phase phase = Phase::Decode;
    int64_t first_position = 0;
    int64_t n_tokens = 0;
    StepExports exports;
  };

  LlamaModel& model_;
  KvCache& cache_;
  CacheManager* manager_;
  StepRouter* router_ = nullptr;
  double prefill_seconds_ = 0.0;
  double decode_seconds_ = 0.0;
  int64_t prefill_tokens_ = 0;
  int64_t decode_steps_ = 0;
  int64_t decode_forwards_ = 0;
  LastStep last_;
  std::vector<int32_t> draft_step_;  // the tokens of the verification step not yet ended
  int64_t draft_replayed_ = 0;       // how many of them were replayed
  std::vector<int32_t> replay_;      // kept tokens dropped to be fed again (end_draft_step)
};

}  // namespace edgelm
