// The language model in the ecosystem's formats: SHA-256 against FIPS 180-4's vectors,
// SentencePiece tokens that give back every byte (corpus and adversarial text), token files
// that name their tokenizer, bits per byte against a hand count, safetensors files in
// GPT-2's layout (bit-exact round trip, Conv1D transposes, truncated and mislabelled files
// refused by name), and the key/value-cache decoder against the full forward pass.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "error_matchers.h"
#include "mirrored/checkpoint/gpt2_weights.h"
#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"
#include "mirrored/core/sha256.h"
#include "mirrored/data/text_import.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/data/tokenizer.h"
#include "mirrored/distribute/distributed_token_dataset.h"
#include "mirrored/io/hdf5.h"
#include "mirrored/io/safetensors.h"
#include "mirrored/nn/builders.h"
#include "mirrored/nn/gpt_decoder.h"
#include "mirrored/train/evaluate.h"
#include "temp_dir.h"

namespace mirrored {
namespace {

using testing::expect_mentions;
using testing::message_of;
using testing::TempDir;

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// ~40 kB of verse-like text from a small word list: enough for a few hundred pieces.
std::string training_text() {
  const std::vector<std::string> words = {"the", "king", "queen", "shall", "thou", "art", "my", "lord", "love",
                                          "and", "of", "to", "in", "that", "is", "not", "with", "be", "your",
                                          "sweet", "night", "day", "death", "heaven", "O", "fair", "speak"};
  Rng rng(3);
  std::string text;
  for (int line = 0; line < 1400; ++line) {
    if (line % 9 == 0) text += "\nKING HENRY:\n";
    const int length = 4 + static_cast<int>(rng.uniform() * 6);
    for (int w = 0; w < length; ++w) {
      text += words[static_cast<size_t>(rng.uniform() * static_cast<float>(words.size())) % words.size()];
      text += w + 1 < length ? " " : (line % 3 == 0 ? ",\n" : ".\n");
    }
  }
  return text;
}

class SubwordTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!data::Tokenizer::has_sentencepiece()) return;
    dir_ = new TempDir();
    text_ = new std::string(training_text());
    tokenizer_ = new data::Tokenizer(
        data::Tokenizer::train_sentencepiece(*text_, {.vocab_size = 400, .model_type = "bpe"}, dir_->file("t.model")));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete text_;
    delete dir_;
  }
  void SetUp() override {
    if (!data::Tokenizer::has_sentencepiece()) GTEST_SKIP() << "built without SentencePiece (libsentencepiece-dev)";
  }
  static TempDir* dir_;
  static std::string* text_;
  static data::Tokenizer* tokenizer_;
};
TempDir* SubwordTokenizer::dir_ = nullptr;
std::string* SubwordTokenizer::text_ = nullptr;
data::Tokenizer* SubwordTokenizer::tokenizer_ = nullptr;

TEST_F(SubwordTokenizer, TrainedModelCompressesAndRoundTripsItsCorpus) {
  const data::Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.name(), "sentencepiece");
  EXPECT_EQ(t.vocab_size(), 400);
  EXPECT_EQ(t.model_sha256(), sha256_file_hex(dir_->file("t.model")));
  const std::vector<int32_t> ids = t.encode(*text_);
  EXPECT_EQ(t.decode(ids), *text_);
  EXPECT_LT(static_cast<double>(ids.size()), 0.5 * static_cast<double>(text_->size()))
      << "400 pieces of a 27-word language cover over 2 bytes per token";
  int64_t bytes = 0;
  const std::vector<uint16_t> lengths = t.token_byte_lengths();
  for (const int32_t id : ids) bytes += lengths[static_cast<size_t>(id)];
  EXPECT_EQ(bytes, static_cast<int64_t>(text_->size())) << "token lengths are what bits per byte divide by";
}

