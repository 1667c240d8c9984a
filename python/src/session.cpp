// edgelm.Session: one KV cache over a model, fed token by token or by prompts, its eviction run
// by a CacheManager, its K, V and positions readable as numpy views of the cache's own buffers;
// and the generation iterator over it.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "models/tokenizer.h"
#include "python/src/bindings.h"
#include "runtime/generator.h"
#include "runtime/sampler.h"

namespace edgelm::python {

EvictionConfig eviction_config(const std::string& policy, std::optional<int64_t> budget,
                               const py::dict& options) {
  EvictionConfig config;
  config.policy = policy;
  if (budget) {
    if (*budget < 1) EDGELM_FAIL("budget ", *budget, " must be at least 1 slot");
    config.kv_budget = *budget;
  }
  for (const auto& [key, value] : options) {
    const auto name = key.cast<std::string>();
    if (name == "window") {
      config.window = value.cast<int64_t>();
    } else if (name == "sink_tokens") {
      config.sink_tokens = value.cast<int64_t>();
    } else if (name == "protected_prefix") {
      config.protected_prefix = value.cast<int64_t>();
    } else if (name == "snapkv_window") {
      config.snapkv_window = value.cast<int64_t>();
    } else if (name == "snapkv_kernel") {
      config.snapkv_kernel = value.cast<int64_t>();
    } else if (name == "snapkv_pool") {
      config.snapkv_pool = value.cast<std::string>();
    } else if (name == "seed") {
      config.seed = value.cast<uint64_t>();
    } else if (name == "ea_future_positions") {
      config.ea_future_positions = value.cast<int64_t>();
    } else if (name == "ea_covariance") {
      config.ea_covariance = value.cast<bool>();
    } else if (name == "ea_epsilon") {
      config.ea_epsilon = value.cast<double>();
    } else if (name == "protect") {
      config.protect = value.cast<std::string>();
    } else if (name == "layer_budget") {
      config.layer_budget = value.cast<std::string>();
    } else if (name == "pyramid_beta") {
      config.pyramid_beta = value.cast<double>();
    } else {
      EDGELM_FAIL("[python] unknown eviction option '", name,
                  "' (window, sink_tokens, protected_prefix, snapkv_window, snapkv_kernel, "
                  "snapkv_pool, seed, ea_future_positions, ea_covariance, ea_epsilon, protect, "
                  "layer_budget, pyramid_beta)");
    }
  }
  return config;
}

std::unique_ptr<CacheManager> make_manager(const py::object& policy, std::optional<int64_t> budget,
                                           const py::dict& options) {
  if (policy.is_none() || py::isinstance<py::str>(policy)) {
    const std::string name = policy.is_none() ? "none" : policy.cast<std::string>();
    const EvictionConfig config = eviction_config(name, budget, options);
    return std::make_unique<CacheManager>(config, make_policy(config));
  }
  // A policy scored in Python: the budget is the manager's, and the policy promises nothing else.
  const EvictionConfig config = eviction_config("none", budget, options);
  return std::make_unique<CacheManager>(config, make_python_policy(policy, config));
}

namespace {

py::dict event_dict(const EvictionEvent& event) {
  py::dict d;
  d["step"] = event.step;
  d["reason"] = event.reason;
  d["slots_before"] = event.slots_before;
  d["slots_after"] = event.slots_after;
  d["seconds"] = event.seconds;
  d["score_seconds"] = event.score_seconds;
  d["select_seconds"] = event.select_seconds;
  d["compact_seconds"] = event.compact_seconds;
  return d;
}

class Session {
 public:
  Session(ModelRef model, const py::object& policy, std::optional<int64_t> budget,
          std::optional<int64_t> context, const py::dict& options)
      : model_(std::move(model)), manager_(make_manager(policy, budget, options)) {
    const Settings& settings = model_->runtime.settings();
    LlamaModel& llama = model_->runtime.model();
    const int64_t positions = context.value_or(settings.context);
    if (positions < 1) EDGELM_FAIL("context ", positions, " must be at least 1");
    const int64_t capacity =
        manager_->capacity_for(positions, llama.max_chunk(), llama.config().n_layers);
    cache_.emplace(llama.make_cache(capacity, settings.kv_type, positions));
    generator_.emplace(llama, *cache_, manager_.get());
  }

