// A custom training loop on mirrored's strategy API, as a TensorFlow user writes one with
// tf.distribute: the strategy splits the global batch over replicas, builds the model on
// the chief and mirrors it, averages gradients, and reduces values across replicas.
//
//   mpirun -np 2 custom_loop DATA_DIR [STEPS]     (DATA_DIR holds train.h5 and test.h5)
#include <mirrored/mirrored.h>

#include <cstdio>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  try {
    mirrored::Runtime runtime(argc, argv);
    if (argc < 2) {
      mirrored::chief_print("usage: custom_loop DATA_DIR [STEPS]");
      return 2;
    }
    const std::string data_dir = argv[1];
    const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 300;
    mirrored::kernels::set_cpu_threads(1);

    mirrored::MirroredStrategy strategy(runtime);
    auto train_set = std::make_shared<const mirrored::data::Dataset>(
        mirrored::data::load_hdf5_dataset(data_dir + "/train.h5"));
    auto test_set = std::make_shared<const mirrored::data::Dataset>(
        mirrored::data::load_hdf5_dataset(data_dir + "/test.h5"));

    // Global batch 128: each of N replicas takes 128 / N samples of every step.
    auto train = strategy.distribute_dataset(train_set, {.global_batch = 128, .seed = 7, .shuffle = true});
    auto test = strategy.distribute_eval_dataset(test_set, 1000);
    auto model = strategy.scope([&] { return mirrored::nn::mlp({{256, 128}, train_set->num_classes}); },
                                {train_set->sample_shape, /*seed=*/7});
    mirrored::optim::Sgd optimizer(model.parameters(), {.lr = 0.05f, .momentum = 0.9f});
    mirrored::nn::CrossEntropyLoss loss_fn;

    // One replica's step: forward, backward, gradients averaged over replicas, update.
    auto step = [&](const mirrored::Batch& batch) {
      model.zero_grad();
      const auto value = loss_fn.forward(model.forward(batch.images, mirrored::nn::Mode::kTrain), batch.labels);
      model.backward(loss_fn.grad());
      model.synchronize_gradients();
      optimizer.step();
      return value.mean_loss;
    };

    int64_t done = 0;
    for (int64_t epoch = 0; done < steps; ++epoch) {
      for (const auto& batch : train.epoch(epoch)) {
        const float loss = strategy.run(step, batch);
        const float mean_loss = strategy.reduce(mirrored::ReduceOp::kMean, loss);
        if (++done % 100 == 0)
          mirrored::chief_print(mirrored::str_cat("step ", done, "  loss ", mean_loss));
        if (done == steps) break;
      }
    }
    const mirrored::EvalResult result = mirrored::evaluate(strategy, model, test);
    mirrored::chief_print(mirrored::str_cat("replicas ", strategy.num_replicas_in_sync(), "  steps ", done,
                                            "  test accuracy ", result.accuracy, "  test loss ", result.loss));
    return 0;
  } catch (const mirrored::Error& error) {
    mirrored::rank_error(error.what());
    mirrored::Runtime::abort_job(error.code());
  }
}