TEST_F(SubwordTokenizer, AdversarialTextRoundTrips) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte.push_back(static_cast<char>(b));
  const std::vector<std::string> texts = {
      "",
      "\n",
      "\n\n\n  \n\t\n",
      "  leading and trailing spaces  ",
      "invalid \xff\xfe UTF-8 \xc0\xaf overlong, \xed\xa0\x80 surrogate, cut \xe6\x97",
      "the \xe2\x96\x81 mark SentencePiece uses for a space, and \xe2\x96\x81\xe2\x96\x81 twice",
      std::string("NUL\0inside", 10),
      "outside the training text: \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e, \xf0\x9f\x8e\x89, caf\xc3\xa9, Zebra 1234567",
      "CRLF\r\nline\r\n",
      every_byte,
  };
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tokenizer_->encode(text);
    EXPECT_EQ(tokenizer_->decode(ids), text) << "text of " << text.size() << " bytes";
    for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer_->vocab_size());
  }
  EXPECT_TRUE(tokenizer_->encode("").empty());
}

TEST_F(SubwordTokenizer, ModelFileProblemsNameTheFile) {
  const std::string junk = write_text(*dir_, "junk.model", "not a model");
  expect_mentions(message_of<InputError>([&] { data::Tokenizer::load_sentencepiece(junk); }),
                  {junk, "not a SentencePiece model"});
  expect_mentions(message_of<InputError>([&] { data::Tokenizer::load_sentencepiece(dir_->file("none.model")); }),
                  {"none.model"});
  expect_mentions(message_of<InputError>([&] {
                    data::Tokenizer::train_sentencepiece(*text_, {.vocab_size = 200}, dir_->file("small.model"));
                  }),
                  {"--vocab_size 200"});
}

TEST_F(SubwordTokenizer, ImportWritesTokenFilesThatNameTheModel) {
  TempDir out;
  const std::string corpus = write_text(out, "corpus.txt", *text_);
  data::TextImportOptions options;
  options.tokenizer = "sentencepiece";
  options.training = {.vocab_size = 300, .model_type = "unigram"};
  const data::TextImportResult result = data::import_text({corpus}, out.file("data"), options);
  EXPECT_EQ(result.total_bytes, static_cast<int64_t>(text_->size()));
  EXPECT_EQ(result.vocab_size, 300);
  const std::string model = out.file("data/tokenizer.model");
  ASSERT_EQ(result.tokenizer_path, model);
  const data::TokenFileInfo train = data::open_token_file(result.train_path);
  const data::TokenFileInfo val = data::open_token_file(result.val_path);
  EXPECT_EQ(train.tokenizer, "sentencepiece");
  EXPECT_EQ(train.tokenizer_model, "tokenizer.model");
  EXPECT_EQ(train.tokenizer_sha256, sha256_file_hex(model));
  EXPECT_EQ(train.token_bytes, 2);
  EXPECT_EQ(train.vocab_size, 300);
  EXPECT_TRUE(data::same_tokenizer(train, val));
  // Decoding both files gives back the corpus, split at floor(bytes * 9 / 10).
  const data::Tokenizer tokenizer = data::Tokenizer::load_sentencepiece(model);
  std::string decoded;
  for (const auto* info : {&train, &val}) {
    data::TokenDataset set(info->path);
    std::vector<int32_t> ids(static_cast<size_t>(set.size()));
    set.read(0, set.size(), ids.data());
    const std::string part = tokenizer.decode(ids);
    if (info == &train) EXPECT_EQ(static_cast<int64_t>(part.size()), data::train_split_tokens(result.total_bytes));
    decoded += part;
  }
  EXPECT_EQ(decoded, *text_);
  const std::vector<int64_t> lengths = data::read_token_byte_lengths(val);
  ASSERT_EQ(lengths.size(), 300u);
  for (int32_t id = 0; id < 300; ++id) EXPECT_EQ(lengths[static_cast<size_t>(id)], static_cast<int64_t>(tokenizer.token_bytes(id).size()));

  // An existing model encodes the same tokens; a byte import is told apart from it.
  data::TextImportOptions given;
  given.tokenizer = model;
  const data::TextImportResult again = data::import_text({corpus}, out.file("again"), given);
  EXPECT_EQ(again.train_tokens, result.train_tokens);
  EXPECT_TRUE(data::same_tokenizer(train, data::describe_token_file(again.train_path)));
  const data::TextImportResult bytes = data::import_text({corpus}, out.file("bytes"), {});
  const data::TokenFileInfo byte_info = data::describe_token_file(bytes.train_path);
  EXPECT_FALSE(data::same_tokenizer(train, byte_info));
  expect_mentions(data::describe_tokenizer(train), {"sentencepiece", "tokenizer.model", train.tokenizer_sha256.substr(0, 12)});
  EXPECT_EQ(data::describe_tokenizer(byte_info), "bytes");
}

