// The policy registry: every registered policy builds with its defaults, names are unique and
// listed in the registry's order, policy_reads answers from the registry, an unknown name is an
// error; and the statistics the CacheManager keeps for a policy follow every compaction, on every
// backend (the compaction is the backend's kv_compact op).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/error.h"
#include "eviction/cache_manager.h"
#include "eviction/policy_registry.h"

namespace edgelm {
namespace {

std::string message_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// With --kv-budget where the policy needs one, and every other setting left at its default.
TEST(PolicyRegistry, EveryPolicyBuildsWithItsDefaults) {
  ASSERT_FALSE(policy_registry().empty());
  for (const PolicyEntry& entry : policy_registry()) {
    EvictionConfig config;
    config.policy = std::string(entry.name);
    if (entry.limit == PolicyLimit::kBudget) config.kv_budget = 64;
    const std::unique_ptr<EvictionPolicy> policy = make_policy(config);
    ASSERT_NE(policy, nullptr) << entry.name;
    EXPECT_EQ(policy->name(), entry.name);
    EXPECT_FALSE(entry.description.empty()) << entry.name;
    EXPECT_EQ(policy->evicts(), entry.limit != PolicyLimit::kNever) << entry.name;
    // What bounds it: its own rule, the budget, or nothing.
    const std::optional<int64_t> expected_limit =
        entry.limit == PolicyLimit::kBudget ? std::optional<int64_t>(64)
        : entry.limit == PolicyLimit::kOwn  ? policy->own_limit().value_or(-1)
                                            : std::optional<int64_t>();
    EXPECT_EQ(policy->own_limit(), expected_limit) << entry.name;
    EXPECT_GE(policy->stat_channels(), 0) << entry.name;
    if (entry.limit == PolicyLimit::kBudget) {
      config.kv_budget = 0;
      EXPECT_NE(message_of([&] {
                  make_policy(config);
                }).find("--eviction-policy " + config.policy + " needs --kv-budget"),
                std::string::npos)
          << entry.name;
    }
  }
}

TEST(PolicyRegistry, NamesAreUniqueAndListedInOrder) {
  std::set<std::string_view> seen;
  std::vector<std::string> names;
  for (const PolicyEntry& entry : policy_registry()) {
    EXPECT_TRUE(seen.insert(entry.name).second) << "'" << entry.name << "' registered twice";
    EXPECT_EQ(&find_policy(entry.name), &entry);
    names.emplace_back(entry.name);
  }
  EXPECT_EQ(policy_names(), names);
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : "|") + name;
  EXPECT_EQ(policy_list(), list);
  // An unknown name is an error that lists the known ones, never a fallback.
  const std::string error = message_of([] { find_policy("lru"); });
  EXPECT_NE(error.find("--eviction-policy 'lru' is not one of " + list), std::string::npos)
      << error;
  EXPECT_THROW(policy_reads("lru", "--kv-budget"), Error);
}

// Every flag a registry line names is one of eviction_flags() (a misspelt flag would never be
// read); policy_reads answers yes for exactly those, the triggers every evicting policy reads and,
// for the budgeted ones, the per-layer budget flags.
TEST(PolicyRegistry, PolicyReadsAgreesWithTheRegistry) {
  const std::vector<std::string>& flags = eviction_flags();
  const std::set<std::string> triggers = {"--kv-budget", "--memory-threshold-mb",
                                          "--simulate-memory", "--pressure-floor", "--protect"};
  for (const PolicyEntry& entry : policy_registry()) {
    const std::string name(entry.name);
    std::set<std::string> own;
    for (const std::string_view flag : entry.flags) {
      EXPECT_NE(std::find(flags.begin(), flags.end(), flag), flags.end())
          << name << " lists " << flag << ", which is not an eviction flag";
      EXPECT_TRUE(own.emplace(flag).second) << name << " lists " << flag << " twice";
    }
    for (const std::string& flag : flags) {
      bool expected = own.contains(flag) || triggers.contains(flag);
      if (flag == "--layer-budget" || flag == "--pyramid-beta")
        expected = entry.limit == PolicyLimit::kBudget;
      if (entry.limit == PolicyLimit::kNever) expected = false;
      EXPECT_EQ(policy_reads(name, flag), expected) << name << " " << flag;
    }
  }
}

Backend* backend_or_null(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Backend>> backends;
  if (!backends.contains(name)) {
    const std::vector<std::string> names = backend_names();
    backends[name] = std::find(names.begin(), names.end(), name) != names.end()
                         ? create_backend(name, {.n_threads = 2})
                         : nullptr;
  }
  return backends[name].get();
}

// Keeps two statistics per slot that say which token the slot holds: position + 1 and
// -(position + 1) - 1000 * kv head. At each eviction it checks that every slot it wrote before
// still holds its own token's (so the statistics moved with their slots, per kv head), and that
// every other slot is new and reads 0 (so a slot reused after a compaction starts clean); then
// it writes them all and scores by a hash of (kv head, position), so the kv heads keep different
// slots in no order of recency.
class StatsProbe final : public EvictionPolicy {
 public:
  std::string name() const override { return "stats_probe"; }
  std::optional<int64_t> own_limit() const override { return 6; }
  int64_t stat_channels() const override { return 2; }
  void score(const LayerSlots& slots, Phase, float* scores) override {
    const SlotStats& stats = slots.stats;
    ASSERT_NE(stats.values, nullptr);
    ASSERT_EQ(stats.n_slots, slots.n_slots);
    ASSERT_EQ(stats.n_kv_heads, slots.n_kv_heads);
    ASSERT_EQ(stats.channels, 2);
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      for (int64_t s = 0; s < slots.n_slots; ++s) {
        const int32_t position = slots.positions[s * slots.n_kv_heads + g];
        const float own = static_cast<float>(position + 1);
        const float mirror = -own - 1000.0f * static_cast<float>(g);
        if (stats.at(g, s, 0) == 0.0f) {
          // Not seen yet: appended since the last eviction of this layer.
          EXPECT_GE(position, seen_until_[slots.layer]) << "layer " << slots.layer << " head " << g;
          EXPECT_EQ(stats.at(g, s, 1), 0.0f);
          ++fresh;
        } else {
          EXPECT_EQ(stats.at(g, s, 0), own) << "layer " << slots.layer << " head " << g;
          EXPECT_EQ(stats.at(g, s, 1), mirror) << "layer " << slots.layer << " head " << g;
          ++followed;
        }
        stats.at(g, s, 0) = own;
        stats.at(g, s, 1) = mirror;
        const uint32_t hash = static_cast<uint32_t>(position * 2654435761u + g * 40503u);
        scores[g * slots.n_slots + s] = static_cast<float>(hash >> 8);
      }
    }
    seen_until_[slots.layer] = slots.next_position;
  }
  int64_t fresh = 0;
  int64_t followed = 0;

