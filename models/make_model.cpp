#include "models/make_model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/half.h"
#include "core/log.h"
#include "core/quant.h"
#include "models/gguf.h"
#include "models/loader.h"
#include "models/safetensors.h"

namespace edgelm {
namespace {

using nlohmann::json;

LlamaConfig tiny_config(int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim,
                        int64_t layers, int64_t intermediate, int64_t vocab, bool tied,
                        bool llama3) {
  LlamaConfig c;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.rms_norm_eps = 1e-5f;
  c.rope.head_dim = head_dim;
  c.rope.theta = llama3 ? 500000.0f : 10000.0f;
  if (llama3) {
    // A short original context so the scaled, smoothed and untouched bands all occur at these
    // sizes.
    c.rope.scaling = {RopeScaling::Type::Llama3, 8.0f, 1.0f, 4.0f, 64};
  }
  c.tie_word_embeddings = tied;
  c.max_position_embeddings = 4096;
  // Tiny vocabularies end with eight special tokens; see make_vocabulary().
  c.bos_token_id = static_cast<int32_t>(vocab - 8);
  c.eos_token_ids = {static_cast<int32_t>(vocab - 7), static_cast<int32_t>(vocab - 1)};
  return c;
}

LlamaConfig llama32_config(int64_t hidden, int64_t heads, int64_t head_dim, int64_t layers) {
  LlamaConfig c;
  c.vocab_size = 128256;
  c.hidden_size = hidden;
  c.intermediate_size = 8192;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = 8;
  c.head_dim = head_dim;
  c.rms_norm_eps = 1e-5f;
  c.rope.head_dim = head_dim;
  c.rope.theta = 500000.0f;
  c.rope.scaling = {RopeScaling::Type::Llama3, 32.0f, 1.0f, 4.0f, 8192};
  c.tie_word_embeddings = true;
  c.max_position_embeddings = 131072;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001, 128008, 128009};
  return c;
}

// ---- deterministic weights ----

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& name, uint64_t seed) {
  uint64_t h = splitmix64(seed);
  for (unsigned char ch : name) h = splitmix64(h ^ ch);
  return h;
}

// Values with mean `mean` and standard deviation `std`: a sum of four uniforms (close to normal,
// bounded) from a counter-based generator, so every element is independent of the others and of
// how the tensor is split.
std::vector<float> random_values(const std::string& name, uint64_t seed, int64_t count, float mean,
                                 float std) {
  std::vector<float> values(static_cast<size_t>(count));
  const uint64_t key = hash_name(name, seed);
  const float scale = std * std::sqrt(3.0f) / 32768.0f;  // four U(0,1) sum: variance 1/3
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t bits = splitmix64(key + static_cast<uint64_t>(i));
    const float sum = static_cast<float>((bits & 0xffff) + ((bits >> 16) & 0xffff) +
                                         ((bits >> 32) & 0xffff) + (bits >> 48));
    values[i] = mean + (sum - 131070.0f) * scale;
  }
  return values;
}

struct CanonicalTensor {
  std::string hf_name;
  std::string gguf_name;
  Shape shape;
  bool is_norm = false;
  bool permute_heads = false;  // Q and K: GGUF stores rows for interleaved rope pairs
};

std::vector<CanonicalTensor> tensor_list(const LlamaConfig& c) {
  std::vector<CanonicalTensor> list;
  list.push_back({"model.embed_tokens.weight", "token_embd.weight", {c.vocab_size, c.hidden_size}});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const std::string gg = "blk." + std::to_string(l) + ".";
    list.push_back({hf + "input_layernorm.weight", gg + "attn_norm.weight", {c.hidden_size}, true});
    list.push_back({hf + "self_attn.q_proj.weight",
                    gg + "attn_q.weight",
                    {c.q_dim(), c.hidden_size},
                    false,
                    true});
    list.push_back({hf + "self_attn.k_proj.weight",
                    gg + "attn_k.weight",
                    {c.kv_dim(), c.hidden_size},
                    false,
                    true});
    list.push_back(
        {hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {c.kv_dim(), c.hidden_size}});
    list.push_back(
        {hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {c.hidden_size, c.q_dim()}});
    list.push_back(
        {hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {c.hidden_size}, true});
    list.push_back({hf + "mlp.gate_proj.weight",
                    gg + "ffn_gate.weight",
                    {c.intermediate_size, c.hidden_size}});
    list.push_back(
        {hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {c.intermediate_size, c.hidden_size}});
    list.push_back({hf + "mlp.down_proj.weight",
                    gg + "ffn_down.weight",
                    {c.hidden_size, c.intermediate_size}});
  }
  list.push_back({"model.norm.weight", "output_norm.weight", {c.hidden_size}, true});
  if (!c.tie_word_embeddings) {
    list.push_back({"lm_head.weight", "output.weight", {c.vocab_size, c.hidden_size}});
  }
  return list;
}

