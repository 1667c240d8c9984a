#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

// Counts operator new calls while armed, to check that sample() allocates nothing.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

// Out of line: GCC 12 at -O2 otherwise inlines these and flags free() of operator new's memory
// as -Wmismatched-new-delete, which is wrong for a replaced pair.
[[gnu::noinline]] void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace edgelm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Five tokens whose order by logit (1, 3, 0, 4, 2) is not the id order. Relative to the best,
// the weights at temperature 1 are 1, e^-1, e^-1.5, e^-2, e^-3, i.e. probabilities
// 0.5630, 0.2071, 0.1256, 0.0762, 0.0280.
const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 1.0f, 0.0f};

// Sampling with every filter off; tests switch on the one they check.
SamplerConfig plain(float temperature = 1.0f, uint64_t seed = 7) {
  return SamplerConfig{.greedy = false,
                       .temperature = temperature,
                       .top_k = 0,
                       .top_p = 1.0f,
                       .min_p = 0.0f,
                       .repetition_penalty = 1.0f,
                       .seed = seed};
}

// softmax(logits / temperature) restricted to `keep` and renormalised; 0 elsewhere.
std::vector<double> expected_probs(const std::vector<float>& logits, double temperature,
                                   const std::vector<int>& keep) {
  std::vector<double> probs(logits.size(), 0.0);
  double total = 0.0;
  for (const int id : keep) {
    probs[id] = std::exp(logits[id] / temperature);
    total += probs[id];
  }
  for (double& p : probs) p /= total;
  return probs;
}

std::vector<int> draw_counts(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[sampler.sample(logits, {})];
  return counts;
}

// Each count within 4 standard errors of draws * p (the seed is fixed, so this cannot flake;
// 4 sigma leaves room for any seed), and exactly 0 where p is 0.
void expect_frequencies(const std::vector<int>& counts, const std::vector<double>& probs,
                        int draws) {
  for (size_t id = 0; id < probs.size(); ++id) {
    const double mean = draws * probs[id];
    if (probs[id] == 0.0) {
      EXPECT_EQ(counts[id], 0) << "token " << id << " should be filtered out";
      continue;
    }
    const double sigma = std::sqrt(draws * probs[id] * (1.0 - probs[id]));
    EXPECT_NEAR(counts[id], mean, 4.0 * sigma) << "token " << id << ", p " << probs[id];
  }
}

constexpr int kDraws = 20000;

void expect_error(const SamplerConfig& config, int64_t vocab_size, const std::string& fragment) {
  try {
    Sampler sampler(config, vocab_size);
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[sampler]"), std::string::npos) << e.what();
  }
}

TEST(Sampler, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler greedy(SamplerConfig{.greedy = true}, 5);
  EXPECT_EQ(greedy.sample(kLogits, {}), 1);
  const std::vector<float> tied = {1.0f, 3.0f, -kInf, 3.0f, 2.0f};
  EXPECT_EQ(greedy.sample(tied, {}), 1);
  Sampler cold(SamplerConfig{.temperature = 0.0f}, 5);
  EXPECT_EQ(cold.sample(tied, {}), 1);
  Sampler negative(SamplerConfig{.temperature = -1.0f}, 5);
  EXPECT_EQ(negative.sample(kLogits, {}), 1);
}

TEST(Sampler, GreedyOverALargeVocabulary) {
  // 1003 tokens: the vectorized scans take 8 at a time and finish the last 3 one by one.
  std::vector<float> logits(1003, 0.0f);
  logits[600] = 2.0f;
  logits[1001] = 2.0f;
  Sampler greedy(SamplerConfig{.greedy = true}, 1003);
  EXPECT_EQ(greedy.sample(logits, {}), 600);
  logits[1002] = 5.0f;
  EXPECT_EQ(greedy.sample(logits, {}), 1002);
  std::fill(logits.begin(), logits.end(), -kInf);
  EXPECT_THROW(greedy.sample(logits, {}), Error);
  logits[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(greedy.sample(logits, {}), Error);
}

TEST(Sampler, TopKOverALargeVocabularyKeepsTheKBestByLogitThenId) {
  // 1000 tokens: 1 at every seventh id, -inf at the other multiples of eleven, 0 elsewhere, and 3
  // at id 993. The ten best are 993 and the nine lowest ids holding 1 (ties go to lower ids),
  // which the selection must find although the largest logit comes last.
  std::vector<float> logits(1000, 0.0f);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (i % 11 == 0) logits[i] = -kInf;
    if (i % 7 == 0) logits[i] = 1.0f;
  }
  logits[993] = 3.0f;
  SamplerConfig config = plain();
  config.top_k = 10;
  Sampler sampler(config, 1000);
  expect_frequencies(draw_counts(sampler, logits, kDraws),
                     expected_probs(logits, 1.0, {993, 0, 7, 14, 21, 28, 35, 42, 49, 56}), kDraws);
}

