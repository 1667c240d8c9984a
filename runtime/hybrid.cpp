#include "runtime/hybrid.h"

#include <unordered_set>
#include <utility>

#include "core/error.h"

namespace edgelm {

const char* hybrid_side_name(HybridSide side) {
  return side == HybridSide::Cpu ? "cpu" : "opencl";
}

HybridSide parse_hybrid_side(const std::string& name, const char* flag) {
  if (name == "opencl") return HybridSide::OpenCl;
  if (name == "cpu" || name.starts_with("cpu:")) return HybridSide::Cpu;
  EDGELM_FAIL(flag, ": '", name, "' is not a backend of a hybrid run (cpu, cpu:<isa> or opencl)");
}

const char* weight_sharing_name(WeightSharing sharing) {
  return sharing == WeightSharing::Shared ? "shared" : "per-backend";
}

WeightSharing parse_weight_sharing(const std::string& name, const char* flag) {
  if (name == "shared") return WeightSharing::Shared;
  if (name == "per-backend") return WeightSharing::PerBackend;
  EDGELM_FAIL(flag, ": '", name, "' is not one of shared|per-backend");
}

namespace {

// Every tensor of a model's weights, each once (a tied output is the embedding).
std::vector<const Tensor*> weight_tensors(const LlamaWeights& w) {
  std::vector<const Tensor*> all = {&w.embedding, &w.output_norm, &w.output};
  for (const LlamaLayerWeights& l : w.layers) {
    for (const Tensor* t :
         {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down})
      all.push_back(t);
  }
  return all;
}

// Bytes of the distinct tensors of `weights` (by start address) that are not in `except`.
size_t distinct_bytes(const LlamaWeights& weights, const LlamaWeights* except) {
  std::unordered_set<const void*> skip;
  if (except != nullptr) {
    for (const Tensor* t : weight_tensors(*except)) skip.insert(t->raw());
  }
  std::unordered_set<const void*> seen;
  size_t bytes = 0;
  for (const Tensor* t : weight_tensors(weights)) {
    if (skip.contains(t->raw()) || !seen.insert(t->raw()).second) continue;
    bytes += t->nbytes();
  }
  return bytes;
}

}  // namespace

HybridModel::HybridModel(const std::string& path, const HybridOptions& options)
    : sharing_(options.weights) {
  EDGELM_CHECK(options.cpu == "cpu" || options.cpu.starts_with("cpu:"), "[hybrid] '", options.cpu,
               "' is not a CPU backend (cpu or cpu:<isa>)");
  BackendOptions backend_options = options.backend;
  backend_options.memory = nullptr;
  opencl_ = create_backend("opencl", backend_options);
  // The CPU allocates from OpenCL's shared memory: its workspace, and the matrices it repacks for
  // itself, are buffers OpenCL could use too. Not owning: opencl_ outlives cpu_ (declared first).
  backend_options.memory = std::shared_ptr<Memory>(std::shared_ptr<Memory>(), &opencl_->memory());
  cpu_ = create_backend(options.cpu, backend_options);
  LoadedModel loaded =
      load_llama(path, *opencl_, {.weight_type = options.weight_type, .converter = cpu_.get()});
  format_ = loaded.format;
  weight_type_ = loaded.weight_type;
  weight_types_ = loaded.weight_types;
  LlamaWeights cpu_weights =
      sharing_ == WeightSharing::Shared ? loaded.weights : weights_for(*cpu_, loaded.weights);
  cpu_model_ =
      std::make_unique<LlamaModel>(*cpu_, loaded.config, std::move(cpu_weights), options.max_chunk);
  opencl_model_ = std::make_unique<LlamaModel>(*opencl_, std::move(loaded.config),
                                               std::move(loaded.weights), options.max_chunk);
}

KvCache HybridModel::make_cache(int64_t capacity, DType kv_type, int64_t max_positions) const {
  return opencl_model_->make_cache(capacity, kv_type, max_positions);
}

size_t HybridModel::shared_weight_bytes() const {
  return distinct_bytes(opencl_model_->weights(), nullptr);
}

size_t HybridModel::cpu_only_weight_bytes() const {
  return distinct_bytes(cpu_model_->weights(), &opencl_model_->weights());
}

std::vector<ScheduledBackend> HybridModel::backends() {
  return {{hybrid_side_name(HybridSide::Cpu), cpu_model_.get()},
          {hybrid_side_name(HybridSide::OpenCl), opencl_model_.get()}};
}

BackendNames HybridModel::backend_names() {
  return {hybrid_side_name(HybridSide::Cpu), hybrid_side_name(HybridSide::OpenCl)};
}

uint64_t HybridModel::host_device_copy_bytes() const {
  return cpu_->host_device_copy_bytes() + opencl_->host_device_copy_bytes();
}

}  // namespace edgelm
