// GGUF files written by the `gguf` package's GGUFWriter (tests/fixtures/gguf, made from the
// Hugging Face reference models by scripts/fixtures/make_gguf_fixtures.py), not by edgelm's own
// writer: the GGUF loader's tensor names, Q/K row order, rope_freqs, metadata and F32/F16/Q8_0
// blocks are checked against a layout edgelm did not produce. F32 files must give transformers'
// logits (the HF fixture's); F16 and Q8_0 files the logits of the fixture script's numpy forward
// over the weights as the file holds them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/npy.h"
#include "models/config.h"
#include "models/loader.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = EDGELM_FIXTURE_DIR;

// The portable kernels multiply the stored weights exactly as decoded (in double), like numpy on
// the dequantized values; a SIMD table would quantize activations for Q8_0 and differ by far more.
cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2, .isa = "portable"});
  return cpu;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return worst;
}

struct Case {
  std::string model;  // a folder of tests/fixtures/hf
  std::string type;   // "f32", "f16", "q8_0"
};

// For gtest's messages: "tiny-gqa-llama3 q8_0" rather than the struct's bytes.
void PrintTo(const Case& c, std::ostream* out) {
  *out << c.model << " " << c.type;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* model :
       {"tiny-gqa-llama3", "tiny-odd-heads", "tiny-untied-mha", "tiny-qwen2", "tiny-qwen3"}) {
    for (const char* type : {"f32", "f16", "q8_0"}) out.push_back({model, type});
  }
  return out;
}

class IndependentGguf : public ::testing::TestWithParam<Case> {};

// Every position's logits within 1e-4 of the reference, from one prefill step and from one-token
// decode steps through the cache; 1e-4 is the HF fixtures' own tolerance (float32 on both sides,
// summed in other orders).
TEST_P(IndependentGguf, LogitsMatchTheReference) {
  const Case& c = GetParam();
  const fs::path hf = kFixtures / "hf" / c.model;
  const fs::path gguf = kFixtures / "gguf" / (c.model + "-" + c.type + ".gguf");
  LoadedModel loaded = load_llama(gguf.string(), backend());
  const LlamaConfig expected = load_hf_config(hf.string());
  EXPECT_EQ(loaded.format, "gguf");
  EXPECT_EQ(loaded.weight_types, c.type);
  EXPECT_EQ(loaded.config.vocab_size, expected.vocab_size);
  EXPECT_EQ(loaded.config.n_layers, expected.n_layers);
  EXPECT_EQ(loaded.config.head_dim, expected.head_dim);
  EXPECT_EQ(loaded.config.tie_word_embeddings, expected.tie_word_embeddings);
  EXPECT_EQ(loaded.config.architecture, expected.architecture);
  EXPECT_EQ(loaded.config.attention_bias, expected.attention_bias);
  EXPECT_EQ(loaded.config.qk_norm, expected.qk_norm);
  EXPECT_EQ(loaded.config.rope.theta, expected.rope.theta);
  LlamaModel model(backend(), std::move(loaded.config), std::move(loaded.weights), 130);
  const int64_t vocab = model.config().vocab_size;

  std::ifstream in(hf / "fixture.json");
  const nlohmann::json fixture = nlohmann::json::parse(in);
  for (const auto& prompt : fixture["prompts"]) {
    const auto ids = prompt["ids"].get<std::vector<int32_t>>();
    const auto n = static_cast<int64_t>(ids.size());
    SCOPED_TRACE(n);
    const std::string logits_name =
        c.type == "f32" ? (hf / prompt["logits"].get<std::string>()).string()
                        : (kFixtures / "gguf" /
                           (c.model + "-" + c.type + "-logits_" + std::to_string(n) + ".npy"))
                              .string();
    const NpyArray reference = read_npy(logits_name);
    ASSERT_EQ(reference.shape, (std::vector<int64_t>{n, vocab}));

    KvCache cache = model.make_cache(n, DType::F32);
    const std::span<const float> all =
        model.forward(ids, cache, {.all_logits = true, .logits_from = 0});
    ASSERT_EQ(all.size(), reference.data.size());
    EXPECT_LT(max_abs_diff(all, reference.data), 1e-4) << "prefill";

    KvCache decode_cache = model.make_cache(n, DType::F32);
    double worst = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const auto logits = model.forward(std::span<const int32_t>(&ids[i], 1), decode_cache);
      worst = std::max(worst, max_abs_diff(logits, std::span<const float>(
                                                       reference.data.data() + i * vocab, vocab)));
    }
    EXPECT_LT(worst, 1e-4) << "decode";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IndependentGguf, ::testing::ValuesIn(cases()),
                         [](const auto& param_info) {
                           std::string name = param_info.param.model + "_" + param_info.param.type;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace edgelm
