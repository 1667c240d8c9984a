#include "models/tokenizer.h"

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "models/gguf.h"
#include "models/tokenizer/loaders.h"
#include "models/tokenizer/pipeline.h"

namespace edgelm {

Tokenizer Tokenizer::from_hf_json(const std::string& path) {
  return Tokenizer(tokenizer::load_hf_json(path));
}

Tokenizer Tokenizer::from_gguf(const GgufFile& file, const TokenizerOptions& options) {
  Tokenizer tokenizer(tokenizer::load_gguf(file, options));
  if (options.model_vocab_size) tokenizer.check_model_vocab(*options.model_vocab_size);
  return tokenizer;
}

Tokenizer Tokenizer::from_model_path(const std::string& path, const TokenizerOptions& options) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const fs::path json_path = fs::path(path) / "tokenizer.json";
    if (!fs::exists(json_path, error)) {
      EDGELM_FAIL("[tokenizer] ", path, ": no tokenizer.json in the model folder");
    }
    Tokenizer tokenizer = from_hf_json(json_path.string());
    if (options.model_vocab_size) tokenizer.check_model_vocab(*options.model_vocab_size);
    return tokenizer;
  }
  if (!fs::exists(path, error)) EDGELM_FAIL("[tokenizer] ", path, ": no such file or folder");
  const std::shared_ptr<MappedFile> file = MappedFile::open(path);
  if (file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0) {
    // The vocabulary is metadata: the file's tensors (whatever their types) are not looked at.
    return from_gguf(GgufFile::open_metadata(path), options);
  }
  Tokenizer tokenizer = from_hf_json(path);
  if (options.model_vocab_size) tokenizer.check_model_vocab(*options.model_vocab_size);
  return tokenizer;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  return impl_->encode(text, add_bos, parse_special);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->decode(ids, skip_special);
}

std::string Tokenizer::token_text(int32_t id) const {
  impl_->vocab.check_id(id, "token_text");
  return impl_->vocab.texts[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  const int32_t id = impl_->vocab.ids.find(token);
  if (id == tokenizer::kNone) return std::nullopt;
  return id;
}

int64_t Tokenizer::vocab_size() const {
  return impl_->vocab.size();
}

std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->post_processor.bos;
}

bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || id >= impl_->vocab.size()) return false;
  return (impl_->vocab.flags[static_cast<size_t>(id)] & tokenizer::kSpecial) != 0;
}

void Tokenizer::check_model_vocab(int64_t model_vocab_size) const {
  impl_->check_model_vocab(model_vocab_size);
}

std::string Tokenizer::describe() const {
  return str_cat(impl_->is_sentencepiece() ? "SentencePiece BPE" : "byte-level BPE", ", ",
                 impl_->vocab.size(), " tokens (", impl_->added.size(), " added) from ",
                 impl_->source);
}

TokenStreamDecoder::TokenStreamDecoder(Tokenizer tokenizer, bool skip_special)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string TokenStreamDecoder::push(int32_t id) {
  tokenizer_.impl_->append_decoded(id, skip_special_, at_fragment_start_, pending_);
  std::string out;
  const size_t consumed = append_utf8_repaired(out, pending_, false);
  pending_.erase(0, consumed);
  return out;
}

std::string TokenStreamDecoder::finish() {
  std::string out;
  append_utf8_repaired(out, pending_, true);
  pending_.clear();
  at_fragment_start_ = true;
  return out;
}

}  // namespace edgelm
