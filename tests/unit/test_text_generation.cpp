// Text generation's pieces (nn/text_generation.h) and the .npy writer (io/npy_file.h) that
// `mirrored generate --logits_out` uses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mirrored/core/error.h"
#include "mirrored/io/npy_file.h"
#include "mirrored/nn/text_generation.h"
#include "temp_dir.h"

namespace mirrored {
namespace {

using testing::TempDir;

TEST(SampleToken, TemperatureZeroTakesTheMostLikelyAndTiesTheLowerId) {
  Rng rng(1);
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(nn::sample_token(logits.data(), 4, 0.0, 0, rng), 1);
  EXPECT_EQ(nn::sample_token(logits.data(), 4, 0.0, 3, rng), 1);
}

TEST(SampleToken, TopKOfOneIsTheMostLikelyAtAnyTemperature) {
  Rng rng(2);
  const std::vector<float> logits = {0.1f, 0.3f, 0.2f};
  for (int draw = 0; draw < 100; ++draw) EXPECT_EQ(nn::sample_token(logits.data(), 3, 5.0, 1, rng), 1);
}

TEST(SampleToken, DrawsFollowTheSoftmaxOfTheTopK) {
  // Weights exp(0) : exp(ln 3) = 1 : 3 between tokens 0 and 2; token 1 is outside the top 2.
  const std::vector<float> logits = {0.0f, -5.0f, std::log(3.0f)};
  Rng rng(3);
  int counts[3] = {0, 0, 0};
  constexpr int kDraws = 8000;
  for (int draw = 0; draw < kDraws; ++draw) ++counts[nn::sample_token(logits.data(), 3, 1.0, 2, rng)];
  EXPECT_EQ(counts[1], 0);
  EXPECT_NEAR(static_cast<double>(counts[2]) / kDraws, 0.75, 0.02);
  // The same generator state draws the same tokens.
  Rng a(7), b(7);
  for (int draw = 0; draw < 50; ++draw)
    EXPECT_EQ(nn::sample_token(logits.data(), 3, 0.7, 0, a), nn::sample_token(logits.data(), 3, 0.7, 0, b));
}

nn::Model small_gpt_model(const nn::GptSpec& spec) {
  nn::Model model = nn::gpt(spec);
  model.build({spec.context});
  model.initialize(5);
  return model;
}

TEST(NextTokenLogits, TheCacheAndTheFullWindowAgreeAcrossAWindowRestart) {
  const nn::GptSpec spec{.vocab = 19, .context = 8, .width = 16, .heads = 2, .layers = 2, .dropout = 0.0f};
  nn::Model model = small_gpt_model(spec);
  nn::NextTokenLogits cached(model, spec, true), full(model, spec, false);
  std::vector<int32_t> tokens = {3, 1, 4, 1, 5};
  std::vector<float> cached_all, full_all;
  const float* c = cached(tokens, 0, &cached_all);
  const std::vector<float> c_first(c, c + spec.vocab);
  const float* f = full(tokens, 0, &full_all);
  ASSERT_EQ(cached_all.size(), tokens.size() * spec.vocab);
  ASSERT_EQ(full_all.size(), tokens.size() * spec.vocab);
  for (size_t i = 0; i < cached_all.size(); ++i) ASSERT_NEAR(cached_all[i], full_all[i], 2e-5f) << i;
  for (int64_t v = 0; v < spec.vocab; ++v) EXPECT_NEAR(c_first[v], f[v], 2e-5f);
  // Grow past the context, then restart the window from a later start: both paths again.
  for (int32_t t : {9, 2, 6, 5, 3}) tokens.push_back(t);
  const size_t start = tokens.size() - 4;
  c = cached(tokens, start, nullptr);
  const std::vector<float> c_restart(c, c + spec.vocab);
  f = full(tokens, start, nullptr);
  for (int64_t v = 0; v < spec.vocab; ++v) EXPECT_NEAR(c_restart[v], f[v], 2e-5f) << v;
}

TEST(NpyFile, WritesTheHeaderNumPyReadsAndTheValues) {
  TempDir dir;
  const std::vector<float> values = {1.0f, -2.5f, 3.25f, 0.0f, 7.0f, 8.5f};
  io::write_npy_f32(dir.file("a.npy"), values, 2, 3);
  std::ifstream in(dir.file("a.npy"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header) % 64, 0u);
  const std::string dict = bytes.substr(10, header);
  EXPECT_EQ(dict.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u) << dict;
  EXPECT_EQ(dict.back(), '\n');
  ASSERT_EQ(bytes.size(), 10 + header + values.size() * sizeof(float));
  std::vector<float> read(values.size());
  std::memcpy(read.data(), bytes.data() + 10 + header, read.size() * sizeof(float));
  EXPECT_EQ(read, values);
}

TEST(NpyFile, AFileThatCannotBeWrittenIsAWriteFailureNamingIt) {
  TempDir dir;
  try {
    io::write_npy_f32(dir.file("missing/a.npy"), {1.0f}, 1, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kWriteFailed);
    EXPECT_NE(std::string(e.what()).find("missing/a.npy"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mirrored
