#include "runtime/generator.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/process_stats.h"

namespace edgelm {
namespace {

// The queries the model exported in its last step, as the cache manager reads them: each layer's
// rows at a fixed stride (the layout of ForwardOptions::export_queries).
StepQueries exported_queries(const LlamaModel& model, int64_t first_position) {
  const Tensor layer0 = model.query_rows(0);  // [n_tokens, n_heads, head_dim]
  return {.rows = layer0.data<float>(),
          .layer_stride = model.max_chunk() * layer0.dim(1) * layer0.dim(2),
          .n_tokens = layer0.dim(0),
          .n_heads = layer0.dim(1),
          .head_dim = layer0.dim(2),
          .first_position = first_position,
          .inv_freq = model.rope_inv_freq()};
}

}  // namespace

Generator::Generator(LlamaModel& model, KvCache& cache, CacheManager* manager)
    : model_(model), cache_(cache), manager_(manager) {}

std::span<const float> Generator::step(std::span<const int32_t> tokens, Phase phase,
                                       std::optional<int64_t> logits_from, bool evict) {
  const auto n = static_cast<int64_t>(tokens.size());
  LlamaModel& model = router_ != nullptr ? router_->route(phase, n) : model_;
  last_ = {.model = &model, .phase = phase, .first_position = 0, .n_tokens = n, .exports = {}};
  ForwardOptions options;
  if (manager_ != nullptr) {
    // Evict before the step so that after it the cache holds at most the policy's limit/budget
    // (and fits its capacity); then run with what the policy needs exported.
    if (evict) manager_->maybe_evict(cache_, phase, n);
    last_.exports = manager_->forward_options(cache_, phase, n);
    options.export_mass = last_.exports.export_mass;
    options.mass_from_position = last_.exports.mass_from_position;
    options.export_queries = last_.exports.export_queries;
    manager_->tokens().record(cache_.next_position(), tokens);
  }
  last_.first_position = cache_.next_position();
  if (logits_from) {
    options.all_logits = true;
    options.logits_from = *logits_from;
  }
  const Stopwatch stopwatch;
  const std::span<const float> logits = model.forward(tokens, cache_, options);
  const double seconds = stopwatch.seconds();
  (phase == Phase::Prefill ? prefill_seconds_ : decode_seconds_) += seconds;
  if (phase == Phase::Decode) ++decode_forwards_;
  if (router_ != nullptr) router_->finished(phase, n, seconds);
  return logits;
}

void Generator::observe(bool mass, int64_t rows) {
  if (manager_ == nullptr) return;
  StepExports exports = last_.exports;
  exports.export_mass = exports.export_mass && mass;
  manager_->observe(cache_, last_.phase, exports);
  if (!exports.export_queries || rows == 0) return;
  const StepQueries all = exported_queries(*last_.model, last_.first_position);
  if (last_.phase == Phase::Prefill || last_.n_tokens == 1) {
    StepQueries queries = all;
    queries.n_tokens = rows;
    manager_->observe_queries(cache_, queries);
    return;
  }
  // A decode step of several tokens: one row at a time, as one-token steps hand them over, so
  // that a policy that sums them (Expected Attention) adds them in the same order.
  const int64_t row = all.n_heads * all.head_dim;
  for (int64_t t = 0; t < rows; ++t) {
    StepQueries queries = all;
    queries.rows = all.rows + t * row;
    queries.n_tokens = 1;
    queries.first_position = all.first_position + t;
    manager_->observe_queries(cache_, queries);
  }
}

int64_t Generator::max_step() const {
  int64_t max_step = model_.max_chunk();
  if (manager_ != nullptr) max_step = std::min(max_step, manager_->max_step_tokens(cache_));
  return max_step;
}

void Generator::begin_prefill(int64_t n_tokens) {
  if (manager_ != nullptr) manager_->begin_prefill(cache_.next_position() + n_tokens);
}

std::span<const float> Generator::prefill_step(std::span<const int32_t> tokens,
                                               int64_t logits_from) {
  flush_replay();
  const auto n = static_cast<int64_t>(tokens.size());
  EDGELM_CHECK(n > 0 && n <= max_step(), "[generator] a prefill step takes 1 to ", max_step(),
               " tokens, got ", n);
  const std::span<const float> logits = step(tokens, Phase::Prefill, logits_from);
  observe(true, n);
  prefill_tokens_ += n;
  return logits;
}

std::span<const float> Generator::prefill(std::span<const int32_t> tokens) {
  EDGELM_CHECK(!tokens.empty(), "[generator] empty prompt");
  flush_replay();
  begin_prefill(static_cast<int64_t>(tokens.size()));
  std::span<const float> logits;
  const auto chunk = static_cast<size_t>(max_step());
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const size_t count = std::min(chunk, tokens.size() - begin);
    logits = step(tokens.subspan(begin, count), Phase::Prefill);
    observe(true, static_cast<int64_t>(count));
  }
  prefill_tokens_ += static_cast<int64_t>(tokens.size());
  if (manager_ != nullptr) manager_->end_prefill(cache_);
  return logits;
}

