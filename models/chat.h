// Chat templates: the prompt format a model was trained on, read from the model (GGUF
// tokenizer.chat_template; a Hugging Face folder's tokenizer_config.json or chat_template.jinja),
// recognised by its family and rendered exactly as transformers' apply_chat_template renders it
// (Jinja with trim_blocks and lstrip_blocks), with the tokens that end an assistant turn.
//
//   ChatTemplate chat = ChatTemplate::from_model_path("SmolLM2-135M-Instruct.gguf");
//   std::string prompt = chat.render({{"user", "What is the capital of France?"}}, true);
//   std::vector<int32_t> ids = tokenizer.encode(prompt, /*add_bos=*/false);
//   std::vector<int32_t> stop = chat_stop_ids(tokenizer, chat, config.eos_token_ids);
//
// The template writes the BOS token itself where it has one (`{{ bos_token }}`), so the rendered
// text is encoded with add_bos = false, as apply_chat_template(tokenize=True) does. A plain
// encode() parses special tokens written inside a message's content as special tokens, as
// apply_chat_template does by default; docs/tokenizer.md lists the families, the detection rules
// and what is rendered exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace edgelm {

class Tokenizer;
struct ChatFormat;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", or another role the template knows
  std::string content;
};

// A chat template: one of the formats of chat_template_names(), plus what the model's template
// text fixes (its BOS and EOS token texts, a default system message, the knowledge-cutoff and
// date lines). Cheap to copy.
class ChatTemplate {
 public:
  // The template the model carries: a .gguf file (tokenizer.chat_template, BOS and EOS texts from
  // tokenizer.ggml.bos/eos_token_id) or a Hugging Face folder (chat_template.jinja, else
  // tokenizer_config.json's chat_template: a string, or a list of {name, template} of which
  // "default" is taken; bos_token and eos_token from tokenizer_config.json). Throws edgelm::Error
  // "[chat] <file>: ..." when the model has no template, or one that no format recognises. With
  // `name`, that format instead (see by_name), with the model's BOS and EOS texts; the model then
  // need not carry a template.
  static ChatTemplate from_model_path(const std::string& path, std::string_view name = {});
  // Recognises `text` (see docs/tokenizer.md for the rules); `bos` and `eos` are the texts of the
  // model's BOS and EOS tokens, which the template writes as bos_token and eos_token. `source`
  // names where the text came from, for the error message when it is not recognised.
  static ChatTemplate from_text(std::string_view text, std::string bos, std::string eos,
                                std::string_view source = "chat template");
  // A format by name (one of chat_template_names()), with the given BOS and EOS texts; no default
  // system message; Llama 3.1's date lines use the template's fixed "26 Jul 2024" and Llama 3.2's
  // today's date. Throws edgelm::Error for an unknown name, listing the known ones.
  static ChatTemplate by_name(std::string_view name, std::string bos, std::string eos);

  // The format's name ("chatml", "llama3.2", "mistral-v7", ...).
  std::string_view name() const;
  // The whole conversation as the template renders it, with the assistant header that starts the
  // model's reply when add_generation_prompt is true (templates without one ignore the flag).
  // Throws edgelm::Error "[chat] <name>: ..." for an empty conversation, a message with an empty
  // role, a role this renderer does not implement (tool calls), and, with the template's own
  // message, a conversation the template refuses (a system message Gemma 2 does not take, roles
  // that do not alternate).
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;
  // The texts of the tokens that end an assistant turn (<|im_end|>, <|eot_id|>, the EOS text for
  // templates that close turns with eos_token, ...).
  std::vector<std::string> end_of_turn_texts() const;
  // The default system message the template adds when the conversation has none; empty if none.
  const std::string& default_system() const { return default_system_; }
  // The "Today Date" that Llama 3.1-style templates write; formatted "%d %b %Y" ("27 Nov 2026").
  // Set by from_model_path/from_text/by_name (today's local date where the template reads the
  // clock); override it for reproducible prompts, as transformers' date_string argument does.
  void set_date(std::string date) { date_ = std::move(date); }
  const std::string& date() const { return date_; }
  // Whether the template has a thinking switch (Qwen3's enable_thinking).
  bool has_thinking_switch() const;
  // enable_thinking: false writes the generation prompt with an empty reasoning block, so that
  // the model answers without thinking first (Qwen3's "non-thinking mode"). Throws edgelm::Error
  // "[chat] <name>: ..." for false when the template has no such switch. True by default, as the
  // template's own default.
  void set_thinking(bool enabled);
  bool thinking() const { return thinking_; }
  // True when rendering a conversation that grew by messages at its end extends the earlier
  // rendering (plus the reply as generated). False for formats that move or drop earlier text:
  // Mistral v3 (the system message goes with the last user message), DeepSeek-R1 (earlier replies
  // and Qwen3 lose their reasoning). ChatSession checks the prefix either way.
  bool prefix_stable() const;