std::vector<float> tensor_values(const CanonicalTensor& t, uint64_t seed) {
  // Norm weights near 1 (so they matter but keep scale); matrices with std 0.5/sqrt(fan_in). At
  // 1/sqrt(fan_in) random layers amplify weight errors chaotically (Q8_0 rounding alone flips the
  // top token); half that keeps the model in a regime where quantization error behaves as in
  // trained models while logits stay far from uniform.
  if (t.is_norm) return random_values(t.hf_name, seed, t.shape.numel(), 1.0f, 0.1f);
  const float std = 0.5f / std::sqrt(static_cast<float>(t.shape.last()));
  return random_values(t.hf_name, seed, t.shape.numel(), 0.0f, std);
}

// Encodes F32 values as `dtype` bytes (rows of shape.last()).
std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype, int64_t row) {
  const auto n = static_cast<int64_t>(values.size());
  std::vector<uint8_t> bytes(dtype_row_bytes(dtype, row) * static_cast<size_t>(n / row));
  switch (dtype) {
    case DType::F32:
      std::memcpy(bytes.data(), values.data(), bytes.size());
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i)
        reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_f16(values[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i)
        reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_bf16(values[i]);
      break;
    case DType::Q8_0:
      quantize_row_q8_0(values.data(), reinterpret_cast<BlockQ8_0*>(bytes.data()), n);
      break;
    case DType::Q4_0:
      quantize_row_q4_0(values.data(), reinterpret_cast<BlockQ4_0*>(bytes.data()), n);
      break;
    case DType::Q4_1:
      quantize_row_q4_1(values.data(), reinterpret_cast<BlockQ4_1*>(bytes.data()), n);
      break;
    case DType::Q5_0:
      quantize_row_q5_0(values.data(), reinterpret_cast<BlockQ5_0*>(bytes.data()), n);
      break;
    case DType::Q5_1:
      quantize_row_q5_1(values.data(), reinterpret_cast<BlockQ5_1*>(bytes.data()), n);
      break;
    case DType::Q4_K:
      quantize_row_q4_K(values.data(), bytes.data(), n);
      break;
    case DType::Q5_K:
      quantize_row_q5_K(values.data(), bytes.data(), n);
      break;
    case DType::Q6_K:
      quantize_row_q6_K(values.data(), bytes.data(), n);
      break;
    default:
      EDGELM_FAIL("[make_model] cannot encode ", dtype_name(dtype));
  }
  return bytes;
}

// ---- vocabulary ----

// Byte-level BPE vocabulary: the 256 byte symbols, synthetic merges up to the vocabulary size, and
// special tokens at the end (Llama 3's names for the 256 of the real presets; eight for tiny ones).
struct Vocabulary {
  std::vector<std::string> tokens;  // byte-level (GPT-2 unicode) strings
  std::vector<std::string> merges;  // "left right", rank order
  int64_t first_special = 0;
};

std::string utf8(uint32_t code) {
  std::string out;
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
  return out;
}

// GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the other bytes
// take code points from 256 upwards in order.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> symbols(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    symbols[b] = utf8(printable ? b : next++);
  }
  return symbols;
}