TEST(Sampler, TopKOneMatchesGreedy) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  const std::vector<int32_t> history = {5, 9, 5, 30, 2};
  SamplerConfig top1{.top_k = 1, .repetition_penalty = 1.3f, .seed = 11};
  SamplerConfig greedy_config = top1;
  greedy_config.greedy = true;
  Sampler sampler(top1, 32);
  Sampler greedy(greedy_config, 32);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(32);
    // Values on a coarse grid, so that ties for the maximum happen often.
    for (float& l : logits) l = std::round(uniform(gen));
    ASSERT_EQ(sampler.sample(logits, history), greedy.sample(logits, history)) << trial;
  }
}

TEST(Sampler, SameSeedSameSequenceOtherSeedDiffers) {
  Sampler a(plain(1.0f, 123), 5), b(plain(1.0f, 123), 5), c(plain(1.0f, 124), 5);
  std::vector<int32_t> seq_a, seq_b, seq_c;
  for (int i = 0; i < 100; ++i) {
    seq_a.push_back(a.sample(kLogits, {}));
    seq_b.push_back(b.sample(kLogits, {}));
    seq_c.push_back(c.sample(kLogits, {}));
  }
  EXPECT_EQ(seq_a, seq_b);
  EXPECT_NE(seq_a, seq_c);
}

// The draw is specified down to the bit (mt19937_64, 53-bit conversion, cumulative walk), so a
// seed gives these tokens with every standard library; a change here changes users' outputs.
// The sequence was also reproduced by an independent Python MT19937-64 doing the same walk.
TEST(Sampler, SeedGivesPinnedSequence) {
  Sampler sampler(plain(1.0f, 42), 5);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back(sampler.sample(kLogits, {}));
  const std::vector<int32_t> pinned = {3, 1, 3, 1, 3, 0, 1, 1, 1, 1, 0, 1, 1, 1, 3, 4};
  EXPECT_EQ(tokens, pinned);
}

TEST(Sampler, TemperatureOnlyMatchesSoftmax) {
  Sampler sampler(plain(0.7f), 5);
  expect_frequencies(draw_counts(sampler, kLogits, kDraws),
                     expected_probs(kLogits, 0.7, {0, 1, 2, 3, 4}), kDraws);
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  // Probability of the best token: 0.829 at T 0.5, 0.563 at T 1, 0.375 at T 2.
  std::vector<double> best_share;
  for (const float temperature : {0.5f, 1.0f, 2.0f}) {
    Sampler sampler(plain(temperature), 5);
    const std::vector<int> counts = draw_counts(sampler, kLogits, kDraws);
    expect_frequencies(counts, expected_probs(kLogits, temperature, {0, 1, 2, 3, 4}), kDraws);
    best_share.push_back(static_cast<double>(counts[1]) / kDraws);
  }
  EXPECT_GT(best_share[0], best_share[1] + 0.2);
  EXPECT_GT(best_share[1], best_share[2] + 0.15);
}

TEST(Sampler, TopKKeepsTheKBest) {
  SamplerConfig config = plain(1.5f);
  config.top_k = 2;
  Sampler sampler(config, 5);
  expect_frequencies(draw_counts(sampler, kLogits, kDraws), expected_probs(kLogits, 1.5, {1, 3}),
                     kDraws);
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  // Cumulative probabilities in order 1, 3, 0: 0.563, 0.770, 0.896, so 0.8 keeps three tokens.
  SamplerConfig config = plain();
  config.top_p = 0.8f;
  Sampler sampler(config, 5);
  expect_frequencies(draw_counts(sampler, kLogits, kDraws), expected_probs(kLogits, 1.0, {1, 3, 0}),
                     kDraws);
}

TEST(Sampler, TopPStopsAtTheFirstTokenReachingP) {
  // 0.77 is just under the second cumulative probability (0.7701): two tokens, not three.
  SamplerConfig config = plain();
  config.top_p = 0.77f;
  Sampler sampler(config, 5);
  expect_frequencies(draw_counts(sampler, kLogits, 2000), expected_probs(kLogits, 1.0, {1, 3}),
                     2000);
}

