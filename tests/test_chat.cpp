// Chat templates: recognition of real templates as models carry them, renderings compared exactly
// with transformers' (tests/fixtures/chat/expected.json from
// scripts/fixtures/make_chat_fixtures.py), reading templates from GGUF files and Hugging Face
// folders, stop ids, and ChatSession's incremental feeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/chat.h"
#include "models/gguf.h"
#include "models/tokenizer.h"
#include "tests/temp_dir.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kChatFixtures = std::string(EDGELM_FIXTURE_DIR) + "/chat";
const std::string kTokenizerFixtures = std::string(EDGELM_FIXTURE_DIR) + "/tokenizer";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const json& expected() {
  static const json data = json::parse(read_file(kChatFixtures + "/expected.json"));
  return data;
}

std::vector<ChatMessage> conversation(size_t index) {
  std::vector<ChatMessage> messages;
  for (const json& message : expected()["conversations"][index]) {
    messages.push_back({message["role"].get<std::string>(), message["content"].get<std::string>()});
  }
  return messages;
}

bool has_other_role(const std::vector<ChatMessage>& messages) {
  return std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
    return m.role != "system" && m.role != "user" && m.role != "assistant";
  });
}

ChatTemplate fixture_template(const json& entry) {
  const std::string file = entry["file"];
  ChatTemplate chat = ChatTemplate::from_text(read_file(kChatFixtures + "/" + file),
                                              entry["bos"].get<std::string>(),
                                              entry["eos"].get<std::string>(), file);
  if (entry["date"].is_string()) chat.set_date(entry["date"].get<std::string>());
  return chat;
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A scratch folder removed at the end of the test.
class TempDir : public edgelm::testing::TempDir {
 public:
  TempDir() : edgelm::testing::TempDir("edgelm_chat_") {}
};
using edgelm::testing::write_text;

// ---- recognition and exact rendering ----

TEST(ChatTemplates, RecognisesEveryFixtureTemplate) {
  for (const json& entry : expected()["templates"]) {
    const std::string file = entry["file"];
    const std::string text = read_file(kChatFixtures + "/" + file);
    if (entry["format"].is_null()) {
      const std::string message = error_of([&] { ChatTemplate::from_text(text, "", "", file); });
      EXPECT_NE(message.find("[chat] " + file + ": not a chat template edgelm recognises"),
                std::string::npos)
          << file << " should not be recognised; got " << message;
      EXPECT_NE(message.find("--chat-template NAME"), std::string::npos) << message;
      continue;
    }
    const ChatTemplate chat = ChatTemplate::from_text(text, entry["bos"].get<std::string>(),
                                                      entry["eos"].get<std::string>(), file);
    EXPECT_EQ(chat.name(), entry["format"].get<std::string>()) << file;
    EXPECT_EQ(chat.default_system(), entry["default_system"].get<std::string>()) << file;
  }
}

TEST(ChatTemplates, RendersExactlyAsTransformers) {
  size_t compared = 0, refused = 0, not_implemented = 0;
  for (const json& entry : expected()["templates"]) {
    if (entry["format"].is_null()) continue;
    const std::string file = entry["file"];
    for (const json& render : entry["renders"]) {
      ChatTemplate chat = fixture_template(entry);
      const bool thinking = render.value("enable_thinking", true);
      chat.set_thinking(thinking);
      const std::vector<ChatMessage> messages = conversation(render["conversation"]);
      const bool generation_prompt = render["add_generation_prompt"];
      const std::string where = file + ", conversation " + render["conversation"].dump() +
                                (generation_prompt ? ", with" : ", without") +
                                " the generation prompt" + (thinking ? "" : ", thinking off");
      if (render.contains("error")) {
        const std::string message = error_of([&] { chat.render(messages, generation_prompt); });
        EXPECT_NE(message.find(render["error"].get<std::string>()), std::string::npos)
            << where << ": expected the template's error '" << render["error"] << "', got "
            << message;
        ++refused;
        continue;
      }
      std::string rendered;
      try {
        rendered = chat.render(messages, generation_prompt);
      } catch (const Error& e) {
        // Roles beyond system/user/assistant that a template renders in its own way are refused,
        // never rendered differently.
        const bool allowed = has_other_role(messages) &&
                             std::string(e.what()).find("not implemented") != std::string::npos;
        EXPECT_TRUE(allowed) << where << ": " << e.what();
        not_implemented += allowed ? 1 : 0;
        continue;
      }
      EXPECT_EQ(rendered, render["text"].get<std::string>()) << where;
      ++compared;
    }
  }
  EXPECT_GT(compared, 500u);
  EXPECT_GT(refused, 40u);
  EXPECT_LE(not_implemented, 6u);  // conversation 11's "observation" role on the ChatML templates
}

TEST(ChatTemplates, EveryFormatHasAFixture) {
  std::set<std::string> covered;
  for (const json& entry : expected()["templates"]) {
    if (entry["format"].is_string()) covered.insert(entry["format"].get<std::string>());
  }
  for (const std::string& name : chat_template_names()) {
    EXPECT_TRUE(covered.count(name)) << name << " has no fixture template";
  }
}

TEST(ChatTemplates, ByNameMatchesTheRecognisedTemplate) {
  // by_name gives the same rendering as the detected template, except for what the text adds
  // (a default system message), which a conversation with a system message does not use.
  for (const json& entry : expected()["templates"]) {
    if (entry["format"].is_null()) continue;
    const ChatTemplate detected = fixture_template(entry);
    ChatTemplate named =
        ChatTemplate::by_name(entry["format"].get<std::string>(), entry["bos"].get<std::string>(),
                              entry["eos"].get<std::string>());
    named.set_date(detected.date());
    EXPECT_EQ(named.name(), detected.name());
    const std::vector<ChatMessage> messages = conversation(3);  // no system message
    if (detected.default_system().empty()) {
      EXPECT_EQ(named.render(messages, true), detected.render(messages, true)) << entry["file"];
    }
  }
  const std::string message = error_of([] { ChatTemplate::by_name("alpaca", "", ""); });
  EXPECT_NE(message.find("unknown chat template 'alpaca' (known: llama3,"), std::string::npos)
      << message;
}

TEST(ChatTemplates, DatesOfLlama31And32) {
  const json* llama31 = nullptr;
  const json* llama32 = nullptr;
  for (const json& entry : expected()["templates"]) {
    if (entry["file"] == "llama3.1.jinja") llama31 = &entry;
    if (entry["file"] == "llama3.2.jinja") llama32 = &entry;
  }
  ASSERT_TRUE(llama31 && llama32);
  // Llama 3.1's template fixes the date; 3.2's asks strftime_now("%d %b %Y") for today's.
  const std::string text31 = read_file(kChatFixtures + "/llama3.1.jinja");
  const std::string text32 = read_file(kChatFixtures + "/llama3.2.jinja");
  EXPECT_EQ(ChatTemplate::from_text(text31, "", "").date(), "26 Jul 2024");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char today[32];
  std::strftime(today, sizeof today, "%d %b %Y", &local);  // the C locale, as in Python
  EXPECT_EQ(ChatTemplate::from_text(text32, "", "").date(), today);
  EXPECT_EQ(ChatTemplate::by_name("llama3.2", "", "").date(), today);
  EXPECT_EQ(ChatTemplate::by_name("llama3.1", "", "").date(), "26 Jul 2024");
  // The knowledge cutoff comes from the text.
  std::string edited = text31;
  edited.replace(edited.find("December 2023"), 13, "March 2025");
  ChatTemplate chat = ChatTemplate::from_text(edited, "<|begin_of_text|>", "<|eot_id|>");
  EXPECT_NE(chat.render(conversation(1), false).find("Cutting Knowledge Date: March 2025\n"),
            std::string::npos);
}

TEST(ChatTemplates, RefusesBadConversations) {
  const ChatTemplate chat = ChatTemplate::by_name("chatml", "", "");
  EXPECT_NE(error_of([&] { chat.render({}, true); }).find("[chat] chatml: no messages"),
            std::string::npos);
  const std::vector<ChatMessage> no_role = {{"", "x"}};
  EXPECT_NE(error_of([&] { chat.render(no_role, true); }).find("message 0 has an empty role"),
            std::string::npos);
  const std::vector<ChatMessage> tool = {{"user", "x"}, {"tool", "y"}};
  EXPECT_NE(error_of([&] {
              ChatTemplate::by_name("llama3.1", "", "").render(tool, true);
            }).find("role 'tool' is rendered specially"),
            std::string::npos);
  const std::vector<ChatMessage> with_system = {{"system", "s"}, {"user", "u"}};
  EXPECT_EQ(
      error_of([&] { ChatTemplate::by_name("gemma", "<bos>", "<eos>").render(with_system, true); }),
      "[chat] gemma: the template refuses this conversation: System role not supported");
}

TEST(ChatTemplates, UnrecognisedTextNamesTheSource) {
  const std::string message =
      error_of([] { ChatTemplate::from_text("{{ messages }}\nand more", "", "", "m.gguf"); });
  EXPECT_EQ(message,
            "[chat] m.gguf: not a chat template edgelm recognises ('{{ messages }}\\nand more', 23 "
            "bytes); name a format with --chat-template NAME (--list-chat-templates lists them)");
}

// ---- end-of-turn tokens ----

TEST(ChatTemplates, EndOfTurnTexts) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"llama3", {"<|eot_id|>", "<|eom_id|>"}},
      {"llama3.2", {"<|eot_id|>", "<|eom_id|>"}},
      {"chatml", {"<|im_end|>"}},
      {"llama2", {"</s>"}},
      {"mistral-v7-tekken", {"</s>"}},
      {"gemma3", {"<end_of_turn>"}},
      {"phi3.5", {"<|end|>"}},
      {"zephyr", {"</s>"}},
      {"deepseek", {"</s>"}},
      {"deepseek-r1", {"<｜end▁of▁sentence｜>"}},
      {"command-r", {"<|END_OF_TURN_TOKEN|>"}},
  };
  for (const auto& [name, texts] : cases) {
    EXPECT_EQ(ChatTemplate::by_name(name, "<s>", "</s>").end_of_turn_texts(), texts) << name;
  }
  // A template that closes turns with eos_token has nothing to add when the model has no EOS.
  EXPECT_TRUE(ChatTemplate::by_name("llama2", "<s>", "").end_of_turn_texts().empty());
}

