#include "models/tokenizer/loaders.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "models/tokenizer/byte_level.h"
#include "models/tokenizer/pipeline.h"
#include "models/tokenizer/pre_tokenizer.h"

namespace edgelm::tokenizer {
namespace {

using nlohmann::json;

// Typed access to the fields of a tokenizer.json, failing with "[tokenizer] <path>: <where><key>
// ..." so that every error names the file and the field. `where` is a field path ending in '.'.
class JsonSource {
 public:
  explicit JsonSource(std::string path) : path_(std::move(path)) {}

  // Throws edgelm::Error "[tokenizer] <path>: <args...>".
  template <class... Args>
  [[noreturn]] void fail(Args&&... args) const {
    EDGELM_FAIL("[tokenizer] ", path_, ": ", std::forward<Args>(args)...);
  }
  // object[key]; fails when it is missing.
  const json& require(const json& object, const std::string& key, const std::string& where) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(where, key, " is missing");
    return *it;
  }
  // object[key] as a string; fails when it is missing or not a string.
  std::string string_field(const json& object, const std::string& key,
                           const std::string& where) const {
    const json& value = require(object, key, where);
    if (!value.is_string()) fail(where, key, " is not a string");
    return value.get<std::string>();
  }
  // object[key] as a bool, `fallback` when it is missing or null.
  bool bool_field(const json& object, const std::string& key, const std::string& where,
                  bool fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(where, key, " is not true or false");
    return it->get<bool>();
  }
  // `value` as a token id; `what` names it in the error.
  int32_t id_value(const json& value, const std::string& what) const {
    if (!value.is_number_integer()) fail(what, " is not an integer id");
    const int64_t id = value.get<int64_t>();
    // 2^24 ids is far above any vocabulary and keeps vocab-sized tables sane.
    if (id < 0 || id >= (int64_t{1} << 24)) fail(what, " = ", id, " is not a valid id");
    return static_cast<int32_t>(id);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// `where` is a field path ending in '.' ("pre_tokenizer."), or empty for the top level.
std::string field_name(const std::string& where) {
  return where.empty() ? "the top level" : where.substr(0, where.size() - 1);
}

std::string type_of(const JsonSource& source, const json& object, const std::string& where) {
  if (!object.is_object()) source.fail(field_name(where), " is not an object");
  return source.string_field(object, "type", where);
}

// Escapes a literal so that PCRE2 matches it as written.
std::string regex_literal(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c != '\0' && std::strchr("\\^$.|?*+()[]{}", c) != nullptr) out += '\\';
    out += c;
  }
  return out;
}

void parse_pre_tokenizer(const JsonSource& source, const json& value,
                         tokenizer::PreTokenizer& pre_tokenizer) {
  if (value.is_null()) {
    source.fail("pre_tokenizer is null; a byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  std::vector<std::pair<std::string, const json*>> list;
  const std::string type = type_of(source, value, "pre_tokenizer.");
  if (type == "Sequence") {
    const json& inner = source.require(value, "pretokenizers", "pre_tokenizer.");
    if (!inner.is_array()) source.fail("pre_tokenizer.pretokenizers is not an array");
    for (size_t i = 0; i < inner.size(); ++i) {
      list.emplace_back(str_cat("pre_tokenizer.pretokenizers[", i, "]."), &inner[i]);
    }
  } else {
    list.emplace_back("pre_tokenizer.", &value);
  }
  using Type = PreStepSpec::Type;
  for (const auto& [where, item] : list) {
    const std::string item_type = type_of(source, *item, where);
    PreStepSpec spec{Type::Split};
    std::string regex;
    if (item_type == "Split") {
      const json& pattern = source.require(*item, "pattern", where);
      if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
        regex = pattern["Regex"].get<std::string>();
      } else if (pattern.is_object() && pattern.contains("String") &&
                 pattern["String"].is_string()) {
        regex = regex_literal(pattern["String"].get<std::string>());
      } else {
        source.fail(where, "pattern is neither {\"Regex\": ...} nor {\"String\": ...}");
      }
      const std::string behavior = source.string_field(*item, "behavior", where);
      if (behavior != "Isolated") {
        source.fail(where, "behavior '", behavior, "' is not supported (only Isolated)");
      }
      if (source.bool_field(*item, "invert", where, false)) {
        source.fail(where, "invert: true is not supported");
      }
      spec.pattern = regex.c_str();
    } else if (item_type == "ByteLevel") {
      if (pre_tokenizer.has_byte_level()) {
        source.fail(where, "a second ByteLevel step is not supported");
      }
      // ByteLevel's defaults in `tokenizers`: add_prefix_space and use_regex both true.
      spec = {Type::ByteLevel, nullptr, source.bool_field(*item, "use_regex", where, true)};
      spec.add_prefix_space = source.bool_field(*item, "add_prefix_space", where, true);
    } else if (item_type == "Digits") {
      spec = {Type::Digits, nullptr, source.bool_field(*item, "individual_digits", where, false)};
    } else if (item_type == "Punctuation") {
      const auto behavior = item->find("behavior");
      const std::string name = behavior == item->end() || behavior->is_null()
                                   ? "Isolated"
                                   : source.string_field(*item, "behavior", where);
      if (name != "Isolated" && name != "Contiguous") {
        source.fail(where, "behavior '", name, "' is not supported (Isolated, Contiguous)");
      }
      spec = {Type::Punctuation, nullptr, name == "Contiguous"};
    } else {
      source.fail(where, "type '", item_type,
                  "' is not supported (supported: Split with a regex, ByteLevel, Digits, "
                  "Punctuation)");
    }
    pre_tokenizer.add_step(spec, str_cat("[tokenizer] ", source.path(), ": ", where, "pattern"));
  }
  if (!pre_tokenizer.has_byte_level())
    source.fail("pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
}

void parse_post_processor(const JsonSource& source, const json& value, Tokenizer::Impl& impl) {
  if (value.is_null()) return;
  std::vector<std::pair<std::string, const json*>> list;
  const std::string type = type_of(source, value, "post_processor.");
  if (type == "Sequence") {
    const json& inner = source.require(value, "processors", "post_processor.");
    if (!inner.is_array()) source.fail("post_processor.processors is not an array");
    for (size_t i = 0; i < inner.size(); ++i) {
      list.emplace_back(str_cat("post_processor.processors[", i, "]."), &inner[i]);
    }
  } else {
    list.emplace_back("post_processor.", &value);
  }
  for (const auto& [where, item] : list) {
    const std::string item_type = type_of(source, *item, where);
    if (item_type == "ByteLevel") continue;  // only adjusts offsets, which edgelm does not report
    if (item_type != "TemplateProcessing") {
      source.fail(where, "type '", item_type,
                  "' is not supported (supported: TemplateProcessing, ByteLevel)");
    }
    const json& single = source.require(*item, "single", where);
    const json& specials = source.require(*item, "special_tokens", where);
    if (!single.is_array()) source.fail(where, "single is not an array");
    bool after_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string piece_where = str_cat(where, "single[", i, "]");
      const json& piece = single[i];
      if (piece.is_object() && piece.contains("Sequence")) {
        after_sequence = true;
        continue;
      }
      if (!piece.is_object() || !piece.contains("SpecialToken") ||
          !piece["SpecialToken"].is_object()) {
        source.fail(piece_where, " is neither a SpecialToken nor a Sequence");
      }
      const std::string name = source.string_field(piece["SpecialToken"], "id", piece_where + ".");
      const auto entry = specials.find(name);
      if (entry == specials.end() || !entry->is_object() || !entry->contains("ids") ||
          !(*entry)["ids"].is_array()) {
        source.fail(where, "special_tokens has no ids for '", name, "'");
      }
      for (const json& id_value : (*entry)["ids"]) {
        const int32_t id =
            source.id_value(id_value, str_cat(where, "special_tokens['", name, "']"));
        (after_sequence ? impl.post_processor.suffix_ids : impl.post_processor.prefix_ids)
            .push_back(id);
      }
    }
  }
  if (!impl.post_processor.prefix_ids.empty()) {
    impl.post_processor.bos = impl.post_processor.prefix_ids.front();
  }
}

void check_decoder(const JsonSource& source, const json& value) {
  if (value.is_null()) source.fail("decoder is null; a byte-level BPE needs the ByteLevel decoder");
  const std::string type = type_of(source, value, "decoder.");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const json& inner = source.require(value, "decoders", "decoder.");
    if (inner.is_array() && inner.size() == 1 &&
        type_of(source, inner[0], "decoder.decoders[0].") == "ByteLevel") {
      return;
    }
  }
  source.fail("decoder type '", type, "' is not supported (only ByteLevel)");
}

std::shared_ptr<Tokenizer::Impl> parse(const JsonSource& source, const json& root) {
  auto impl = std::make_shared<Tokenizer::Impl>();
  BpeModel& bpe = impl->model.emplace<BpeModel>();
  impl->source = source.path();
  if (!root.is_object()) source.fail("not a tokenizer.json (the top level is not an object)");

  const json& model = source.require(root, "model", "");
  if (!model.is_object()) source.fail("model is not an object");
  std::string model_type;
  if (model.contains("type")) {
    model_type = source.string_field(model, "type", "model.");
  } else if (model.contains("merges")) {
    model_type = "BPE";  // older files leave the type out; `tokenizers` recognises BPE by merges
  } else {
    source.fail("model.type is missing");
  }
  if (model_type != "BPE") {
    source.fail("model.type '", model_type, "' is not supported (only BPE)");
  }
  const json& vocab = source.require(model, "vocab", "model.");
  if (!vocab.is_object()) source.fail("model.vocab is not an object of token → id");
  const json& merges = source.require(model, "merges", "model.");
  if (!merges.is_array()) source.fail("model.merges is not an array");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0)) {
    source.fail("model.dropout is not supported (encoding would be random)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() &&
        !(model[key].is_string() && model[key].get<std::string>().empty())) {
      source.fail("model.", key, " is not supported");
    }
  }
  bpe.ignore_merges = source.bool_field(model, "ignore_merges", "model.", false);
  bpe.fuse_unk = source.bool_field(model, "fuse_unk", "model.", false);
  bpe.byte_fallback = source.bool_field(model, "byte_fallback", "model.", false);

  // Vocabulary: the model's tokens, then the added tokens (which may reuse model ids).
  int32_t max_id = -1;
  std::string max_id_source;  // the field that gives max_id
  auto note_id = [&](int32_t id, std::string source_field) {
    if (id > max_id) {
      max_id = id;
      max_id_source = std::move(source_field);
    }
  };
  std::vector<std::pair<std::string, int32_t>> model_tokens;
  model_tokens.reserve(vocab.size());
  StringIdMap model_ids;  // stored text → id, model vocabulary only (what merges refer to)
  for (const auto& [text, id_value] : vocab.items()) {
    const std::string field = str_cat("model.vocab['", text, "']");
    const int32_t id = source.id_value(id_value, field);
    model_tokens.emplace_back(text, id);
    model_ids.set(text, id);
    note_id(id, field);
  }
  // id → its model token: two tokens with one id would encode to an id that decodes to the other.
  std::vector<const std::string*> model_text_of(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [text, id] : model_tokens) {
    const std::string*& owner = model_text_of[static_cast<size_t>(id)];
    if (owner != nullptr) {
      source.fail("model.vocab['", text, "'] and model.vocab['", *owner, "'] have the same id ",
                  id);
    }
    owner = &text;
  }
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& list = root["added_tokens"];
    if (!list.is_array()) source.fail("added_tokens is not an array");
    std::unordered_map<int32_t, std::string> added_content;  // id → content, to find clashes
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = str_cat("added_tokens[", i, "].");
      if (!list[i].is_object()) source.fail(field_name(where), " is not an object");
      AddedToken token;
      token.id = source.id_value(source.require(list[i], "id", where), where + "id");
      token.content = source.string_field(list[i], "content", where);
      token.single_word = source.bool_field(list[i], "single_word", where, false);
      token.lstrip = source.bool_field(list[i], "lstrip", where, false);
      token.rstrip = source.bool_field(list[i], "rstrip", where, false);
      token.special = source.bool_field(list[i], "special", where, false);
      // With no normalizer, "normalized" tokens are found in a second pass (see AddedTokens).
      const bool normalized = source.bool_field(list[i], "normalized", where, !token.special);
      if (token.content.empty()) continue;  // `tokenizers` ignores them too
      // An added token that is also a model token keeps the model's id (`tokenizers` gives it
      // that one); one on another model token's id would make that token's id decode as the
      // added text.
      const int32_t model_id = model_ids.find(token.content);
      if (model_id != kNone && model_id != token.id) {
        source.fail(where, "id ", token.id, ": '", token.content, "' is model.vocab's id ",
                    model_id);
      }
      if (model_id == kNone && static_cast<size_t>(token.id) < model_text_of.size() &&
          model_text_of[static_cast<size_t>(token.id)] != nullptr) {
        source.fail(where, "id ", token.id, " of '", token.content, "' is model.vocab['",
                    *model_text_of[static_cast<size_t>(token.id)], "']");
      }
      const auto [earlier, first] = added_content.emplace(token.id, token.content);
      if (!first && earlier->second != token.content) {
        source.fail(where, "id ", token.id, " of '", token.content, "' is also the id of '",
                    earlier->second, "'");
      }
      note_id(token.id, where + "id");
      impl->added.add(std::move(token),
                      normalized ? AddedTokens::Pass::Normalized : AddedTokens::Pass::Raw);
    }
  }
  if (max_id < 0) source.fail("model.vocab is empty");
  impl->largest_id_source = max_id_source;
  impl->vocab.texts.resize(static_cast<size_t>(max_id) + 1);
  impl->vocab.flags.assign(impl->vocab.texts.size(), 0);
  for (const auto& [text, id] : model_tokens) {
    impl->vocab.texts[static_cast<size_t>(id)] = text;
    impl->vocab.ids.set(text, id);
    if (auto bytes = byte_level_to_bytes(text)) {
      bpe.word_ids.set(*bytes, id);
      bpe.max_token_bytes = std::max(bpe.max_token_bytes, bytes->size());
      if (bytes->size() == 1) bpe.byte_ids[static_cast<unsigned char>((*bytes)[0])] = id;
    }
    // A byte-fallback token <0xNN>; other texts of that shape are ordinary tokens.
    if (text.size() == 6 && text.starts_with("<0x") && text.back() == '>' &&
        std::isxdigit(static_cast<unsigned char>(text[3])) &&
        std::isxdigit(static_cast<unsigned char>(text[4]))) {
      const int value = std::stoi(text.substr(3, 2), nullptr, 16);
      bpe.fallback_ids[static_cast<size_t>(value & 0xFF)] = id;
    }
  }
  for (const AddedToken& token : impl->added.tokens()) {
    impl->vocab.texts[static_cast<size_t>(token.id)] = token.content;
    impl->vocab.ids.set(token.content, token.id);
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unk = source.string_field(model, "unk_token", "model.");
    bpe.unk_id = model_ids.find(unk);
    if (bpe.unk_id == kNone) source.fail("model.unk_token '", unk, "' is not in model.vocab");
  }

  // Merges: "a b" strings (older files) or ["a", "b"] pairs; rank = position in the list.
  bpe.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {
      const std::string& line = merge.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        source.fail("model.merges[", rank, "] '", line, "' is not two tokens separated by a space");
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      source.fail("model.merges[", rank, "] is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const std::string merged = left + right;
    const int32_t left_id = model_ids.find(left);
    const int32_t right_id = model_ids.find(right);
    const int32_t merged_id = model_ids.find(merged);
    const std::string& missing = left_id == kNone ? left : right_id == kNone ? right : merged;
    if (left_id == kNone || right_id == kNone || merged_id == kNone) {
      source.fail("model.merges[", rank, "]: token '", missing, "' is not in model.vocab");
    }
    bpe.merges.set(left_id, right_id, {static_cast<int32_t>(rank), merged_id});
  }

  if (root.contains("normalizer") && !root["normalizer"].is_null()) {
    const json& normalizer = root["normalizer"];
    const std::string type = type_of(source, normalizer, "normalizer.");
    const bool empty_sequence = type == "Sequence" && normalizer.contains("normalizers") &&
                                normalizer["normalizers"].is_array() &&
                                normalizer["normalizers"].empty();
    if (type == "NFC") {
      impl->nfc = true;
    } else if (!empty_sequence) {
      source.fail("normalizer type '", type, "' is not supported (only null and NFC)");
    }
  }
  parse_pre_tokenizer(source, source.require(root, "pre_tokenizer", ""), impl->pre_tokenizer);
  if (root.contains("post_processor")) parse_post_processor(source, root["post_processor"], *impl);
  check_decoder(source, source.require(root, "decoder", ""));
  for (int32_t id : impl->post_processor.prefix_ids) {
    if (id >= impl->vocab.size())
      source.fail("post_processor: id ", id, " is outside the vocabulary");
  }
  for (int32_t id : impl->post_processor.suffix_ids) {
    if (id >= impl->vocab.size())
      source.fail("post_processor: id ", id, " is outside the vocabulary");
  }
  impl->finish_loading();
  return impl;
}

}  // namespace

std::shared_ptr<Tokenizer::Impl> load_hf_json(const std::string& path) {
  const JsonSource source(path);
  const std::shared_ptr<MappedFile> file = MappedFile::open(path);
  if (file->size() == 0) source.fail("the file is empty");
  json root;
  try {
    root = json::parse(file->data(), file->data() + file->size());
  } catch (const json::exception& e) {
    source.fail("not valid JSON (", e.what(), ")");
  }
  try {
    return parse(source, root);
  } catch (const json::exception& e) {
    source.fail("unexpected structure (", e.what(), ")");
  }
}

}  // namespace edgelm::tokenizer
