// The eviction policies, one line each: a policy is its own file (eviction/<name>_policy.{h,cpp})
// plus one line in the table of policy_registry.cpp. make_policy, policy_names, policy_list and
// policy_reads (eviction/policy.h) are derived from the table; docs/adding_a_policy.md has the
// steps.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>

#include "eviction/policy.h"

namespace edgelm {

// What bounds a policy's cache.
enum class PolicyLimit {
  kNever,   // never evicts (none)
  kOwn,     // its own rule (sinks + window, prefix + window); --kv-budget may bound it further
  kBudget,  // --kv-budget, which it needs; per-layer budgets (--layer-budget) share it out
};

// One registered policy.
struct PolicyEntry {
  // Builds the policy from `config` (with with_budget_defaults applied), checking the settings it
  // reads; throws edgelm::Error naming the flag of a bad one. make_policy has checked the settings
  // every policy shares (the budget, sinks and prefix >= 0, the window >= 1 after this call, the
  // memory settings) and, for a budgeted policy, that --kv-budget is set.
  using Factory = std::unique_ptr<EvictionPolicy> (*)(const EvictionConfig& config);
  // The window an unset --eviction-window takes under --kv-budget (config.kv_budget > 0,
  // sink_tokens set); null: half the budget.
  using BudgetWindow = int64_t (*)(const EvictionConfig& config);

  std::string_view name;         // --eviction-policy
  Factory make;                  // never null
  std::string_view description;  // one line, for help texts and docs
  // The command-line flags of its own settings (of eviction_flags()), beside those every policy
  // that evicts reads (see policy_reads).
  std::initializer_list<std::string_view> flags;
  PolicyLimit limit;
  BudgetWindow budget_window = nullptr;
};

// Every registered policy, in the order help texts list them.
std::span<const PolicyEntry> policy_registry();
// The entry named `name`; throws edgelm::Error naming --eviction-policy and the registered names
// when there is none.
const PolicyEntry& find_policy(std::string_view name);

}  // namespace edgelm