TEST(ChatTemplates, StopIds) {
  const Tokenizer llama3 = Tokenizer::from_hf_json(kTokenizerFixtures + "/llama3-style.json");
  const std::vector<int32_t> eos = {4001, 4009};
  const ChatTemplate chat = ChatTemplate::by_name("llama3", "<|begin_of_text|>", "<|eot_id|>");
  // eos ids first, then <|eot_id|> (already there) and <|eom_id|>.
  EXPECT_EQ(chat_stop_ids(llama3, chat, eos), (std::vector<int32_t>{4001, 4009, 4008}));
  // ChatML's <|im_end|> is not a token of this vocabulary: only the eos ids.
  EXPECT_EQ(chat_stop_ids(llama3, ChatTemplate::by_name("chatml", "", ""), eos), eos);
  // A template that ends turns with eos_token stops on the EOS text's id.
  const std::vector<int32_t> none;
  EXPECT_EQ(chat_stop_ids(llama3, ChatTemplate::by_name("zephyr", "", "<|eot_id|>"), none),
            (std::vector<int32_t>{4009}));
}

TEST(ChatTemplates, RenderedSpecialTokensEncodeAsSingleIds) {
  const Tokenizer llama3 = Tokenizer::from_hf_json(kTokenizerFixtures + "/llama3-style.json");
  const ChatTemplate chat = ChatTemplate::by_name("llama3", "<|begin_of_text|>", "<|eot_id|>");
  const std::vector<int32_t> ids = llama3.encode(chat.render(conversation(2), true), false);
  EXPECT_EQ(ids.front(), 4000);  // <|begin_of_text|>, once
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 4000), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 4009), 4);  // <|eot_id|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 4006), 5);  // <|start_header_id|>
}

