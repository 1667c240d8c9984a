#include "models/chat.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "models/chat_format.h"
#include "models/gguf.h"
#include "models/tokenizer.h"

namespace edgelm {
namespace {

using nlohmann::json;

// ---- recognising a template text ----

// Substrings that identify a format, matched against the template text with double quotes turned
// into single quotes and the two characters `\n` into a newline, so that a template written with
// either kind of string literal matches. A row matches when it has all of `all_of` and none of
// `none_of`; the first row that matches wins, so the order matters: look-alikes that another
// renderer would get wrong are excluded before the general rows, and the more specific variants
// of a family come before the general one.
struct Recognizer {
  std::string_view format;
  std::array<std::string_view, 3> all_of;
  std::array<std::string_view, 4> none_of;
};

constexpr Recognizer kRecognizers[] = {
    // ChatML, but not Phi-4 (<|im_sep|>), GLM, or the thinking templates of Qwen3, QwQ and
    // SmolLM3, which write <think> blocks and metadata into the turns.
    // Qwen3's hybrid thinking template: replies' reasoning kept only after the last user
    // message, and the enable_thinking switch; not SmolLM3's, which adds metadata and /think.
    {"qwen3",
     {"last_query_index", "enable_thinking is false", "'<think>\n\n</think>\n\n'"},
     {"custom_instructions", "<|im_sep|>", "[gMASK]"}},
    {"chatml", {"<|im_start|>"}, {"<|im_sep|>", "<think>", "[gMASK]"}},
    {"llama3.2", {"<|start_header_id|>", "Cutting Knowledge Date:", "strftime_now"}},
    {"llama3.1", {"<|start_header_id|>", "Cutting Knowledge Date:"}},
    // Meta's first Llama 3 templates; function-calling fine-tunes (functionary, firefunction)
    // write more than the turns.
    {"llama3", {"<|start_header_id|>", "add_generation_prompt"}, {"function"}},
    {"llama3-always-prompt", {"<|start_header_id|>"}, {"add_generation_prompt", "function"}},
    // Meta's Llama 2; not the fine-tunes with a default system message or other spacing.
    {"llama2",
     {"<<SYS>>", "bos_token + '[INST] ' + content.strip() + ' [/INST]'"},
     {"system_message = '"}},
    {"mistral-v7", {"[SYSTEM_PROMPT] '", "'[INST] '"}, {"default_system_message"}},
    {"mistral-v7-tekken", {"[SYSTEM_PROMPT]'", "'[INST]'"}, {"default_system_message"}},
    {"mistral-v3", {"'[INST] ' + system_message", "loop.last and system_message is defined"}},
    {"mistral-v3-tekken", {"'[INST]' + system_message", "loop.last and system_message is defined"}},
    {"mistral-v1", {"' [INST] ' + system_message", "loop.first and system_message is defined"}},
    {"mistral-v0.1",
     {"'[INST] ' + message['content'] + ' [/INST]'", "eos_token + ' '",
      "Only user and assistant roles are supported!"}},
    {"mixtral-v0.1",
     {"'[INST] ' + message['content'] + ' [/INST]'",
      "Only user and assistant roles are supported!"}},
    {"gemma3", {"<start_of_turn>", "first_user_prefix"}},
    {"gemma", {"<start_of_turn>", "System role not supported"}},
    // Phi-3-medium writes the assistant header after each user message and has no generation
    // prompt; Phi-3.5 leaves out an empty system message.
    {"phi3-medium", {"<|user|>", "'<|end|>' + '\n' + '<|assistant|>'"}, {"add_generation_prompt"}},
    {"phi3.5", {"<|user|>", "<|end|>", "'system' and message['content']"}},
    {"phi3", {"<|user|>", "<|end|>", "add_generation_prompt"}},
    {"zephyr", {"'<|user|>\n' + message['content'] + eos_token"}},
    // DeepSeek-R1-0528 and V3.1 place the generation prompt and thinking differently.
    {"deepseek-r1",
     {"<｜User｜>", "<｜Assistant｜><think>", "</think>"},
     {"is_first_sp", "is_last_user", "thinking"}},
    {"deepseek-v3", {"<｜User｜>", "is_first_sp"}, {"</think>", "is_last_user", "thinking"}},
    {"deepseek", {"'User: ' + message['content'] + '\n\n'", "'Assistant:'"}},
    // Command R7B and Command A write reasoning and response markers.
    {"command-r",
     {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"},
     {"<|START_RESPONSE|>", "<|START_THINKING|>"}},
};

std::string normalized_for_matching(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') {
      out += '\'';
    } else if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

const ChatFormat* recognise(std::string_view text) {
  const std::string normalized = normalized_for_matching(text);
  for (const Recognizer& recognizer : kRecognizers) {
    const auto present = [&](std::string_view part) {
      return !part.empty() && contains(normalized, part);
    };
    const bool all =
        std::all_of(recognizer.all_of.begin(), recognizer.all_of.end(),
                    [&](std::string_view part) { return part.empty() || present(part); });
    const bool none = std::none_of(recognizer.none_of.begin(), recognizer.none_of.end(), present);
    if (all && none) return find_chat_format(recognizer.format);
  }
  return nullptr;
}

// The value of the Jinja string literal whose opening quote is at text[quote]: Python's escapes
// for newline, tab, carriage return, backslash and quotes are resolved, others kept as written.
std::string string_literal_at(std::string_view text, size_t quote) {
  const char delimiter = text[quote];
  std::string value;
  for (size_t i = quote + 1; i < text.size() && text[i] != delimiter; ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      value += text[i];
      continue;
    }
    const char escaped = text[++i];
    switch (escaped) {
      case 'n':
        value += '\n';
        break;
      case 't':
        value += '\t';
        break;
      case 'r':
        value += '\r';
        break;
      case '\\':
      case '\'':
      case '"':
        value += escaped;
        break;
      default:
        value += '\\';
        value += escaped;
    }
  }
  return value;
}

// The text that starts at text[at]: the value of the string literal it is in when a quote comes
// just before it, else the template's literal text up to the next tag.
std::string text_at(std::string_view text, size_t at) {
  if (at > 0 && (text[at - 1] == '\'' || text[at - 1] == '"')) {
    return string_literal_at(text, at - 1);
  }
  return std::string(text.substr(at, text.find('{', at) - at));
}

// A ChatML template's default system message: the text of a literal that writes a whole system
// turn, "<|im_start|>system\n...<|im_end|>", as SmolLM2's and Qwen2.5's do when the conversation
// has no system message. Empty when there is none.
std::string chatml_default_system(std::string_view text) {
  constexpr std::string_view kOpen = "<|im_start|>system\n";
  for (size_t at = text.find("<|im_start|>system"); at != std::string_view::npos;
       at = text.find("<|im_start|>system", at + 1)) {
    const std::string literal = text_at(text, at);
    if (!literal.starts_with(kOpen)) continue;
    const size_t end = literal.find("<|im_end|>");
    if (end == std::string::npos || end == kOpen.size()) continue;
    return literal.substr(kOpen.size(), end - kOpen.size());
  }
  return {};
}

// The rest of the line after `label` in the literal (or text) that holds it; empty when absent.
std::string line_after(std::string_view text, std::string_view label) {
  const size_t at = text.find(label);
  if (at == std::string_view::npos) return {};
  size_t start = at;  // the start of the literal that holds the label
  while (start > 0 && text[start - 1] != '\'' && text[start - 1] != '"' && text[start - 1] != '}') {
    --start;
  }
  const std::string literal = text_at(text, start);
  const size_t label_at = literal.find(label);
  if (label_at == std::string::npos) return {};
  const std::string rest = literal.substr(label_at + label.size());
  return rest.substr(0, rest.find('\n'));
}

// The value assigned by `{% set date_string = "..." %}`; empty when absent.
std::string default_date(std::string_view text) {
  constexpr std::string_view kSet = "set date_string = ";
  const size_t at = text.find(kSet);
  if (at == std::string_view::npos) return {};
  const size_t quote = at + kSet.size();
  if (quote >= text.size() || (text[quote] != '"' && text[quote] != '\'')) return {};
  return string_literal_at(text, quote);
}

// Today's local date as Python's strftime("%d %b %Y") writes it in the C locale: "05 Mar 2026".
std::string todays_date() {
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char day[3];
  std::snprintf(day, sizeof day, "%02d", local.tm_mday);
  return str_cat(day, ' ', kMonths[local.tm_mon], ' ', 1900 + local.tm_year);
}

// One line for an error message: the start of the text, with line breaks shown as \n.
std::string excerpt(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < 60; ++i) {
    out += text[i] == '\n' ? std::string("\\n") : std::string(1, text[i]);
  }
  return out.size() < text.size() ? out + "..." : out;
}

// What a model folder or GGUF file says about its chat template.
struct ModelChatData {
  std::string source;   // the file and key the template comes from
  std::string text;     // empty when the model has no template
  std::string missing;  // then: where it was looked for
  std::string bos, eos;
};

// tokenizer_config.json's bos_token/eos_token: a string, an AddedToken object, or null.
std::string token_field(const json& config, const char* key, const std::string& path) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  EDGELM_FAIL("[chat] ", path, ": field '", key, "' must be a string or an object with 'content'");
}