 private:
  std::map<int64_t, int64_t> seen_until_;
};

class StatisticsOnBackend : public ::testing::TestWithParam<std::string> {};

TEST_P(StatisticsOnBackend, FollowTheirSlotsThroughEveryCompaction) {
  Backend* backend = backend_or_null(GetParam());
  if (backend == nullptr) {
    if (GetParam() == "opencl" && opencl_built() &&
        std::getenv("EDGELM_REQUIRE_OPENCL") != nullptr) {
      FAIL() << "EDGELM_REQUIRE_OPENCL is set but no OpenCL device was found";
    }
    GTEST_SKIP() << "no " << GetParam() << " backend here";
  }
  constexpr int64_t kLayers = 2, kKvHeads = 3, kDim = 4;
  KvCache cache(*backend, kLayers, 8, kKvHeads, kDim, DType::F32);
  auto probe = std::make_unique<StatsProbe>();
  StatsProbe& seen = *probe;
  CacheManager manager(EvictionConfig{}, std::move(probe));
  Tensor row = Tensor::empty(backend->memory(), DType::F32, {1, kKvHeads, kDim});
  std::fill_n(row.data<float>(), row.numel(), 1.0f);
  for (int32_t position = 0; position < 40; ++position) {
    manager.maybe_evict(cache, Phase::Decode, 1);
    for (int64_t l = 0; l < kLayers; ++l) cache.append(l, row, row, std::vector<int32_t>{position});
    cache.advance(1);
  }
  // 34 evictions (from position 6 on) of 2 layers x 3 kv heads: the first sees 6 new slots, each
  // later one the 5 slots it kept and the newest.
  EXPECT_EQ(manager.evictions(), 34);
  EXPECT_EQ(seen.followed, 33 * kLayers * kKvHeads * 5);
  EXPECT_EQ(seen.fresh, kLayers * kKvHeads * (6 + 33));
}

INSTANTIATE_TEST_SUITE_P(Backends, StatisticsOnBackend, ::testing::Values("cpu:portable", "opencl"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           std::replace(name.begin(), name.end(), ':', '_');
                           return name;
                         });

}  // namespace
}  // namespace edgelm
