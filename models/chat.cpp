#include "models/chat.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "models/tokenizer.h"

namespace edgelm {
namespace {

// What Python's str.isspace() accepts (Jinja's `trim` is str.strip()): Unicode White_Space plus
// the information separators U+001C..U+001F.
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

std::string_view trim(std::string_view text) {
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

void append_message(std::string& out, const ChatMessage& message, size_t index) {
  if (message.role.empty()) EDGELM_FAIL("[chat] message ", index, " has an empty role");
  out += "<|start_header_id|>";
  out += message.role;
  out += "<|end_header_id|>\n\n";
  out += trim(message.content);
  out += "<|eot_id|>";
}

constexpr std::string_view kAssistantHeader = "<|start_header_id|>assistant<|end_header_id|>\n\n";

}  // namespace

std::string render_llama3_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out = "<|begin_of_text|>";
  for (size_t i = 0; i < messages.size(); ++i) append_message(out, messages[i], i);
  if (add_generation_prompt) out += kAssistantHeader;
  return out;
}

std::string render_llama3_continuation(std::span<const ChatMessage> new_messages,
                                       bool add_generation_prompt, bool close_assistant_turn) {
  std::string out = close_assistant_turn ? "<|eot_id|>" : "";
  for (size_t i = 0; i < new_messages.size(); ++i) append_message(out, new_messages[i], i);
  if (add_generation_prompt) out += kAssistantHeader;
  return out;
}

std::vector<int32_t> chat_stop_ids(const Tokenizer& tokenizer, std::span<const int32_t> eos_ids) {
  std::vector<int32_t> ids;
  auto add = [&](int32_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (int32_t id : eos_ids) add(id);
  for (const char* name : {"<|eot_id|>", "<|eom_id|>"}) {
    if (const auto id = tokenizer.token_id(name)) add(*id);
  }
  return ids;
}

}  // namespace edgelm
