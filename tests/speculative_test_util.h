// Tiny models and prompts for the speculative decoding tests of runtime/speculative.h under
// eviction and sampling (test_speculative_eviction.cpp, test_speculative_sampling.cpp).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "eval/parity.h"
#include "models/make_model.h"
#include "runtime/setup.h"

namespace edgelm::test {

// make_model's `preset` with random weights from `seed`, as `format` files of `quant` weights,
// made once per process in the test's temporary folder.
inline const std::string& tiny_model_path(const std::string& preset, const std::string& format,
                                          DType quant, uint64_t seed) {
  static std::map<std::string, std::string> paths;
  const std::string name =
      preset + "_" + format + "_" + dtype_name(quant) + "_seed" + std::to_string(seed);
  auto it = paths.find(name);
  if (it == paths.end()) {
    const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) /
                                      ("edgelm_spec_" + std::to_string(::getpid())) / name;
    it = paths
             .emplace(name, make_model({.preset = preset,
                                        .format = format,
                                        .quant = quant,
                                        .seed = seed,
                                        .out_dir = dir.string()}))
             .first;
  }
  return it->second;
}

// The model on `backend` with one thread (a tiny model's step is shorter than handing it to
// another) and prefill steps of 16 tokens, without a tokenizer.
inline Runtime load_tiny(const std::string& backend, const std::string& preset = "tiny",
                         const std::string& format = "hf", DType quant = DType::F32,
                         uint64_t seed = 7) {
  Settings settings;
  settings.model_path = tiny_model_path(preset, format, quant, seed);
  settings.backend = backend;
  settings.backend_options.n_threads = 1;
  settings.max_chunk = 16;
  settings.load_tokenizer = false;
  settings.require_tokenizer = false;
  return Runtime::load(settings);
}

inline std::vector<int32_t> random_ids(std::mt19937& rng, int n, int32_t vocab) {
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = id(rng);
  return ids;
}

// Short prompts, so that a reply grows the cache to a small budget before eviction starts: random
// ones, and ones that repeat a random pattern (where prompt lookup drafts long runs).
inline std::vector<std::vector<int32_t>> short_prompts(int32_t vocab, int count) {
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; static_cast<int>(out.size()) < count; ++i) {
    if (i % 2 == 0) {
      out.push_back(random_ids(rng, 3 + i, vocab));
    } else {
      const std::vector<int32_t> pattern = random_ids(rng, 2 + i % 3, vocab);
      std::vector<int32_t> prompt;
      for (int r = 0; r < 3; ++r) prompt.insert(prompt.end(), pattern.begin(), pattern.end());
      out.push_back(prompt);
    }
  }
  return out;
}

// Whether a speculative reply equals plain greedy's, on a table whose verification rows are not
// the decode step's bit for bit: where the two first differ, plain greedy's top-2 margin must be
// a near tie (eval/parity.h's rule: within twice the parity bound of `weights`).
// plain_logits[i] is what plain greedy's token i was drawn from.
inline bool equal_up_to_a_tie(const std::vector<int32_t>& plain,
                              const std::vector<std::vector<float>>& plain_logits,
                              const std::vector<int32_t>& spec, DType weights,
                              const std::string& what) {
  const ParityBound bound = parity_bound(weights, weights);
  const size_t n = std::min(spec.size(), plain.size());
  for (size_t i = 0; i < n; ++i) {
    if (spec[i] == plain[i]) continue;
    const double margin = compare_logits(plain_logits[i], plain_logits[i]).margin_a;
    EXPECT_LE(margin, 2.0 * bound.logit)
        << what << ": token " << i << " differs (" << spec[i] << " against " << plain[i]
        << ") where plain greedy's top-2 margin is " << margin;
    return false;
  }
  EXPECT_EQ(spec, plain) << what;
  return spec == plain;
}

}  // namespace edgelm::test
