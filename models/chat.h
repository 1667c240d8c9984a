// Chat prompts in the Llama 3 instruct format, and the ids that end an assistant turn.
//
//   <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>
//   <|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|>
//   <|start_header_id|>assistant<|end_header_id|>\n\n
//
// (one string, no line breaks between the pieces), as Meta's chat_template for Llama 3 writes it:
// each message's content is trimmed of leading and trailing whitespace (the template's `| trim`).
// The rendered text starts with <|begin_of_text|>, so encode it with add_bos = false. Special
// tokens written inside a message's content are parsed as special tokens by a plain encode(), as
// with transformers' apply_chat_template; see docs/tokenizer.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace edgelm {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", or any other header name ("ipython")
  std::string content;
};

// The whole conversation, with <|begin_of_text|> first. With add_generation_prompt, the header of
// an assistant turn follows, for the model to write the reply. Throws edgelm::Error "[chat] ..."
// for a message with an empty role.
std::string render_llama3_chat(std::span<const ChatMessage> messages,
                               bool add_generation_prompt = true);

// Only what to append to a KV cache that holds an earlier render_llama3_chat(..., true) followed
// by the tokens the model generated for the reply: the <|eot_id|> that closes that reply (unless
// close_assistant_turn is false, for a cache that already took the stop token), then
// `new_messages` and, with add_generation_prompt, the next assistant header. Then
//   render_llama3_chat(history + [assistant reply] + new_messages)
//     == render_llama3_chat(history) + reply + render_llama3_continuation(new_messages)
// for a reply without surrounding whitespace.
std::string render_llama3_continuation(std::span<const ChatMessage> new_messages,
                                       bool add_generation_prompt = true,
                                       bool close_assistant_turn = true);

// Ids that end an assistant turn: `eos_ids` (from generation_config.json, config.json or the GGUF
// eos/eot keys, as LlamaConfig::eos_token_ids holds them), plus <|eot_id|> and <|eom_id|> when the
// vocabulary has them. No duplicates, in that order.
std::vector<int32_t> chat_stop_ids(const Tokenizer& tokenizer, std::span<const int32_t> eos_ids);

}  // namespace edgelm
