// Speculative decoding: a drafter proposes the tokens likely to follow, the target model scores
// the last sampled token and the drafts in one forward step with the logits of every position
// (the prefill path), the session keeps drafts as long as sampling keeps them (greedy: while each
// is the argmax; sampled: by rejection sampling, Sampler::sample_draft) and the KV cache is rolled
// back past the rest (KvCache::truncate). A greedy reply is plain greedy decoding's, token for
// token, wherever the batched step's logits equal the one-token step's, with or without eviction;
// a sampled one is distributed as plain sampling's (docs/speculative.md).
//
//   PromptLookupDrafter lookup({.ngram_max = 3});
//   session.set_drafter(&lookup, /*max_draft=*/4);
//   const Reply reply = session.generate();  // stats(): drafted, accepted, target_forwards
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/kv_cache.h"
#include "eviction/cache_manager.h"
#include "models/llama.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"

namespace edgelm {

class Runtime;

// Proposes draft tokens. Drafts need not be right: the target checks every one.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max_tokens` (>= 1) tokens likely to follow `context` (every token fed or sampled since
  // the session's last reset, the last one just sampled and not yet fed); empty: no guess, the
  // step decodes one token.
  virtual std::vector<int32_t> draft(std::span<const int32_t> context, int64_t max_tokens) = 0;
  // The distribution the i-th draft of the last draft() call was drawn from, for rejection
  // sampling (Sampler::sample_draft); no ids (the default): a point mass at that draft, as a
  // lookup or a greedy draft model proposes. Valid until the next draft() call.
  virtual Sampler::Distribution proposal(size_t /*i*/) const { return {}; }
  // "lookup" or "model", for reports.
  virtual std::string name() const = 0;
};

// Prompt lookup: finds the latest earlier occurrence of the context's last n tokens, for n from
// ngram_max down to ngram_min, and proposes the tokens that followed it. Costs no model, and on
// text that repeats its input (a summary, code edited in place) guesses long runs right.
class PromptLookupDrafter : public Drafter {
 public:
  struct Options {
    int64_t ngram_max = 3;
    // 2: a single token ("the", ",") matches almost anywhere, so n = 1 drafts on nearly every
    // step of open-ended text and nearly all of it is rejected, costing verification rows.
    int64_t ngram_min = 2;
  };
  // Throws edgelm::Error unless 1 <= ngram_min <= ngram_max.
  explicit PromptLookupDrafter(Options options);
  std::vector<int32_t> draft(std::span<const int32_t> context, int64_t max_tokens) override;
  std::string name() const override { return "lookup"; }

 private:
  Options options_;
};

// A draft model: a smaller model over the same vocabulary, in a KV cache of its own. Each call
// feeds the context the draft model lacks (after rolling its cache back to the longest prefix it
// shares with the context, which drops its own rejected drafts), then decodes max_tokens tokens
// one at a time: the argmax, or with a sampling config drawn as the target samples (its
// temperature, top-k/p, min-p, penalty), each draft's distribution kept for proposal().
class ModelDrafter : public Drafter {
 public:
  // model, cache and manager must outlive the drafter; nothing else may feed the cache, and the
  // model must be another object than the target's (whose buffers hold the target's step). The
  // manager (null: no eviction) evicts in the draft cache under its own policy and budget, only
  // before the drafts are fed (Generator::make_room), so that they can always be rolled back;
  // its policy hears of every draft, rejected ones included (what the draft model keeps
  // changes its guesses, never the reply). sampling: how drafts are drawn (default: greedy); its
  // seed should differ from the target's, whose draws must be independent of the drafter's.
  ModelDrafter(LlamaModel& model, KvCache& cache, CacheManager* manager = nullptr,
               const SamplerConfig& sampling = {.greedy = true});
  std::vector<int32_t> draft(std::span<const int32_t> context, int64_t max_tokens) override;
  Sampler::Distribution proposal(size_t i) const override;
  std::string name() const override { return "model"; }
  // Forward steps the draft model ran (prefill chunks and decode steps).
  int64_t forwards() const { return forwards_; }

 private:
  // The next draft from `logits` after `history`; with sampling, its distribution appended to
  // proposals_.
  int32_t next_draft(std::span<const float> logits, std::span<const int32_t> history);

  KvCache& cache_;
  Generator generator_;
  bool evicts_;
  Sampler sampler_;
  std::mt19937_64 rng_;       // the draws from each proposal (sampling only)
  std::vector<int32_t> fed_;  // the tokens fed to cache_, in order (evicted ones included)
  // Sampling: the last call's proposals, draft by draft.
  std::vector<std::vector<int32_t>> proposal_ids_;
  std::vector<std::vector<double>> proposal_probs_;
  int64_t forwards_ = 0;
};

// Throws edgelm::Error "[speculative] draft model <draft_path> has another vocabulary than
// <target_path>: ..." unless both models have the same vocabulary size and, where both have a
// tokenizer, the same token at every id.
void check_same_vocabulary(const Runtime& target, const std::string& target_path,
                           const Runtime& draft, const std::string& draft_path);

// The adaptive draft length: starts at max, one shorter after a step whose drafts were all
// rejected, one longer after a step whose drafts were all accepted, within [1, max].
class DraftLength {
 public:
  // Throws edgelm::Error unless max >= 1.
  explicit DraftLength(int64_t max);
  int64_t current() const { return current_; }
  int64_t max() const { return max_; }
  // A verification step checked `drafted` (>= 1) drafts and accepted `accepted` of them.
  void update(int64_t drafted, int64_t accepted);

 private:
  int64_t max_;
  int64_t current_;
};

}  // namespace edgelm
