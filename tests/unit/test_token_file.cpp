// The token file format: what open_token_file accepts, and the errors that name the file
// and the field for everything it refuses.
#include <gtest/gtest.h>

#include <vector>

#include "error_matchers.h"
#include "mirrored/core/error.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/io/hdf5.h"
#include "temp_dir.h"

namespace mirrored::data {
namespace {

using io::H5File;
using mirrored::testing::expect_mentions;
using mirrored::testing::message_of;
using mirrored::testing::TempDir;

void expect_refused(const std::string& path, std::initializer_list<std::string> words) {
  expect_mentions(message_of<InputError>([&] { open_token_file(path); }), words);
}

TEST(TokenFile, WideTokensRoundTrip) {
  TempDir dir;
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 5000; ++i) tokens.push_back(static_cast<uint16_t>((i * 7919) % 50257));
  TokenFileAttributes attributes;
  attributes.tokenizer = "gpt2";
  attributes.vocab_size = 50257;
  write_token_file(dir.file("t.h5"), tokens, attributes);
  const TokenFileInfo info = open_token_file(dir.file("t.h5"));
  EXPECT_EQ(info.num_tokens, 5000);
  EXPECT_EQ(info.vocab_size, 50257);
  EXPECT_EQ(info.tokenizer, "gpt2");
  EXPECT_EQ(info.token_bytes, 2);
  EXPECT_EQ(info.source, "");
  EXPECT_TRUE(is_token_file(dir.file("t.h5")));

  TokenDataset dataset(dir.file("t.h5"), {.cache_bytes = 0, .block_tokens = 0, .prefetch = false});
  std::vector<int32_t> read(tokens.size());
  dataset.read(0, static_cast<int64_t>(tokens.size()), read.data());
  for (size_t i = 0; i < tokens.size(); ++i) ASSERT_EQ(read[i], tokens[i]) << "token " << i;
}

TEST(TokenFile, TokenAboveTheVocabularyIsNamedWithItsIndex) {
  TempDir dir;
  std::vector<uint8_t> bytes(100, 3);
  bytes[57] = 200;
  TokenFileAttributes attributes;
  attributes.vocab_size = 100;
  write_token_file(dir.file("bytes.h5"), bytes, attributes);
  expect_refused(dir.file("bytes.h5"), {"'" + dir.file("bytes.h5") + "'", "/tokens[57] = 200",
                                        "outside the vocabulary [0, 100)", "attribute vocab_size = 100"});

  std::vector<uint16_t> wide(3000000, 9);  // more than one scan piece of 2^20 tokens
  wide[2500000] = 256;
  attributes.vocab_size = 256;
  write_token_file(dir.file("wide.h5"), wide, attributes);
  expect_refused(dir.file("wide.h5"), {"/tokens[2500000] = 256", "outside the vocabulary [0, 256)"});
  // The dataset refuses it too: it validates on opening.
  expect_mentions(message_of<InputError>([&] { load_token_dataset(dir.file("wide.h5"), 1); }), {"/tokens[2500000]"});
}

TEST(TokenFile, LayoutProblemsNameTheDatasetOrAttribute) {
  TempDir dir;
  const std::vector<uint8_t> some(10, 1);
  {
    H5File file(dir.file("no_tokens.h5"), H5File::Access::kTruncate);
    file.write_u8("/images", {10}, some.data());
  }
  expect_refused(dir.file("no_tokens.h5"), {"no_tokens.h5", "dataset /tokens is missing"});
  EXPECT_FALSE(is_token_file(dir.file("no_tokens.h5")));

  {
    H5File file(dir.file("matrix.h5"), H5File::Access::kTruncate);
    file.write_u8("/tokens", {2, 5}, some.data());
  }
  expect_refused(dir.file("matrix.h5"), {"matrix.h5", "/tokens has shape [2, 5], expected [N]"});

  {
    H5File file(dir.file("wide_type.h5"), H5File::Access::kTruncate);
    const std::vector<int64_t> values(10, 1);
    file.write_i64("/tokens", {10}, values.data());
  }
  expect_refused(dir.file("wide_type.h5"), {"wide_type.h5", "/tokens holds int64 values, expected uint8 or uint16"});

  write_token_file(dir.file("empty.h5"), std::span<const uint8_t>(), {});
  expect_refused(dir.file("empty.h5"), {"empty.h5", "/tokens holds 0 tokens"});

  {
    H5File file(dir.file("no_vocab.h5"), H5File::Access::kTruncate);
    file.write_u8("/tokens", {10}, some.data());
    file.write_attribute("tokenizer", std::string("bytes"));
  }
  expect_refused(dir.file("no_vocab.h5"), {"no_vocab.h5", "attribute vocab_size is missing"});

  {
    H5File file(dir.file("no_tokenizer.h5"), H5File::Access::kTruncate);
    file.write_u8("/tokens", {10}, some.data());
    file.write_attribute("vocab_size", int64_t{256});
  }
  expect_refused(dir.file("no_tokenizer.h5"), {"no_tokenizer.h5", "attribute tokenizer is missing"});

  {
    H5File file(dir.file("big_vocab.h5"), H5File::Access::kTruncate);
    file.write_u8("/tokens", {10}, some.data());
    file.write_attribute("vocab_size", int64_t{300});
    file.write_attribute("tokenizer", std::string("bytes"));
  }
  expect_refused(dir.file("big_vocab.h5"), {"big_vocab.h5", "attribute vocab_size = 300", "uint8"});

  {
    H5File file(dir.file("zero_vocab.h5"), H5File::Access::kTruncate);
    file.write_u8("/tokens", {10}, some.data());
    file.write_attribute("vocab_size", int64_t{0});
    file.write_attribute("tokenizer", std::string("bytes"));
  }
  expect_refused(dir.file("zero_vocab.h5"), {"zero_vocab.h5", "attribute vocab_size = 0, expected 1 to 65536"});

  expect_refused(dir.file("missing.h5"), {"missing.h5", "does not exist"});
}

}  // namespace
}  // namespace mirrored::data