  // Feeds `ids` after what the cache holds (the last generated token first, when a generation
  // ended before feeding it) as one prompt; returns the logits after the last one.
  py::array_t<float> append(const std::vector<int32_t>& ids) {
    std::vector<int32_t> feed;
    if (pending_) feed.push_back(*pending_);
    feed.insert(feed.end(), ids.begin(), ids.end());
    if (feed.empty()) EDGELM_FAIL("[python] append of no tokens");
    const int64_t vocab = model_->runtime.model().config().vocab_size;
    for (int32_t id : feed) {
      if (id < 0 || id >= vocab)
        EDGELM_FAIL("[session] token id ", id, " is outside the vocabulary of ", vocab);
    }
    const auto n = static_cast<int64_t>(feed.size());
    if (!room_for(n)) {
      EDGELM_FAIL("[session] ", n, " tokens do not fit: ", cache_->free_slots(),
                  " free slots, ", cache_->max_positions() - cache_->next_position(),
                  " positions left of the context, and ",
                  evicts() ? "eviction" : "no eviction policy");
    }
    {
      py::gil_scoped_release release;
      std::lock_guard lock(model_->compute);
      keep_logits(generator_->prefill(feed));
    }
    pending_.reset();
    history_.insert(history_.end(), ids.begin(), ids.end());
    return last_logits();
  }

  // Feeds one sampled token (as generation does: a decode step).
  void decode(int32_t token) {
    py::gil_scoped_release release;
    std::lock_guard lock(model_->compute);
    keep_logits(generator_->decode(token));
  }

  py::object evict(int64_t need_free) {
    std::optional<EvictionEvent> event;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(model_->compute);
      event = manager_->maybe_evict(*cache_, Phase::Decode, need_free);
    }
    return event ? py::object(event_dict(*event)) : py::object(py::none());
  }

  bool evicts() const { return manager_->policy().evicts(); }
  bool room_for(int64_t n) const {
    return (evicts() || cache_->free_slots() >= n) &&
           cache_->max_positions() - cache_->next_position() >= n;
  }

  void clear() {
    cache_->clear();
    history_.clear();
    pending_.reset();
    logits_.clear();
  }

  int64_t check_layer(int64_t layer) const {
    if (layer < 0 || layer >= cache_->n_layers())
      EDGELM_FAIL("[python] layer ", layer, " is outside [0, ", cache_->n_layers(), ")");
    return layer;
  }
  // The filled part of a layer's K or V, [size, n_kv_heads, head_dim], or its positions
  // [size, n_kv_heads]: views of the cache's buffers, read-only.
  py::array view(py::handle self, int64_t layer, int which) const {
    cache_->backend().synchronize();
    const KvCache::View v = cache_->view(check_layer(layer));
    const py::ssize_t size = cache_->size(layer);
    if (which == 2) return array_view(DType::I32, {size, cache_->n_kv_heads()}, v.kv_pos.data<int32_t>(), self);
    const Tensor& t = which == 0 ? v.k : v.v;
    return array_view(t.dtype(), {size, cache_->n_kv_heads(), cache_->head_dim()}, t.data<uint8_t>(), self);
  }

  py::array_t<float> last_logits() const {
    if (logits_.empty()) EDGELM_FAIL("[python] nothing was fed yet");
    return py::array_t<float>(static_cast<py::ssize_t>(logits_.size()), logits_.data());
  }

  ModelRef model_;
  std::unique_ptr<CacheManager> manager_;
  std::optional<KvCache> cache_;
  std::optional<Generator> generator_;
  std::vector<int32_t> history_;    // every token fed or sampled since clear(), oldest first
  std::optional<int32_t> pending_;  // generated, not yet fed
  std::vector<float> logits_;       // (vocab) after the last token fed

 private:
  // The logits live in the model's workspace until its next step (which another session may run):
  // kept here.
  void keep_logits(std::span<const float> logits) { logits_.assign(logits.begin(), logits.end()); }
};

// The tokens of one generation, one per next(): each is sampled from the logits after the previous
// one, which is fed first (a decode step, the GIL released), so the last token of a generation is
// fed only when the session goes on (append or another generation). Between tokens, pending
// signals are handled: Ctrl-C raises KeyboardInterrupt there and leaves the session as after the
// token before.
class Generation {
 public:
  Generation(py::object session, int64_t max_tokens, const SamplerConfig& sampling,
             std::vector<int32_t> stop_ids, bool ignore_eos)
      : owner_(std::move(session)),
        session_(owner_.cast<Session*>()),
        max_tokens_(max_tokens),
        stop_ids_(std::move(stop_ids)),
        ignore_eos_(ignore_eos),
        sampler_(sampling, session_->model_->runtime.model().config().vocab_size) {
    if (max_tokens < 0) EDGELM_FAIL("[python] n ", max_tokens, " is negative");
    if (const Tokenizer* tokenizer = session_->model_->runtime.tokenizer())
      decoder_.emplace(*tokenizer);
    if (session_->logits_.empty() && !session_->pending_)
      EDGELM_FAIL("[python] generate before anything was fed (append a prompt first)");
  }

