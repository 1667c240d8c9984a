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

KvPlan::KvPlan(const Settings& settings) : settings_(settings) {
  // What needs no model is checked first, so that a bad flag ends at once, before the wait.
  if (settings_.max_chunk < 1) EDGELM_FAIL("-b/--batch-size must be at least 1");
  if (settings_.context < 1) EDGELM_FAIL("-c/--ctx-size must be at least 1");
  if (settings_.kv_capacity < 0) EDGELM_FAIL("--kv-capacity must not be negative");
  if (settings_.kv_capacity > settings_.context) {
    EDGELM_FAIL("--kv-capacity ", settings_.kv_capacity, " is above -c/--ctx-size ",
                settings_.context, ": slots past the logical context are never used");
  }
  if (settings_.kv_type != DType::F32 && settings_.kv_type != DType::F16) {
    EDGELM_FAIL("--kv-type must be f32 or f16, not ", dtype_name(settings_.kv_type));
  }
  if (settings_.budget_bytes > 0 && settings_.eviction.kv_budget > 0) {
    EDGELM_FAIL("--kv-budget and --budget-bytes are exclusive");
  }
  // Without a budget in bytes the policy is built (its settings checked) now; with one, once it
  // is slots. The first manager takes it.
  if (settings_.budget_bytes == 0) first_policy_ = make_policy(settings_.eviction);
  if (!settings_.simulate_memory.empty()) SimulatedMonitor::parse(settings_.simulate_memory);
}

void KvPlan::resolve(const LlamaConfig& config) {
  n_layers_ = config.n_layers;
  if (settings_.budget_bytes == 0) return;
  settings_.eviction.kv_budget = kv_budget_from_bytes(
      settings_.budget_bytes,
      KvCache::slot_bytes(config.n_layers, config.n_kv_heads, config.head_dim, settings_.kv_type));
  first_policy_ = make_policy(settings_.eviction);
}

CacheManager KvPlan::make_manager() {
  EDGELM_CHECK(n_layers_ > 0, "[setup] KvPlan::make_manager before resolve()");
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

int64_t KvPlan::capacity(const CacheManager& manager) const {
  EDGELM_CHECK(n_layers_ > 0, "[setup] KvPlan::capacity before resolve()");
  return settings_.kv_capacity > 0
             ? settings_.kv_capacity
             : manager.capacity_for(settings_.context, settings_.max_chunk, n_layers_);
}

Runtime Runtime::load(Settings settings) {
  if (settings.model_path.empty()) EDGELM_FAIL("give a model with -m/--model-path");
  KvPlan plan(settings);

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
  if (settings.wrap_backend) {
    runtime.wrapper_ = settings.wrap_backend(*runtime.backend_, loaded.config, loaded.weights);
  }
  runtime.model_ = std::make_unique<LlamaModel>(runtime.backend(), std::move(loaded.config),
                                                std::move(loaded.weights), settings.max_chunk);
  const LlamaConfig& config = runtime.model_->config();
  plan.resolve(config);
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
  settings.eviction = plan.settings().eviction;  // the budget in slots
  runtime.settings_ = std::move(settings);
  runtime.plan_ = std::make_unique<KvPlan>(std::move(plan));
  return runtime;
}

std::string Runtime::describe() const {
  std::string text =
      str_cat("model: ", settings_.model_path, " (", info_.format, "; weights ", info_.weight_types,
              ")\n", model_->config().describe(), "\nbackend: ", backend().device());
  if (tokenizer_) text += "\ntokenizer: " + tokenizer_->describe();
  return text;
}

Runtime::ModelOnBackend Runtime::model_on(const BackendOptions& options) const {
  ModelOnBackend out;
  out.backend = create_backend(settings_.backend, options);
  out.model = std::make_unique<LlamaModel>(*out.backend, model_->config(), model_->weights(),
                                           settings_.max_chunk);
  return out;
}

CacheManager Runtime::make_manager() {
  return plan_->make_manager();
}

KvCache Runtime::make_cache(const CacheManager& manager) const {
  return model_->make_cache(plan_->capacity(manager), settings_.kv_type, settings_.context);
}

}  // namespace edgelm
