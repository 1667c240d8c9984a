#include "eviction/protect_policy.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "eviction/policy_wrapper.h"
#include "eviction/token_record.h"

namespace edgelm {
namespace {

constexpr float kDrop = -std::numeric_limits<float>::infinity();

class ProtectPolicy final : public PolicyWrapper {
 public:
  ProtectPolicy(std::unique_ptr<EvictionPolicy> inner, unsigned classes, int64_t sink_tokens)
      : PolicyWrapper(std::move(inner)), classes_(classes), sinks_(sink_tokens) {}

  std::string name() const override {
    std::string name = PolicyWrapper::name();
    name += "+protect(";
    bool first = true;
    for (const auto& [bit, word] : kNames) {
      if ((classes_ & bit) == 0) continue;
      if (!first) name += ',';
      name += word;
      first = false;
    }
    name += ')';
    return name;
  }

  // The sinks and the system prompt, counted once where they overlap.
  int64_t reserved_slots(const TokenRecord& tokens) const override {
    const int64_t sinks = (classes_ & kProtectSinks) != 0 ? sinks_ : 0;
    int64_t system = 0;
    if ((classes_ & kProtectSystem) != 0) {
      system = std::max<int64_t>(0, tokens.system_end() - std::max(tokens.system_begin(), sinks));
    }
    return sinks + system;
  }

  // The protected sinks are the first positions, which the wrapped policy may keep already.
  KeptSlots always_kept() const override {
    KeptSlots kept = PolicyWrapper::always_kept();
    if ((classes_ & kProtectSinks) != 0) kept.first = std::max(kept.first, sinks_);
    return kept;
  }

  void prepare(int64_t n_layers, int64_t n_kv_heads, int64_t capacity) override {
    PolicyWrapper::prepare(n_layers, n_kv_heads, capacity);
    template_positions_.reserve(static_cast<size_t>(capacity));
  }

  void score(const LayerSlots& slots, Phase phase, float* scores) override {
    PolicyWrapper::score(slots, phase, scores);
    const TokenRecord* tokens = slots.tokens;
    if ((classes_ & kProtectTemplate) != 0 && (tokens == nullptr || !tokens->tracks_special())) {
      EDGELM_FAIL(
          "[eviction] --protect template: no special token ids were given "
          "(CacheManager::set_special_tokens), so template tokens cannot be told apart");
    }
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      float* head = scores + g * slots.n_slots;
      int64_t fixed = 0;  // sinks and system prompt: never evicted
      template_positions_.clear();
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        const int32_t position = slots.positions[s * slots.n_kv_heads + g];
        const Tier tier = tier_of(position, tokens);
        if (tier == Tier::Fixed) ++fixed;
        if (tier == Tier::Template) template_positions_.push_back(position);
      }
      const auto n_template = static_cast<int64_t>(template_positions_.size());
      if (fixed > slots.keep) {
        EDGELM_FAIL("[eviction] --protect: ", fixed, " sink and system-prompt slots of layer ",
                    slots.layer, " do not fit its limit of ", slots.keep,
                    " slots this step (the limit less the step's tokens); raise --kv-budget, "
                    "lower -b/--batch-size or protect fewer classes");
      }
      // Template tokens beyond what the layer keeps: the newest stay.
      int32_t oldest_kept_template = std::numeric_limits<int32_t>::min();
      const bool overflow = fixed + n_template > slots.keep;
      if (overflow) {
        const int64_t room = slots.keep - fixed;
        if (!warned_) {
          log_warn("[eviction] --protect: ", fixed + n_template, " protected slots exceed the ",
                   slots.keep, " that layer ", slots.layer,
                   " keeps; the oldest template tokens are evicted");
          warned_ = true;
        }
        if (room == 0) {
          oldest_kept_template = std::numeric_limits<int32_t>::max();
        } else {
          auto nth = template_positions_.begin() + (n_template - room);
          std::nth_element(template_positions_.begin(), nth, template_positions_.end());
          oldest_kept_template = *nth;
        }
      }
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        const int32_t position = slots.positions[s * slots.n_kv_heads + g];
        switch (tier_of(position, tokens)) {
          case Tier::Fixed:
            head[s] = kAlwaysKeep;
            break;
          case Tier::Template:
            head[s] = position >= oldest_kept_template ? kAlwaysKeep : kDrop;
            break;
          case Tier::Free:
            // What the wrapped policy promises (its recent window) ranks below every protected
            // slot, so that the manager's tie-break by recency cannot drop a sink for it.
            if (overflow) {
              head[s] = kDrop;  // every kept slot is a protected one
            } else if (head[s] == kAlwaysKeep) {
              head[s] = std::numeric_limits<float>::max();
            }
            break;
        }
      }
    }
  }

 private:
  enum class Tier { Fixed, Template, Free };
  static constexpr std::pair<unsigned, const char*> kNames[] = {
      {kProtectSinks, "sinks"}, {kProtectSystem, "system"}, {kProtectTemplate, "template"}};

  Tier tier_of(int32_t position, const TokenRecord* tokens) const {
    if ((classes_ & kProtectSinks) != 0 && position < sinks_) return Tier::Fixed;
    if (tokens != nullptr) {
      if ((classes_ & kProtectSystem) != 0 && tokens->in_system_prompt(position))
        return Tier::Fixed;
      if ((classes_ & kProtectTemplate) != 0 && tokens->special(position)) return Tier::Template;
    }
    return Tier::Free;
  }

  unsigned classes_;
  int64_t sinks_;
  bool warned_ = false;
  std::vector<int32_t> template_positions_;  // [<= capacity] scratch, reserved in prepare()
};

}  // namespace

unsigned parse_protect_classes(const std::string& protect) {
  unsigned classes = 0;
  size_t begin = 0;
  while (begin <= protect.size()) {
    const size_t comma = std::min(protect.find(',', begin), protect.size());
    const std::string word = protect.substr(begin, comma - begin);
    if (word == "sinks") {
      classes |= kProtectSinks;
    } else if (word == "system") {
      classes |= kProtectSystem;
    } else if (word == "template") {
      classes |= kProtectTemplate;
    } else {
      EDGELM_FAIL("[eviction] --protect '", protect, "': '", word,
                  "' is not one of sinks|system|template");
    }
    begin = comma + 1;
  }
  return classes;
}

std::unique_ptr<EvictionPolicy> make_protect_policy(std::unique_ptr<EvictionPolicy> inner,
                                                    unsigned classes, int64_t sink_tokens) {
  return std::make_unique<ProtectPolicy>(std::move(inner), classes, sink_tokens);
}

}  // namespace edgelm
