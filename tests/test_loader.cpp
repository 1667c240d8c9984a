// The loader refuses a checkpoint it cannot run as its authors meant, with one line naming the
// file and the field or tensor: another family's config.json fields, a layer count that disagrees
// with the tensors, tensors it would not read, and tied-embedding flags the tensors contradict.
// Each case starts from a tiny model that loads, changed in one place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "models/gguf.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "models/safetensors.h"
#include "temp_dir.h"

namespace edgelm {
namespace {

using nlohmann::json;

cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 1, .isa = "portable"});
  return cpu;
}

// Loads `path` expecting an edgelm::Error whose text holds every one of `parts`.
void expect_load_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    load_llama(path, backend());
    ADD_FAILURE() << "no error loading " << path << "; expected '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// A tensor read out of a file, owning its bytes, to be written again.
struct StoredTensor {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

class LoaderChecksTest : public ::testing::Test {
 protected:
  // A fresh copy of a tiny Hugging Face model (`preset`) in `name`.
  std::string hf_model(const std::string& name, const std::string& preset = "tiny") {
    return make_model({.preset = preset, .format = "hf", .out_dir = dir_.file(name)});
  }
  std::string gguf_model(const std::string& name, const std::string& preset = "tiny") {
    return make_model({.preset = preset, .format = "gguf", .out_dir = dir_.file(name)});
  }

  static void edit_config(const std::string& model, const std::function<void(json&)>& edit) {
    const std::string path = model + "/config.json";
    json config = json::parse(std::ifstream(path));
    edit(config);
    std::ofstream(path) << config.dump();
  }

  // Rewrites model.safetensors with its tensors changed by `edit`.
  static void edit_safetensors(const std::string& model,
                               const std::function<void(std::vector<StoredTensor>&)>& edit) {
    const std::string path = model + "/model.safetensors";
    std::vector<StoredTensor> tensors;
    {
      const SafetensorsFile file = SafetensorsFile::open(path);
      for (const SafetensorsTensor& t : file.tensors())
        tensors.push_back({t.name, t.dtype, t.shape, {t.data, t.data + t.nbytes}});
    }
    edit(tensors);
    std::vector<SafetensorsWriteTensor> list;
    for (const StoredTensor& t : tensors)
      list.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
    write_safetensors(path, list);
  }

  // A copy of the GGUF file at `path` with its metadata changed by `edit_metadata` and one more
  // F32 tensor of `extra_elements` values when `extra` is not empty.
  std::string edit_gguf(const std::string& path, const std::string& name,
                        const std::function<void(GgufWriter&)>& edit_metadata,
                        const std::string& extra = "", int64_t extra_elements = 64) {
    const GgufFile file = GgufFile::open(path);
    GgufWriter writer;
    for (const auto& [key, value] : file.metadata()) writer.set(key, value);
    edit_metadata(writer);
    for (const GgufTensor& t : file.tensors())
      writer.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
    const std::vector<float> zeros(static_cast<size_t>(extra_elements), 0.0f);
    if (!extra.empty())
      writer.add_tensor(extra, GgmlType::F32, {extra_elements}, zeros.data(), zeros.size() * 4);
    const std::string out = dir_.file(name + ".gguf");
    writer.write(out);
    return out;
  }

