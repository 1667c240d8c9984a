// Tokenizers of the Llama family: byte-level BPE from a Hugging Face tokenizer.json or a GGUF
// "gpt2" vocabulary (Llama 3), and SentencePiece BPE from a GGUF "llama" vocabulary (Llama 2).
// docs/tokenizer.md describes what is supported, the rules for invalid UTF-8 and how the ids are
// checked against the `tokenizers` package.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edgelm {

class GgufFile;

// Choices made when a tokenizer is loaded.
struct TokenizerOptions {
  // A GGUF vocabulary whose tokenizer.ggml.pre names a pre-tokenizer this library does not know is
  // an error by default, since guessing would silently change every id. When true, the Llama 3
  // pre-tokenizer ("llama-bpe") is used instead and a warning names the value.
  bool allow_unknown_pre_tokenizer = false;
  // The model's vocabulary (LlamaConfig::vocab_size, the rows of its token embedding), when the
  // tokenizer is loaded for a model: from_model_path and from_gguf then run check_model_vocab.
  std::optional<int64_t> model_vocab_size;
};

// An immutable tokenizer. Copies are cheap and share the vocabulary. encode() and decode() are
// const and may run concurrently from any number of threads: the word cache that encode() keeps
// is thread-local (one per thread and tokenizer, bounded), so threads never wait on each other.
class Tokenizer {
 public:
  // Loads a Hugging Face tokenizer.json of the BPE kind: added tokens, the normalizer (null or
  // NFC), a pre-tokenizer made of Split (regex, Isolated), Digits, Punctuation (Isolated or
  // Contiguous) and one ByteLevel, in any order (steps after ByteLevel see its byte-level
  // spelling, as in `tokenizers`), the BPE model (vocab,
  // merges as "a b" or ["a", "b"], ignore_merges, unk_token, byte_fallback), a TemplateProcessing
  // post-processor (optionally inside a Sequence) and the ByteLevel decoder. Throws edgelm::Error
  // "[tokenizer] <path>: <field>: <what>" for anything malformed or unsupported.
  static Tokenizer from_hf_json(const std::string& path);
  // Loads the vocabulary of a GGUF file: tokenizer.ggml.model "gpt2" (byte-level BPE with merges;
  // the normalizer, pre-tokenizer and ignore_merges of the Hugging Face tokenizer that
  // tokenizer.ggml.pre names, "default" when the key is missing; docs/tokenizer.md lists the
  // names) or "llama" (SentencePiece BPE with scores, byte fallback and the "▁" space). Throws
  // edgelm::Error naming the key, and for an unknown tokenizer.ggml.pre unless `options` allow it.
  static Tokenizer from_gguf(const GgufFile& file, const TokenizerOptions& options = {});
  // A model folder (reads <dir>/tokenizer.json) or a .gguf file (`options` as for from_gguf).
  static Tokenizer from_model_path(const std::string& path, const TokenizerOptions& options = {});

  // Text to ids. Added tokens written in the text ("<|eot_id|>") become their ids; with
  // parse_special false, special ones are tokenized as plain text instead (for untrusted input).
  // add_bos applies the post-processor's template (BOS for Llama; what a GGUF's add_bos_token and
  // add_eos_token ask for). Invalid UTF-8 never fails: each maximal invalid sequence is replaced
  // by U+FFFD before tokenizing (the rule of Python's errors="replace").
  std::vector<int32_t> encode(std::string_view text, bool add_bos = true,
                              bool parse_special = true) const;
  // Ids to text. skip_special drops special tokens (Hugging Face's skip_special_tokens). Bytes that
  // do not form valid UTF-8 become U+FFFD. Throws edgelm::Error for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The token as the vocabulary stores it ("Ġthe", "▁the", "<|eot_id|>"); empty for an id no token
  // has. Throws edgelm::Error for an id outside [0, vocab_size()).
  std::string token_text(int32_t id) const;
  // The id of a token given as the vocabulary stores it; nullopt when there is none.
  std::optional<int32_t> token_id(std::string_view token) const;
  // One more than the largest id (added tokens included).
  int64_t vocab_size() const;
  // The token the post-processor puts first (<|begin_of_text|>), or tokenizer.ggml.bos_token_id.
  std::optional<int32_t> bos_id() const;
  // True for special added tokens (HF "special": true; GGUF control tokens).
  bool is_special(int32_t id) const;
  // Throws edgelm::Error "[tokenizer] <file>: <field>: id N is outside the model's vocabulary of
  // M tokens ..." when the tokenizer can produce an id that `model_vocab_size` (the rows of the
  // model's token embedding) does not cover, naming the field that holds its largest id. A
  // tokenizer smaller than the model passes: embeddings are often padded past the vocabulary.
  void check_model_vocab(int64_t model_vocab_size) const;
  // "byte-level BPE" or "SentencePiece BPE", with the vocabulary size, for logs.
  std::string describe() const;

  struct Impl;

 private:
  friend class TokenStreamDecoder;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Decodes ids one at a time, for printing generated text as it arrives. push() returns only
// complete UTF-8: the bytes of a character split across tokens are held until the character is
// whole. Bytes that can no longer become valid UTF-8 (a lone continuation byte, a lead byte
// followed by a non-continuation, an overlong or surrogate form) are returned as U+FFFD as soon as
// that is certain; finish() returns U+FFFD for a sequence still incomplete at the end. The
// concatenation of every push() and the final finish() equals decode() of all the ids.
class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(Tokenizer tokenizer, bool skip_special = true);

  // The text that became complete with this id; often empty. Throws edgelm::Error for an id
  // outside the vocabulary.
  std::string push(int32_t id);
  // Flushes held bytes (as U+FFFD) and starts over, as for a new text.
  std::string finish();
  // Bytes held back waiting for the rest of a character (0 to 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  bool at_fragment_start_ = true;  // SentencePiece: the next piece's leading "▁" is dropped
  std::string pending_;
};

// Appends `bytes` to `out` as valid UTF-8: each maximal invalid subsequence (Unicode's "maximal
// subpart" practice, as Python's errors="replace" and Rust's from_utf8_lossy) becomes U+FFFD.
// When `final` is false, an incomplete but so far valid sequence at the end is not consumed.
// Returns the number of bytes consumed.
size_t append_utf8_repaired(std::string& out, std::string_view bytes, bool final = true);

}  // namespace edgelm
