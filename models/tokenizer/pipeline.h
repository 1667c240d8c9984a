// A loaded tokenizer: its components in the order text goes through them, as in Hugging Face's
// `tokenizers` (added tokens → normalizer → pre-tokenizer → model → post-processor; the decoder
// back). The loaders (loaders.h) fill the components; models/tokenizer.h is the interface.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "models/tokenizer.h"
#include "models/tokenizer/added_tokens.h"
#include "models/tokenizer/bpe.h"
#include "models/tokenizer/decoder.h"
#include "models/tokenizer/pre_tokenizer.h"
#include "models/tokenizer/sentencepiece.h"
#include "models/tokenizer/vocabulary.h"

namespace edgelm {

namespace tokenizer {

// The post-processor: the template's tokens around the encoded text.
struct PostProcessor {
  std::vector<int32_t> prefix_ids;  // before the text (BOS)
  std::vector<int32_t> suffix_ids;  // after it (EOS, where a GGUF's add_eos_token asks for it)
  std::optional<int32_t> bos;       // what bos_id() reports
};

}  // namespace tokenizer

struct Tokenizer::Impl {
  std::string source;  // the file, for messages
  // The field that gives the largest id (vocab.size() - 1), for check_model_vocab's message:
  // "added_tokens[3].id", "model.vocab['x']", "tokenizer.ggml.tokens[49151]".
  std::string largest_id_source;
  uint64_t cache_key = 0;  // names this tokenizer's per-thread word caches

  tokenizer::Vocabulary vocab;
  // 1. Found in the text before anything else.
  tokenizer::AddedTokens added;
  // 2. Normalizer (byte-level BPE): NFC on the text between added tokens.
  bool nfc = false;
  // 3. Pre-tokenizer (byte-level BPE).
  tokenizer::PreTokenizer pre_tokenizer;
  // 4. Model: byte-level BPE (tokenizer.json, GGUF "gpt2") or SentencePiece (GGUF "llama").
  std::variant<tokenizer::BpeModel, tokenizer::SentencePieceModel> model;
  // 5. Post-processor.
  tokenizer::PostProcessor post_processor;
  tokenizer::Decoder decoder;

  bool is_sentencepiece() const {
    return std::holds_alternative<tokenizer::SentencePieceModel>(model);
  }
  // The loaders' last step: marks the added tokens in the vocabulary's flags, builds the decoder
  // and gives the tokenizer its cache key.
  void finish_loading();

  // Tokenizer::check_model_vocab.
  void check_model_vocab(int64_t model_vocab_size) const;
  // Tokenizer::encode: any bytes (invalid UTF-8 repaired first) through every step.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
  // Tokenizer::decode: the decoder over `ids`, with invalid UTF-8 repaired.
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;
  // Appends the bytes of `id` (see Decoder::append).
  void append_decoded(int32_t id, bool skip_special, bool& at_fragment_start,
                      std::string& out) const {
    decoder.append(vocab, id, skip_special, at_fragment_start, out);
  }

 private:
  // Steps 1 to 4 on valid UTF-8, appending to `out`.
  void encode_valid(std::string_view text, bool parse_special, std::vector<int32_t>& out) const;
};

}  // namespace edgelm