  testing::TempDir dir_{"edgelm_loader_"};
};

TEST_F(LoaderChecksTest, UnchangedModelsLoad) {
  EXPECT_NO_THROW(load_llama(hf_model("hf"), backend()));
  EXPECT_NO_THROW(load_llama(hf_model("hf_untied", "tiny-mha-untied"), backend()));
  const std::string gguf = gguf_model("gguf");
  EXPECT_NO_THROW(load_llama(gguf, backend()));
  // A copy made by edit_gguf loads too, so the refusals below come from the one change.
  EXPECT_NO_THROW(load_llama(edit_gguf(gguf, "copy", [](GgufWriter&) {}), backend()));
}

// Fields of transformers' Llama that change the network: each is refused, never ignored.
TEST_F(LoaderChecksTest, RefusesConfigFieldsOfAnotherNetwork) {
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"qwen2 class for a llama", [](json& c) { c["architectures"] = {"Qwen2ForCausalLM"}; },
       "unsupported architectures entry \"Qwen2ForCausalLM\" for model_type 'llama' (supported: "
       "LlamaForCausalLM)"},
      {"qwen2 with llama's class",
       [](json& c) {
         c["model_type"] = "qwen2";
         c["architectures"] = {"LlamaForCausalLM"};
       },
       "for model_type 'qwen2' (supported: Qwen2ForCausalLM)"},
      {"sliding window",
       [](json& c) {
         c["model_type"] = "qwen2";
         c["architectures"] = {"Qwen2ForCausalLM"};
         c["use_sliding_window"] = true;
       },
       "use_sliding_window true is not supported"},
      {"sliding layers",
       [](json& c) {
         c["model_type"] = "qwen3";
         c["architectures"] = {"Qwen3ForCausalLM"};
         c["layer_types"] = {"full_attention", "sliding_attention"};
       },
       "layer_types entry \"sliding_attention\" is not supported"},
      {"qwen3 attention bias",
       [](json& c) {
         c["model_type"] = "qwen3";
         c["architectures"] = {"Qwen3ForCausalLM"};
         c["attention_bias"] = true;
       },
       "attention_bias true is not supported"},
      {"qwen2 moe", [](json& c) { c["model_type"] = "qwen2_moe"; },
       "model_type 'qwen2_moe' (supported: llama, qwen2, qwen3)"},
      {"architectures not a list", [](json& c) { c["architectures"] = "LlamaForCausalLM"; },
       "field 'architectures' must be a list"},
      {"gelu", [](json& c) { c["hidden_act"] = "gelu"; }, "unsupported hidden_act \"gelu\""},
      {"attention bias", [](json& c) { c["attention_bias"] = true; },
       "attention_bias true is not supported"},
      {"mlp bias", [](json& c) { c["mlp_bias"] = true; }, "mlp_bias true is not supported"},
      {"bias not a bool", [](json& c) { c["mlp_bias"] = 1; },
       "field 'mlp_bias' must be true or false"},
      {"partial rotary", [](json& c) { c["partial_rotary_factor"] = 0.5; },
       "partial_rotary_factor 0.5 is not supported"},
      {"quantized checkpoint",
       [](json& c) {
         c["quantization_config"] = {{"quant_method", "gptq"}};
       },
       "quantization_config (quant_method 'gptq') is not supported"},
  };
  const std::string model = hf_model("hf");
  const json good = json::parse(std::ifstream(model + "/config.json"));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    edit_config(model, [&](json& config) {
      config = good;
      c.edit(config);
    });
    expect_load_error(model, {"[config] " + model + "/config.json: ", c.expected});
  }
  // The values a Llama checkpoint carries still load.
  edit_config(model, [&](json& config) {
    config = good;
    config["architectures"] = {"LlamaForCausalLM"};
    config["hidden_act"] = "silu";
    config["attention_bias"] = false;
    config["mlp_bias"] = false;
    config["partial_rotary_factor"] = 1.0;
  });
  EXPECT_NO_THROW(load_llama(model, backend()));
}

TEST_F(LoaderChecksTest, RefusesALayerCountBelowTheTensors) {
  const std::string model = hf_model("hf");
  edit_config(model, [](json& c) { c["num_hidden_layers"] = 1; });
  expect_load_error(model, {"[load] " + model + ": tensor 'model.layers.1.",
                            "belongs to layer 1 but num_hidden_layers is 1"});

  const std::string gguf = edit_gguf(gguf_model("gguf"), "one_block",
                                     [](GgufWriter& w) { w.set_u32("llama.block_count", 1); });
  expect_load_error(gguf, {"[load] " + gguf + ": tensor 'blk.1.",
                           "belongs to layer 1 but llama.block_count is 1"});
}

TEST_F(LoaderChecksTest, RefusesAMissingLayerTensor) {
  const std::string model = hf_model("hf");
  edit_config(model, [](json& c) { c["num_hidden_layers"] = 3; });
  expect_load_error(
      model, {"[load] " + model + ": missing tensor 'model.layers.2.input_layernorm.weight'"});

  const std::string gguf = edit_gguf(gguf_model("gguf"), "three_blocks",
                                     [](GgufWriter& w) { w.set_u32("llama.block_count", 3); });
  expect_load_error(gguf, {"[load] " + gguf + ": missing tensor 'blk.2.attn_norm.weight'"});
}

// A damaged layer count far beyond the file's tensors fails at the first missing layer, at once
// (building every expected name first, 36 billion of them here, would not end).
TEST_F(LoaderChecksTest, RefusesAHugeLayerCountAtTheFirstMissingLayer) {
  const std::string gguf = edit_gguf(gguf_model("gguf"), "huge_block_count", [](GgufWriter& w) {
    w.set_u32("llama.block_count", 0xFFFFFFF0u);
  });
  expect_load_error(gguf, {"[load] " + gguf + ": missing tensor 'blk.2.attn_norm.weight'"});
}

