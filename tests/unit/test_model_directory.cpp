// The exported model directory (checkpoint/model_directory.h) and the shape init_from takes
// from it (checkpoint/init_from.h).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "error_matchers.h"
#include "mirrored/checkpoint/gpt2_weights.h"
#include "mirrored/checkpoint/init_from.h"
#include "mirrored/checkpoint/model_directory.h"
#include "mirrored/config/config.h"
#include "mirrored/core/error.h"
#include "mirrored/io/safetensors.h"
#include "temp_dir.h"

namespace mirrored {
namespace {
namespace fs = std::filesystem;
using testing::expect_mentions;
using testing::message_of;
using testing::TempDir;

nn::GptSpec shape() {
  nn::GptSpec spec;
  spec.vocab = 37;
  spec.context = 12;
  spec.width = 16;
  spec.heads = 2;
  spec.layers = 3;
  return spec;
}

// A directory of the shape alone: one tensor stands for the weights (the shape is read
// from the metadata, the tensors only when a run starts).
checkpoint::ModelDirectory contents(const nn::GptSpec& spec) {
  std::vector<float> table(static_cast<size_t>(spec.vocab * spec.width), 0.5f);
  return {{{"transformer.wte.weight", {spec.vocab, spec.width}, std::move(table)}},
          spec,
          checkpoint::gpt2_metadata(spec),
          ""};
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ModelDirectory, ConfigJsonHoldsGpt2ConfigsFields) {
  nn::GptSpec spec = shape();
  spec.dropout = 0.25f;
  const std::string json = checkpoint::gpt2_config_json(spec);
  expect_mentions(json, {"\"architectures\": [\"GPT2LMHeadModel\"]", "\"model_type\": \"gpt2\"", "\"vocab_size\": 37",
                         "\"n_positions\": 12", "\"n_ctx\": 12", "\"n_embd\": 16", "\"n_layer\": 3", "\"n_head\": 2",
                         "\"n_inner\": 64", "\"activation_function\": \"gelu_new\"", "\"layer_norm_epsilon\": 1e-05",
                         "\"embd_pdrop\": 0.25", "\"resid_pdrop\": 0.25", "\"attn_pdrop\": 0.0",
                         "\"tie_word_embeddings\": true"});
  EXPECT_EQ(json.find("bos_token_id"), std::string::npos) << "mirrored's vocabularies have no bos token";
  expect_mentions(checkpoint::gpt2_generation_config_json(spec), {"\"do_sample\": true", "\"max_length\": 12"});
}

TEST(ModelDirectory, WritesEveryFileAndReadsTheShapeBack) {
  TempDir dir;
  std::ofstream(dir.file("sp.model")) << "tokenizer bytes";
  checkpoint::ModelDirectory model = contents(shape());
  model.tokenizer_model = dir.file("sp.model");
  const mode_t mask = ::umask(022);
  checkpoint::write_model_directory(dir.file("out"), model);
  ::umask(mask);
  struct stat info {};
  ASSERT_EQ(::stat(dir.file("out").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0755u);
  EXPECT_EQ(read(dir.file("out/tokenizer.model")), "tokenizer bytes");
  EXPECT_EQ(read(dir.file("out/config.json")), checkpoint::gpt2_config_json(shape()));
  EXPECT_TRUE(fs::exists(dir.file("out/generation_config.json")));
  EXPECT_TRUE(checkpoint::is_safetensors_model(dir.file("out")));
  EXPECT_FALSE(checkpoint::is_safetensors_model(dir.path().string()));
  const nn::GptSpec back = checkpoint::gpt2_spec_of(dir.file("out"));
  EXPECT_EQ(back.layers, 3);
  EXPECT_EQ(back.heads, 2);
  EXPECT_EQ(back.width, 16);
  EXPECT_EQ(back.context, 12);
  EXPECT_EQ(back.vocab, 37);
  // Written again over itself: the files are replaced, the directory reused; a model
  // without a tokenizer file leaves none of the earlier one's.
  model.tokenizer_model.clear();
  checkpoint::write_model_directory(dir.file("out"), model);
  EXPECT_FALSE(fs::exists(dir.file("out/tokenizer.model")));
  EXPECT_TRUE(fs::exists(dir.file("out/model.safetensors")));
}

TEST(ModelDirectory, RefusesAPlantedSymlinkAndWritesNothingThroughIt) {
  TempDir dir;
  fs::create_directory(dir.file("victim"));
  fs::create_directory_symlink(dir.file("victim"), dir.file("planted"));
  const std::string message =
      message_of<Error>([&] { checkpoint::write_model_directory(dir.file("planted"), contents(shape())); });
  expect_mentions(message, {dir.file("planted"), "is a symlink or a file, not a directory"});
  EXPECT_TRUE(fs::is_empty(dir.file("victim")));
}

TEST(ModelDirectory, ShapeMetadataMissingOrBadIsNamed) {
  TempDir dir;
  std::map<std::string, std::string> metadata = checkpoint::gpt2_metadata(shape());
  metadata["n_head"] = "two";
  io::write_safetensors(dir.file("bad.safetensors"), contents(shape()).tensors, metadata);
  expect_mentions(message_of<InputError>([&] { checkpoint::gpt2_spec_of(dir.file("bad.safetensors")); }),
                  {"bad.safetensors", "metadata key n_head is 'two', expected a positive integer"});
  metadata.erase("n_head");
  io::write_safetensors(dir.file("none.safetensors"), contents(shape()).tensors, metadata);
  expect_mentions(message_of<InputError>([&] { checkpoint::gpt2_spec_of(dir.file("none.safetensors")); }),
                  {"none.safetensors", "metadata key n_head is missing"});
}

TEST(InitFromShape, FillsTheKeysLeftOutAndRefusesOnesThatDisagree) {
  TempDir dir;
  checkpoint::write_model_directory(dir.file("m"), contents(shape()));
  config::TrainConfig config = config::parse_train_config({"--model", "gpt", "--init_from", dir.file("m")});
  checkpoint::take_shape_from_init_from(config);
  EXPECT_EQ(config.gpt_layers, 3);
  EXPECT_EQ(config.gpt_heads, 2);
  EXPECT_EQ(config.gpt_width, 16);
  EXPECT_EQ(config.gpt_context, 12);

  config::TrainConfig agreeing =
      config::parse_train_config({"--model", "gpt", "--gpt.width", "16", "--init_from", dir.file("m")});
  checkpoint::take_shape_from_init_from(agreeing);
  EXPECT_EQ(agreeing.gpt_layers, 3);

  config::TrainConfig other =
      config::parse_train_config({"--model", "gpt", "--gpt.layers", "5", "--init_from", dir.file("m")});
  const std::string message = message_of<InputError>([&] { checkpoint::take_shape_from_init_from(other); });
  expect_mentions(message, {dir.file("m/model.safetensors"), "n_layer = 3", "gpt.layers = 5"});
}

TEST(InitFromShape, AFileWithoutShapeMetadataKeepsTheConfiguredShape) {
  TempDir dir;
  io::write_safetensors(dir.file("hub.safetensors"), contents(shape()).tensors, {{"format", "pt"}});
  config::TrainConfig config =
      config::parse_train_config({"--model", "gpt", "--gpt.layers", "5", "--init_from", dir.file("hub.safetensors")});
  checkpoint::take_shape_from_init_from(config);
  EXPECT_EQ(config.gpt_layers, 5);
  config::TrainConfig missing =
      config::parse_train_config({"--model", "gpt", "--init_from", dir.file("absent")});
  expect_mentions(message_of<InputError>([&] { checkpoint::take_shape_from_init_from(missing); }),
                  {"init_from", dir.file("absent"), "does not exist"});
}

}  // namespace
}  // namespace mirrored