ModelChatData read_hf_folder(const std::filesystem::path& dir) {
  ModelChatData data;
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  std::error_code error;
  json config = json::object();
  if (std::filesystem::exists(config_path, error)) {
    const std::string text = read_regular_file(config_path.string());
    try {
      config = json::parse(text);
    } catch (const json::exception& e) {
      EDGELM_FAIL("[chat] ", config_path.string(), ": malformed JSON: ", e.what());
    }
    data.bos = token_field(config, "bos_token", config_path.string());
    data.eos = token_field(config, "eos_token", config_path.string());
  }
  // As in transformers, a chat_template.jinja file takes precedence over the config's field.
  const std::filesystem::path jinja_path = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja_path, error)) {
    data.source = jinja_path.string();
    data.text = read_regular_file(jinja_path.string());
    return data;
  }
  data.source = config_path.string() + " chat_template";
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    data.missing = "no chat_template.jinja, and no chat_template in tokenizer_config.json";
    return data;
  }
  if (it->is_string()) {
    data.text = it->get<std::string>();
    return data;
  }
  if (!it->is_array()) {
    EDGELM_FAIL("[chat] ", config_path.string(),
                ": field 'chat_template' must be a string or a list of {name, template}");
  }
  std::string names;
  for (const json& entry : *it) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string()) {
      EDGELM_FAIL("[chat] ", config_path.string(),
                  ": field 'chat_template': each entry must be {\"name\": ..., \"template\": ...}");
    }
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") {
      data.text = entry["template"].get<std::string>();
      return data;
    }
    names += names.empty() ? name : ", " + name;
  }
  EDGELM_FAIL("[chat] ", config_path.string(), ": field 'chat_template' has no \"default\" entry (",
              names.empty() ? std::string("none") : names, ")");
}

