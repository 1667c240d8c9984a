// The eviction-quality harness behind bin/eviction_eval: for one model, a list of policies and a
// list of budgets, every (policy, budget) cell runs beside the full cache over the same tokens, in
// one process, with the same chunk schedule and kernels, and is measured four ways:
//
// - streaming: each text window teacher-forced with the cache held to the budget throughout
//   (evicting between chunks of `evict_every` tokens); NLL, perplexity and bits per byte, and per
//   position KL(full || policy), top-1 agreement and ΔNLL against the full cache, stepped in
//   lockstep so that no more than one chunk of logits is ever kept;
// - compress-then-continue: a prefix prefilled and compressed once (the SnapKV setting), then the
//   next tokens teacher-forced one decode step at a time, paired the same way;
// - retrieval: passkey documents answered greedily (eval/eviction_eval_retrieval.h), each answer
//   next to the full cache's;
// - cost: KV bytes, peak RSS, time per eviction (scoring, selection, compaction) and decode
//   tokens/s at the same logical length.
//
// docs/kv_cache.md ("Measuring eviction quality") says how budgets are shared out among sinks and
// windows, and what every reported field means.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "eval/eviction_eval_retrieval.h"
#include "eval/eviction_eval_stats.h"
#include "eval/teacher_forcing.h"
#include "eviction/cache_manager.h"
#include "eviction/policy.h"
#include "models/llama.h"

namespace edgelm {

class Tokenizer;

// ---- budgets ----

// Bytes of K and V that one slot of every layer and kv head takes (KvCache::slot_bytes); a budget
// in bytes becomes slots by kv_budget_from_bytes (eviction/cache_manager.h), as everywhere.
int64_t kv_bytes_per_slot(const LlamaConfig& config, DType kv_type);

// The settings every budget is shared out by (docs/kv_cache.md): each policy gets the whole budget
// as its --kv-budget, and the parts it reserves are carved out of it.
struct BudgetShares {
  int64_t sink_tokens = 4;    // sink: S sinks + a window of budget - S; snapkv: its decode sinks
  double recent_share = 0.5;  // h2o: a recent window of round(share x budget), the rest heavy
  std::optional<int64_t> snapkv_window;  // default min(32, budget / 2)
  int64_t snapkv_kernel = 7;
  std::string snapkv_pool = "max";
  uint64_t policy_seed = 0;    // random: the seed of its kept subset
  double pyramid_beta = 20.0;  // "+pyramid": PyramidKV's slope
};

// The settings of `policy` at `budget` slots per layer and kv head: kv_budget = budget for every
// policy; sliding a window of the whole budget; sink `sink_tokens` sinks and a window of the rest;
// h2o a recent window of round(recent_share x budget) (at least 1, below the budget); snapkv the
// budget with its observation window inside it; any other policy the budget and the defaults of
// its other settings (expected_attention: `sink_tokens` sinks; random: `policy_seed`). A policy
// may carry wrappers: "+protect" keeps its first `sink_tokens` positions outside the competition
// (--protect sinks), "+pyramid" shares the budget out over the layers (--layer-budget pyramid),
// both in the same total. Throws edgelm::Error naming the setting for a budget below 1, sinks not
// below the budget, a share that leaves no heavy hitters, `none`, an unknown policy or wrapper.
EvictionConfig budget_config(const std::string& policy, int64_t budget, const BudgetShares& shares);

// The most slots one of n_layers layers holds under `config` (its budget, or a pyramid's bottom
// layer's share of it).
int64_t largest_layer_limit(const EvictionConfig& config, int64_t n_layers);

// The most tokens one step may bring under `config` (a policy that evicts before each step):
// half its smallest layer's share, less the protected sinks (CacheManager::max_step_tokens).
int64_t largest_step(const EvictionConfig& config, int64_t n_layers);

// ---- texts ----

// A text to stream: its tokens and where they came from.
struct EvalText {
  std::string name;    // the file path as given
  std::string sha256;  // of the file's bytes; empty when unknown
  int64_t bytes = 0;   // of the file
  std::vector<int32_t> tokens;
  // byte_ends[i]: bytes of text up to and including token i (for bits per byte); empty when
  // unknown (bits per byte are then not reported).
  std::vector<int64_t> byte_ends;
};

// byte_ends for `tokens`: the running count of the bytes each token decodes to (special tokens
// included), as a streaming decoder produces them.
std::vector<int64_t> token_byte_ends(const Tokenizer& tokenizer, std::span<const int32_t> tokens);

// A text as eviction_eval reads it: `bytes` (a file's content, `name` its path) hashed, one
// trailing newline dropped, tokenized with BOS and with special-token text left as text (as
// perplexity does), and byte_ends for the first `used_tokens` tokens (the windows that run; the
// rest repeat the last). Throws edgelm::Error "<flag>: '<name>' ..." for an empty text.
EvalText make_eval_text(std::string name, std::string bytes, const Tokenizer& tokenizer,
                        int64_t used_tokens, std::string_view flag);
// Now in UTC as the run records write it: "2026-12-02T13:20:00Z".
std::string utc_now();

// ---- the run ----

struct EvictionEvalOptions {
  std::vector<std::string> policies;  // of policy_names(), `none` excepted
  std::vector<int64_t> budgets;       // slots per layer and kv head, each >= 1
  BudgetShares shares;
  DType kv_type = DType::F16;

