#include "runtime/generator.h"

#include <algorithm>

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
                                       std::optional<int64_t> logits_from) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t first_position = cache_.next_position();
  LlamaModel& model = router_ != nullptr ? router_->route(phase, n) : model_;
  ForwardOptions options;
  StepExports exports;
  if (manager_ != nullptr) {
    // Evict before the step so that after it the cache holds at most the policy's limit/budget
    // (and fits its capacity); then run with what the policy needs exported.
    manager_->maybe_evict(cache_, phase, n);
    exports = manager_->forward_options(cache_, phase, n);
    options.export_mass = exports.export_mass;
    options.mass_from_position = exports.mass_from_position;
    options.export_queries = exports.export_queries;
    manager_->tokens().record(first_position, tokens);
  }
  if (logits_from) {
    options.all_logits = true;
    options.logits_from = *logits_from;
  }
  const Stopwatch stopwatch;
  const std::span<const float> logits = model.forward(tokens, cache_, options);
  const double seconds = stopwatch.seconds();
  (phase == Phase::Prefill ? prefill_seconds_ : decode_seconds_) += seconds;
  if (router_ != nullptr) router_->finished(phase, n, seconds);
  if (manager_ != nullptr) {
    manager_->observe(cache_, phase, exports);
    if (exports.export_queries) {
      manager_->observe_queries(cache_, exported_queries(model, first_position));
    }
  }
  return logits;
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
  const auto n = static_cast<int64_t>(tokens.size());
  EDGELM_CHECK(n > 0 && n <= max_step(), "[generator] a prefill step takes 1 to ", max_step(),
               " tokens, got ", n);
  const std::span<const float> logits = step(tokens, Phase::Prefill, logits_from);
  prefill_tokens_ += n;
  return logits;
}

std::span<const float> Generator::prefill(std::span<const int32_t> tokens) {
  EDGELM_CHECK(!tokens.empty(), "[generator] empty prompt");
  begin_prefill(static_cast<int64_t>(tokens.size()));
  std::span<const float> logits;
  const auto chunk = static_cast<size_t>(max_step());
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const size_t count = std::min(chunk, tokens.size() - begin);
    logits = step(tokens.subspan(begin, count), Phase::Prefill);
  }
  prefill_tokens_ += static_cast<int64_t>(tokens.size());
  if (manager_ != nullptr) manager_->end_prefill(cache_);
  return logits;
}

std::span<const float> Generator::decode(int32_t token) {
  const std::span<const float> logits = step(std::span<const int32_t>(&token, 1), Phase::Decode);
  ++decode_steps_;
  return logits;
}

std::span<const float> Generator::decode_draft(std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  EDGELM_CHECK(n > 0 && n <= max_step(), "[generator] a draft step takes 1 to ", max_step(),
               " tokens, got ", n);
  const std::span<const float> logits = step(tokens, Phase::Decode, 0);
  decode_steps_ += n;
  return logits;
}

void Generator::rollback(int64_t n) {
  cache_.truncate(n);
  decode_steps_ -= n;
}

}  // namespace edgelm