// The text of token `key`'s id in tokenizer.ggml.tokens; empty when the key is absent.
std::string gguf_token_text(const GgufFile& file, const std::string& key) {
  const std::optional<int64_t> id = file.find_int(key);
  if (!id) return {};
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  const auto* array = tokens != nullptr ? tokens->get_if<GgufArray>() : nullptr;
  const auto* strings =
      array != nullptr ? std::get_if<std::vector<std::string>>(&array->values) : nullptr;
  if (strings == nullptr || *id < 0 || static_cast<size_t>(*id) >= strings->size()) {
    EDGELM_FAIL("[chat] ", file.path(), ": ", key, " ", *id,
                " is not an index of tokenizer.ggml.tokens");
  }
  return (*strings)[static_cast<size_t>(*id)];
}

ModelChatData read_model(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_directory(path, error)) return read_hf_folder(path);
  if (!fs::exists(path, error)) EDGELM_FAIL("[chat] ", path, ": no such file or folder");
  {
    const std::shared_ptr<MappedFile> file = MappedFile::open(path);
    if (file->size() < 4 || std::memcmp(file->data(), "GGUF", 4) != 0) {
      EDGELM_FAIL("[chat] ", path, ": not a model folder or a GGUF file");
    }
  }
  const GgufFile file = GgufFile::open(path);
  ModelChatData data;
  data.source = path + " tokenizer.chat_template";
  data.text = file.find_string("tokenizer.chat_template").value_or("");
  data.missing = "no tokenizer.chat_template";
  data.bos = gguf_token_text(file, "tokenizer.ggml.bos_token_id");
  data.eos = gguf_token_text(file, "tokenizer.ggml.eos_token_id");
  return data;
}