TEST(Sampler, TopKBreaksTiesByLowerId) {
  // Tokens 1, 2 and 3 tie; the two kept are the lower ids, whatever the sort does with ties.
  const std::vector<float> tied = {1.0f, 3.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  SamplerConfig config = plain();
  config.top_k = 2;
  Sampler sampler(config, 6);
  expect_frequencies(draw_counts(sampler, tied, 2000), {0, 0.5, 0.5, 0, 0, 0}, 2000);
}

TEST(Sampler, TopPAppliesToTheTopKDistribution) {
  // Over all five tokens the best has 0.563 < 0.6; renormalised over the top 3 it has 0.629.
  SamplerConfig config = plain();
  config.top_k = 3;
  config.top_p = 0.6f;
  Sampler sampler(config, 5);
  const std::vector<int> counts = draw_counts(sampler, kLogits, 1000);
  EXPECT_EQ(counts[1], 1000);
}

TEST(Sampler, TopPAlwaysKeepsOneToken) {
  SamplerConfig config = plain();
  config.top_p = 1e-6f;
  Sampler sampler(config, 5);
  EXPECT_EQ(draw_counts(sampler, kLogits, 200)[1], 200);
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfBest) {
  // Weights relative to the best: 1, 0.368, 0.223, 0.135, 0.050; 0.13 drops only token 2.
  SamplerConfig config = plain();
  config.min_p = 0.13f;
  Sampler sampler(config, 5);
  expect_frequencies(draw_counts(sampler, kLogits, kDraws),
                     expected_probs(kLogits, 1.0, {1, 3, 0, 4}), kDraws);
  // Just above token 4's 0.1353, so it goes too.
  config.min_p = 0.14f;
  Sampler tighter(config, 5);
  expect_frequencies(draw_counts(tighter, kLogits, 2000), expected_probs(kLogits, 1.0, {1, 3, 0}),
                     2000);
}

TEST(Sampler, DefaultPipelineCombinesFilters) {
  // top_k 3 keeps {1, 3, 0}; at T 0.5 their weights are 1, e^-2, e^-3 (0.844, 0.114, 0.042);
  // top_p 0.95 then keeps {1, 3} (0.958); min_p 0.05 keeps both (0.135 >= 0.05).
  SamplerConfig config{.temperature = 0.5f, .top_k = 3, .top_p = 0.95f, .min_p = 0.05f};
  Sampler sampler(config, 5);
  expect_frequencies(draw_counts(sampler, kLogits, kDraws), expected_probs(kLogits, 0.5, {1, 3}),
                     kDraws);
}

TEST(Sampler, NegativeInfinityIsNeverChosen) {
  const std::vector<float> logits = {-kInf, 0.0f, -kInf, 0.0f, -kInf};
  Sampler sampler(plain(), 5);
  expect_frequencies(draw_counts(sampler, logits, 2000), {0, 0.5, 0, 0.5, 0}, 2000);
  Sampler greedy(SamplerConfig{.greedy = true}, 3);
  EXPECT_EQ(greedy.sample(std::vector<float>{-kInf, -kInf, -5.0f}, {}), 2);
}

TEST(Sampler, VocabOfOne) {
  Sampler sampler(SamplerConfig{}, 1);
  const std::vector<float> logits = {-3.0f};
  EXPECT_EQ(sampler.sample(logits, std::vector<int32_t>{0, 0}), 0);
  Sampler greedy(SamplerConfig{.greedy = true}, 1);
  EXPECT_EQ(greedy.sample(logits, {}), 0);
}

TEST(Sampler, RepetitionPenaltyFollowsHfRuleWithinWindow) {
  SamplerConfig config{.repetition_penalty = 1.5f, .repetition_window = 5};
  Sampler sampler(config, 7);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -0.5f, 1.0f, 0.0f};
  // The window is the last 5 tokens, {1, 1, 4, 0, 6}: token 5 is too old.
  const std::vector<int32_t> history = {5, 1, 1, 4, 0, 6};
  sampler.apply_repetition_penalty(logits, history);
  EXPECT_EQ(logits[0], 2.0f / 1.5f);   // positive: divided
  EXPECT_EQ(logits[1], -1.0f * 1.5f);  // negative: multiplied, once although seen twice
  EXPECT_EQ(logits[2], 0.5f);          // not in the history
  EXPECT_EQ(logits[3], 3.0f);
  EXPECT_EQ(logits[4], -0.5f * 1.5f);
  EXPECT_EQ(logits[5], 1.0f);  // outside the window
  EXPECT_EQ(logits[6], 0.0f);  // zero stays zero

  // Applying it again from a fresh copy gives the same values: no state leaks between calls.
  std::vector<float> again = {2.0f, -1.0f, 0.5f, 3.0f, -0.5f, 1.0f, 0.0f};
  sampler.apply_repetition_penalty(again, history);
  EXPECT_EQ(again, logits);
}

