// The setup every tool runs before its own loop, and the Python bindings with them: one Settings
// struct in which each setting has one owner, and Runtime::load, which turns it into a backend, a
// loaded model and its tokenizer, and then, per conversation, the cache manager (its policy built
// once, from the KV budget resolved once) and a KV cache sized for it.
//
//   Settings settings{.model_path = "SmolLM2-135M-Instruct.Q4_1.gguf"};
//   settings.eviction.policy = "h2o";
//   settings.budget_bytes = 8 << 20;  // or settings.eviction.kv_budget = 256 (slots)
//   Runtime runtime = Runtime::load(settings);
//   CacheManager manager = runtime.make_manager();
//   KvCache cache = runtime.make_cache(manager);
//   GenerationSession session(runtime.model(), cache, &manager, ...);
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backends/registry.h"
#include "core/dtype.h"
#include "core/kv_cache.h"
#include "eviction/cache_manager.h"
#include "eviction/policy.h"
#include "models/llama.h"
#include "models/tokenizer.h"

namespace edgelm {

struct Settings {
  // The model: a Hugging Face folder or a GGUF file.
  std::string model_path;
  // The backend by registry name ("cpu", "cpu:<isa>", "opencl"; backend_names()) and its options
  // (threads, pinning, OpenCL device, profiling, repacking).
  std::string backend = "cpu";
  BackendOptions backend_options;
  // Type of every matrix after loading; nullopt: each as stored (LoadOptions::weight_type).
  std::optional<DType> weight_type;
  // A backend the model runs on instead, wrapped around the one created: called once the weights
  // are loaded, before the model is built (the parity tool's planted fault, eval/parity.h
  // plant_fault, which needs the weight it corrupts). Unset: the model runs on the backend
  // itself. It may throw edgelm::Error, as Runtime::load then does.
  std::function<std::unique_ptr<Backend>(Backend& backend, const LlamaConfig& config,
                                         const LlamaWeights& weights)>
      wrap_backend;
  // The most tokens one forward step takes (-b/--batch-size).
  int64_t max_chunk = kDefaultPrefillChunk;

  // The tokenizer: not loaded at all, loaded when the model has one, or required (load throws
  // the tokenizer's error without one).
  bool load_tokenizer = true;
  bool require_tokenizer = true;
  TokenizerOptions tokenizer_options;  // model_vocab_size is set by load

  // The KV cache: element type, logical context (positions, RoPE: -c/--ctx-size) and slots
  // allocated (0: what the eviction limit needs, CacheManager::capacity_for).
  DType kv_type = DType::F16;
  int64_t context = 2048;
  int64_t kv_capacity = 0;
  // Eviction: the policy and its settings. The budget is eviction.kv_budget (slots per layer) or
  // budget_bytes (bytes of K and V over all layers), never both; load resolves bytes into slots
  // once, and eviction.kv_budget is then the one value every part reads.
  EvictionConfig eviction;
  uint64_t budget_bytes = 0;
  // A simulated memory monitor (SimulatedMonitor::parse) instead of /proc/meminfo.
  std::string simulate_memory;
};

// The KV cache's side of Settings for any model over one cache (a Runtime's, generate_hybrid's
// pair of backends): the settings checked at construction, before a model loads; resolve() turns
// a budget in bytes into slots for the model's shape, once; then each conversation gets a cache
// manager and a capacity.
class KvPlan {
 public:
  // Checks the cache and eviction settings (by their flags) and, when the budget is in slots,
  // builds the policy. Throws edgelm::Error.
  explicit KvPlan(const Settings& settings);
  KvPlan(KvPlan&&) noexcept = default;
  // For a model of `config`: budget_bytes as slots (eviction.kv_budget) and the policy built from
  // them. Throws edgelm::Error naming --budget-bytes when not one slot fits.
  void resolve(const LlamaConfig& config);
  // The settings as resolved.
  const Settings& settings() const { return settings_; }
  // A cache manager for one conversation: the policy built from the resolved settings (the first
  // manager gets the one already built to check them), and the memory monitor (simulated, or
  // /proc/meminfo when a policy is set).
  CacheManager make_manager();
  // The slots to allocate: kv_capacity, else what `manager` needs for the context.
  int64_t capacity(const CacheManager& manager) const;

 private:
  Settings settings_;
  int64_t n_layers_ = 0;  // set by resolve()
  std::unique_ptr<EvictionPolicy> first_policy_;
};

// What loading found, for the tools' report lines and JSON.
struct ModelInfo {
  std::string format;        // "hf" or "gguf"
  DType weight_type{};       // the projections' type after loading (LoadedModel::weight_type)
  DType weight_layout{};     // how the backend holds them (a repacked layout, or weight_type)
  std::string weight_types;  // every matrix's type in words (LoadedModel::weight_types)
  double load_seconds = 0;   // backend creation, weights, tokenizer
};

class Runtime {
 public:
  // Checks the settings that need no file (the budget, the cache's shape), then creates the
  // backend, loads the model and its tokenizer. Throws edgelm::Error with one line naming the
  // setting (by its flag), the file or the field at fault.
  static Runtime load(Settings settings);

  Runtime(Runtime&&) noexcept;
  Runtime& operator=(Runtime&&) noexcept;
  ~Runtime();

  // The settings as resolved: eviction.kv_budget in slots where budget_bytes gave it.
  const Settings& settings() const { return settings_; }
  // The backend the model runs on: Settings::wrap_backend's, when it gave one.
  Backend& backend() const { return wrapper_ ? *wrapper_ : *backend_; }
  LlamaModel& model() const { return *model_; }
  const ModelInfo& info() const { return info_; }
  // The tokenizer; null when the model has none and it was not required (tokenizer_error() then
  // says why).
  const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  const std::string& tokenizer_error() const { return tokenizer_error_; }
  // What the tools print after loading: "model: <path> (<format>; weights <types>)", the model's
  // shape (LlamaConfig::describe), "backend: <device>" and, with a tokenizer, "tokenizer: ...",
  // one line each, without a final newline.
  std::string describe() const;

  // The loaded model again, on a backend of its own created by the runtime's name with `options`,
  // over the same weights (not loaded again): bench's other thread counts. The backend must read
  // the weights where they are (a CPU backend with other threads reads the CPU's).
  struct ModelOnBackend {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<LlamaModel> model;  // on *backend; declared after it, so destroyed first
  };
  ModelOnBackend model_on(const BackendOptions& options) const;

  // A cache manager for one conversation (KvPlan::make_manager).
  CacheManager make_manager();
  // A KV cache for `manager`'s limits: kv_capacity slots, else what the manager needs for the
  // context; positions up to the context.
  KvCache make_cache(const CacheManager& manager) const;

 private:
  Runtime() = default;
  Settings settings_;
  std::unique_ptr<Backend> converter_;  // before backend_: it may convert onto its memory
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> wrapper_;  // Settings::wrap_backend's, around backend_; may be null
  std::unique_ptr<LlamaModel> model_;
  std::optional<Tokenizer> tokenizer_;
  std::string tokenizer_error_;
  ModelInfo info_;
  std::unique_ptr<KvPlan> plan_;
};

}  // namespace edgelm