 private:
  ChatTemplate() = default;
  const ChatFormat* format_ = nullptr;
  std::string bos_, eos_;
  std::string default_system_;
  std::string knowledge_cutoff_;
  std::string date_;
  bool write_bos_ = false;
  bool thinking_ = true;
};

// The names by_name() accepts, in a stable order (for --list-chat-templates).
std::vector<std::string> chat_template_names();

// Ids that end an assistant turn: `eos_ids` (from generation_config.json, config.json or the GGUF
// eos/eot keys, as LlamaConfig::eos_token_ids holds them), then each of the template's
// end_of_turn_texts() that is one token of the vocabulary. No duplicates, in that order.
std::vector<int32_t> chat_stop_ids(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                   std::span<const int32_t> eos_ids);

// A conversation whose rendering a KV cache holds, turn by turn. Each add_user() renders the whole
// conversation (earlier replies included) and returns only what the cache lacks: the rendering
// after the last reply. That is valid when the rendering fed before still starts the new one and
// the template renders the reply as it was generated, up to whitespace around it (which the
// model's tokens already hold in their own way: a space DeepSeek's "Assistant: " puts before the
// content, a newline Llama 3's `trim` removes). Otherwise (a format that is not prefix-stable, a
// reply the template rewrites) the whole rendering is returned with from_scratch set, to prefill
// into an emptied cache.
class ChatSession {
 public:
  explicit ChatSession(ChatTemplate chat, std::string system = {});

  struct Feed {
    std::string text;           // to encode (add_bos = false) and prefill
    bool from_scratch = false;  // the caller must empty the KV cache first
  };
  // Adds a user message; the text to feed before generating the reply. Throws edgelm::Error as
  // ChatTemplate::render does (the session is then unchanged).
  Feed add_user(std::string content);
  // Records the reply generated after the last feed: the text of the tokens that went into the
  // cache (decoded without skipping special tokens; the stop token, which is sampled but not fed,
  // excluded).
  void add_reply(std::string text);
  // Forgets the conversation (the system message stays); the caller empties the KV cache.
  void clear();
  // The start of the first feed up to the end of the system message (the explicit one, else the
  // template's default), so that a caller can tell which cached positions hold the system prompt,
  // e.g. to protect them from eviction: the system message rendered alone with the text that
  // closes it where that starts the first turn (ChatML, Llama 3), else the first turn up to the end
  // of the message's content (Llama 2 and Gemma write it inside the first user turn). Empty when
  // there is no system message, the template refuses one, or later turns move it (Mistral v3
  // writes it into the last user turn).
  std::string system_prefix() const;

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const ChatTemplate& chat_template() const { return chat_; }

 private:
  // The text to feed after rendered_ and the reply, when `rendered` continues them.
  std::optional<std::string> continuation(const std::vector<ChatMessage>& messages,
                                          const std::string& rendered) const;

  ChatTemplate chat_;
  std::string system_;
  std::vector<ChatMessage> messages_;
  std::string rendered_;  // the conversation as rendered at the last add_user()
  bool replied_ = false;  // a reply followed it
};

}  // namespace edgelm
