// libFuzzer target: the chat-template renderer. The input is NUL-separated fields: the template
// text, the BOS text, the EOS text, then (role, content) pairs. The text goes through
// ChatTemplate::from_text (recognition); when no format recognises it, the format at an index
// picked from the input is taken by name instead, so that the messages are rendered either way:
// ChatTemplate::render with and without the generation prompt, and a ChatSession fed the user
// messages and the assistant replies in order (its prefix bookkeeping and system_prefix()).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "models/chat.h"

namespace {

std::vector<std::string> split_fields(std::string_view text) {
  std::vector<std::string> fields;
  while (true) {
    const size_t nul = text.find('\0');
    fields.emplace_back(text.substr(0, nul));
    if (nul == std::string_view::npos) return fields;
    text.remove_prefix(nul + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelm;
  const std::string_view input = fuzz::as_text(data, size);
  std::vector<std::string> fields = split_fields(input);
  fields.resize(std::max<size_t>(fields.size(), 3));
  std::vector<ChatMessage> messages;
  for (size_t i = 3; i + 1 < fields.size(); i += 2) messages.push_back({fields[i], fields[i + 1]});

  std::optional<ChatTemplate> chat;
  fuzz::expect_edgelm_errors_only(
      input, [&] { chat = ChatTemplate::from_text(fields[0], fields[1], fields[2]); });
  if (!chat) {
    static const std::vector<std::string> names = chat_template_names();
    chat = ChatTemplate::by_name(names[size % names.size()], fields[1], fields[2]);
  }
  chat->set_date("27 Nov 2026");  // rendering must not depend on the day the fuzzer runs
  chat->end_of_turn_texts();
  fuzz::expect_edgelm_errors_only(input,
                                  [&] { chat->render(messages, /*add_generation_prompt=*/true); });
  fuzz::expect_edgelm_errors_only(input,
                                  [&] { chat->render(messages, /*add_generation_prompt=*/false); });
  fuzz::expect_edgelm_errors_only(input, [&] {
    std::string system;
    if (!messages.empty() && messages.front().role == "system") system = messages.front().content;
    ChatSession session(*chat, system);
    session.system_prefix();
    for (const ChatMessage& message : messages) {
      if (message.role == "user") session.add_user(message.content);
      if (message.role == "assistant") session.add_reply(message.content);
    }
  });
  return 0;
}