std::vector<std::string> special_names(int64_t count) {
  std::vector<std::string> names;
  if (count == 256) {  // Llama 3 layout of ids 128000..128255
    const std::map<int, std::string> known = {
        {0, "<|begin_of_text|>"},   {1, "<|end_of_text|>"},   {4, "<|finetune_right_pad_id|>"},
        {6, "<|start_header_id|>"}, {7, "<|end_header_id|>"}, {8, "<|eom_id|>"},
        {9, "<|eot_id|>"},          {10, "<|python_tag|>"}};
    int reserved = 0;
    for (int i = 0; i < 256; ++i) {
      const auto it = known.find(i);
      names.push_back(it != known.end()
                          ? it->second
                          : "<|reserved_special_token_" + std::to_string(reserved++) + "|>");
    }
    return names;
  }
  names = {"<|begin_of_text|>",
           "<|end_of_text|>",
           "<|start_header_id|>",
           "<|end_header_id|>",
           "<|reserved_special_token_0|>",
           "<|reserved_special_token_1|>",
           "<|eom_id|>",
           "<|eot_id|>"};
  names.resize(static_cast<size_t>(count));
  return names;
}

Vocabulary make_vocabulary(const LlamaConfig& c, uint64_t seed) {
  Vocabulary vocab;
  const int64_t n_special = c.vocab_size >= 128000 ? 256 : 8;
  vocab.first_special = c.vocab_size - n_special;
  EDGELM_CHECK(vocab.first_special >= 256, "[make_model] vocabulary of ", c.vocab_size,
               " is too small for 256 byte tokens and ", n_special, " special tokens");
  vocab.tokens = byte_symbols();
  std::map<std::string, bool> seen;
  for (const std::string& t : vocab.tokens) seen[t] = true;
  // Merge frequent-looking pairs first: letters and a leading space ('Ġ'), then anything.
  uint64_t state = splitmix64(seed ^ 0x766f636162ull);
  while (static_cast<int64_t>(vocab.tokens.size()) < vocab.first_special) {
    state = splitmix64(state);
    const auto size = vocab.tokens.size();
    // Prefer recent tokens on the left so merged strings grow like real BPE tokens.
    const size_t left =
        size > 512 && (state & 1) ? size - 1 - (state >> 8) % 256 : (state >> 8) % size;
    const size_t right = (state >> 32) % std::min<size_t>(size, 256 + (size - 256) / 4 + 1);
    std::string merged = vocab.tokens[left] + vocab.tokens[right];
    if (merged.size() > 24 || seen.count(merged)) continue;
    seen[merged] = true;
    vocab.merges.push_back(vocab.tokens[left] + " " + vocab.tokens[right]);
    vocab.tokens.push_back(merged);
  }
  for (const std::string& name : special_names(n_special)) vocab.tokens.push_back(name);
  return vocab;
}

// The pre-tokenizer regex of Llama 3's tokenizer.json.
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

json tokenizer_json(const Vocabulary& vocab, const LlamaConfig& c) {
  json added = json::array();
  for (int64_t id = vocab.first_special; id < static_cast<int64_t>(vocab.tokens.size()); ++id) {
    added.push_back({{"id", id},
                     {"content", vocab.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  json model_vocab = json::object();
  for (int64_t id = 0; id < static_cast<int64_t>(vocab.tokens.size()); ++id)
    model_vocab[vocab.tokens[id]] = id;
  const std::string bos = vocab.tokens[c.bos_token_id];
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", kLlama3Pattern}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       {{"type", "ByteLevel"},
                                        {"add_prefix_space", false},
                                        {"trim_offsets", true},
                                        {"use_regex", false}}})}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"pair", json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                              {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
                              {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
        {"special_tokens",
         {{bos,
           {{"id", bos},
            {"ids", json::array({c.bos_token_id})},
            {"tokens", json::array({bos})}}}}}}},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", model_vocab},
        {"merges", vocab.merges}}},
  };
}

void write_json(const std::string& path, const json& value) {
  std::ofstream out(path);
  if (!out) EDGELM_FAIL("[make_model] ", path, ": cannot open for writing");
  out << value.dump(2) << "\n";
  out.close();  // flushes: a full disk shows only here for a small file
  if (!out) EDGELM_FAIL("[make_model] ", path, ": write failed");
}

