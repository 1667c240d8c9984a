#include "models/chat_format.h"

#include <array>

#include "core/error.h"

namespace edgelm {
namespace {

// ---- rows, each under the models that carry its template ----

constexpr std::string_view kAlternate =
    "Conversation roles must alternate user/assistant/user/assistant/...";
constexpr std::string_view kAlternateAfterSystem =
    "After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...";
constexpr std::string_view kMistralRoles =
    "Only user and assistant roles are supported, with the exception of an initial optional "
    "system message!";

constexpr TurnStyle kLlama3Turn = {"<|start_header_id|>{role}<|end_header_id|>\n\n", "<|eot_id|>",
                                   true};
constexpr TurnStyle kChatmlTurn = {"<|im_start|>{role}\n", "<|im_end|>\n"};
constexpr TurnStyle kGemmaTurn = {"<start_of_turn>{role}\n", "<end_of_turn>\n", true};
constexpr TurnStyle kPhi3Turn = {"<|{role}|>\n", "<|end|>\n"};
constexpr TurnStyle kSkip = {"", "", false, RoleAction::Skip};

// Meta-Llama-3-8B/70B-Instruct
constexpr ChatFormat kLlama3{
    .name = "llama3",
    .bos = true,
    .system = kLlama3Turn,
    .user = kLlama3Turn,
    .assistant = kLlama3Turn,
    .other = kLlama3Turn,
    .generation_prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n",
    .end_of_turn = "<|eot_id|> <|eom_id|>",
};

constexpr ChatFormat with_generation_prompt_always(ChatFormat format, std::string_view name) {
  format.name = name;
  format.generation_prompt_always = true;
  return format;
}

// Llama-3.1-8B/70B/405B-Instruct, Llama-3.3-70B-Instruct
constexpr ChatFormat kLlama31{
    .name = "llama3.1",
    .bos = true,
    .system = {"<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
               "{cutoff}\nToday Date: {date}\n\n",
               "<|eot_id|>", true},
    .user = kLlama3Turn,
    .assistant = kLlama3Turn,
    .other = kLlama3Turn,
    .system_rule = SystemRule::FirstTurnAlways,
    .unsupported_roles = "tool ipython",
    .generation_prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n",
    .end_of_turn = "<|eot_id|> <|eom_id|>",
    .knowledge_cutoff = "December 2023",
    .date = "26 Jul 2024",
};

constexpr ChatFormat with_todays_date(ChatFormat format, std::string_view name) {
  format.name = name;
  format.date = "";
  return format;
}

// SmolLM2-Instruct, Qwen2/2.5-Instruct, OpenHermes-2.5, Dolphin, Hermes
constexpr ChatFormat kChatml{
    .name = "chatml",
    .system = kChatmlTurn,
    .user = kChatmlTurn,
    .assistant = kChatmlTurn,
    // Generic ChatML templates write any role; Qwen's skip unknown roles and rewrite tool
    // messages. Other roles are refused rather than rendered one way for all.
    .other = {"", "", false, RoleAction::Unsupported},
    .generation_prompt = "<|im_start|>assistant\n",
    .end_of_turn = "<|im_end|>",
};

// Llama-2-7b/13b/70b-chat
constexpr ChatFormat kLlama2{
    .name = "llama2",
    .user = {"{bos}[INST] ", " [/INST]", true},
    .assistant = {" ", " {eos}", true},
    .other = kSkip,
    .system_rule = SystemRule::FoldFirst,
    .system_fold = "<<SYS>>\n{system}\n<</SYS>>\n\n",
    .fold_before_strip = true,
    .alternation_error = kAlternate,
    .end_of_turn = "{eos}",
};

constexpr TurnStyle kMistralV0Refuse = {"", "", false, RoleAction::Refuse,
                                        "Only user and assistant roles are supported!"};

// Mistral-7B-Instruct-v0.1
constexpr ChatFormat kMistralV01{
    .name = "mistral-v0.1",
    .bos = true,
    .system = kMistralV0Refuse,
    .user = {"[INST] ", " [/INST]"},
    .assistant = {"", "{eos} "},
    .other = kMistralV0Refuse,
    .alternation_error = kAlternate,
    .end_of_turn = "{eos}",
};

// Mixtral-8x7B-Instruct-v0.1, Mistral-7B-Instruct-v0.2 (first releases)
constexpr ChatFormat kMixtralV01{
    .name = "mixtral-v0.1",
    .bos = true,
    .system = kMistralV0Refuse,
    .user = {"[INST] ", " [/INST]"},
    .assistant = {"", "{eos}"},
    .other = kMistralV0Refuse,
    .alternation_error = kAlternate,
    .end_of_turn = "{eos}",
};

// Mixtral-8x7B-Instruct-v0.1, Mistral-7B-Instruct-v0.2 (with a system message)
constexpr ChatFormat kMistralV1{
    .name = "mistral-v1",
    .bos = true,
    .user = {" [INST] ", " [/INST]"},
    .assistant = {" ", "{eos}"},
    .other = {"", "", false, RoleAction::Refuse, kMistralRoles},
    .system_rule = SystemRule::FoldFirst,
    .system_fold = "{system}\n\n",
    .alternation_error = kAlternateAfterSystem,
    .end_of_turn = "{eos}",
};

// Mistral-7B-Instruct-v0.3, Mistral-Large-Instruct-2407
constexpr ChatFormat kMistralV3{
    .name = "mistral-v3",
    .bos = true,
    .user = {"[INST] ", "[/INST]"},
    .assistant = {" ", "{eos}", true},
    .other = {"", "", false, RoleAction::Refuse, kMistralRoles},
    .system_rule = SystemRule::FoldLast,
    .system_fold = "{system}\n\n",
    .alternation_error = kAlternateAfterSystem,
    .unsupported_roles = "tool tool_results",
    .end_of_turn = "{eos}",
    .prefix_stable = false,
};

// Mistral-Nemo-Instruct-2407
constexpr ChatFormat kMistralV3Tekken{
    .name = "mistral-v3-tekken",
    .bos = true,
    .user = {"[INST]", "[/INST]"},
    .assistant = {"", "{eos}"},
    .other = {"", "", false, RoleAction::Refuse, kMistralRoles},
    .system_rule = SystemRule::FoldLast,
    .system_fold = "{system}\n\n",
    .alternation_error = kAlternateAfterSystem,
    .unsupported_roles = "tool tool_results",
    .end_of_turn = "{eos}",
    .prefix_stable = false,
};

constexpr TurnStyle kMistralV7Refuse = {"", "", false, RoleAction::Refuse,
                                        "Only user, system and assistant roles are supported!"};

// Mistral-Large-Instruct-2411
constexpr ChatFormat kMistralV7{
    .name = "mistral-v7",
    .bos = true,
    .system = {"[SYSTEM_PROMPT] ", "[/SYSTEM_PROMPT]"},
    .user = {"[INST] ", "[/INST]"},
    .assistant = {" ", "{eos}"},
    .other = kMistralV7Refuse,
    .end_of_turn = "{eos}",
};

// Mistral-Small-24B-Instruct-2501
constexpr ChatFormat kMistralV7Tekken{
    .name = "mistral-v7-tekken",
    .bos = true,
    .system = {"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"},
    .user = {"[INST]", "[/INST]"},
    .assistant = {"", "{eos}"},
    .other = kMistralV7Refuse,
    .end_of_turn = "{eos}",
};

// gemma-7b-it, gemma-2-2b/9b/27b-it
constexpr ChatFormat kGemma{
    .name = "gemma",
    .bos = true,
    .user = kGemmaTurn,
    .assistant = {"<start_of_turn>model\n", "<end_of_turn>\n", true},
    .other = kGemmaTurn,
    .system_rule = SystemRule::Refuse,
    .system_error = "System role not supported",
    .alternation_error = kAlternate,
    .generation_prompt = "<start_of_turn>model\n",
    .end_of_turn = "<end_of_turn>",
};

// gemma-3-270m/1b/4b/12b/27b-it
constexpr ChatFormat kGemma3{
    .name = "gemma3",
    .bos = true,
    .user = kGemmaTurn,
    .assistant = {"<start_of_turn>model\n", "<end_of_turn>\n", true},
    .other = kGemmaTurn,
    .system_rule = SystemRule::FoldFirst,
    .system_fold = "{system}\n\n",
    .alternation_error = kAlternate,
    .generation_prompt = "<start_of_turn>model\n",
    .end_of_turn = "<end_of_turn>",
};

// Phi-3-mini-4k/128k-instruct
constexpr ChatFormat kPhi3{
    .name = "phi3",
    .system = kPhi3Turn,
    .user = kPhi3Turn,
    .assistant = kPhi3Turn,
    .other = kSkip,
    .generation_prompt = "<|assistant|>\n",
    .without_generation_prompt = "{eos}",
    .end_of_turn = "<|end|>",
};

constexpr ChatFormat with_empty_system_skipped(ChatFormat format, std::string_view name) {
  format.name = name;
  format.system_rule = SystemRule::TurnIfNonEmpty;
  return format;
}

// Phi-3-medium-4k/128k-instruct
constexpr ChatFormat kPhi3Medium{
    .name = "phi3-medium",
    .system = kSkip,
    .user = {"<|user|>\n", "<|end|>\n<|assistant|>\n"},
    .assistant = {"", "<|end|>\n"},
    .other = kSkip,
    .end_of_turn = "<|end|>",
};

constexpr TurnStyle kZephyrTurn = {"<|{role}|>\n", "{eos}\n"};

// zephyr-7b-beta, TinyLlama-1.1B-Chat-v1.0
constexpr ChatFormat kZephyr{
    .name = "zephyr",
    .system = kZephyrTurn,
    .user = kZephyrTurn,
    .assistant = kZephyrTurn,
    .other = kSkip,
    .generation_prompt = "<|assistant|>\n",
    .end_of_turn = "{eos}",
};

// deepseek-llm-7b/67b-chat, DeepSeek-V2(-Lite)-Chat
constexpr ChatFormat kDeepseek{
    .name = "deepseek",
    .bos = true,
    .system = {"", "\n\n"},
    .user = {"User: ", "\n\n"},
    .assistant = {"Assistant: ", "{eos}"},
    .other = kSkip,
    .generation_prompt = "Assistant:",
    .end_of_turn = "{eos}",
};

// DeepSeek-V3
constexpr ChatFormat kDeepseekV3{
    .name = "deepseek-v3",
    .bos = true,
    .user = {"<｜User｜>", ""},
    .assistant = {"<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
    .other = kSkip,
    .system_rule = SystemRule::LeadingJoined,
    .unsupported_roles = "tool",
    .generation_prompt = "<｜Assistant｜>",
    .end_of_turn = "<｜end▁of▁sentence｜>",
};

// DeepSeek-R1, DeepSeek-R1-Distill-Llama/Qwen
constexpr ChatFormat kDeepseekR1{
    .name = "deepseek-r1",
    .bos = true,
    .user = {"<｜User｜>", ""},
    .assistant = {"<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
    .other = kSkip,
    .system_rule = SystemRule::Leading,
    .unsupported_roles = "tool",
    .reasoning = Reasoning::Drop,
    .generation_prompt = "<｜Assistant｜><think>\n",
    .end_of_turn = "<｜end▁of▁sentence｜>",
    .prefix_stable = false,
};

// Qwen3-0.6B ... 32B, Qwen3-30B-A3B (the hybrid thinking models): ChatML turns without a default
// system message, other roles skipped, replies' reasoning written only after the last user
// message, and the enable_thinking switch.
constexpr ChatFormat kQwen3{
    .name = "qwen3",
    .system = kChatmlTurn,
    .user = kChatmlTurn,
    .assistant = kChatmlTurn,
    .other = kSkip,
    .unsupported_roles = "tool",
    .reasoning = Reasoning::ThinkAfterLastQuery,
    .generation_prompt = "<|im_start|>assistant\n",
    .generation_prompt_no_thinking = "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    .end_of_turn = "<|im_end|>",
    .prefix_stable = false,
};

// c4ai-command-r-v01, c4ai-command-r-plus, aya-23, aya-expanse
constexpr ChatFormat kCommandR{
    .name = "command-r",
    .bos = true,
    .system = {"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
    .user = {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>", true},
    .assistant = {"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", true},
    .other = kSkip,
    .system_rule = SystemRule::FirstTurn,
    .alternation_error = kAlternate,
    .generation_prompt = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    .end_of_turn = "<|END_OF_TURN_TOKEN|>",
};

constexpr std::array kFormats = {
    kLlama3,
    // Meta-Llama-3-8B-Instruct's first template (dolphin-2.9-llama3-8b keeps it)
    with_generation_prompt_always(kLlama3, "llama3-always-prompt"),
    kLlama31,
    // Llama-3.2-1B/3B-Instruct
    with_todays_date(kLlama31, "llama3.2"),
    kChatml,
    kQwen3,
    kLlama2,
    kMistralV01,
    kMixtralV01,
    kMistralV1,
    kMistralV3,
    kMistralV3Tekken,
    kMistralV7,
    kMistralV7Tekken,
    kGemma,
    kGemma3,
    kPhi3,
    // Phi-3.5-mini-instruct
    with_empty_system_skipped(kPhi3, "phi3.5"),
    kPhi3Medium,
    kZephyr,
    kDeepseek,
    kDeepseekV3,
    kDeepseekR1,
    kCommandR,
};

// ---- rendering ----

// What Python's str.isspace() accepts: Unicode White_Space plus the information separators
// U+001C..U+001F.
bool is_python_space(uint32_t code) {
  return (code >= 0x09 && code <= 0x0D) || (code >= 0x1C && code <= 0x20) || code == 0x85 ||
         code == 0xA0 || code == 0x1680 || (code >= 0x2000 && code <= 0x200A) || code == 0x2028 ||
         code == 0x2029 || code == 0x202F || code == 0x205F || code == 0x3000;
}

// Decodes the character of valid UTF-8 starting at text[i]; returns 0xFFFD (not a space) for
// bytes that do not start one, which leaves them in place.
uint32_t char_at(std::string_view text, size_t i, size_t& length) {
  const auto lead = static_cast<unsigned char>(text[i]);
  length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (lead >= 0x80 && (lead < 0xC2 || lead > 0xF4 || i + length > text.size())) {
    length = 1;
    return 0xFFFD;
  }
  uint32_t code = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    const auto byte = static_cast<unsigned char>(text[i + k]);
    if ((byte & 0xC0) != 0x80) {
      length = 1;
      return 0xFFFD;
    }
    code = (code << 6) | (byte & 0x3F);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length]) {  // an overlong form: not a character
    length = 1;
    return 0xFFFD;
  }
  return code;
}

// Python's str.lstrip('\n') (leading), str.rstrip('\n') (trailing), or both.
std::string_view strip_newlines(std::string_view text, bool leading, bool trailing) {
  while (leading && text.starts_with('\n')) text.remove_prefix(1);
  while (trailing && text.ends_with('\n')) text.remove_suffix(1);
  return text;
}

bool has_word(std::string_view words, std::string_view word) {
  while (!words.empty()) {
    const size_t space = words.find(' ');
    if (words.substr(0, space) == word) return true;
    if (space == std::string_view::npos) break;
    words.remove_prefix(space + 1);
  }
  return false;
}

class Renderer {
 public:
  Renderer(const ChatFormat& format, const ChatTokens& tokens) : format_(format), tokens_(tokens) {}

  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) {
    if (messages.empty()) fail("no messages to render");
    for (size_t i = 0; i < messages.size(); ++i) {
      if (messages[i].role.empty()) fail("message ", i, " has an empty role");
    }
    const bool first_is_system = messages.front().role == "system";
    const SystemRule rule = format_.system_rule;
    if (rule == SystemRule::Refuse && first_is_system) refuse(format_.system_error);
    if (tokens_.write_bos) out_ += tokens_.bos;

    // The messages the main loop walks, after an extracted system message.
    std::span<const ChatMessage> loop = messages;
    std::string_view system;  // the extracted system message
    const bool extracts = rule == SystemRule::FirstTurn || rule == SystemRule::FirstTurnAlways ||
                          rule == SystemRule::FoldFirst || rule == SystemRule::FoldLast;
    const bool extracted = extracts && first_is_system;
    if (extracted) {
      system = messages.front().content;
      loop = messages.subspan(1);
    }
    if ((rule == SystemRule::FirstTurn && extracted) || rule == SystemRule::FirstTurnAlways) {
      append_turn(format_.system, "system", system);
    }
    if (rule == SystemRule::Leading || rule == SystemRule::LeadingJoined) {
      out_ += leading_system(messages, rule == SystemRule::LeadingJoined);
    }
    if ((rule == SystemRule::Turn || rule == SystemRule::TurnIfNonEmpty) && !first_is_system &&
        !tokens_.default_system.empty()) {
      append_turn(format_.system, "system", tokens_.default_system);
    }

    // Qwen3's last query: the last user message that is not a tool response.
    const ChatMessage* last_query = messages.data() + messages.size() - 1;
    for (size_t i = messages.size(); i-- > 0;) {
      const std::string_view content = messages[i].content;
      if (messages[i].role == "user" &&
          !(content.starts_with("<tool_response>") && content.ends_with("</tool_response>"))) {
        last_query = messages.data() + i;
        break;
      }
    }

    for (size_t i = 0; i < loop.size(); ++i) {
      const ChatMessage& message = loop[i];
      if (!format_.alternation_error.empty() && (message.role == "user") != (i % 2 == 0)) {
        refuse(format_.alternation_error);
      }
      if (has_word(format_.unsupported_roles, message.role)) {
        fail("role '", message.role, "' is rendered specially by this template (tool calls), ",
             "which is not implemented");
      }
      if (message.role == "user") {
        std::string_view fold;
        if (extracted && rule == SystemRule::FoldFirst && i == 0) fold = format_.system_fold;
        if (extracted && rule == SystemRule::FoldLast && i + 1 == loop.size()) {
          fold = format_.system_fold;
        }
        append_user(message.content, fold, system);
      } else if (message.role == "assistant") {
        append_assistant(message.content, i + 1 == loop.size(), loop.data() + i > last_query);
      } else if (message.role == "system" && !extracts && rule != SystemRule::Refuse) {
        if (rule == SystemRule::Leading || rule == SystemRule::LeadingJoined) continue;
        if (rule == SystemRule::TurnIfNonEmpty && message.content.empty()) continue;
        append_turn(format_.system, "system", message.content);
      } else {
        append_turn(format_.other, message.role, message.content);
      }
    }

    if (add_generation_prompt && !tokens_.thinking &&
        !format_.generation_prompt_no_thinking.empty()) {
      append_expanded(format_.generation_prompt_no_thinking, "assistant");
    } else if (add_generation_prompt || format_.generation_prompt_always) {
      append_expanded(format_.generation_prompt, "assistant");
    } else {
      append_expanded(format_.without_generation_prompt, "assistant");
    }
    return std::move(out_);
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(Args&&... args) const {
    EDGELM_FAIL("[chat] ", format_.name, ": ", std::forward<Args>(args)...);
  }

  [[noreturn]] void refuse(std::string_view message) const {
    fail("the template refuses this conversation: ", message);
  }

  // Writes `pattern` with its placeholders filled in.
  void append_expanded(std::string_view pattern, std::string_view role) {
    while (!pattern.empty()) {
      const size_t open = pattern.find('{');
      out_ += pattern.substr(0, open);
      if (open == std::string_view::npos) return;
      const size_t close = pattern.find('}', open);
      const std::string_view name = pattern.substr(open + 1, close - open - 1);
      if (name == "role") {
        out_ += role;
      } else if (name == "bos") {
        out_ += tokens_.bos;
      } else if (name == "eos") {
        out_ += tokens_.eos;
      } else if (name == "cutoff") {
        out_ += tokens_.knowledge_cutoff;
      } else if (name == "date") {
        out_ += tokens_.date;
      } else {
        fail("unknown placeholder {", name, "}");  // a mistake in the table
      }
      pattern.remove_prefix(close + 1);
    }
  }

  void append_turn(const TurnStyle& style, std::string_view role, std::string_view content) {
    switch (style.action) {
      case RoleAction::Skip:
        return;
      case RoleAction::Refuse:
        refuse(style.error);
      case RoleAction::Unsupported:
        fail("role '", role, "' is not implemented");
      case RoleAction::Render:
        break;
    }
    append_expanded(style.prefix, role);
    out_ += style.strip ? python_strip(content) : content;
    append_expanded(style.suffix, role);
  }

  // An assistant message, its reasoning treated as the row says; `after_last_query`: it follows
  // the last user message that is not a tool response.
  void append_assistant(std::string_view content, bool last, bool after_last_query) {
    constexpr std::string_view kOpen = "<think>", kClose = "</think>";
    const size_t close = content.find(kClose);
    if (format_.reasoning == Reasoning::Keep) return append_turn(format_.assistant, "assistant", content);
    std::string_view reply = content;
    if (close != std::string_view::npos) reply = content.substr(content.rfind(kClose) + kClose.size());
    if (format_.reasoning == Reasoning::Drop) return append_turn(format_.assistant, "assistant", reply);
    // Reasoning::ThinkAfterLastQuery, as Qwen3's template splits the text.
    std::string_view reasoning;
    if (close != std::string_view::npos) {
      reply = strip_newlines(reply, true, false);
      reasoning = strip_newlines(content.substr(0, close), false, true);
      if (const size_t open = reasoning.rfind(kOpen); open != std::string_view::npos) {
        reasoning.remove_prefix(open + kOpen.size());
      }
      reasoning = strip_newlines(reasoning, true, false);
    }
    if (!after_last_query || (!last && reasoning.empty())) {
      return append_turn(format_.assistant, "assistant", reply);
    }
    append_turn(format_.assistant, "assistant",
                str_cat("<think>\n", strip_newlines(reasoning, true, true), "\n</think>\n\n",
                        strip_newlines(reply, true, false)));
  }

  // A user message, with the system message folded in front of it when `fold` is set.
  void append_user(std::string_view content, std::string_view fold, std::string_view system) {
    const TurnStyle& style = format_.user;
    if (fold.empty()) return append_turn(style, "user", content);
    std::string folded;
    const size_t at = fold.find("{system}");
    folded += fold.substr(0, at);
    folded += system;
    folded += fold.substr(at + 8);
    if (format_.fold_before_strip) {
      folded += content;
      return append_turn(style, "user", folded);
    }
    folded += style.strip ? python_strip(content) : content;
    append_turn(TurnStyle{style.prefix, style.suffix, false, style.action, style.error}, "user",
                folded);
  }

  // DeepSeek's system prompt: the last system message, or all of them joined by blank lines.
  static std::string leading_system(std::span<const ChatMessage> messages, bool joined) {
    std::string system;
    bool first = true;
    for (const ChatMessage& message : messages) {
      if (message.role != "system") continue;
      if (!joined) {
        system = message.content;
      } else {
        if (!first) system += "\n\n";
        system += message.content;
      }
      first = false;
    }
    return system;
  }

  const ChatFormat& format_;
  const ChatTokens& tokens_;
  std::string out_;
};

}  // namespace

std::span<const ChatFormat> chat_formats() {
  return kFormats;
}

const ChatFormat* find_chat_format(std::string_view name) {
  for (const ChatFormat& format : kFormats) {
    if (format.name == name) return &format;
  }
  return nullptr;
}

std::string render_chat_format(const ChatFormat& format, const ChatTokens& tokens,
                               std::span<const ChatMessage> messages, bool add_generation_prompt) {
  return Renderer(format, tokens).render(messages, add_generation_prompt);
}

std::string_view python_strip(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t length;
    if (!is_python_space(char_at(text, begin, length))) break;
    begin += length;
  }
  size_t end = begin;  // one past the last non-space character
  for (size_t i = begin; i < text.size();) {
    size_t length;
    const bool space = is_python_space(char_at(text, i, length));
    i += length;
    if (!space) end = i;
  }
  return text.substr(begin, end - begin);
}

}  // namespace edgelm