// A tensor the loader would not read means a network it does not compute: refused by name. Rotary
// inv_freq buffers are recomputed from the config, as transformers does, so they are ignored.
TEST_F(LoaderChecksTest, RefusesTensorsItWouldNotRead) {
  const std::string model = hf_model("hf");
  edit_safetensors(model, [](std::vector<StoredTensor>& tensors) {
    tensors.push_back({"model.layers.0.self_attn.q_proj.bias",
                       DType::F32,
                       {64},
                       std::vector<uint8_t>(64 * 4, 0)});
  });
  expect_load_error(model, {"[load] " + model + ": tensor 'model.layers.0.self_attn.q_proj.bias'",
                            "is not part of a Llama model"});

  const std::string ignored = hf_model("hf_inv_freq");
  edit_safetensors(ignored, [](std::vector<StoredTensor>& tensors) {
    for (int layer = 0; layer < 2; ++layer) {
      tensors.push_back({str_cat("model.layers.", layer, ".self_attn.rotary_emb.inv_freq"),
                         DType::F32,
                         {8},
                         std::vector<uint8_t>(8 * 4, 0)});
    }
  });
  EXPECT_NO_THROW(load_llama(ignored, backend()));

  const std::string gguf = edit_gguf(
      gguf_model("gguf"), "bias", [](GgufWriter&) {}, "blk.0.attn_q.bias", 64);
  expect_load_error(
      gguf, {"[load] " + gguf + ": tensor 'blk.0.attn_q.bias'", "is not part of a Llama model"});
}

TEST_F(LoaderChecksTest, RefusesTiedFlagsTheTensorsContradict) {
  // Untied in config.json, but only the embedding is there.
  const std::string tied = hf_model("hf");
  edit_config(tied, [](json& c) { c["tie_word_embeddings"] = false; });
  expect_load_error(tied, {"[load] " + tied + ": no tensor 'lm_head.weight' but ",
                           "config.json says tie_word_embeddings false"});

  // Tied in config.json, with an lm_head.weight: accepted when it is the embedding, refused when
  // it differs (the checkpoint then has an output matrix of its own that tying would drop).
  const std::string same = hf_model("hf_same_head");
  edit_safetensors(same, [](std::vector<StoredTensor>& tensors) {
    const auto embedding = std::find_if(tensors.begin(), tensors.end(), [](const StoredTensor& t) {
      return t.name == "model.embed_tokens.weight";
    });
    StoredTensor head = *embedding;
    head.name = "lm_head.weight";
    tensors.push_back(head);
  });
  EXPECT_NO_THROW(load_llama(same, backend()));
  edit_safetensors(same, [](std::vector<StoredTensor>& tensors) {
    for (StoredTensor& t : tensors) {
      if (t.name == "lm_head.weight") t.bytes[5] ^= 0x40;
    }
  });
  expect_load_error(same, {"says tie_word_embeddings true but tensor 'lm_head.weight' differs "
                           "from 'model.embed_tokens.weight'"});
}

// GGUF keys that change the network: mixture of experts (Mixtral's files say "llama"), and rope
// scaling other than Llama 3's (which arrives as rope_freqs.weight).
TEST_F(LoaderChecksTest, RefusesGgufKeysOfAnotherNetwork) {
  const std::string gguf = gguf_model("gguf");
  struct Case {
    const char* name;
    std::function<void(GgufWriter&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"experts", [](GgufWriter& w) { w.set_u32("llama.expert_count", 8); },
       "llama.expert_count 8 (mixture-of-experts models are not supported)"},
      {"yarn", [](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "yarn"); },
       "unsupported llama.rope.scaling.type 'yarn'"},
      {"linear factor", [](GgufWriter& w) { w.set_f32("llama.rope.scaling.factor", 4.0f); },
       "llama.rope.scaling.factor 4: linear rope scaling is not supported"},
      {"old linear key", [](GgufWriter& w) { w.set_f32("llama.rope.scale_linear", 2.0f); },
       "llama.rope.scale_linear 2: linear rope scaling"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = edit_gguf(gguf, "edited", c.edit);
    expect_load_error(path, {"[gguf] " + path + ": ", c.expected});
  }
  // Scaling keys that leave the rotation unchanged load: type none whatever the factor (llama.cpp
  // never scales then), a factor of 1.
  for (const auto& edit : std::vector<std::function<void(GgufWriter&)>>{
           [](GgufWriter& w) {
             w.set_string("llama.rope.scaling.type", "none");
             w.set_f32("llama.rope.scaling.factor", 8.0f);
           },
           [](GgufWriter& w) {
             w.set_string("llama.rope.scaling.type", "linear");
             w.set_f32("llama.rope.scaling.factor", 1.0f);
           }}) {
    EXPECT_NO_THROW(load_llama(edit_gguf(gguf, "harmless", edit), backend()));
  }
}

}  // namespace
}  // namespace edgelm