json hf_config_json(const LlamaConfig& c, DType dtype) {
  json rope_scaling = nullptr;
  if (c.rope.scaling.type == RopeScaling::Type::Llama3) {
    rope_scaling = {
        {"rope_type", "llama3"},
        {"factor", c.rope.scaling.factor},
        {"low_freq_factor", c.rope.scaling.low_freq_factor},
        {"high_freq_factor", c.rope.scaling.high_freq_factor},
        {"original_max_position_embeddings", c.rope.scaling.original_max_position_embeddings}};
  }
  const char* torch_dtype = dtype == DType::F16    ? "float16"
                            : dtype == DType::BF16 ? "bfloat16"
                                                   : "float32";
  return {{"architectures", json::array({"LlamaForCausalLM"})},
          {"model_type", "llama"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"hidden_act", "silu"},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.n_layers},
          {"num_attention_heads", c.n_heads},
          {"num_key_value_heads", c.n_kv_heads},
          {"head_dim", c.head_dim},
          {"rms_norm_eps", c.rms_norm_eps},
          {"rope_theta", c.rope.theta},
          {"rope_scaling", rope_scaling},
          {"tie_word_embeddings", c.tie_word_embeddings},
          {"max_position_embeddings", c.max_position_embeddings},
          {"bos_token_id", c.bos_token_id},
          {"eos_token_id",
           c.eos_token_ids.size() == 1 ? json(c.eos_token_ids[0]) : json(c.eos_token_ids)},
          {"torch_dtype", torch_dtype}};
}

std::string write_hf(const ModelPreset& preset, const MakeModelOptions& options) {
  const LlamaConfig& c = preset.config;
  namespace fs = std::filesystem;
  const fs::path dir = options.out_dir;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<SafetensorsWriteTensor> tensors;
  for (const CanonicalTensor& t : tensor_list(c)) {
    storage.push_back(encode(tensor_values(t, options.seed), options.quant, t.shape.last()));
    tensors.push_back({t.hf_name, options.quant, t.shape, storage.back().data()});
  }
  write_safetensors((dir / "model.safetensors").string(), tensors, {{"format", "pt"}});
  write_json((dir / "config.json").string(), hf_config_json(c, options.quant));
  write_json(
      (dir / "generation_config.json").string(),
      {{"bos_token_id", c.bos_token_id}, {"eos_token_id", c.eos_token_ids}, {"do_sample", false}});
  const Vocabulary vocab = make_vocabulary(c, options.seed);
  write_json((dir / "tokenizer.json").string(), tokenizer_json(vocab, c));
  write_json((dir / "tokenizer_config.json").string(),
             {{"bos_token", vocab.tokens[c.bos_token_id]},
              {"eos_token", vocab.tokens[c.eos_token_ids.back()]},
              {"model_max_length", c.max_position_embeddings},
              {"tokenizer_class", "PreTrainedTokenizerFast"}});
  return dir.string();
}

// The block index of a GGUF tensor name ("blk.7.attn_v.weight" -> 7), -1 for the others.
int64_t block_of(const std::string& gguf_name) {
  if (gguf_name.rfind("blk.", 0) != 0) return -1;
  return std::stoll(gguf_name.substr(4));
}

uint32_t gguf_file_type(DType dtype, bool k_quant_mix) {
  switch (dtype) {  // llama.cpp's "mostly <type>" file type codes (K-quants: _S, or _M mixed)
    case DType::Q4_K:
      return k_quant_mix ? 15 : 14;
    case DType::Q5_K:
      return k_quant_mix ? 17 : 16;
    case DType::Q6_K:
      return 18;
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::BF16:
      return 32;
    default:
      return 0;
  }
}

