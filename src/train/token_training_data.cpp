// Language-model data: token files read in windows through a bounded cache. Batch b of the
// run (epoch * batches_per_epoch + batch in epoch) is a pure function of (seed, b), so an
// epoch is only a unit of schedule and logs; evaluation scores a fixed set of validation
// windows.
#include <optional>

#include "mirrored/data/token_dataset.h"
#include "mirrored/distribute/distributed_token_dataset.h"
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
  TokenTrainingData(const TrainConfig& config, const LibraryOptions& lib, distribute::MirroredStrategy& strategy,
                    bool with_eval)
      : context_(config.gpt_context) {
    const int replica = strategy.replica_id(), replicas = strategy.num_replicas_in_sync();
    auto train_set =
        naming_key("data.train", [&] { return data::load_token_dataset(config.train_data, config.data_cache_mb); });
    vocab_ = train_set->vocab_size();
    const distribute::TokenDatasetOptions options{lib.train_data.global_batch, context_, lib.train_data.seed};
    train_.emplace(naming_key("data.train", [&] {
      return distribute::DistributedTokenDataset(train_set, options, replica, replicas, strategy.device());
    }));
    if (!with_eval) return;
    auto test_set =
        naming_key("data.test", [&] { return data::load_token_dataset(config.test_data, config.data_cache_mb); });
    if (test_set->vocab_size() != vocab_)
      throw InputError(str_cat("data.test '", config.test_data, "' has a vocabulary of ", test_set->vocab_size(),
                               " tokens but data.train '", config.train_data, "' has ", vocab_),
                       ExitCode::kUsage);
    test_.emplace(naming_key("data.test", [&] {
      return distribute::TokenEvalDataset(test_set, config.eval_batch_size, context_, replica, replicas,
                                          strategy.device(), config.eval_windows);
    }));
  }

  Shape sample_shape() const override { return {context_}; }
  int num_classes() const override { return static_cast<int>(vocab_); }
  int64_t batches_per_epoch() const override { return train_->steps_per_epoch(); }
  int64_t tokens_per_sample() const override { return context_; }

  void start_epoch(int64_t epoch, int64_t first_batch) override { next_ = epoch * batches_per_epoch() + first_batch; }
  const distribute::Batch& next_batch() override { return train_->batch(next_++); }

  EvalResult evaluate(distribute::MirroredStrategy& strategy, distribute::DistributedModel& model) override {
    MIRRORED_CHECK(test_.has_value(), "evaluation without a validation set");
    return train::evaluate(strategy, model, *test_);
  }

 private:
  int64_t context_;
  int64_t vocab_ = 0;
  std::optional<distribute::DistributedTokenDataset> train_;
  std::optional<distribute::TokenEvalDataset> test_;
  int64_t next_ = 0;  // the run's index of the next global batch
};

}  // namespace

std::unique_ptr<TrainingData> token_training_data(const TrainConfig& config, const LibraryOptions& lib,
                                                  distribute::MirroredStrategy& strategy, bool with_eval) {
  return std::make_unique<TokenTrainingData>(config, lib, strategy, with_eval);
}

}  // namespace mirrored::train