std::span<const float> Generator::decode(int32_t token) {
  if (!replay_.empty()) {
    begin_draft_step();
    const std::span<const float> logits = decode_draft(std::span<const int32_t>(&token, 1));
    end_draft_step(1);
    return logits;
  }
  const std::span<const float> logits = step(std::span<const int32_t>(&token, 1), Phase::Decode);
  observe(true, 1);
  ++decode_steps_;
  return logits;
}

int64_t Generator::begin_draft_step() {
  EDGELM_CHECK(draft_step_.empty(), "[generator] a draft step began before the last one ended");
  if (replay_tokens() + 1 > max_step()) flush_replay();  // too many to go with the next token
  if (manager_ == nullptr) return std::numeric_limits<int64_t>::max();
  // The replayed tokens join the next token's step: they were fed before, so the eviction for
  // the one token is what plain decoding runs before it (the replay's slots fit below the
  // limit, where they were).
  manager_->maybe_evict(cache_, Phase::Decode, 1 + replay_tokens());
  if (!replay_.empty()) return 0;  // drafts there would let rejected rows into the mass again
  return manager_->decode_headroom(cache_);
}

std::span<const float> Generator::decode_draft(std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  const auto replayed = replay_tokens();
  EDGELM_CHECK(n > 0 && replayed + n <= max_step(), "[generator] a draft step takes 1 to ",
               max_step() - replayed, " tokens, got ", n);
  draft_step_.assign(replay_.begin(), replay_.end());
  draft_replayed_ = replayed;
  draft_step_.insert(draft_step_.end(), tokens.begin(), tokens.end());
  replay_.clear();
  // One token's logits as decode() computes them; else every row from the first token on.
  const std::optional<int64_t> logits_from =
      n == 1 ? std::nullopt : std::optional<int64_t>(replayed);
  const std::span<const float> logits =
      step(draft_step_, Phase::Decode, logits_from, /*evict=*/false);
  decode_steps_ += replayed + n;
  return logits;
}

void Generator::end_draft_step(int64_t kept) {
  const auto n = static_cast<int64_t>(draft_step_.size());
  EDGELM_CHECK(n > 0, "[generator] end_draft_step() without decode_draft()");
  EDGELM_CHECK(kept >= 1 && kept <= n - draft_replayed_, "[generator] a draft step of ",
               n - draft_replayed_, " tokens keeps 1 to all of them, got ", kept);
  const int64_t keep = draft_replayed_ + kept;  // the replayed tokens stay
  if (keep < n && last_.exports.export_mass) {
    cache_.truncate(n);
    manager_->truncated(cache_);
    decode_steps_ -= n;
    replay_.assign(draft_step_.begin(), draft_step_.begin() + keep);
  } else {
    observe(keep == n, keep);
    if (keep < n) rollback(n - keep);
  }
  draft_step_.clear();
  draft_replayed_ = 0;
}

void Generator::flush_replay() {
  if (replay_.empty()) return;
  const std::vector<int32_t> tokens = std::move(replay_);
  replay_.clear();
  step(tokens, Phase::Decode);
  observe(true, static_cast<int64_t>(tokens.size()));
  decode_steps_ += static_cast<int64_t>(tokens.size());
}

void Generator::make_room(int64_t n_tokens) {
  EDGELM_CHECK(n_tokens >= 0 && n_tokens <= max_step(), "[generator] room for 0 to ", max_step(),
               " tokens, asked for ", n_tokens);
  if (manager_ != nullptr && n_tokens > 0) manager_->maybe_evict(cache_, Phase::Decode, n_tokens);
}

void Generator::rollback(int64_t n) {
  cache_.truncate(n);
  if (manager_ != nullptr) manager_->truncated(cache_);
  decode_steps_ -= n;
}

}  // namespace edgelm