// Bits per byte: the summed loss over the bytes the scored targets decode to. A token file
// whose token t decodes to t % 4 + 1 bytes; two windows of context 3 over tokens 0..7.
TEST(BitsPerByte, TargetBytesAndTheFormulaByHand) {
  TempDir dir;
  data::TokenFileAttributes attributes;
  attributes.tokenizer = "sentencepiece";
  attributes.vocab_size = 300;
  attributes.tokenizer_model = "tokenizer.model";
  attributes.tokenizer_sha256 = std::string(64, '0');
  for (int64_t t = 0; t < 300; ++t) attributes.token_bytes.push_back(t % 4 + 1);
  const std::vector<uint16_t> tokens = {5, 6, 7, 8, 9, 10, 11, 12};
  data::write_token_file(dir.file("val.h5"), std::span<const uint16_t>(tokens), attributes);
  auto set = std::make_shared<data::TokenDataset>(dir.file("val.h5"));
  // Windows start at 0 and 3; their targets are tokens[1..3] = 6 7 8 and tokens[4..6] = 9 10 11:
  // (3 + 4 + 1) + (2 + 3 + 4) = 17 bytes.
  distribute::TokenEvalDataset windows(set, 10, 3, 0, 1);
  ASSERT_EQ(windows.num_windows(), 2);
  EXPECT_EQ(windows.target_bytes(), 17);
  // Split over two replicas in batches of one window, each counts its own window.
  distribute::TokenEvalDataset first(set, 1, 3, 0, 2), second(set, 1, 3, 1, 2);
  EXPECT_EQ(first.target_bytes(), 8);
  EXPECT_EQ(second.target_bytes(), 9);

  train::EvalResult result;
  result.kind = train::EvalKind::kLanguageModel;
  result.loss = 2.5;  // nats per token, over 6 tokens: 15 nats in all, over 17 bytes
  result.tokens = 6;
  result.bytes = 17;
  EXPECT_DOUBLE_EQ(result.bits_per_byte(), 15.0 / 17.0 / std::numbers::ln2);
  EXPECT_DOUBLE_EQ(result.perplexity(), std::exp(2.5));
  result.bytes = result.tokens;  // byte tokens: the mean loss in bits
  EXPECT_EQ(result.bits_per_byte(), 2.5 / std::numbers::ln2);

  // A subword file without /token_bytes is refused by name.
  attributes.token_bytes.clear();
  data::write_token_file(dir.file("bare.h5"), std::span<const uint16_t>(tokens), attributes);
  expect_mentions(message_of<InputError>([&] { data::read_token_byte_lengths(data::describe_token_file(dir.file("bare.h5"))); }),
                  {dir.file("bare.h5"), "/token_bytes"});
}

nn::Model built_gpt(const nn::GptSpec& spec, uint64_t seed) {
  nn::Model model = nn::gpt(spec);
  model.build({spec.context});
  model.initialize(seed);
  // Non-zero biases and gains too, so that a misplaced one shows.
  Rng rng(seed + 1);
  Tensor& params = model.parameters().flat_params();
  for (int64_t i = 0; i < params.numel(); ++i) params.data<float>()[i] += 0.05f * (rng.uniform() - 0.5f);
  return model;
}

