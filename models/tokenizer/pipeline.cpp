#include "models/tokenizer/pipeline.h"

#include <atomic>

#include "core/error.h"
#include "models/tokenizer/unicode_nfc.h"
#include "models/tokenizer/utf8.h"

namespace edgelm {

using tokenizer::AddedTokens;

namespace {

std::atomic<uint64_t> next_tokenizer_key{1};

}  // namespace

void Tokenizer::Impl::finish_loading() {
  added.mark(vocab);
  if (const auto* sentencepiece = std::get_if<tokenizer::SentencePieceModel>(&model)) {
    decoder.build(tokenizer::Decoder::Kind::SentencePiece, vocab, sentencepiece->add_space_prefix);
  } else {
    decoder.build(tokenizer::Decoder::Kind::ByteLevel, vocab, false);
  }
  cache_key = next_tokenizer_key.fetch_add(1);
}

void Tokenizer::Impl::check_model_vocab(int64_t model_vocab_size) const {
  if (vocab.size() <= model_vocab_size) return;
  EDGELM_FAIL("[tokenizer] ", source, ": ", largest_id_source, ": id ", vocab.size() - 1,
              " is outside the model's vocabulary of ", model_vocab_size,
              " tokens (the rows of its token embedding)");
}

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view text, bool add_bos,
                                             bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_bos) {
    ids.insert(ids.end(), post_processor.prefix_ids.begin(), post_processor.prefix_ids.end());
  }
  if (utf8::is_valid(text)) {
    encode_valid(text, parse_special, ids);
  } else {
    std::string repaired;
    repaired.reserve(text.size() + 16);
    append_utf8_repaired(repaired, text, true);
    encode_valid(repaired, parse_special, ids);
  }
  if (add_bos) {
    ids.insert(ids.end(), post_processor.suffix_ids.begin(), post_processor.suffix_ids.end());
  }
  return ids;
}

void Tokenizer::Impl::encode_valid(std::string_view text, bool parse_special,
                                   std::vector<int32_t>& out) const {
  if (const auto* sentencepiece = std::get_if<tokenizer::SentencePieceModel>(&model)) {
    bool after_token = true;  // the first fragment, and each after an added token, gets a "▁"
    auto on_token = [&](int32_t id) {
      out.push_back(id);
      after_token = true;
    };
    added.split(
        AddedTokens::Pass::Raw, text, parse_special,
        [&](std::string_view fragment) {
          sentencepiece->encode_fragment(fragment, sentencepiece->add_space_prefix && after_token,
                                         out);
          after_token = false;
        },
        on_token);
    return;
  }
  const tokenizer::BpeModel& bpe = std::get<tokenizer::BpeModel>(model);
  tokenizer::WordCache& cache = tokenizer::thread_word_cache(cache_key);
  auto on_token = [&](int32_t id) { out.push_back(id); };
  auto on_word = [&](std::string_view word) { bpe.encode_word(word, cache, out); };
  added.split(
      AddedTokens::Pass::Raw, text, parse_special,
      [&](std::string_view gap) {
        // The normalizer runs on the text between the tokens matched as written; "normalized"
        // added tokens are then found in its output, as in `tokenizers`.
        std::string normalized;
        if (nfc) {
          normalized = nfc_normalize(gap);
          gap = normalized;
        }
        added.split(
            AddedTokens::Pass::Normalized, gap, parse_special,
            [&](std::string_view fragment) { pre_tokenizer.split(fragment, on_word); }, on_token);
      },
      on_token);
}

std::string Tokenizer::Impl::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  bool at_fragment_start = true;
  for (int32_t id : ids) append_decoded(id, skip_special, at_fragment_start, bytes);
  if (utf8::is_valid(bytes)) return bytes;
  std::string text;
  append_utf8_repaired(text, bytes, true);
  return text;
}

}  // namespace edgelm
