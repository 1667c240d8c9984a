#include "eviction/none_policy.h"

namespace edgelm {
namespace {

class NonePolicy final : public EvictionPolicy {
 public:
  std::string name() const override { return "none"; }
  bool evicts() const override { return false; }
  void score(const LayerSlots&, Phase, float*) override {}
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_none_policy(const EvictionConfig&) {
  return std::make_unique<NonePolicy>();
}

}  // namespace edgelm
