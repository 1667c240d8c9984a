// The chat formats ChatTemplate renders: one table row per template variant that models carry,
// and the one renderer that interprets a row. Internal to models/chat.cpp and its tests; the
// public interface is models/chat.h.
//
// A row describes what the Jinja template does with each message: the text around its content
// (with {role}, {bos}, {eos}, {cutoff}, {date} filled in), whether the content is stripped (Jinja's
// `trim`, Python's str.strip()), what happens to the system message (its own turn, folded into a
// user message, refused, ...), whether roles must alternate, and the generation prompt.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "models/chat.h"

namespace edgelm {

// What a template does with a message of some role.
enum class RoleAction : uint8_t {
  Render,       // prefix + content + suffix
  Skip,         // writes nothing
  Refuse,       // raise_exception(TurnStyle::error)
  Unsupported,  // the template renders it in a way this renderer does not implement (tool calls)
};

struct TurnStyle {
  std::string_view prefix;
  std::string_view suffix;
  bool strip = false;  // the template strips the content (`| trim`, `.strip()`)
  RoleAction action = RoleAction::Render;
  std::string_view error;  // the template's message, for RoleAction::Refuse
};

// Where a system message goes.
enum class SystemRule : uint8_t {
  Turn,             // a turn of its own wherever it is (ChatFormat::system); the default system
                    // message first when messages[0] is not a system message
  TurnIfNonEmpty,   // the same, but an empty system message writes nothing (Phi-3.5)
  FirstTurn,        // messages[0], if a system message, is written first in the system style;
                    // later system messages are ordinary messages (`other`)
  FirstTurnAlways,  // the same, and the system turn is written (empty) without one (Llama 3.1)
  Refuse,           // messages[0] must not be a system message (ChatFormat::system_error)
  FoldFirst,        // messages[0]'s content goes before the next message's (system_fold)
  FoldLast,         // ... before the last message's, when that is a user message (Mistral v3)
  Leading,          // the last system message's content right after BOS; system messages write
                    // nothing where they are (DeepSeek-R1)
  LeadingJoined,    // the same with every system message, joined by "\n\n" (DeepSeek-V3)
};

// What happens to reasoning (<think>...</think>) in an assistant message's content.
enum class Reasoning : uint8_t {
  Keep,  // written as given
  Drop,  // only what follows the last </think> is written (DeepSeek-R1)
  // Qwen3: the reasoning (after the last <think> of the text before the first </think>) and the
  // reply (after the last </think>) are split; replies before the last user message are written
  // without their reasoning, later ones as "<think>\n{reasoning}\n</think>\n\n{reply}" when
  // they are the last message or have reasoning.
  ThinkAfterLastQuery,
};

struct ChatFormat {
  std::string_view name;
  bool bos = false;  // BOS first (where the template always writes it)
  TurnStyle system, user, assistant;
  TurnStyle other;  // any other role, and system messages the rule does not place
  SystemRule system_rule = SystemRule::Turn;
  std::string_view system_fold;    // FoldFirst/FoldLast: written before the content ({system})
  bool fold_before_strip = false;  // the user style strips the folded text as a whole (Llama 2)
  std::string_view system_error;   // SystemRule::Refuse
  // Non-empty: the messages after an extracted system message must go user, assistant, user, ...;
  // the template's message otherwise.
  std::string_view alternation_error;
  std::string_view unsupported_roles;  // space-separated: roles the template renders specially
  Reasoning reasoning = Reasoning::Keep;  // what a reply's <think> block becomes
  std::string_view generation_prompt;
  bool generation_prompt_always = false;       // written whether asked for or not
  std::string_view without_generation_prompt;  // written when no generation prompt is asked for
  // Non-empty: the template's thinking switch (enable_thinking=false) writes this generation
  // prompt instead, which opens and closes an empty reasoning block (Qwen3).
  std::string_view generation_prompt_no_thinking;
  std::string_view end_of_turn;       // space-separated token texts; {eos} for the EOS text
  std::string_view knowledge_cutoff;  // {cutoff}
  std::string_view date;              // {date} by default; empty: today's date ("%d %b %Y")
  bool prefix_stable = true;
};

// All rows, in the order chat_template_names() lists them.
std::span<const ChatFormat> chat_formats();
// The row of that name; null when there is none.
const ChatFormat* find_chat_format(std::string_view name);

// What the placeholders of a row stand for in one template.
struct ChatTokens {
  std::string_view bos, eos;
  std::string_view knowledge_cutoff, date;
  std::string_view default_system;
  bool write_bos = false;  // BOS first, for rows whose `bos` the template text decides
  bool thinking = true;    // the template's enable_thinking (rows with a thinking switch)
};

// Renders `messages` as the row's template does. Throws edgelm::Error "[chat] <name>: ...".
std::string render_chat_format(const ChatFormat& format, const ChatTokens& tokens,
                               std::span<const ChatMessage> messages, bool add_generation_prompt);

// Python's str.strip() (and Jinja's trim): removes leading and trailing characters for which
// str.isspace() is true. Invalid UTF-8 is left in place.
std::string_view python_strip(std::string_view text);

}  // namespace edgelm
