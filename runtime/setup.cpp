#include "runtime/setup.h"

#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "core/process_stats.h"
#include "eviction/system_monitor.h"
#include "models/loader.h"

namespace edgelm {

Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;
Runtime::~Runtime() = default;

Runtime Runtime::load(Settings settings) {
  // What needs no file is checked first, so that a bad flag ends at once, before the wait.
  if (settings.model_path.empty()) EDGELM_FAIL("give a model with -m/--model-path");
  if (settings.max_chunk < 1) EDGELM_FAIL("-b/--batch-size must be at least 1");
  if (settings.context < 1) EDGELM_FAIL("-c/--ctx-size must be at least 1");
  if (settings.kv_capacity < 0) EDGELM_FAIL("--kv-capacity must not be negative");
  if (settings.kv_capacity > settings.context) {
    EDGELM_FAIL("--kv-capacity ", settings.kv_capacity, " is above -c/--ctx-size ",
                settings.context, ": slots past the logical context are never used");
  }
  if (settings.kv_type != DType::F32 && settings.kv_type != DType::F16) {
    EDGELM_FAIL("--kv-type must be f32 or f16, not ", dtype_name(settings.kv_type));
  }
  if (settings.budget_bytes > 0 && settings.eviction.kv_budget > 0) {
    EDGELM_FAIL("--kv-budget and --budget-bytes are exclusive");
  }
  // Without a budget in bytes the policy is built (its settings checked) now; with one, once it
  // is slots. The first manager takes it.
  std::unique_ptr<EvictionPolicy> policy;
  if (settings.budget_bytes == 0) policy = make_policy(settings.eviction);
  if (!settings.simulate_memory.empty()) SimulatedMonitor::parse(settings.simulate_memory);

  const Stopwatch load_time;
  Runtime runtime;
  runtime.backend_ = create_backend(settings.backend, settings.backend_options);
  runtime.converter_ = create_weight_converter(settings.backend, settings.backend_options);
  LoadOptions load_options;
  load_options.weight_type = settings.weight_type;
  load_options.converter = runtime.converter_.get();
  LoadedModel loaded = load_llama(settings.model_path, *runtime.backend_, load_options);
  runtime.info_.format = loaded.format;
  runtime.info_.weight_type = loaded.weight_type;
  runtime.info_.weight_layout =
      loaded.weights.layers.empty() ? loaded.weight_type : loaded.weights.layers[0].w_gate.dtype();
  runtime.info_.weight_types = loaded.weight_types;
  runtime.model_ = std::make_unique<LlamaModel>(*runtime.backend_, std::move(loaded.config),
                                                std::move(loaded.weights), settings.max_chunk);
  const LlamaConfig& config = runtime.model_->config();
  if (settings.budget_bytes > 0) {  // the budget in bytes, as slots of this model's cache
    settings.eviction.kv_budget = kv_budget_from_bytes(
        settings.budget_bytes,
        KvCache::slot_bytes(config.n_layers, config.n_kv_heads, config.head_dim, settings.kv_type));
    policy = make_policy(settings.eviction);
  }
  runtime.first_policy_ = std::move(policy);
  settings.tokenizer_options.model_vocab_size = config.vocab_size;
  if (settings.load_tokenizer || settings.require_tokenizer) {
    try {
      runtime.tokenizer_ =
          Tokenizer::from_model_path(settings.model_path, settings.tokenizer_options);
    } catch (const Error& e) {
      if (settings.require_tokenizer) throw;
      runtime.tokenizer_error_ = e.what();
    }
  }
  runtime.backend_->synchronize();
  runtime.info_.load_seconds = load_time.seconds();
  runtime.settings_ = std::move(settings);
  return runtime;
}

CacheManager Runtime::make_manager() {
  std::unique_ptr<SystemMonitor> monitor;
  if (!settings_.simulate_memory.empty()) {
    monitor = SimulatedMonitor::parse(settings_.simulate_memory);
  } else if (settings_.eviction.policy != "none") {
    monitor = std::make_unique<LinuxSystemMonitor>();
  }
  std::unique_ptr<EvictionPolicy> policy =
      first_policy_ ? std::move(first_policy_) : make_policy(settings_.eviction);
  return CacheManager(settings_.eviction, std::move(policy), std::move(monitor));
}

KvCache Runtime::make_cache(const CacheManager& manager) const {
  const int64_t capacity =
      settings_.kv_capacity > 0
          ? settings_.kv_capacity
          : manager.capacity_for(settings_.context, settings_.max_chunk, model_->config().n_layers);
  return model_->make_cache(capacity, settings_.kv_type, settings_.context);
}

}  // namespace edgelm