TEST(Sampler, RepetitionPenaltyChangesTheChoice) {
  SamplerConfig config{.greedy = true, .repetition_penalty = 1.5f, .repetition_window = 1};
  Sampler sampler(config, 2);
  const std::vector<float> logits = {3.0f, 2.5f};
  EXPECT_EQ(sampler.sample(logits, std::vector<int32_t>{0}), 1);     // 3.0 / 1.5 = 2.0 < 2.5
  EXPECT_EQ(sampler.sample(logits, std::vector<int32_t>{0, 1}), 0);  // 0 left the window
  SamplerConfig no_window = config;
  no_window.repetition_window = 0;
  EXPECT_EQ(Sampler(no_window, 2).sample(logits, std::vector<int32_t>{0}), 0);
}

TEST(Sampler, InvalidConfigsThrow) {
  expect_error(SamplerConfig{.top_p = 1.5f}, 5, "top_p 1.5");
  expect_error(SamplerConfig{.top_p = 0.0f}, 5, "top_p 0");
  expect_error(SamplerConfig{.top_p = std::nanf("")}, 5, "top_p");
  expect_error(SamplerConfig{.min_p = -0.1f}, 5, "min_p -0.1");
  expect_error(SamplerConfig{.min_p = 1.5f}, 5, "min_p 1.5");
  expect_error(SamplerConfig{.temperature = std::nanf("")}, 5, "temperature");
  expect_error(SamplerConfig{.temperature = kInf}, 5, "temperature inf");
  expect_error(SamplerConfig{.repetition_penalty = 0.0f}, 5, "repetition_penalty 0");
  expect_error(SamplerConfig{.repetition_penalty = -1.0f}, 5, "repetition_penalty -1");
  expect_error(SamplerConfig{.repetition_window = -1}, 5, "repetition_window -1");
  expect_error(SamplerConfig{}, 0, "vocab_size 0");
  expect_error(SamplerConfig{}, int64_t{1} << 31, "vocab_size 2147483648");
}

TEST(Sampler, BadLogitsAndHistoryThrow) {
  for (const bool greedy : {false, true}) {
    SamplerConfig config{.greedy = greedy, .repetition_penalty = 1.2f};
    Sampler sampler(config, 5);
    std::vector<float> logits = kLogits;
    logits[2] = std::nanf("");
    EXPECT_THROW(sampler.sample(logits, {}), Error);
    try {
      sampler.sample(logits, {});
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token 2 is nan"), std::string::npos) << e.what();
    }
    logits[2] = kInf;
    EXPECT_THROW(sampler.sample(logits, {}), Error);
    EXPECT_THROW(sampler.sample(std::vector<float>(5, -kInf), {}), Error);
    EXPECT_THROW(sampler.sample(std::vector<float>(4, 0.0f), {}), Error);
    EXPECT_THROW(sampler.sample(kLogits, std::vector<int32_t>{1, 5}), Error);
    EXPECT_THROW(sampler.sample(kLogits, std::vector<int32_t>{-1}), Error);
    // Still usable afterwards, with no stale penalty marks left by the failed calls.
    std::vector<float> penalised = kLogits;
    sampler.apply_repetition_penalty(penalised, std::vector<int32_t>{1});
    EXPECT_EQ(penalised[1], 2.0f / 1.2f);
  }
}

TEST(Sampler, SampleAllocatesNothing) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(1000);
  for (float& l : logits) l = normal(gen);
  std::vector<int32_t> history(100);
  for (size_t i = 0; i < history.size(); ++i) history[i] = static_cast<int32_t>((i * 37) % 1000);
  SamplerConfig with_penalty{.repetition_penalty = 1.1f};
  for (const SamplerConfig& config :
       {SamplerConfig{}, with_penalty, SamplerConfig{.top_k = 0}, SamplerConfig{.greedy = true}}) {
    Sampler sampler(config, 1000);
    g_allocations = 0;
    g_counting = true;
    int64_t sum = 0;
    for (int i = 0; i < 50; ++i) sum += sampler.sample(logits, history);
    g_counting = false;
    EXPECT_EQ(g_allocations.load(), 0);
    EXPECT_GE(sum, 0);
  }
}

}  // namespace
}  // namespace edgelm