// ---- reading templates from models ----

TEST(ChatModelFiles, GgufTemplateAndTokens) {
  TempDir dir;
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_string_array("tokenizer.ggml.tokens", {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  writer.set_u32("tokenizer.ggml.bos_token_id", 1);
  writer.set_u32("tokenizer.ggml.eos_token_id", 2);
  const std::string without = dir.file("without.gguf");
  writer.write(without);
  writer.set_string("tokenizer.chat_template", read_file(kChatFixtures + "/smollm2.jinja"));
  const std::string with = dir.file("with.gguf");
  writer.write(with);

  const ChatTemplate chat = ChatTemplate::from_model_path(with);
  EXPECT_EQ(chat.name(), "chatml");
  EXPECT_EQ(chat.default_system(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  EXPECT_EQ(chat.end_of_turn_texts(), std::vector<std::string>{"<|im_end|>"});
  EXPECT_EQ(error_of([&] { ChatTemplate::from_model_path(without); }),
            "[chat] " + without +
                ": the model carries no chat template (no tokenizer.chat_template); name a "
                "format with --chat-template NAME (--list-chat-templates lists them)");
  // A name overrides the template; the model's token texts still fill bos_token and eos_token.
  const ChatTemplate named = ChatTemplate::from_model_path(without, "zephyr");
  EXPECT_EQ(named.render(conversation(1), true), "<|user|>\nHello!<|im_end|>\n<|assistant|>\n");
  EXPECT_NE(
      error_of([&] { ChatTemplate::from_model_path(dir.file("none.gguf")); }).find("no such file"),
      std::string::npos);
}

TEST(ChatModelFiles, HuggingFaceFolder) {
  TempDir dir;
  const std::string config = dir.file("tokenizer_config.json");
  const std::string gemma = read_file(kChatFixtures + "/gemma3.jinja");
  // A string template; tokens as AddedToken objects.
  write_text(config, json{{"bos_token", {{"content", "<bos>"}, {"special", true}}},
                          {"eos_token", "<eos>"},
                          {"chat_template", gemma}}
                         .dump());
  ChatTemplate chat = ChatTemplate::from_model_path(dir.path().string());
  EXPECT_EQ(chat.name(), "gemma3");
  EXPECT_EQ(chat.render(conversation(1), false), "<bos><start_of_turn>user\nHello!<end_of_turn>\n");
  // A list of named templates: "default" is taken.
  write_text(config, json{{"bos_token", "<bos>"},
                          {"chat_template",
                           json::array({{{"name", "tool_use"}, {"template", "{{ tools }}"}},
                                        {{"name", "default"}, {"template", gemma}}})}}
                         .dump());
  EXPECT_EQ(ChatTemplate::from_model_path(dir.path().string()).name(), "gemma3");
  write_text(config, json{{"chat_template",
                           json::array({{{"name", "tool_use"}, {"template", "{{ tools }}"}},
                                        {{"name", "rag"}, {"template", "{{ documents }}"}}})}}
                         .dump());
  EXPECT_NE(error_of([&] {
              ChatTemplate::from_model_path(dir.path().string());
            }).find("field 'chat_template' has no \"default\" entry (tool_use, rag)"),
            std::string::npos);
  // chat_template.jinja takes precedence over the config's field, as in transformers.
  write_text(dir.file("chat_template.jinja"), read_file(kChatFixtures + "/phi3.5.jinja"));
  EXPECT_EQ(ChatTemplate::from_model_path(dir.path().string()).name(), "phi3.5");
  // No template at all.
  fs::remove(dir.file("chat_template.jinja"));
  write_text(config, json{{"eos_token", nullptr}}.dump());
  EXPECT_NE(error_of([&] { ChatTemplate::from_model_path(dir.path().string()); })
                .find("the model carries no chat template (no chat_template.jinja, and no "
                      "chat_template in tokenizer_config.json)"),
            std::string::npos);
  write_text(config, "{ \"chat_template\": ");
  EXPECT_NE(error_of([&] {
              ChatTemplate::from_model_path(dir.path().string());
            }).find("tokenizer_config.json: malformed JSON"),
            std::string::npos);
}

// ---- incremental chat ----

// Plays a conversation through a ChatSession: what a KV cache fed this way holds (the feeds and
// the replies, starting over where a feed says so), and how often it started over.
struct Played {
  int from_scratch = 0;
  std::string cache;
};

// Without spaces: where a template puts a space between the generation prompt and the reply
// (DeepSeek's "Assistant: ", Mistral's "[/INST] "), the model writes it as part of its reply (or a
// SentencePiece decode leaves it out), so the cache and the rendering differ by that space.
std::string without_spaces(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c != ' ') out += c;
  }
  return out;
}

// Checks after every feed that the cache holds the whole conversation as rendered: exactly, or
// with `exact` false up to spaces.
Played play(ChatSession& session, const std::vector<std::string>& users,
            const std::vector<std::string>& replies, bool exact = true) {
  Played played;
  for (size_t turn = 0; turn < users.size(); ++turn) {
    const ChatSession::Feed feed = session.add_user(users[turn]);
    if (feed.from_scratch) {
      played.cache.clear();
      ++played.from_scratch;
    }
    played.cache += feed.text;
    const std::string whole = session.chat_template().render(session.messages(), true);
    if (exact) {
      EXPECT_EQ(played.cache, whole) << session.chat_template().name() << ", turn " << turn;
    } else {
      EXPECT_EQ(without_spaces(played.cache), without_spaces(whole))
          << session.chat_template().name() << ", turn " << turn;
    }
    if (turn < replies.size()) {
      session.add_reply(replies[turn]);
      played.cache += replies[turn];
    }
  }
  return played;
}

TEST(ChatSession, FeedsOnlyWhatTheCacheLacks) {
  const ChatTemplate chat = ChatTemplate::from_text(read_file(kChatFixtures + "/smollm2.jinja"),
                                                    "<|im_start|>", "<|im_end|>");
  ChatSession session(chat);
  EXPECT_EQ(session.add_user("Hi").text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  session.add_reply("Hello! How can I help?");
  const ChatSession::Feed next = session.add_user("Tell me a joke.");
  EXPECT_FALSE(next.from_scratch);
  EXPECT_EQ(next.text,
            "<|im_end|>\n<|im_start|>user\nTell me a joke.<|im_end|>\n<|im_start|>assistant\n");
  session.clear();
  EXPECT_TRUE(session.messages().empty());
  EXPECT_FALSE(session.add_user("Hi").from_scratch);
}

// The system prompt's rendering, for protecting its positions from eviction: SmolLM2's default
// system message when none is given, the explicit one otherwise; in every format that gives one,
// the start of the first feed, holding the system message and nothing of the user's.
TEST(ChatSession, SystemPrefixStartsTheFirstFeed) {
  const ChatTemplate smollm2 = ChatTemplate::from_text(read_file(kChatFixtures + "/smollm2.jinja"),
                                                       "<|im_start|>", "<|im_end|>");
  EXPECT_EQ(ChatSession(smollm2).system_prefix(),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n");
  EXPECT_EQ(ChatSession(smollm2, "Be brief.").system_prefix(),
            "<|im_start|>system\nBe brief.<|im_end|>\n");
  int with_prefix = 0;
  for (const std::string& name : chat_template_names()) {
    ChatSession session(ChatTemplate::by_name(name, "<s>", "</s>"), "Be brief.");
    const std::string prefix = session.system_prefix();
    if (prefix.empty()) continue;
    ++with_prefix;
    std::string feed;
    try {
      feed = session.add_user("Hi").text;
    } catch (const Error&) {
      ADD_FAILURE() << name << " gives a system prefix but refuses the system message";
      continue;
    }
    EXPECT_TRUE(feed.starts_with(prefix)) << name;
    EXPECT_NE(prefix.find("Be brief."), std::string::npos) << name;
    EXPECT_EQ(prefix.find("Hi"), std::string::npos) << name;
  }
  EXPECT_GE(with_prefix, 15);
  // Gemma 3 writes the system message at the start of the first user turn: up to its end.
  EXPECT_EQ(
      ChatSession(ChatTemplate::by_name("gemma3", "<bos>", "<eos>"), "Be brief.").system_prefix(),
      "<bos><start_of_turn>user\nBe brief.");
  // Mistral v3 writes the system message into the last user turn: no prefix holds it alone.
  EXPECT_EQ(
      ChatSession(ChatTemplate::by_name("mistral-v3", "<s>", "</s>"), "Be brief.").system_prefix(),
      "");
  // No system message and no default: nothing to protect.
  EXPECT_EQ(ChatSession(ChatTemplate::by_name("chatml", "<s>", "</s>")).system_prefix(), "");
}

TEST(ChatSession, EveryPrefixStableFormatStaysIncremental) {
  const std::vector<std::string> users = {"Hi", "Tell me a joke.", "Another one, please."};
  const std::vector<std::string> replies = {"Hello! How can I help?", "Why did the chicken...",
                                            "Knock, knock."};
  for (const std::string& name : chat_template_names()) {
    const ChatTemplate chat = ChatTemplate::by_name(name, "<s>", "</s>");
    // Formats that take a system message get one.
    std::string system = "Be brief.";
    const std::vector<ChatMessage> probe = {{"system", system}, {"user", "x"}};
    try {
      chat.render(probe, true);
    } catch (const Error&) {
      system.clear();
    }
    ChatSession session(chat, system);
    const Played played = play(session, users, replies, /*exact=*/false);
    if (chat.prefix_stable()) {
      EXPECT_EQ(played.from_scratch, 0) << name;
    }
  }
}

TEST(ChatSession, ExactWhereRepliesFollowTheGenerationPrompt) {
  for (const std::string name : {"llama3", "llama3.2", "chatml", "gemma3", "phi3.5", "zephyr",
                                 "deepseek-v3", "command-r", "mistral-v3-tekken"}) {
    ChatSession session(ChatTemplate::by_name(name, "<s>", "</s>"));
    EXPECT_EQ(play(session, {"a", "b", "c"}, {"x", "y"}).from_scratch, 0) << name;
  }
}

TEST(ChatSession, StartsOverWhereTheRenderingMovesEarlierText) {
  // Mistral v3 writes the system message into the last user message: each turn moves it.
  ChatSession mistral(ChatTemplate::by_name("mistral-v3", "<s>", "</s>"), "Be brief.");
  EXPECT_EQ(play(mistral, {"a", "b", "c"}, {"x", "y"}, false).from_scratch, 2);
  ChatSession no_system(ChatTemplate::by_name("mistral-v3", "<s>", "</s>"));
  EXPECT_EQ(play(no_system, {"a", "b", "c"}, {"x", "y"}, false).from_scratch, 0);
  // DeepSeek-R1's generation prompt opens a <think> block that its rendering of earlier replies
  // leaves out, with their reasoning: every turn starts over.
  ChatSession r1(
      ChatTemplate::by_name("deepseek-r1", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"));
  const Played played =
      play(r1, {"a", "b", "c"}, {"<think>\nhm\n</think>\n\nAnswer.", "Plain answer."});
  EXPECT_EQ(played.from_scratch, 2);
}

TEST(ChatTemplates, ThinkingSwitch) {
  ChatTemplate qwen3 = ChatTemplate::by_name("qwen3", "", "<|im_end|>");
  EXPECT_TRUE(qwen3.has_thinking_switch());
  const std::vector<ChatMessage> question = {{"user", "Hi"}};
  EXPECT_EQ(qwen3.render(question, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  qwen3.set_thinking(false);
  EXPECT_EQ(qwen3.render(question, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(qwen3.render(question, false), "<|im_start|>user\nHi<|im_end|>\n");
  // Every other format has no switch: asking to turn it off is an error, not ignored.
  for (const std::string& name : chat_template_names()) {
    if (name == "qwen3") continue;
    ChatTemplate chat = ChatTemplate::by_name(name, "<s>", "</s>");
    EXPECT_FALSE(chat.has_thinking_switch()) << name;
    chat.set_thinking(true);
    EXPECT_NE(error_of([&] { chat.set_thinking(false); })
                  .find("[chat] " + name + ": the template has no thinking switch"),
              std::string::npos)
        << name;
  }
}

TEST(ChatSession, Qwen3StartsOverAfterAReplyWithReasoning) {
  // Earlier replies lose their reasoning (and, without thinking, the empty block the generation
  // prompt opened): the next turn is fed from scratch.
  for (const bool thinking : {true, false}) {
    ChatTemplate chat = ChatTemplate::by_name("qwen3", "", "<|im_end|>");
    chat.set_thinking(thinking);
    ChatSession session(chat, "Be brief.");
    EXPECT_EQ(session.system_prefix(), "<|im_start|>system\nBe brief.<|im_end|>\n");
    session.add_user("Capital of France?");
    session.add_reply(thinking ? "<think>\nEasy.\n</think>\n\nParis." : "Paris.");
    const ChatSession::Feed next = session.add_user("And Spain?");
    EXPECT_TRUE(next.from_scratch) << thinking;
    EXPECT_NE(next.text.find("<|im_start|>assistant\nParis.<|im_end|>\n<|im_start|>user\nAnd "
                             "Spain?<|im_end|>\n<|im_start|>assistant\n"),
              std::string::npos)
        << next.text;
  }
}

TEST(ChatSession, ToleratesWhitespaceAroundReplies) {
  // DeepSeek's generation prompt "Assistant:" lacks the space its assistant turns have: the
  // model writes it, as part of its first token.
  ChatSession deepseek(ChatTemplate::by_name("deepseek", "<s>", "</s>"));
  EXPECT_EQ(play(deepseek, {"Capital of France?", "And Spain?"}, {" Paris."}, false).from_scratch,
            0);
  EXPECT_EQ(deepseek.messages()[1].content, " Paris.");  // kept as generated
  // Llama 3 trims the reply; the cache keeps the newline the model wrote.
  ChatSession llama3(ChatTemplate::by_name("llama3", "<|begin_of_text|>", "<|eot_id|>"));
  const ChatSession::Feed first = llama3.add_user("Capital of France?");
  llama3.add_reply("Paris.\n");
  const ChatSession::Feed second = llama3.add_user("And Spain?");
  EXPECT_FALSE(second.from_scratch);
  EXPECT_EQ(second.text,
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd "
            "Spain?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  // A reply the template renders otherwise is not continued: the cache would not hold the
  // conversation as the template writes it.
  ChatSession r1(ChatTemplate::by_name("deepseek-r1", "", ""));
  r1.add_user("Q");
  r1.add_reply("<think>x</think>A");
  EXPECT_TRUE(r1.add_user("Q2").from_scratch);
}

TEST(ChatSession, RefusalLeavesTheSessionUnchanged) {
  ChatSession session(ChatTemplate::by_name("gemma", "<bos>", "<eos>"), "Be brief.");
  EXPECT_NE(error_of([&] { session.add_user("Hi"); }).find("System role not supported"),
            std::string::npos);
  EXPECT_EQ(session.messages().size(), 1u);
}

}  // namespace
}  // namespace edgelm