constexpr std::string_view kNameHint =
    "name a format with --chat-template NAME (--list-chat-templates lists them)";

}  // namespace

// ---- ChatTemplate ----

ChatTemplate ChatTemplate::by_name(std::string_view name, std::string bos, std::string eos) {
  const ChatFormat* format = find_chat_format(name);
  if (format == nullptr) {
    std::string names;
    for (const std::string& known : chat_template_names())
      names += (names.empty() ? "" : ", ") + known;
    EDGELM_FAIL("[chat] unknown chat template '", name, "' (known: ", names, ")");
  }
  ChatTemplate chat;
  chat.format_ = format;
  chat.bos_ = std::move(bos);
  chat.eos_ = std::move(eos);
  chat.write_bos_ = format->bos;
  chat.knowledge_cutoff_ = format->knowledge_cutoff;
  chat.date_ = format->date.empty() ? todays_date() : std::string(format->date);
  return chat;
}

ChatTemplate ChatTemplate::from_text(std::string_view text, std::string bos, std::string eos,
                                     std::string_view source) {
  const ChatFormat* format = recognise(text);
  if (format == nullptr) {
    EDGELM_FAIL("[chat] ", source, ": not a chat template edgelm recognises ('", excerpt(text),
                "', ", text.size(), " bytes); ", kNameHint);
  }
  ChatTemplate chat = by_name(format->name, std::move(bos), std::move(eos));
  // Where the family varies in it, the text decides whether BOS comes first.
  if (format->name == "chatml" || format->name.starts_with("gemma") ||
      format->name.starts_with("phi3")) {
    chat.write_bos_ = contains(text, "bos_token");
  }
  if (format->name == "chatml") chat.default_system_ = chatml_default_system(text);
  if (format->system_rule == SystemRule::FirstTurnAlways) {  // Llama 3.1 and 3.2
    if (std::string cutoff = line_after(text, "Cutting Knowledge Date: "); !cutoff.empty()) {
      chat.knowledge_cutoff_ = std::move(cutoff);
    }
    if (format->date.empty() || contains(text, "strftime_now")) {
      chat.date_ = todays_date();
    } else if (std::string date = default_date(text); !date.empty()) {
      chat.date_ = std::move(date);
    }
  }
  return chat;
}

ChatTemplate ChatTemplate::from_model_path(const std::string& path, std::string_view name) {
  ModelChatData data = read_model(path);
  if (!name.empty()) return by_name(name, std::move(data.bos), std::move(data.eos));
  if (data.text.empty()) {
    EDGELM_FAIL("[chat] ", path, ": the model carries no chat template (", data.missing, "); ",
                kNameHint);
  }
  return from_text(data.text, std::move(data.bos), std::move(data.eos), data.source);
}

std::string_view ChatTemplate::name() const {
  return format_->name;
}

bool ChatTemplate::has_thinking_switch() const {
  return !format_->generation_prompt_no_thinking.empty();
}

void ChatTemplate::set_thinking(bool enabled) {
  if (!enabled && !has_thinking_switch()) {
    EDGELM_FAIL("[chat] ", format_->name,
                ": the template has no thinking switch (enable_thinking); only qwen3's has one");
  }
  thinking_ = enabled;
}

bool ChatTemplate::prefix_stable() const {
  return format_->prefix_stable;
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) const {
  const ChatTokens tokens{.bos = bos_,
                          .eos = eos_,
                          .knowledge_cutoff = knowledge_cutoff_,
                          .date = date_,
                          .default_system = default_system_,
                          .write_bos = write_bos_,
                          .thinking = thinking_};
  return render_chat_format(*format_, tokens, messages, add_generation_prompt);
}

std::vector<std::string> ChatTemplate::end_of_turn_texts() const {
  std::vector<std::string> texts;
  std::istringstream words{std::string(format_->end_of_turn)};
  for (std::string word; words >> word;) {
    std::string text = word == "{eos}" ? eos_ : word;
    if (!text.empty() && std::find(texts.begin(), texts.end(), text) == texts.end()) {
      texts.push_back(std::move(text));
    }
  }
  return texts;
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (const ChatFormat& format : chat_formats()) names.emplace_back(format.name);
  return names;
}