  // Streaming: each text is cut into windows of window_tokens (up to windows_per_text of them),
  // each streamed from an empty cache; bos, when set, replaces each window's first token (as
  // perplexity does when the tokenizer adds BOS).
  int64_t window_tokens = 2048;
  int64_t windows_per_text = 1;
  std::optional<int32_t> bos;
  // Tokens per teacher-forced chunk; the cache is cut to the budget before each (1: before every
  // token, the strict setting). At most half of every budget.
  int64_t evict_every = 1;

  // Tokens per prefill step of the compress-then-continue, retrieval and cost runs; 0: the
  // model's chunk (128) or half the smallest budget, whichever is smaller. At most half of every
  // budget, so that the full cache and every cell prefill in the same steps.
  int64_t batch = 0;

  // Compress-then-continue: windows of prefix_tokens + continue_tokens + 1 tokens cut from each
  // streamed window; the prefix is prefilled (and compressed), then continue_tokens decode steps
  // predict the rest.
  int64_t prefix_tokens = 512;
  int64_t continue_tokens = 128;

  // Paired statistics: streaming units are blocks of block_tokens consecutive predictions within a
  // window, continuation units whole windows.
  int64_t block_tokens = 128;
  BootstrapOptions bootstrap;
  // When one of the policies, every other cell is also compared with it at the same budget (the
  // floor a scored policy must beat).
  std::string floor_policy = "random";

  // Cost: tokens decoded after prefilling a window, timed.
  int64_t cost_decode_tokens = 32;

  // Which runs the options are checked for (a run left out needs no consistent settings).
  bool streaming = true;
  bool continuation = true;
  bool cost = true;

  // Keep every position's paired values (StreamingCell::positions); for tests and dumps.
  bool keep_positions = false;
};

// Eviction counts and times of a CacheManager, and the manager's split of them.
struct EvictionTotals {
  int64_t evictions = 0;
  int64_t evicted_tokens = 0;
  double seconds = 0.0;
  double score_seconds = 0.0;
  double select_seconds = 0.0;
  double compact_seconds = 0.0;

