#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mirrored/config/config.h"
#include "mirrored/config/library_options.h"
#include "mirrored/core/error.h"

using namespace mirrored;
using mirrored::config::parse_train_config;

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
  const auto path = write_ini("roundtrip", config::to_ini(config));
  const auto again = parse_train_config({"--config", path});
  EXPECT_EQ(config::to_ini(again), config::to_ini(config));
  EXPECT_EQ(again.optimizer, config::OptimizerKind::kAdamW);
  EXPECT_EQ(again.seed, 42u);
}

TEST(Config, UnknownKeyInFileSuggestsTheNearestKeys) {
  const auto path = write_ini("unknown", "batch_sise = 64\n");
  const auto message = error_of({"--config", path});
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("batch_sise"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean batch_size?"), std::string::npos) << message;
}

TEST(Config, UnknownFlagSuggestsTheNearestKeysInOneLine) {
  const auto message = error_of({"--learning_rate", "0.1"});
  EXPECT_EQ(message, "command line: unknown key '--learning_rate'; did you mean --lr? (mirrored train --help lists "
                     "every key)");
  EXPECT_NE(error_of({"--layers", "2"}).find("did you mean --gpt.layers?"), std::string::npos);  // a section's key
  EXPECT_NE(error_of({"--warmup_steps", "2"}).find("did you mean --lr_warmup_steps"), std::string::npos);
  EXPECT_NE(error_of({"--optimiser", "sgd"}).find("did you mean --optimizer"), std::string::npos);
  const auto far = error_of({"--zzzzzzzzzzzz", "1"});
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
  EXPECT_LT(far.size(), 120u) << "no list of every key: " << far;
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
  const auto help = config::train_config_help();
  for (const auto& key : config::train_config_keys()) EXPECT_NE(help.find("--" + key), std::string::npos) << key;
}

TEST(Config, LearningRateScheduleKeys) {
  const auto path = write_ini("schedule",
                              "lr = 0.1\nlr_schedule = step\nlr_milestones = 3,4\nlr_gamma = 0.5\n"
                              "lr_warmup_epochs = 0.5\n");
  const auto config = parse_train_config({"--config", path});
  EXPECT_EQ(config.lr_schedule, optim::LrScheduleKind::kStep);
  EXPECT_EQ(config.lr_milestones, (std::vector<int64_t>{3, 4}));
  EXPECT_DOUBLE_EQ(config.lr_gamma, 0.5);
  EXPECT_DOUBLE_EQ(config.lr_warmup_epochs, 0.5);
  const auto again = parse_train_config({"--config", write_ini("schedule_again", config::to_ini(config))});
  EXPECT_EQ(config::to_ini(again), config::to_ini(config));
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

TEST(Config, RepeatedFlagsKeepTheLastValueOverTheFile) {
  const auto path = write_ini("repeated", "max_steps = 50\nlr = 0.1\n");
  const auto config = parse_train_config(
      {"--config", path, "--max_steps", "300", "--lr", "0.2", "--max_steps", "200", "--model", "cnn", "--model", "mlp"});
  EXPECT_EQ(config.max_steps, 200);
  EXPECT_DOUBLE_EQ(config.lr, 0.2);
  EXPECT_EQ(config.model, config::ModelKind::kMlp);
  // The file alone, and the file with one flag.
  EXPECT_EQ(parse_train_config({"--config", path}).max_steps, 50);
  EXPECT_EQ(parse_train_config({"--max_steps", "7", "--config", path}).max_steps, 7);
  // A repeated key in the file: its last line wins too.
  const auto twice = write_ini("repeated_in_file", "epochs = 2\nepochs = 5\n");
  EXPECT_EQ(parse_train_config({"--config", twice}).epochs, 5);
  // Switches and --config may repeat as well.
  EXPECT_TRUE(parse_train_config({"--quiet", "--lr", "0.3", "--quiet"}).quiet);
  EXPECT_EQ(parse_train_config({"--config", twice, "--config", path}).max_steps, 50);
}

TEST(Config, EnumeratedOptionsAreTypedAndListTheirNames) {
  const auto config = parse_train_config({"--model", "resnet", "--optimizer", "adam", "--launch", "local", "--device",
                                          "auto", "--allreduce", "hierarchical", "--grad_compression", "bf16",
                                          "--progress", "plain", "--nan_policy", "skip", "--preemption_signal", "TERM",
                                          "--resume", "never", "--lr_schedule", "cosine"});
  EXPECT_EQ(config.model, config::ModelKind::kResnet);
  EXPECT_EQ(config.optimizer, config::OptimizerKind::kAdam);
  EXPECT_EQ(config.launch, runtime::Launch::kLocal);
  EXPECT_EQ(config.device, runtime::DeviceChoice::kAuto);
  EXPECT_EQ(config.allreduce, runtime::Allreduce::kHierarchical);
  EXPECT_EQ(config.grad_compression, distribute::GradCompression::kBf16);
  EXPECT_EQ(config.progress, config::ProgressSetting::kPlain);
  EXPECT_EQ(config.nan_policy, config::NanPolicy::kSkip);
  EXPECT_EQ(config.preemption_signal, config::PreemptionSignal::kTerm);
  EXPECT_EQ(config.resume, config::ResumeMode::kNever);
  EXPECT_EQ(config.lr_schedule, optim::LrScheduleKind::kCosine);
  const auto again = parse_train_config({"--config", write_ini("typed_roundtrip", config::to_ini(config))});
  EXPECT_EQ(config::to_ini(again), config::to_ini(config));

  EXPECT_NE(error_of({"--device", "gpu"}).find("device = 'gpu': expected one of: auto, cpu, cuda"), std::string::npos);
  EXPECT_NE(error_of({"--launch", "slurm"}).find("one of: auto, mpi, local"), std::string::npos);
  EXPECT_NE(error_of({"--allreduce", "ring"}).find("one of: auto, flat, hierarchical"), std::string::npos);
  EXPECT_NE(error_of({"--nan_policy", "ignore"}).find("one of: stop, skip"), std::string::npos);
  EXPECT_NE(error_of({"--preemption_signal", "HUP"}).find("one of: USR1, USR2, TERM, none"), std::string::npos);
  EXPECT_NE(error_of({"--progress", "fancy"}).find("one of: auto, bar, plain, off"), std::string::npos);
  EXPECT_NE(error_of({"--model", "transformer"}).find("one of: mlp, cnn, resnet, gpt"), std::string::npos);
}

TEST(Config, FailureHandlingKeys) {
  const auto defaults = parse_train_config({});
  EXPECT_EQ(defaults.on_failure, config::OnFailure::kAbort);
  EXPECT_EQ(defaults.shrink_min_replicas, 1);
  const auto config = parse_train_config({"--on_failure", "shrink", "--shrink.min_replicas", "3"});
  EXPECT_EQ(config.on_failure, config::OnFailure::kShrink);
  EXPECT_EQ(config.shrink_min_replicas, 3);
  const std::string ini = config::to_ini(config);
  EXPECT_NE(ini.find("[shrink]\nmin_replicas = 3"), std::string::npos) << ini;
  EXPECT_EQ(config::to_ini(parse_train_config({"--config", write_ini("failure_roundtrip", ini)})), ini);
  // Operational: a resume that changes them is not another run.
  EXPECT_TRUE(config::result_changes(defaults, config).empty());
  EXPECT_NE(error_of({"--on_failure", "restart"}).find("on_failure = 'restart': expected one of: abort, shrink"),
            std::string::npos);
  EXPECT_NE(error_of({"--shrink.min_replicas", "0"}).find("expected an integer >= 1"), std::string::npos);
}

TEST(Config, SparesNeedOnFailureShrink) {
  EXPECT_EQ(parse_train_config({}).shrink_spares, 0);
  const auto config = parse_train_config({"--on_failure", "shrink", "--shrink.spares", "2"});
  EXPECT_EQ(config.shrink_spares, 2);
  EXPECT_NE(config::to_ini(config).find("spares = 2"), std::string::npos);
  EXPECT_TRUE(config::result_changes(parse_train_config({"--on_failure", "shrink"}), config).empty());
  EXPECT_NE(error_of({"--shrink.spares", "1"}).find("shrink.spares = 1 with on_failure = abort"), std::string::npos);
  EXPECT_NE(error_of({"--on_failure", "shrink", "--shrink.spares", "-1"}).find("expected an integer >= 0"),
            std::string::npos);
}

TEST(Config, GptKeysAndTheirConstraint) {
  const auto config = parse_train_config({"--model", "gpt", "--gpt.layers", "2", "--gpt.heads", "2", "--gpt.width",
                                          "32", "--gpt.context", "16", "--gpt.dropout", "0.1", "--data.cache_mb", "0",
                                          "--eval_every", "50", "--eval_windows", "8", "--lr_warmup_steps", "10",
                                          "--lr_decay_steps", "100"});
  EXPECT_EQ(config.model, config::ModelKind::kGpt);
  EXPECT_EQ(config.gpt_layers, 2);
  EXPECT_EQ(config.gpt_heads, 2);
  EXPECT_EQ(config.gpt_width, 32);
  EXPECT_EQ(config.gpt_context, 16);
  EXPECT_DOUBLE_EQ(config.gpt_dropout, 0.1);
  EXPECT_EQ(config.data_cache_mb, 0);
  EXPECT_EQ(config.eval_every, 50);
  EXPECT_EQ(config.eval_windows, 8);
  EXPECT_EQ(config.lr_warmup_steps, 10);
  EXPECT_EQ(config.lr_decay_steps, 100);
  EXPECT_EQ(config::parse_config_text(config::to_ini(config), "round trip").gpt_width, 32);
  const std::string error = error_of({"--model", "gpt", "--gpt.width", "130", "--gpt.heads", "4"});
  EXPECT_NE(error.find("gpt.width = 130 is not divisible by gpt.heads = 4"), std::string::npos) << error;
  // The constraint is the gpt's: other models ignore the gpt keys.
  EXPECT_NO_THROW(parse_train_config({"--gpt.width", "130", "--gpt.heads", "4"}));
}

TEST(Config, ResumeIsAutoNeverOrAPath) {
  EXPECT_EQ(parse_train_config({}).resume, config::ResumeMode::kAuto);
  const auto path = parse_train_config({"--resume", "runs/a/checkpoints"});
  EXPECT_EQ(path.resume, config::ResumeMode::kPath);
  EXPECT_EQ(path.resume_path, "runs/a/checkpoints");
  EXPECT_EQ(config::option_value(path, "resume"), "runs/a/checkpoints");
}

TEST(Config, OverlapModesWithBooleanAliases) {
  EXPECT_EQ(parse_train_config({}).overlap, distribute::Overlap::kAuto);
  EXPECT_EQ(parse_train_config({"--overlap", "thread"}).overlap, distribute::Overlap::kThread);
  EXPECT_EQ(parse_train_config({"--overlap", "inline"}).overlap, distribute::Overlap::kInline);
  EXPECT_EQ(parse_train_config({"--overlap", "off"}).overlap, distribute::Overlap::kOff);
  EXPECT_EQ(parse_train_config({"--overlap", "true"}).overlap, distribute::Overlap::kThread);
  const auto old_file = write_ini("overlap_false", "overlap = false\n");
  const auto config = parse_train_config({"--config", old_file});
  EXPECT_EQ(config.overlap, distribute::Overlap::kOff);
  EXPECT_EQ(config::option_value(config, "overlap"), "off");  // printed by its canonical name
  EXPECT_NE(config::to_ini(config).find("overlap = off"), std::string::npos);
  EXPECT_NE(error_of({"--overlap", "yes"}).find("overlap = 'yes': expected one of: auto, thread, inline, off"),
            std::string::npos);
}

TEST(Config, ResultChangesListOnlyKeysThatChangeTheTrainedResult) {
  const auto before = parse_train_config({});
  const auto operational = parse_train_config({"--out", "elsewhere", "--threads", "3", "--epochs", "9",
                                               "--max_steps", "5", "--log_every", "1", "--overlap", "off",
                                               "--checkpoint.keep", "9", "--progress", "off", "--resume", "never"});
  EXPECT_TRUE(config::result_changes(before, operational).empty());
  const auto changed = parse_train_config({"--lr", "0.1", "--optimizer", "adam", "--out", "elsewhere"});
  const auto changes = config::result_changes(before, changed);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0], "optimizer sgd -> adam");
  EXPECT_EQ(changes[1], "lr 0.05 -> 0.1");  // shortest round-trip text, as written
}

