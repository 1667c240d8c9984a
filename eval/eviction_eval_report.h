// The outputs of an eviction-quality run (eval/eviction_eval.h): one JSON object per (policy,
// budget) cell, holding every setting needed to rerun it and every measurement (docs/kv_cache.md
// lists the fields), a markdown summary, and a CSV table of the same objects' scalar fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eviction_eval.h"

namespace edgelm {

// What the harness itself does not know about the run: where the model and texts came from and
// how the tool was started.
struct EvalRunInfo {
  std::string model_path;
  std::string model_sha256;  // empty: not computed
  int64_t model_bytes = 0;
  std::string format;        // "gguf" or "hf"
  std::string weight_types;  // as the loader describes them
  std::string backend;
  std::string device;
  int threads = 0;
  struct Text {
    std::string path;
    std::string sha256;
    int64_t bytes = 0;
    int64_t tokens = 0;
  };
  std::vector<Text> texts;
  bool add_bos = false;
  std::optional<PasskeyOptions> passkey;  // set when retrieval ran
  std::string chat_template;  // the template the passkey prompts went through; empty: plain
  int64_t answer_tokens = 0;
  std::optional<int64_t> budget_bytes;  // set when the budgets came from --budget-bytes
  std::string command;                  // the command line, quoted for a shell
  std::string commit;                   // the source commit the tool was built from; may be empty
  std::string date;                     // when the run started (UTC, ISO 8601)
};

// "edgelm.eviction_eval/1": the version of the JSON layout, in every object.
inline constexpr const char* kEvictionEvalSchema = "edgelm.eviction_eval/1";

// One JSON object per cell, in cell order (budgets outer, policies inner).
std::vector<nlohmann::ordered_json> eviction_eval_json(const EvictionEval& eval,
                                                       const EvalRunInfo& info);

// Markdown tables: quality (streaming and compress-then-continue, with intervals), then retrieval
// and cost, one row per cell after a row for the full cache.
std::string eviction_eval_markdown(const EvictionEval& eval, const EvalRunInfo& info);

// CSV of the objects' scalar fields (nested names joined by '.', arrays left out), a header row
// then one row per object; strings quoted where they need it.
std::string eviction_eval_csv(const std::vector<nlohmann::ordered_json>& cells);

}  // namespace edgelm