nn::GptSpec small_gpt() { return {.vocab = 37, .context = 12, .width = 16, .heads = 2, .layers = 2, .dropout = 0.0f}; }

TEST(Gpt2Safetensors, ExportAndReadBackAreBitExactWithConv1dLayouts) {
  TempDir dir;
  const nn::GptSpec spec = small_gpt();
  nn::Model model = built_gpt(spec, 11);
  const nn::ParameterArena& arena = model.parameters();
  const auto tensors = checkpoint::gpt2_tensors(arena);
  io::write_safetensors(dir.file("m.safetensors"), tensors, checkpoint::gpt2_metadata(spec));
  const io::SafetensorsFile file(dir.file("m.safetensors"));
  EXPECT_EQ(file.metadata().at("n_embd"), "16");
  EXPECT_EQ(file.metadata().at("n_positions"), "12");
  EXPECT_EQ(file.metadata().at("vocab_size"), "37");
  EXPECT_EQ(file.metadata().at("activation_function"), "gelu_new");
  EXPECT_EQ(file.shape("transformer.wte.weight"), (std::vector<int64_t>{37, 16}));
  EXPECT_EQ(file.shape("transformer.h.1.attn.c_attn.weight"), (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(file.shape("transformer.h.0.mlp.c_fc.weight"), (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(file.shape("transformer.h.0.mlp.c_proj.weight"), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(file.shape("transformer.ln_f.bias"), (std::vector<int64_t>{16}));
  EXPECT_FALSE(file.contains("lm_head.weight"));
  EXPECT_EQ(file.names().size(), 2u + 2 * 12 + 2);
  // Conv1D holds [in, out]: c_attn[i][o] is mirrored's qkv weight [o][i].
  size_t qkv = 0;
  while (arena.info(qkv).name.find("block.attn.qkv.weight") == std::string::npos) ++qkv;
  const std::vector<float> ours = arena.param(qkv).to_vector();
  const std::vector<float> theirs = file.read("transformer.h.0.attn.c_attn.weight");
  for (int64_t o = 0; o < 48; ++o)
    for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(theirs[static_cast<size_t>(i * 48 + o)], ours[static_cast<size_t>(o * 16 + i)]);
  const std::vector<float> back = checkpoint::read_gpt2_parameters(file, arena);
  EXPECT_EQ(back, arena.flat_params().to_vector()) << "export then read gives the same bits";

  // Another shape is refused naming the first tensor that differs.
  nn::GptSpec wider = spec;
  wider.context = 16;
  nn::Model other = built_gpt(wider, 1);
  expect_mentions(message_of<InputError>([&] { checkpoint::read_gpt2_parameters(file, other.parameters()); }),
                  {dir.file("m.safetensors"), "transformer.wpe.weight", "[12, 16]", "[16, 16]"});
  // An untied head is refused; a copy of the token table is taken as the tied one.
  auto with_head = tensors;
  with_head.push_back({"lm_head.weight", {37, 16}, tensors.front().values});
  io::write_safetensors(dir.file("tied.safetensors"), with_head, {});
  EXPECT_EQ(checkpoint::read_gpt2_parameters(io::SafetensorsFile(dir.file("tied.safetensors")), arena), back);
  with_head.back().values[0] += 1.0f;
  io::write_safetensors(dir.file("untied.safetensors"), with_head, {});
  expect_mentions(message_of<InputError>([&] {
                    checkpoint::read_gpt2_parameters(io::SafetensorsFile(dir.file("untied.safetensors")), arena);
                  }),
                  {"lm_head.weight", "ties"});
  // GPT2Model's names (no "transformer.") are read too.
  auto bare = tensors;
  for (auto& t : bare) t.name = t.name.substr(std::string("transformer.").size());
  io::write_safetensors(dir.file("bare.safetensors"), bare, {});
  EXPECT_EQ(checkpoint::read_gpt2_parameters(io::SafetensorsFile(dir.file("bare.safetensors")), arena), back);
}

TEST(Safetensors, TruncatedAndMislabelledFilesNameFileAndTensor) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  io::write_safetensors(path, {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}, {"b", {4}, {7, 8, 9, 10}}}, {{"k", "v"}});
  const io::SafetensorsFile good(path);
  EXPECT_EQ(good.read("b"), (std::vector<float>{7, 8, 9, 10}));
  EXPECT_EQ(good.metadata().at("k"), "v");
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto variant = [&](const std::string& name, const std::string& content) {
    return write_text(dir, name, content);
  };
  // Cut inside tensor b's data: b is named; cut inside the header: the header length is.
  const std::string cut = variant("cut.safetensors", bytes.substr(0, bytes.size() - 4));
  expect_mentions(message_of<InputError>([&] { io::SafetensorsFile{cut}; }), {cut, "tensor b", "truncated"});
  const std::string cut_header = variant("cut_header.safetensors", bytes.substr(0, 20));
  expect_mentions(message_of<InputError>([&] { io::SafetensorsFile{cut_header}; }), {cut_header, "header length"});
  expect_mentions(message_of<InputError>([&] { io::SafetensorsFile{variant("tiny.safetensors", "abc")}; }),
                  {"tiny.safetensors", "truncated"});
  // A dtype that does not fit the byte range (F16 for four-byte data): mislabelled.
  std::string mislabelled = bytes;
  mislabelled.replace(mislabelled.find("\"F32\""), 5, "\"F16\"");
  const std::string wrong = variant("wrong.safetensors", mislabelled);
  expect_mentions(message_of<InputError>([&] { io::SafetensorsFile{wrong}; }), {wrong, "tensor a", "F16", "mislabelled"});
  std::string unknown = bytes;
  unknown.replace(unknown.find("\"F32\""), 5, "\"I32\"");
  expect_mentions(message_of<InputError>([&] { io::SafetensorsFile{variant("i32.safetensors", unknown)}; }),
                  {"tensor a", "dtype I32"});
  std::string broken = bytes;
  broken[9] = '}';  // {} and then text: not one JSON object
  expect_mentions(message_of<InputError>([&] { io::SafetensorsFile{variant("json.safetensors", broken)}; }),
                  {"json.safetensors", "not valid JSON"});
}

// The cached decoder computes the same logits as the full forward pass at every position.
TEST(GptDecoder, KeyValueCacheMatchesTheFullForwardPass) {
  const nn::GptSpec spec = small_gpt();
  nn::Model model = built_gpt(spec, 5);
  Rng rng(9);
  Tensor window({1, spec.context}, DType::kI32);
  std::vector<int32_t> tokens;
  for (int64_t t = 0; t < spec.context; ++t)
    tokens.push_back(window.data<int32_t>()[t] = static_cast<int32_t>(rng.uniform() * 36.99f));
  const Tensor& logits = model.forward(window, nn::Mode::kEval);
  nn::GptDecoder decoder(model.parameters(), spec);
  for (int64_t t = 0; t < spec.context; ++t) {
    const std::vector<float>& step = decoder.step(tokens[static_cast<size_t>(t)]);
    for (int64_t v = 0; v < spec.vocab; ++v)
      ASSERT_NEAR(step[static_cast<size_t>(v)], logits.data<float>()[t * spec.vocab + v], 2e-5f)
          << "position " << t << " token " << v;
  }
  EXPECT_EQ(decoder.position(), spec.context);
  decoder.reset();
  EXPECT_NEAR(decoder.step(tokens[0])[3], logits.data<float>()[3], 2e-5f) << "a reset starts at position 0 again";
}

}  // namespace
}  // namespace mirrored