std::vector<int32_t> chat_stop_ids(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                   std::span<const int32_t> eos_ids) {
  std::vector<int32_t> ids;
  auto add = [&](int32_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (int32_t id : eos_ids) add(id);
  for (const std::string& text : chat.end_of_turn_texts()) {
    if (const auto id = tokenizer.token_id(text)) add(*id);
  }
  return ids;
}

// ---- ChatSession ----

ChatSession::ChatSession(ChatTemplate chat, std::string system)
    : chat_(std::move(chat)), system_(std::move(system)) {
  clear();
}

void ChatSession::clear() {
  messages_.clear();
  if (!system_.empty()) messages_.push_back({"system", system_});
  rendered_.clear();
  replied_ = false;
}

std::string ChatSession::system_prefix() const {
  const std::string& system = !system_.empty() ? system_ : chat_.default_system();
  if (system.empty()) return {};
  // A private-use character as the user's message: no template strips or rewrites it.
  constexpr std::string_view kUser = "\xEE\x80\x80";
  const std::vector<ChatMessage> first_turn = {{"system", system}, {"user", std::string(kUser)}};
  std::string whole;
  try {
    whole = chat_.render(first_turn, true);
  } catch (const Error&) {
    return {};  // a template that takes no system message
  }
  const size_t user = whole.find(kUser);
  const size_t at = whole.find(system);
  if (user == std::string::npos || at == std::string::npos || at + system.size() > user) return {};
  // The system message rendered alone, with the text that closes it, where that starts the turn.
  try {
    const std::string alone = chat_.render(std::vector<ChatMessage>{{"system", system}}, false);
    if (whole.starts_with(alone) && alone.find(system) != std::string::npos) return alone;
  } catch (const Error&) {
  }
  // Otherwise up to the end of its content (Llama 2 and Gemma write it inside the first user
  // turn), unless later renderings move it (Mistral v3 writes it into the last user turn).
  if (!chat_.prefix_stable()) return {};
  return whole.substr(0, at + system.size());
}

ChatSession::Feed ChatSession::add_user(std::string content) {
  std::vector<ChatMessage> messages = messages_;
  messages.push_back({"user", std::move(content)});
  std::string rendered = chat_.render(messages, true);
  Feed feed;
  if (rendered_.empty()) {
    feed.text = rendered;
  } else if (std::optional<std::string> rest = continuation(messages, rendered)) {
    feed.text = std::move(*rest);
  } else {
    feed.text = rendered;
    feed.from_scratch = true;
  }
  messages_ = std::move(messages);
  rendered_ = std::move(rendered);
  replied_ = false;
  return feed;
}

std::optional<std::string> ChatSession::continuation(const std::vector<ChatMessage>& messages,
                                                     const std::string& rendered) const {
  const std::string_view whole = rendered;
  if (!replied_) {
    if (!whole.starts_with(rendered_)) return std::nullopt;
    return std::string(whole.substr(rendered_.size()));
  }
  // Where the reply sits in the new rendering: render it once more with a marker for its content
  // (a private-use character, which no template strips or rewrites).
  constexpr std::string_view kMarker = "\xEE\x80\x80reply\xEE\x80\x80";
  const size_t reply = messages.size() - 2;
  std::vector<ChatMessage> marked = messages;
  marked[reply].content = kMarker;
  const std::string with_marker = chat_.render(marked, true);
  const size_t at = with_marker.find(kMarker);
  if (at == std::string::npos) return std::nullopt;  // the template left the reply out
  const std::string_view before = std::string_view(with_marker).substr(0, at);
  const std::string_view after = std::string_view(with_marker).substr(at + kMarker.size());
  // What was fed before still starts the rendering, up to the whitespace before the content.
  if (!before.starts_with(rendered_) || !python_strip(before.substr(rendered_.size())).empty()) {
    return std::nullopt;
  }
  // The reply is rendered as generated, up to whitespace around it.
  if (whole.size() < before.size() + after.size() || !whole.starts_with(before) ||
      !whole.ends_with(after)) {
    return std::nullopt;
  }
  const std::string_view shown =
      whole.substr(before.size(), whole.size() - before.size() - after.size());
  if (python_strip(shown) != python_strip(messages[reply].content)) return std::nullopt;
  return std::string(after);
}

void ChatSession::add_reply(std::string text) {
  messages_.push_back({"assistant", std::move(text)});
  replied_ = true;
}

}  // namespace edgelm
