#include "models/tokenizer/loaders.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "models/gguf.h"
#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/pipeline.h"
#include "models/tokenizer/pre_tokenizer_names.h"

namespace edgelm::tokenizer {
namespace {

// tokenizer.ggml.token_type values.
enum GgufTokenType : int64_t {
  kGgufNormal = 1,
  kGgufUnknown = 2,
  kGgufControl = 3,
  kGgufUserDefined = 4,
  kGgufUnused = 5,
  kGgufByte = 6,
};

// What llama.cpp reads as "no token" in a u32 *_token_id key (its -1 as an unsigned value).
constexpr int64_t kGgufNoToken = 0xffffffff;

}  // namespace

std::shared_ptr<Tokenizer::Impl> load_gguf(const GgufFile& file, const TokenizerOptions& options) {
  auto impl = std::make_shared<Tokenizer::Impl>();
  impl->source = file.path();
  auto fail = [&](auto&&... args) -> void {
    EDGELM_FAIL("[tokenizer] ", file.path(), ": ", args...);
  };
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama") {
    fail("tokenizer.ggml.model '", model, "' is not supported (supported: gpt2, llama)");
  }
  std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) fail("tokenizer.ggml.tokens is empty");
  std::vector<int64_t> types(tokens.size(), kGgufNormal);
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    types = file.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != tokens.size()) {
      fail("tokenizer.ggml.token_type has ", types.size(), " entries for ", tokens.size(),
           " tokens");
    }
  }
  for (size_t id = 0; id < types.size(); ++id) {
    if (types[id] < kGgufNormal || types[id] > kGgufByte) {
      fail("tokenizer.ggml.token_type[", id, "] = ", types[id],
           " is not a token type (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, "
           "6 byte)");
    }
  }
  impl->vocab.texts = std::move(tokens);
  impl->largest_id_source = str_cat("tokenizer.ggml.tokens[", impl->vocab.texts.size() - 1, "]");
  impl->vocab.flags.assign(impl->vocab.texts.size(), 0);
  const auto n = static_cast<int32_t>(impl->vocab.texts.size());
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = impl->vocab.texts[static_cast<size_t>(id)];
    if (impl->vocab.ids.find(text) == kNone) impl->vocab.ids.set(text, id);
    // Control and user-defined tokens are found in text before the model runs, like the added
    // tokens of a tokenizer.json; control tokens are the special ones.
    const int64_t type = types[static_cast<size_t>(id)];
    if ((type == kGgufControl || type == kGgufUserDefined) && !text.empty()) {
      AddedToken token;
      token.id = id;
      token.content = text;
      token.special = type == kGgufControl;
      impl->added.add(std::move(token), AddedTokens::Pass::Raw);
    }
  }
  // Every special id (bos, eos, eot, eom, unknown, padding, separator, mask, fim_*, ...), read
  // here or not: a bad one is a broken file even where edgelm does not use that key, and its
  // users (the config's EOS list, a chat template's stop ids) would otherwise meet it later.
  for (const auto& [key, value] : file.metadata()) {
    if (!key.starts_with("tokenizer.ggml.") || !key.ends_with("_token_id")) continue;
    const std::optional<int64_t> id = value.as_int();
    if (!id) fail(key, " is a ", value.type_string(), ", not a token id");
    if (*id == kGgufNoToken) continue;
    if (*id < 0 || *id >= n) {
      fail(key, " = ", *id, " is outside the vocabulary of ", n,
           " tokens (GGUF ids are unsigned; 4294967295 means none)");
    }
  }
  auto optional_id = [&](const char* key) -> std::optional<int32_t> {
    const auto value = file.find_int(key);
    if (!value || *value == kGgufNoToken) return std::nullopt;
    return static_cast<int32_t>(*value);  // in range: checked above
  };
  impl->post_processor.bos = optional_id("tokenizer.ggml.bos_token_id");
  const std::optional<int32_t> eos = optional_id("tokenizer.ggml.eos_token_id");
  if (impl->post_processor.bos && file.find_bool("tokenizer.ggml.add_bos_token").value_or(true)) {
    impl->post_processor.prefix_ids.push_back(*impl->post_processor.bos);
  }
  if (eos && file.find_bool("tokenizer.ggml.add_eos_token").value_or(false)) {
    impl->post_processor.suffix_ids.push_back(*eos);
  }

  if (model == "gpt2") {
    BpeModel& bpe = impl->model.emplace<BpeModel>();
    // A file without the key is treated as llama.cpp treats it: "default".
    const std::string pre = file.find_string("tokenizer.ggml.pre").value_or("default");
    const NamedPreTokenizer* named = find_named_pre_tokenizer(pre);
    if (named == nullptr) {
      const std::string known = known_pre_tokenizer_names();
      if (!options.allow_unknown_pre_tokenizer) {
        fail("tokenizer.ggml.pre '", pre, "' is not a known pre-tokenizer (known: ", known,
             "); allow_unknown_pre_tokenizer (--allow-unknown-pre-tokenizer) would use llama-bpe's "
             "instead, with a warning");
      }
      log_warn("[tokenizer] ", file.path(), ": tokenizer.ggml.pre '", pre,
               "' is not a known pre-tokenizer; using llama-bpe's, so ids may differ from the "
               "model's own tokenizer (known: ",
               known, ")");
      named = find_named_pre_tokenizer("llama-bpe");
    }
    for (const PreStepSpec& spec : named->steps) {
      impl->pre_tokenizer.add_step(spec, str_cat("[tokenizer] pre-tokenizer '", pre, "'"));
    }
    bpe.ignore_merges = named->ignore_merges;
    impl->nfc = named->nfc;
    for (int32_t id = 0; id < n; ++id) {
      if (auto bytes = byte_level_to_bytes(impl->vocab.texts[static_cast<size_t>(id)])) {
        if (bpe.word_ids.find(*bytes) == kNone) bpe.word_ids.set(*bytes, id);
        bpe.max_token_bytes = std::max(bpe.max_token_bytes, bytes->size());
        if (bytes->size() == 1 && bpe.byte_ids[static_cast<unsigned char>((*bytes)[0])] == kNone) {
          bpe.byte_ids[static_cast<unsigned char>((*bytes)[0])] = id;
        }
      }
    }
    const std::vector<std::string> merges = file.get_string_array("tokenizer.ggml.merges");
    bpe.merges.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& line = merges[rank];
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        fail("tokenizer.ggml.merges[", rank, "] '", line,
             "' is not two tokens separated by a space");
      }
      const std::string left = line.substr(0, space), right = line.substr(space + 1);
      const int32_t left_id = impl->vocab.ids.find(left);
      const int32_t right_id = impl->vocab.ids.find(right);
      const int32_t merged_id = impl->vocab.ids.find(left + right);
      if (left_id == kNone || right_id == kNone || merged_id == kNone) {
        fail("tokenizer.ggml.merges[", rank, "] '", line,
             "' names a token not in tokenizer.ggml.tokens");
      }
      bpe.merges.set(left_id, right_id, {static_cast<int32_t>(rank), merged_id});
    }
  } else {
    SentencePieceModel& sentencepiece = impl->model.emplace<SentencePieceModel>();
    const std::vector<double> scores = file.get_float_array("tokenizer.ggml.scores");
    if (scores.size() != impl->vocab.texts.size()) {
      fail("tokenizer.ggml.scores has ", scores.size(), " entries for ", n, " tokens");
    }
    sentencepiece.scores.assign(scores.begin(), scores.end());
    sentencepiece.add_space_prefix =
        file.find_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    for (int32_t id = 0; id < n; ++id) {
      const std::string& text = impl->vocab.texts[static_cast<size_t>(id)];
      const int64_t type = types[static_cast<size_t>(id)];
      if (type == kGgufByte) {
        if (text.size() != 6 || !text.starts_with("<0x") || text.back() != '>' ||
            !std::isxdigit(static_cast<unsigned char>(text[3])) ||
            !std::isxdigit(static_cast<unsigned char>(text[4]))) {
          fail("byte token ", id, " is '", text, "', not <0xNN>");
        }
        impl->vocab.flags[static_cast<size_t>(id)] |= tokenizer::kByte;
        sentencepiece.fallback_ids[static_cast<size_t>(std::stoi(text.substr(3, 2), nullptr, 16))] =
            id;
      } else if (type == kGgufNormal || type == kGgufUserDefined) {
        // Merges may produce only these: SentencePiece never makes a control, unknown or unused
        // piece out of text.
        if (sentencepiece.piece_ids.find(text) == kNone) sentencepiece.piece_ids.set(text, id);
      } else if (type == kGgufUnknown) {
        if (sentencepiece.unk_id == kNone) sentencepiece.unk_id = id;
        impl->vocab.flags[static_cast<size_t>(id)] |= tokenizer::kSpecial;
      }
    }
    if (auto unk = optional_id("tokenizer.ggml.unknown_token_id")) sentencepiece.unk_id = *unk;
  }
  impl->finish_loading();
  return impl;
}

}  // namespace edgelm::tokenizer