std::string write_gguf(const ModelPreset& preset, const MakeModelOptions& options) {
  const LlamaConfig& c = preset.config;
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_string("general.name", "edgelm random " + preset.name);
  writer.set_u32("general.file_type", gguf_file_type(options.quant, options.k_quant_mix));
  writer.set_u32("llama.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  writer.set_u32("llama.embedding_length", static_cast<uint32_t>(c.hidden_size));
  writer.set_u32("llama.block_count", static_cast<uint32_t>(c.n_layers));
  writer.set_u32("llama.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  writer.set_u32("llama.attention.head_count", static_cast<uint32_t>(c.n_heads));
  writer.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  writer.set_u32("llama.attention.key_length", static_cast<uint32_t>(c.head_dim));
  writer.set_u32("llama.attention.value_length", static_cast<uint32_t>(c.head_dim));
  writer.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  writer.set_f32("llama.rope.freq_base", c.rope.theta);
  writer.set_f32("llama.attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  writer.set_u32("llama.vocab_size", static_cast<uint32_t>(c.vocab_size));

  const Vocabulary vocab = make_vocabulary(c, options.seed);
  std::vector<int32_t> token_types(vocab.tokens.size(), 1);  // 1 normal, 3 control
  for (size_t id = static_cast<size_t>(vocab.first_special); id < token_types.size(); ++id)
    token_types[id] = 3;
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", "llama-bpe");
  writer.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", token_types);
  writer.set_string_array("tokenizer.ggml.merges", vocab.merges);
  writer.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(c.bos_token_id));
  writer.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids.front()));
  if (c.eos_token_ids.size() > 1) {
    writer.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(c.eos_token_ids.back()));
  }

  std::vector<std::vector<uint8_t>> storage;
  storage.reserve(tensor_list(c).size() + 1);
  if (c.rope.scaling.type == RopeScaling::Type::Llama3) {
    // GGUF carries llama3 scaling as per-pair divisors of the base frequencies.
    RopeParams base = c.rope;
    base.scaling = {};
    const std::vector<float> unscaled = rope_inv_freq(base);
    const std::vector<float> scaled = rope_inv_freq(c.rope);
    std::vector<float> factors(unscaled.size());
    for (size_t i = 0; i < factors.size(); ++i) factors[i] = unscaled[i] / scaled[i];
    storage.push_back(encode(factors, DType::F32, static_cast<int64_t>(factors.size())));
    writer.add_tensor("rope_freqs.weight", GgmlType::F32, {static_cast<int64_t>(factors.size())},
                      storage.back().data(), storage.back().size());
  }
  for (const CanonicalTensor& t : tensor_list(c)) {
    std::vector<float> values = tensor_values(t, options.seed);
    if (t.permute_heads) {
      std::vector<float> permuted(values.size());
      const int64_t row = t.shape.last();
      for (int64_t r = 0; r < t.shape[0]; ++r) {
        std::memcpy(&permuted[hf_to_gguf_row(r, c.head_dim) * row], &values[r * row],
                    row * sizeof(float));
      }
      values.swap(permuted);
    }
    DType dtype = t.is_norm ? DType::F32 : options.quant;
    if (t.gguf_name == "token_embd.weight") dtype = options.embedding_quant.value_or(options.quant);
    if (!t.is_norm && dtype_block_size(dtype) == kKQuantBlockSize) {
      dtype = k_quant_type(t.gguf_name, block_of(t.gguf_name), c.n_layers, t.shape.last(),
                           c.tie_word_embeddings, dtype, options.k_quant_mix);
    }
    if (t.is_norm && (options.quant == DType::F16 || options.quant == DType::BF16)) {
      // llama.cpp wants F32 norms; store the values the HF folder of this type holds, so both
      // formats describe the same model.
      const std::vector<uint8_t> rounded = encode(values, options.quant, t.shape.last());
      const auto* bits = reinterpret_cast<const uint16_t*>(rounded.data());
      for (size_t i = 0; i < values.size(); ++i) {
        values[i] = options.quant == DType::F16 ? f16_to_f32(bits[i]) : bf16_to_f32(bits[i]);
      }
    }
    storage.push_back(encode(values, dtype, t.shape.last()));
    writer.add_tensor(t.gguf_name, ggml_from_dtype(dtype), t.shape, storage.back().data(),
                      storage.back().size());
  }
  std::string name =
      preset.name + "-" + dtype_name(options.quant) + (options.k_quant_mix ? "_m" : "");
  if (options.embedding_quant && *options.embedding_quant != options.quant)
    name += std::string("-embd-") + dtype_name(*options.embedding_quant);
  const std::string path = (std::filesystem::path(options.out_dir) / (name + ".gguf")).string();
  writer.write(path);
  return path;
}

}  // namespace