TEST(Config, StoredIniParsesThroughTheTableIgnoringKeysOfOtherVersions) {
  const auto stored = config::parse_config_text("lr = 0.2\nold_key = 1\n[model]\nhidden = 8\n", "stored", true);
  EXPECT_DOUBLE_EQ(stored.lr, 0.2);
  EXPECT_EQ(stored.hidden, (std::vector<int64_t>{8}));
  try {
    config::parse_config_text("old_key = 1\n", "stored", false);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stored: unknown key 'old_key'"), std::string::npos) << e.what();
  }
}

TEST(LibraryOptions, ReducerStrategyModelAndOptimizerComeFromTheConfig) {
  const auto config = parse_train_config({"--bucket_mb", "0.5", "--overlap", "off", "--grad_compression", "bf16",
                                          "--allreduce", "flat", "--accumulate_steps", "3", "--optimizer", "adamw",
                                          "--lr", "0.01", "--weight_decay", "0.1", "--model", "cnn", "--cnn.fc", "64",
                                          "--launch", "local", "--device", "cuda", "--collective_timeout_s", "9"});
  const auto options = config::library_options(config);
  EXPECT_EQ(options.reducer.caps.bucket_bytes, 512 * 1024);
  EXPECT_EQ(options.reducer.caps.first_bucket_bytes, 512 * 1024);
  EXPECT_EQ(options.reducer.overlap, distribute::Overlap::kOff);
  EXPECT_EQ(options.reducer.compression, distribute::GradCompression::kBf16);
  EXPECT_EQ(options.strategy.allreduce, runtime::Allreduce::kFlat);
  EXPECT_EQ(options.accumulate_steps, 3);
  EXPECT_EQ(options.runtime.launch, runtime::Launch::kLocal);
  EXPECT_EQ(options.runtime.device, runtime::DeviceChoice::kCuda);
  EXPECT_DOUBLE_EQ(options.runtime.collective_timeout_s, 9.0);
  EXPECT_EQ(options.optimizer.kind, config::OptimizerKind::kAdamW);
  EXPECT_TRUE(options.optimizer.adam.decoupled_weight_decay);
  EXPECT_FLOAT_EQ(options.optimizer.adam.lr, 0.01f);
  EXPECT_FLOAT_EQ(options.optimizer.adam.weight_decay, 0.1f);
  EXPECT_EQ(options.model.kind, config::ModelKind::kCnn);
  EXPECT_EQ(options.model.cnn.hidden, (std::vector<int64_t>{64}));
  EXPECT_EQ(options.train_data.global_batch, 128);
  EXPECT_EQ(options.train_data.seed, 7u);
  // The first bucket is capped at 1 MB so communication starts early.
  EXPECT_EQ(config::library_options(parse_train_config({})).reducer.caps.first_bucket_bytes, 1 << 20);
}