  py::tuple next() {
    if (done_ || produced_ >= max_tokens_) return finish();
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    Session& s = *session_;
    if (s.pending_) {
      if (!s.room_for(1)) return finish();
      s.decode(*s.pending_);
      s.pending_.reset();
    }
    std::span<const float> logits = s.logits_;
    if (ignore_eos_ && !stop_ids_.empty()) {
      masked_.assign(s.logits_.begin(), s.logits_.end());
      for (int32_t id : stop_ids_) {
        if (id >= 0 && static_cast<size_t>(id) < masked_.size())
          masked_[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
      }
      logits = masked_;
    }
    const int32_t token = sampler_.sample(logits, s.history_);
    s.history_.push_back(token);
    if (!ignore_eos_ && std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end()) {
      stop_reason_ = "eos";
      return finish();
    }
    s.pending_ = token;
    ++produced_;
    return py::make_tuple(token, decoder_ ? py::str(decoder_->push(token)) : py::str(""));
  }

  std::string stop_reason() const { return stop_reason_; }

 private:
  py::tuple finish() {
    if (!done_) {
      done_ = true;
      if (stop_reason_.empty()) stop_reason_ = produced_ >= max_tokens_ ? "length" : "context_full";
      tail_ = decoder_ ? decoder_->finish() : std::string();
      // The bytes still held back (an incomplete UTF-8 sequence) come out with StopIteration's
      // value as U+FFFD.
    }
    throw py::stop_iteration(tail_);
  }

  py::object owner_;  // keeps the session alive
  Session* session_;
  int64_t max_tokens_;
  std::vector<int32_t> stop_ids_;
  bool ignore_eos_;
  Sampler sampler_;
  std::optional<TokenStreamDecoder> decoder_;
  std::vector<float> masked_;
  int64_t produced_ = 0;
  bool done_ = false;
  std::string stop_reason_;
  std::string tail_;
};

}  // namespace

void bind_session(py::module_& m) {
  py::class_<Session>(m, "Session", "A KV cache over a model, with an eviction policy")
      .def(py::init([](const ModelRef& model, const py::object& policy,
                       std::optional<int64_t> budget, std::optional<int64_t> context,
                       const py::kwargs& options) {
             return std::make_unique<Session>(model, policy, budget, context, options);
           }),
           py::arg("model"), py::arg("policy") = py::none(), py::arg("budget") = py::none(),
           py::arg("context") = py::none())
      .def("append", &Session::append, py::arg("ids"),
           "Feeds ids after what the cache holds; returns the logits after the last one")
      .def("evict", &Session::evict, py::arg("need_free") = 1,
           "Runs the manager's triggers as before a step of need_free tokens; the event or None")
      .def("clear", &Session::clear)
      .def("keys", [](py::object self, int64_t layer) {
             return self.cast<Session&>().view(self, layer, 0);
           }, py::arg("layer"))
      .def("values", [](py::object self, int64_t layer) {
             return self.cast<Session&>().view(self, layer, 1);
           }, py::arg("layer"))
      .def("positions", [](py::object self, int64_t layer) {
             return self.cast<Session&>().view(self, layer, 2);
           }, py::arg("layer"))
      .def_property_readonly("model", [](const Session& s) { return s.model_; })
      .def_property_readonly("logits", &Session::last_logits)
      .def_property_readonly("size", [](const Session& s) { return s.cache_->size(0); })
      .def("layer_size", [](const Session& s, int64_t layer) {
             return s.cache_->size(s.check_layer(layer));
           })
      .def_property_readonly("capacity", [](const Session& s) { return s.cache_->capacity(); })
      .def_property_readonly("context", [](const Session& s) { return s.cache_->max_positions(); })
      .def_property_readonly("next_position",
                             [](const Session& s) { return s.cache_->next_position(); })
      .def_property_readonly("n_layers", [](const Session& s) { return s.cache_->n_layers(); })
      .def_property_readonly("history", [](const Session& s) { return s.history_; })
      .def_property_readonly("pending",
                             [](const Session& s) { return s.pending_; })
      .def_property_readonly("policy", [](Session& s) { return s.manager_->policy().name(); })
      .def_property_readonly("kv_bytes", [](const Session& s) { return s.cache_->memory_bytes(); })
      .def_property_readonly("events", [](const Session& s) {
        py::list events;
        for (const EvictionEvent& e : s.manager_->events()) events.append(event_dict(e));
        return events;
      })
      .def("_generate",
           [](py::object self, int64_t n, bool greedy, float temperature, int top_k, float top_p,
              float min_p, float repeat_penalty, int repeat_window, uint64_t seed,
              std::vector<int32_t> stop_ids, bool ignore_eos) {
             const SamplerConfig sampling{.greedy = greedy,
                                          .temperature = temperature,
                                          .top_k = top_k,
                                          .top_p = top_p,
                                          .min_p = min_p,
                                          .repetition_penalty = repeat_penalty,
                                          .repetition_window = repeat_window,
                                          .seed = seed};
             return Generation(std::move(self), n, sampling, std::move(stop_ids), ignore_eos);
           });
  py::class_<Generation>(m, "_Generation")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &Generation::next)
      .def_property_readonly("stop_reason", &Generation::stop_reason);
}

}  // namespace edgelm::python
