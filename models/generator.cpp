#include "models/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace edgelm {

Generator::Generator(LlamaModel& model, KvCache& cache, CacheManager* manager)
    : model_(model), cache_(cache), manager_(manager) {}

std::span<const float> Generator::step(std::span<const int32_t> tokens, Phase phase) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (manager_ != nullptr) {
    // Evict before the step so that after it the cache holds at most the policy's limit/budget
    // (and fits its capacity); then run with what the policy needs exported.
    manager_->maybe_evict(cache_, phase, n);
    const ForwardOptions options = manager_->forward_options(phase, cache_.next_position(), n);
    const auto start = std::chrono::steady_clock::now();
    const std::span<const float> logits = model_.forward(tokens, cache_, options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    (phase == Phase::Prefill ? prefill_seconds_ : decode_seconds_) += seconds;
    manager_->observe(cache_, phase, options);
    return logits;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::span<const float> logits = model_.forward(tokens, cache_);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  (phase == Phase::Prefill ? prefill_seconds_ : decode_seconds_) += seconds;
  return logits;
}

std::span<const float> Generator::prefill(std::span<const int32_t> tokens) {
  EDGELM_CHECK(!tokens.empty(), "[generator] empty prompt");
  if (manager_ != nullptr)
    manager_->begin_prefill(cache_.next_position() + static_cast<int64_t>(tokens.size()));
  std::span<const float> logits;
  int64_t max_step = model_.max_chunk();
  if (manager_ != nullptr) max_step = std::min(max_step, manager_->max_step_tokens(cache_));
  const auto chunk = static_cast<size_t>(max_step);
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

}  // namespace edgelm