TEST(LibraryOptions, LearningRateScheduleInSteps) {
  const auto config = parse_train_config({"--lr_schedule", "step", "--lr_milestones", "2,3", "--epochs", "4",
                                          "--lr_warmup_epochs", "0.5"});
  const auto spec = config::library_options(config).lr_schedule.in_steps(10);
  EXPECT_EQ(spec.kind, optim::LrScheduleKind::kStep);
  EXPECT_EQ(spec.warmup_steps, 5);
  EXPECT_EQ(spec.total_steps, 40);
  EXPECT_EQ(spec.milestones, (std::vector<int64_t>{20, 30}));
}

TEST(LibraryOptions, WarmupAndCosineInStepsOverrideTheEpochForm) {
  const auto config = parse_train_config({"--lr_schedule", "cosine", "--epochs", "1", "--lr_warmup_epochs", "0.5",
                                          "--lr_warmup_steps", "100", "--lr_decay_steps", "2000"});
  const auto spec = config::library_options(config).lr_schedule.in_steps(6233);
  EXPECT_EQ(spec.warmup_steps, 100);
  EXPECT_EQ(spec.total_steps, 2000);
}

TEST(Config, OptimizerShardAndTheCombinationsItRefuses) {
  EXPECT_FALSE(parse_train_config({}).optimizer_shard);
  EXPECT_TRUE(parse_train_config({"--optimizer.shard", "true"}).optimizer_shard);
  const std::string bf16 = error_of({"--optimizer.shard", "true", "--grad_compression", "bf16"});
  EXPECT_NE(bf16.find("optimizer.shard = true with grad_compression = bf16"), std::string::npos) << bf16;
  const std::string hierarchical = error_of({"--optimizer.shard", "true", "--allreduce", "hierarchical"});
  EXPECT_NE(hierarchical.find("optimizer.shard = true with allreduce = hierarchical"), std::string::npos)
      << hierarchical;
}

