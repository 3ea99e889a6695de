// A custom training loop on mirrored's strategy API, as a TensorFlow user writes one with
// tf.distribute: the strategy splits the global batch over replicas, builds the model on
// the chief and mirrors it, averages gradients, and reduces values across replicas.
// The options come from the same resolution `mirrored train` uses (the defaults of its
// configuration: an mlp 256,128, sgd with momentum, global batch 128, seed 7), and each
// step is the library's train_step, the one `mirrored train` runs.
//
//   mpirun -np 2 custom_loop DATA_DIR [STEPS]     (DATA_DIR holds train.h5 and test.h5)
#include <mirrored/mirrored.h>
#include <mirrored/config/config.h>
#include <mirrored/config/library_options.h>
#include <mirrored/config/model_factory.h>
#include <mirrored/config/optimizer_factory.h>
#include <mirrored/train/step_losses.h>
#include <mirrored/train/train_step.h>

#include <cstdio>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  namespace train = mirrored::train;
  try {
    mirrored::Runtime runtime(argc, argv);
    if (argc < 2) {
      mirrored::chief_print("usage: custom_loop DATA_DIR [STEPS]");
      return 2;
    }
    mirrored::config::TrainConfig config;
    config.train_data = std::string(argv[1]) + "/train.h5";
    config.test_data = std::string(argv[1]) + "/test.h5";
    const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 300;
    const mirrored::config::LibraryOptions options = mirrored::config::library_options(config);
    mirrored::kernels::set_cpu_threads(1);

    mirrored::MirroredStrategy strategy(runtime, options.strategy);
    auto train_set = std::make_shared<const mirrored::data::Dataset>(
        mirrored::data::load_hdf5_dataset(config.train_data));
    auto test_set = std::make_shared<const mirrored::data::Dataset>(
        mirrored::data::load_hdf5_dataset(config.test_data));

    // Global batch 128: each of N replicas takes 128 / N samples of every step.
    auto train_data = strategy.distribute_dataset(train_set, options.train_data);
    auto test_data = strategy.distribute_eval_dataset(test_set, config.eval_batch_size);
    auto model = strategy.scope(
        [&] { return mirrored::config::build_model(options.model, train_set->sample_shape, train_set->num_classes); },
        {train_set->sample_shape, config.seed, options.reducer, options.accumulate_steps});
    // This replica's part of the parameters: all of them, or its shard with optimizer.shard.
    auto optimizer = mirrored::config::make_optimizer(options.optimizer, model.parameters(), model.shard());
    mirrored::nn::CrossEntropyLoss loss_fn;

    // The losses stay on the model's device until they are printed, every 100 steps: a
    // step never waits for a GPU to hand its loss back.
    constexpr int64_t kPrintEvery = 100;
    train::StepLosses losses(model.parameters().flat_params().device(), options.accumulate_steps, kPrintEvery);
    int64_t done = 0;
    for (int64_t epoch = 0; done < steps; ++epoch) {
      for (const auto& batch : train_data.epoch(epoch)) {
        // One replica's step: forward, backward, gradients averaged over replicas, update.
        train::StepHooks hooks;
        hooks.losses = losses.slots(done % kPrintEvery);
        strategy.run(train::train_step, model, *optimizer, loss_fn, [&]() -> const mirrored::Batch& { return batch; },
                     done, hooks);
        if (++done % kPrintEvery == 0) {
          const double local = losses.sum(0, kPrintEvery) / static_cast<double>(kPrintEvery);
          const double mean_loss = strategy.reduce(mirrored::ReduceOp::kMean, local);
          mirrored::chief_print(mirrored::str_cat("step ", done, "  loss ", mean_loss, " (mean of the last ",
                                                  kPrintEvery, " steps)"));
          losses.restart();
        }
        if (done == steps) break;
      }
    }
    const mirrored::EvalResult result = mirrored::evaluate(strategy, model, test_data);
    mirrored::chief_print(mirrored::str_cat("replicas ", strategy.num_replicas_in_sync(), "  steps ", done,
                                            "  test accuracy ", result.accuracy, "  test loss ", result.loss));
    return 0;
  } catch (const mirrored::Error& error) {
    mirrored::rank_error(error.what());
    mirrored::Runtime::abort_job(error.code());
  }
}
