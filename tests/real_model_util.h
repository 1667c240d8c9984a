// What the tests on the real default model share (test_real_model.cpp,
// test_eviction_real_model.cpp): SmolLM2-135M-Instruct Q4_1 as scripts/fetch_smollm2.sh downloads
// it (into build/models/, or the file EDGELM_SMOLLM2 names), its llama.cpp fixture
// (tests/fixtures/llama_cpp, or the file EDGELM_LLAMA_CPP_FIXTURE names), and the rule for a
// missing file: the test skips, and with EDGELM_REQUIRE_REAL_MODEL=1 (CI, which fetches it first)
// fails instead. Tests never download. A target including this defines EDGELM_SOURCE_DIR.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "sanitized.h"

namespace edgelm::test {

// scripts/fixtures/make_llama_cpp_reference.py's output for the fetched file, or the one
// EDGELM_LLAMA_CPP_FIXTURE names (with EDGELM_SMOLLM2, a local check of another file: the same
// script's output for it).
inline std::string llama_cpp_fixture_path() {
  const char* env = std::getenv("EDGELM_LLAMA_CPP_FIXTURE");
  return env != nullptr
             ? env
             : std::string(EDGELM_FIXTURE_DIR) + "/llama_cpp/smollm2-135m-instruct-q4_1.json";
}

inline const nlohmann::json& llama_cpp_fixture() {
  static const nlohmann::json data = [] {
    const std::string path = llama_cpp_fixture_path();
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return nlohmann::json::parse(in);
  }();
  return data;
}

// The model file, or empty (the test then skips or, under EDGELM_REQUIRE_REAL_MODEL=1, fails).
inline std::string real_model_path() {
  namespace fs = std::filesystem;
  const char* env = std::getenv("EDGELM_SMOLLM2");
  const fs::path path = env != nullptr ? fs::path(env)
                                       : fs::path(EDGELM_SOURCE_DIR) / "build" / "models" /
                                             llama_cpp_fixture()["model_file"].get<std::string>();
  return fs::exists(path) ? path.string() : std::string();
}

inline bool real_model_required() {
  const char* env = std::getenv("EDGELM_REQUIRE_REAL_MODEL");
  return env != nullptr && std::string(env) == "1";
}

// Skips the test in a sanitized build (the parity matrix runs the kernels on this model's shapes
// there; the model itself, at the sanitizers' speed, would take many minutes); without the model
// file (`path` empty) skips it too, or fails it under EDGELM_REQUIRE_REAL_MODEL=1.
#define REQUIRE_REAL_MODEL(path)                                                \
  do {                                                                          \
    if (::edgelm::test::kSanitized)                                             \
      GTEST_SKIP() << "sanitized build: the Release suite runs the real model"; \
    if ((path).empty()) {                                                       \
      if (::edgelm::test::real_model_required())                                \
        FAIL() << "EDGELM_REQUIRE_REAL_MODEL=1 but the model is missing: run "  \
                  "scripts/fetch_smollm2.sh";                                   \
      GTEST_SKIP() << "no SmolLM2 file (scripts/fetch_smollm2.sh fetches it)";  \
    }                                                                           \
  } while (false)

}  // namespace edgelm::test