// allreduce = auto picks hierarchical on several nodes, which cannot reduce-scatter: with
// a sharded optimizer the library gets flat, so a multi-node sharded run starts.
// One rank per GPU is the product: GPUs where every rank has one, else the CPU.
TEST(Config, DeviceDefaultsToAuto) {
  EXPECT_EQ(parse_train_config({}).device, runtime::DeviceChoice::kAuto);
  EXPECT_EQ(config::option_value(parse_train_config({}), "device"), "auto");
  EXPECT_EQ(config::library_options(parse_train_config({})).runtime.device, runtime::DeviceChoice::kAuto);
}

TEST(LibraryOptions, ShardedOptimizerResolvesAutoAllreduceToFlat) {
  using runtime::Allreduce;
  EXPECT_EQ(config::library_options(parse_train_config({"--optimizer.shard", "true"})).strategy.allreduce,
            Allreduce::kFlat);
  EXPECT_EQ(config::library_options(parse_train_config({})).strategy.allreduce, Allreduce::kAuto);
  EXPECT_EQ(config::library_options(parse_train_config({"--allreduce", "hierarchical"})).strategy.allreduce,
            Allreduce::kHierarchical);
}

TEST(Config, AGptHeadWiderThanTheAttentionSupportsIsAConfigError) {
  const auto message = error_of({"--model", "gpt", "--gpt.width", "512", "--gpt.heads", "2"});
  EXPECT_NE(message.find("gpt.width = 512 / gpt.heads = 2 is a head size of 256, above 128"), std::string::npos)
      << message;
  EXPECT_EQ(parse_train_config({"--model", "gpt", "--gpt.width", "768", "--gpt.heads", "6", "--out", "x"}).gpt_heads, 6);
}
