#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mirrored/core/error.h"
#include "mirrored/train/config.h"

using namespace mirrored;
using mirrored::train::parse_train_config;

namespace {
std::string write_ini(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("mirrored_test_" + name + ".ini");
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    parse_train_config(args);
  } catch (const InputError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return {};
}
}  // namespace

TEST(Config, FileValuesThenFlagsOverride) {
  const auto path = write_ini("override", "batch_size = 64\nlr = 0.1\n[model]\nhidden = 32,16\n[data]\ntrain = a.h5\n");
  const auto config = parse_train_config({"--config", path, "--lr", "0.2", "--data.test", "b.h5"});
  EXPECT_EQ(config.batch_size, 64);
  EXPECT_DOUBLE_EQ(config.lr, 0.2);
  EXPECT_EQ(config.hidden, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(config.train_data, "a.h5");
  EXPECT_EQ(config.test_data, "b.h5");
}

TEST(Config, ResolvedIniParsesBackToTheSameConfig) {
  auto config = parse_train_config({"--optimizer", "adamw", "--lr", "0.003", "--model.hidden", "7", "--seed", "42"});
  const auto path = write_ini("roundtrip", train::to_ini(config));
  const auto again = parse_train_config({"--config", path});
  EXPECT_EQ(train::to_ini(again), train::to_ini(config));
  EXPECT_EQ(again.optimizer, "adamw");
  EXPECT_EQ(again.seed, 42u);
}

TEST(Config, UnknownKeyInFileListsValidKeys) {
  const auto path = write_ini("unknown", "batch_sise = 64\n");
  const auto message = error_of({"--config", path});
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("batch_sise"), std::string::npos) << message;
  EXPECT_NE(message.find("batch_size"), std::string::npos) << "valid keys listed: " << message;
}

TEST(Config, UnknownFlagListsValidKeys) {
  const auto message = error_of({"--learning_rate", "0.1"});
  EXPECT_NE(message.find("learning_rate"), std::string::npos) << message;
  EXPECT_NE(message.find("lr"), std::string::npos) << message;
}

TEST(Config, BadValuesNameKeyAndExpectation) {
  EXPECT_NE(error_of({"--lr", "-0.1"}).find("lr = '-0.1': expected a number > 0"), std::string::npos);
  EXPECT_NE(error_of({"--batch_size", "0"}).find("batch_size = '0': expected an integer >= 1"), std::string::npos);
  const auto optimizer = error_of({"--optimizer", "rmsprop"});
  EXPECT_NE(optimizer.find("one of: sgd, adam, adamw"), std::string::npos) << optimizer;
  EXPECT_NE(error_of({"--model.hidden", "256,x"}).find("model.hidden"), std::string::npos);
  EXPECT_NE(error_of({"--momentum", "1.5"}).find("[0, 1)"), std::string::npos);
}

TEST(Config, MissingConfigFileIsNamed) {
  const auto message = error_of({"--config", "/nonexistent/run.ini"});
  EXPECT_NE(message.find("/nonexistent/run.ini"), std::string::npos) << message;
}

TEST(Config, HelpListsEveryKey) {
  const auto help = train::train_config_help();
  for (const auto& key : train::train_config_keys()) EXPECT_NE(help.find("--" + key), std::string::npos) << key;
}

TEST(Config, LearningRateScheduleKeys) {
  const auto path = write_ini("schedule",
                              "lr = 0.1\nlr_schedule = step\nlr_milestones = 3,4\nlr_gamma = 0.5\n"
                              "lr_warmup_epochs = 0.5\n");
  const auto config = parse_train_config({"--config", path});
  EXPECT_EQ(config.lr_schedule, "step");
  EXPECT_EQ(config.lr_milestones, (std::vector<int64_t>{3, 4}));
  EXPECT_DOUBLE_EQ(config.lr_gamma, 0.5);
  EXPECT_DOUBLE_EQ(config.lr_warmup_epochs, 0.5);
  const auto again = parse_train_config({"--config", write_ini("schedule_again", train::to_ini(config))});
  EXPECT_EQ(train::to_ini(again), train::to_ini(config));
}

TEST(Config, InconsistentScheduleNamesFileAndKeys) {
  const auto path = write_ini("bad_schedule", "lr = 0.1\nlr_schedule = cosine\nlr_min = 0.2\n");
  const auto too_high = error_of({"--config", path});
  EXPECT_NE(too_high.find(path), std::string::npos) << too_high;
  EXPECT_NE(too_high.find("lr_min = 0.2"), std::string::npos) << too_high;
  EXPECT_NE(too_high.find("at most lr = 0.1"), std::string::npos) << too_high;
  const auto no_milestones = error_of({"--lr_schedule", "step"});
  EXPECT_NE(no_milestones.find("command line: lr_schedule = step: expected lr_milestones"), std::string::npos)
      << no_milestones;
  EXPECT_NE(error_of({"--lr_milestones", "4,3"}).find("lr_milestones = '4,3': expected increasing epochs"),
            std::string::npos);
  EXPECT_NE(error_of({"--lr_gamma", "0"}).find("lr_gamma = '0': expected a number in (0, 1]"), std::string::npos);
  EXPECT_NE(error_of({"--lr_schedule", "linear"}).find("one of: constant, cosine, step"), std::string::npos);
}
