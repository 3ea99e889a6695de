// Language-model data: token files read in windows through a bounded cache. Batch b of the
// run (epoch * batches_per_epoch + batch in epoch) is a pure function of (seed, b), so an
// epoch is only a unit of schedule and logs; evaluation scores a fixed set of validation
// windows.
#include <optional>

#include "mirrored/data/token_dataset.h"
#include "mirrored/data/token_file.h"
#include "mirrored/distribute/distributed_token_dataset.h"
#include "mirrored/train/loaded_datasets.h"
#include "mirrored/train/model_data.h"
#include "training_data_kinds.h"

namespace mirrored::train {
namespace {

// Errors about a token file name the key that chose it (the file itself they name already).
template <typename Make>
auto naming_key(const std::string& key, Make&& make) {
  try {
    return make();
  } catch (const InputError& e) {
    throw InputError(str_cat(key, ": ", e.what()), e.code());
  }
}

class TokenTrainingData final : public TrainingData {
 public:
  TokenTrainingData(const config::LibraryOptions& lib, distribute::MirroredStrategy& strategy, bool with_eval,
                    LoadedDatasets& datasets)
      : context_(lib.data.context) {
    const config::DataSpec& files = lib.data;
    auto train_set = naming_key("data.train", [&] { return datasets.tokens(files.train, files.cache_mb); });
    vocab_ = train_set->vocab_size();
    const distribute::TokenDatasetOptions options{lib.train_data.global_batch, context_, lib.train_data.seed};
    train_.emplace(naming_key("data.train", [&] {
      return distribute::DistributedTokenDataset(train_set, options, strategy.batch_share(options.global_batch),
                                                 strategy.device());
    }));
    if (!with_eval) return;
    test_ = naming_key("data.test",
                       [&] { return load_eval_data(files, files.test, files.eval_batch_size, strategy, datasets); });
    // Token ids mean text only through their tokenizer: a model scored on another's ids
    // would report a meaningless loss.
    const data::TokenFileInfo& train_info = train_set->info();
    const data::TokenFileInfo test_info = data::describe_token_file(files.test);
    if (!data::same_tokenizer(train_info, test_info))
      throw InputError(str_cat("data.train '", files.train, "' was made with tokenizer ",
                               data::describe_tokenizer(train_info), " but data.test '", files.test, "' with ",
                               data::describe_tokenizer(test_info),
                               "; expected both from one `mirrored data import-text`"),
                       ExitCode::kUsage);
    if (test_->inputs().num_classes != vocab_)
      throw InputError(str_cat("data.test '", files.test, "' has a vocabulary of ", test_->inputs().num_classes,
                               " tokens but data.train '", files.train, "' has ", vocab_),
                       ExitCode::kUsage);
  }

  Shape sample_shape() const override { return {context_}; }
  int num_classes() const override { return static_cast<int>(vocab_); }
  int64_t batches_per_epoch() const override { return train_->steps_per_epoch(); }
  int64_t tokens_per_sample() const override { return context_; }

  void start_epoch(int64_t epoch, int64_t first_batch) override { next_ = epoch * batches_per_epoch() + first_batch; }
  const distribute::Batch& next_batch() override { return train_->batch(next_++); }

  EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) override {
    MIRRORED_CHECK(test_ != nullptr, "evaluation without a validation set");
    return test_->evaluate(strategy, model);
  }

 private:
  int64_t context_;
  int64_t vocab_ = 0;
  std::optional<distribute::DistributedTokenDataset> train_;
  std::unique_ptr<EvalData> test_;
  int64_t next_ = 0;  // the run's index of the next global batch
};

}  // namespace

std::unique_ptr<TrainingData> token_training_data(const config::LibraryOptions& lib,
                                                  distribute::MirroredStrategy& strategy, bool with_eval,
                                                  LoadedDatasets& datasets) {
  return std::make_unique<TokenTrainingData>(lib, strategy, with_eval, datasets);
}

}  // namespace mirrored::train