  // The manager's totals so far.
  static EvictionTotals of(const CacheManager& manager);
  EvictionTotals& operator+=(const EvictionTotals& other);
  EvictionTotals operator-(const EvictionTotals& other) const;
};

// One position of a streamed window with a next token, paired.
struct PositionRecord {
  double kl = 0.0;
  bool top1_agrees = false;
  double nll_full = 0.0;
  double nll_policy = 0.0;
};

struct StreamingCell {
  NllStats policy_all, policy_filled;  // over every prediction; over those after the first eviction
  NllStats full_filled;                // the full cache over the same positions as policy_filled
  int64_t bytes_all = 0, bytes_filled = 0;  // text bytes of the predicted tokens; 0 when unknown
  std::vector<PairedSums> units_all, units_filled;
  // Per window: the first position whose chunk ran after an eviction; -1 when nothing was evicted.
  std::vector<int64_t> first_filled;
  int64_t max_slots = 0;  // the most slots any query attended (the cache's size after a step)
  EvictionTotals evictions;
  std::vector<std::vector<PositionRecord>> positions;  // per window, when keep_positions
};

struct ContinuationCell {
  NllStats policy, full;
  std::vector<PairedSums> units;  // one per window
  int64_t max_slots = 0;          // the most slots held at once, the prefilled prefix included
  EvictionTotals evictions;
};

struct CostResult {
  bool measured = false;
  int64_t logical_length = 0;  // positions in the cache's past when the timed decode ends
  int64_t decode_tokens = 0;
  double decode_seconds = 0.0;       // model time of the decode steps
  double decode_wall_seconds = 0.0;  // the same with the evictions between them
  int64_t kv_bytes_allocated = 0;    // KvCache::memory_bytes()
  int64_t kv_bytes_peak = 0;         // the most K/V bytes filled at once (max_slots worth)
  int64_t max_slots = 0;             // the most slots held at once, prefill included
  // Resident memory before the run's model and cache were made, after the allocator returned its
  // free memory to the system (release_free_memory).
  int64_t rss_before_bytes = 0;
  int64_t peak_rss_bytes = 0;   // the process's peak resident memory during the run
  bool peak_rss_reset = false;  // the peak counter was restarted for this run (Linux)
  EvictionTotals prefill_evictions;
  EvictionTotals decode_evictions;
};

struct CellResult {
  std::string policy;
  int64_t budget = 0;
  EvictionConfig config;            // continuation, retrieval and cost
  EvictionConfig streaming_config;  // streaming (see streaming_budget_config)
  bool compresses_prompt = false;   // the policy compresses a prompt when its prefill ends
  StreamingCell streaming;
  ContinuationCell continuation;
  std::vector<PasskeyTrial> retrieval;  // one per case, in case order
  int64_t retrieval_max_slots = 0;
  CostResult cost;
};

struct FullCacheResult {
  NllStats streaming;  // every prediction of every window
  int64_t streaming_bytes = 0;
  NllStats continuation;
  std::vector<PasskeyTrial> retrieval;
  CostResult cost;
};

// Checks the options against the model before anything runs; throws edgelm::Error with one line
// naming the setting (an unknown policy, a budget of 0, sinks not below a budget, a chunk beyond
// half a budget, a continuation longer than the window, ...).
void check_eviction_eval_options(const EvictionEvalOptions& options, const LlamaConfig& config);

// The prefill step of the continuation, retrieval and cost runs that `options` imply.
int64_t eviction_eval_batch(const EvictionEvalOptions& options, const LlamaConfig& config);

// The streaming settings of a cell: `config`, except that a policy which compresses each prompt
// when it ends (SnapKV) gets a budget of budget - evict_every + 1, so that after compressing a
// chunk it leaves room for the next one and no query attends more than `budget` slots, as with
// every other policy (with evict_every 1 the two are the same).
EvictionConfig streaming_budget_config(const EvictionConfig& config, bool compresses_prompt,
                                       int64_t budget, int64_t evict_every);

class EvictionEval {
 public:
  // Every cell's model, and the full cache's, is a LlamaModel over `model`'s backend and weights
  // (the buffers are shared) with the step each run needs; `model` (a Runtime's) must outlive the
  // evaluation and is not run itself. Throws as check_eviction_eval_options.
  EvictionEval(LlamaModel& model, EvictionEvalOptions options);

  // Progress lines (one per text window, case, ...), for stderr; none by default.
  void set_progress(std::function<void(std::string_view)> progress) {
    progress_ = std::move(progress);
  }

  // Streams every window of every text through the full cache and every cell in lockstep. Throws
  // edgelm::Error naming the text when it has fewer than window_tokens tokens.
  void run_streaming(std::span<const EvalText> texts);
  // Compress-then-continue over the windows of every text (as run_streaming cuts them).
  void run_continuation(std::span<const EvalText> texts);
  // Answers every case with the full cache and with every cell (answer_passkey).
  void run_retrieval(std::span<const PasskeyCase> cases, const Tokenizer& tokenizer,
                     const PasskeyAnswerOptions& answer);
  // Prefills the first window of `text` and decodes cost_decode_tokens greedily, for the full
  // cache and then for each cell, each alone in memory, timing the decode steps and the evictions.
  void run_cost(const EvalText& text);

  const EvictionEvalOptions& options() const { return options_; }
  const LlamaConfig& config() const { return config_; }
  int64_t batch() const { return batch_; }
  const std::vector<CellResult>& cells() const { return cells_; }
  const FullCacheResult& full() const { return full_; }
  // The cases run_retrieval answered, in the order of every cell's `retrieval`.
  const std::vector<PasskeyCase>& retrieval_cases() const { return retrieval_cases_; }

 private:
  void report(const std::string& line) const;
  // The windows run_streaming cuts from a text (its first token replaced by BOS when asked).
  std::vector<std::vector<int32_t>> windows_of(const EvalText& text) const;
  int64_t cache_capacity(const CellResult& cell, int64_t sequence_tokens) const;

  Backend& backend_;
  const LlamaConfig& config_;
  const LlamaWeights& weights_;
  EvictionEvalOptions options_;
  int64_t batch_ = 0;
  std::vector<CellResult> cells_;
  FullCacheResult full_;
  std::vector<PasskeyCase> retrieval_cases_;
  std::function<void(std::string_view)> progress_;
};

}  // namespace edgelm