// llama.cpp's choice (its quantizer's type rules, restated): the medium mixes give more bits to
// the first and last eighth of the layers and every third one between; the output matrix (or a
// tied embedding, which is also the output) gets Q6_K in every K-quant file.
DType k_quant_type(const std::string& gguf_name, int64_t layer, int64_t n_layers, int64_t columns,
                   bool tied, DType base, bool mix) {
  auto more_bits = [&] {
    const int64_t eighth = n_layers / 8;
    return layer < eighth || layer >= 7 * n_layers / 8 || (layer - eighth) % 3 == 2;
  };
  auto ends_with = [&](const char* suffix) {
    const std::string s = suffix;
    return gguf_name.size() >= s.size() &&
           gguf_name.compare(gguf_name.size() - s.size(), s.size(), s) == 0;
  };
  DType type = base;
  if (gguf_name == "output.weight" || (tied && gguf_name == "token_embd.weight")) {
    type = DType::Q6_K;
  } else if (mix && layer >= 0 && (ends_with(".attn_v.weight") || ends_with(".ffn_down.weight")) &&
             more_bits()) {
    type = DType::Q6_K;
  }
  if (columns % kKQuantBlockSize != 0) {
    type = type == DType::Q4_K ? DType::Q5_0 : type == DType::Q5_K ? DType::Q5_1 : DType::Q8_0;
  }
  return type;
}

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"tiny",
       "2 layers, hidden 64, 4 heads / 2 kv heads (GQA), llama3 rope scaling, tied embeddings",
       tiny_config(64, 4, 2, 16, 2, 128, 320, true, true)},
      {"tiny-mha-untied", "2 layers, hidden 96, 4 heads / 4 kv heads, plain rope, untied output",
       tiny_config(96, 4, 4, 24, 2, 160, 300, false, false)},
      {"tiny-odd-heads",
       "3 layers, hidden 64, 3 heads / 1 kv head, head_dim 32 (q_dim 96), llama3 scaling",
       tiny_config(64, 3, 1, 32, 3, 96, 288, true, true)},
      {"tiny-long", "4 layers, hidden 128, 8 heads / 2 kv heads, llama3 scaling, tied",
       tiny_config(128, 8, 2, 16, 4, 256, 512, true, true)},
      {"tiny-256",
       "2 layers, hidden 256, 4 heads / 2 kv heads, ffn 512, untied: every matrix whole K-quant "
       "super-blocks",
       tiny_config(256, 4, 2, 64, 2, 512, 320, false, true)},
      {"llama-3.2-1b",
       "Llama 3.2 1B shapes: 16 layers, hidden 2048, 32 heads / 8 kv heads, vocab 128256",
       llama32_config(2048, 32, 64, 16)},
      {"llama-3.2-3b",
       "Llama 3.2 3B shapes: 28 layers, hidden 3072, 24 heads / 8 kv heads, vocab 128256",
       llama32_config(3072, 24, 128, 28)},
  };
  return presets;
}

const ModelPreset& find_preset(const std::string& name) {
  std::string names;
  for (const ModelPreset& preset : model_presets()) {
    if (preset.name == name) return preset;
    names += " " + preset.name;
  }
  EDGELM_FAIL("[make_model] unknown preset '", name, "'; presets:", names);
}

std::string make_model(const MakeModelOptions& options) {
  const ModelPreset& preset = find_preset(options.preset);
  EDGELM_CHECK(!options.out_dir.empty(), "[make_model] no output folder given");
  if (options.format == "hf") {
    if (options.quant != DType::F32 && options.quant != DType::F16 &&
        options.quant != DType::BF16) {
      EDGELM_FAIL("[make_model] --quant ", dtype_name(options.quant),
                  ": safetensors folders hold f32, f16 or bf16; use --format gguf for "
                  "q8_0/q4_0/q4_1/q5_0/q5_1/q4_k/q5_k/q6_k");
    }
    EDGELM_CHECK(!options.embedding_quant, "[make_model] a token embedding of its own type is for ",
                 "GGUF files only");
  } else if (options.format == "gguf") {
    EDGELM_CHECK(
        !options.k_quant_mix || options.quant == DType::Q4_K || options.quant == DType::Q5_K,
        "[make_model] the medium mix is for q4_k and q5_k (q4_k_m, q5_k_m)");
    for (const DType dtype : {options.quant, options.embedding_quant.value_or(options.quant)}) {
      if (dtype_row_group(dtype) != 1 || dtype == DType::I32)
        EDGELM_FAIL("[make_model] --quant ", dtype_name(dtype), " is not a weight type of files");
    }
  } else {
    EDGELM_FAIL("[make_model] --format '", options.format, "' must be hf or gguf");
  }
  std::error_code error;
  std::filesystem::create_directories(options.out_dir, error);
  if (error)
    EDGELM_FAIL("[make_model] ", options.out_dir, ": cannot create folder: ", error.message());
  return options.format == "hf" ? write_hf(preset, options) : write_gguf(preset, options);
}

}  // namespace edgelm
