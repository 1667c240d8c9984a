// edgelm.Model: Runtime::load behind Model.load, the tokenizer, the chat template and the
// teacher-forced logits of a token sequence.
#include <cstring>

#include "core/error.h"
#include "eval/teacher_forcing.h"
#include "models/chat.h"
#include "python/src/bindings.h"

namespace edgelm::python {
namespace {

DType parse_type(const std::string& text, const char* what, std::initializer_list<DType> allowed) {
  const std::optional<DType> dtype = dtype_from_name(text);
  std::string names;
  for (DType d : allowed) {
    if (dtype == d) return d;
    names += names.empty() ? dtype_name(d) : std::string("|") + dtype_name(d);
  }
  EDGELM_FAIL(what, ": '", text, "' is not one of ", names);
}

const Tokenizer& tokenizer_of(const ModelState& state) {
  const Tokenizer* tokenizer = state.runtime.tokenizer();
  if (tokenizer == nullptr)
    EDGELM_FAIL("[python] the model has no tokenizer: ", state.runtime.tokenizer_error());
  return *tokenizer;
}

// Raises KeyboardInterrupt (or what a signal handler raised) between forward steps.
void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

ModelRef load(const std::string& path, const std::string& backend, int threads,
              const std::string& kv_type, const std::optional<std::string>& weight_type,
              int64_t batch, int64_t context, bool repack) {
  Settings settings{.model_path = path, .backend = backend};
  settings.backend_options.n_threads = threads;
  settings.backend_options.repack_weights = repack;
  settings.kv_type = parse_type(kv_type, "kv_type", {DType::F32, DType::F16});
  if (weight_type) {
    settings.weight_type =
        parse_type(*weight_type, "weight_type",
                   {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                    DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K});
  }
  settings.max_chunk = batch;
  settings.context = context;
  settings.require_tokenizer = false;
  py::gil_scoped_release release;
  return std::make_shared<ModelState>(Runtime::load(std::move(settings)), path);
}

// Teacher-forced logits of `ids` from an empty cache, as perplexity computes them: chunks of
// `batch` tokens (0: the model's chunk) through the teacher-forced path, every position's row
// copied out of the model's workspace once into the result.
py::array_t<float> logits(const ModelRef& state, const std::vector<int32_t>& ids, int64_t batch) {
  if (ids.empty()) EDGELM_FAIL("[python] logits of no tokens");
  LlamaModel& model = state->runtime.model();
  const int64_t vocab = model.config().vocab_size;
  const auto n = static_cast<int64_t>(ids.size());
  py::array_t<float> out({n, vocab});
  float* rows = out.mutable_data();
  {
    py::gil_scoped_release release;
    std::lock_guard lock(state->compute);
    KvCache cache = model.make_cache(n, state->runtime.settings().kv_type);
    Generator generator(model, cache);
    TeacherForcedStream stream(generator, ids, {.batch = batch});
    while (!stream.done()) {
      const TeacherForcedChunk chunk = stream.step();
      std::memcpy(rows + (chunk.begin + chunk.logits_from) * vocab, chunk.logits.data(),
                  chunk.logits.size_bytes());
      if (!stream.done()) check_signals();
    }
  }
  return out;
}

// The chat template's rendering of `messages` ((role, content) pairs) with the assistant header,
// as ids, and the ids that end a reply under it.
py::tuple chat_prompt(const ModelRef& state, const std::vector<std::pair<std::string, std::string>>&
                                                 messages,
                      const std::string& template_name) {
  const Tokenizer& tokenizer = tokenizer_of(*state);
  const ChatTemplate chat = ChatTemplate::from_model_path(state->path, template_name);
  std::vector<ChatMessage> list;
  for (const auto& [role, content] : messages) list.push_back({role, content});
  const std::vector<int32_t> ids =
      tokenizer.encode(chat.render(list, /*add_generation_prompt=*/true), /*add_bos=*/false);
  return py::make_tuple(
      ids, chat_stop_ids(tokenizer, chat, state->runtime.model().config().eos_token_ids));
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<ModelState, ModelRef>(m, "Model", "A loaded model (Model.load), with its tokenizer")
      .def_static("load", &load, py::arg("path"), py::arg("backend") = "cpu",
                  py::arg("threads") = 0, py::arg("kv_type") = "f16",
                  py::arg("weight_type") = py::none(), py::arg("batch") = kDefaultPrefillChunk,
                  py::arg("context") = 2048, py::arg("repack") = true,
                  "Loads a Hugging Face folder or a GGUF file (runtime/setup.h's Runtime::load)")
      .def("tokenize",
           [](const ModelRef& state, const std::string& text, bool add_bos, bool special) {
             return tokenizer_of(*state).encode(text, add_bos, special);
           },
           py::arg("text"), py::arg("add_bos") = true, py::arg("special") = true)
      .def("detokenize",
           [](const ModelRef& state, const std::vector<int32_t>& ids, bool skip_special) {
             return tokenizer_of(*state).decode(ids, skip_special);
           },
           py::arg("ids"), py::arg("skip_special") = false)
      .def("logits", &logits, py::arg("ids"), py::arg("batch") = 0,
           "Teacher-forced logits of every position: float32 [len(ids), vocab]")
      .def_static(
          "_token_nll",
          [](const py::array_t<float, py::array::c_style | py::array::forcecast>& row,
             int32_t target) {
            return token_nll(std::span<const float>(row.data(), static_cast<size_t>(row.size())),
                             target, 0);
          },
          py::arg("row"), py::arg("target"),
          "-log softmax(row)[target] as perplexity computes it (eval/teacher_forcing.h)")
      .def("_chat_prompt", &chat_prompt, py::arg("messages"), py::arg("template") = "")
      .def_property_readonly("path", [](const ModelRef& s) { return s->path; })
      .def_property_readonly("vocab_size",
                             [](const ModelRef& s) { return s->runtime.model().config().vocab_size; })
      .def_property_readonly("n_layers",
                             [](const ModelRef& s) { return s->runtime.model().config().n_layers; })
      .def_property_readonly("n_heads",
                             [](const ModelRef& s) { return s->runtime.model().config().n_heads; })
      .def_property_readonly(
          "n_kv_heads", [](const ModelRef& s) { return s->runtime.model().config().n_kv_heads; })
      .def_property_readonly("head_dim",
                             [](const ModelRef& s) { return s->runtime.model().config().head_dim; })
      .def_property_readonly("context", [](const ModelRef& s) { return s->runtime.settings().context; })
      .def_property_readonly("batch", [](const ModelRef& s) { return s->runtime.model().max_chunk(); })
      .def_property_readonly(
          "kv_type", [](const ModelRef& s) { return dtype_name(s->runtime.settings().kv_type); })
      .def_property_readonly("eos_ids",
                             [](const ModelRef& s) { return s->runtime.model().config().eos_token_ids; })
      .def_property_readonly("bos_id",
                             [](const ModelRef& s) -> std::optional<int32_t> {
                               const Tokenizer* t = s->runtime.tokenizer();
                               return t != nullptr ? t->bos_id() : std::nullopt;
                             })
      .def_property_readonly("has_tokenizer",
                             [](const ModelRef& s) { return s->runtime.tokenizer() != nullptr; })
      .def_property_readonly("info",
                             [](const ModelRef& s) {
                               const ModelInfo& info = s->runtime.info();
                               py::dict d;
                               d["format"] = info.format;
                               d["weight_type"] = dtype_name(info.weight_type);
                               d["weight_layout"] = dtype_name(info.weight_layout);
                               d["weight_types"] = info.weight_types;
                               d["load_seconds"] = info.load_seconds;
                               d["backend"] = s->runtime.settings().backend;
                               d["device"] = s->runtime.backend().device();
                               d["config"] = s->runtime.model().config().describe();
                               return d;
                             })
      .def("__repr__", [](const ModelRef& s) {
        return "<edgelm.Model " + s->path + " (" + s->runtime.info().weight_types + ")>";
      });
}

}  // namespace edgelm::python
