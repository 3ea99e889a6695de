// mirrored bench layers --config FILE [--steps N] [--warmup N] [--KEY VALUE ...]
//
// Where a step's compute goes, layer by layer: builds the configured model on this
// process alone (no replicas, no optimizer), runs forward and backward over a batch of
// the training data, and times each layer's forward and backward. For the layers that
// are matrix products (convolution, linear) it sets the time against their FLOPs and
// against this machine's sgemm rate at the same thread count, measured before and after
// the layers: the bound
// a convolution or linear layer can reach when it is a GEMM.
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/data/dataset.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/model.h"
#include "mirrored/train/config.h"
#include "mirrored/train/library_options.h"
#include "mirrored/train/model_factory.h"
#include "mirrored/train/run_setup.h"

namespace mirrored::cli {
namespace {

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Best of several timed runs of a 512 x 512 x 512 sgemm: the rate BLAS reaches on this
// machine with the threads set, in GFLOP/s.
double sgemm_gflops() {
  constexpr int64_t kSize = 512;
  Tensor a({kSize, kSize}), b({kSize, kSize}), c({kSize, kSize});
  for (int64_t i = 0; i < kSize * kSize; ++i) {
    a.data<float>()[i] = static_cast<float>(i % 7) * 0.25f;
    b.data<float>()[i] = static_cast<float>(i % 5) * 0.5f;
  }
  kernels::gemm(false, false, 1.0f, a, b, 0.0f, c);  // warm-up
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    Stopwatch clock;
    int reps = 0;
    while (clock.seconds() < 0.1) {
      kernels::gemm(false, false, 1.0f, a, b, 0.0f, c);
      ++reps;
    }
    best = std::max(best, 2.0 * kSize * kSize * kSize * reps / clock.seconds() / 1e9);
  }
  return best;
}

// Multiply-add FLOPs of one forward of layer `index` for a batch of `batch`: for a
// convolution or linear layer, 2 x outputs x (weights per output channel); 0 for the
// rest (elementwise, pooling, normalisation: memory-bound, reported by time only).
double forward_flops(nn::Model& model, size_t index, const Shape& output_sample, int64_t batch) {
  const std::string kind = model.layer(index).kind();
  if (kind != "conv" && kind != "linear") return 0.0;
  for (const auto& info : model.parameters().infos()) {
    if (info.layer != index || info.name.find("weight") == std::string::npos) continue;
    const double per_output = static_cast<double>(shape_numel(info.shape)) / static_cast<double>(info.shape[0]);
    return 2.0 * static_cast<double>(batch * shape_numel(output_sample)) * per_output;
  }
  return 0.0;
}

}  // namespace

int bench_layers(int&, char**&, const Args& args) {
  StepCounts counts{20, 3};
  bool help = false;
  const train::TrainConfig config = train::parse_train_config(take_step_counts(args, counts), &help);
  if (help) {
    std::puts("usage: mirrored bench layers --config FILE [--steps N (20)] [--warmup N (3)] [--KEY VALUE ...]\n"
              "Times each layer's forward and backward on one process (medians over N steps) and\n"
              "sets convolution and linear layers against this machine's sgemm rate at the same\n"
              "thread count (--threads; 0: every core).");
    return 0;
  }
  const int threads = config.threads > 0 ? static_cast<int>(config.threads)
                                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::set_cpu_threads(threads);
  const auto dataset = train::load_dataset(config.train_data);
  nn::Model model = train::build_model(train::library_options(config).model, dataset->sample_shape,
                                       dataset->num_classes);
  model.build(dataset->sample_shape);
  model.initialize(config.seed);
  const int64_t batch = config.batch_size;
  std::vector<int64_t> indices(static_cast<size_t>(std::min(batch, dataset->size)));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  Tensor images, labels;
  data::assemble_batch(*dataset, indices, images, labels);

  const double sgemm_before = sgemm_gflops();
  const size_t layers = model.num_layers();
  std::vector<std::vector<double>> forward_s(layers), backward_s(layers);
  std::vector<Shape> output_shapes(layers);
  for (int64_t step = 0; step < counts.warmup + counts.steps; ++step) {
    const bool timed = step >= counts.warmup;
    const Tensor* x = &images;
    for (size_t i = 0; i < layers; ++i) {
      Stopwatch clock;
      x = &model.layer(i).forward(*x, nn::Mode::kTrain);
      if (timed) forward_s[i].push_back(clock.seconds());
      output_shapes[i] = Shape(x->shape().begin() + 1, x->shape().end());
    }
    // A fixed output gradient: the loss's cost is not a layer's.
    Tensor dy(x->shape());
    for (int64_t j = 0; j < dy.numel(); ++j) dy.data<float>()[j] = 1e-3f * static_cast<float>(j % 11 - 5);
    const Tensor* grad = &dy;
    for (size_t i = layers; i-- > 0;) {
      Stopwatch clock;
      grad = &model.layer(i).backward(*grad, i > 0);
      if (timed) backward_s[i].push_back(clock.seconds());
    }
  }

  // Measured on both sides of the layers, so a machine whose speed drifts (shared hosts)
  // is compared against its mean speed over the run.
  const double sgemm_after = sgemm_gflops();
  const double sgemm = 0.5 * (sgemm_before + sgemm_after);
  chief_print(str_cat("mirrored bench layers: model ", train::option_value(config, "model"), ", batch ",
                      images.shape()[0], ", ", threads, " thread(s), medians over ", counts.steps, " steps after ",
                      counts.warmup, " warm-up; sgemm 512^3: ", fixed(sgemm, 1), " GFLOP/s (", fixed(sgemm_before, 1),
                      " before the layers, ", fixed(sgemm_after, 1), " after)"));
  chief_print("  layer            output        fwd_ms  bwd_ms  MFLOP(f+b)  GFLOP/s  %sgemm");
  double total_s = 0.0, total_flops = 0.0, gemm_s = 0.0;
  for (size_t i = 0; i < layers; ++i) {
    const double f = median(forward_s[i]), b = median(backward_s[i]);
    const double flops_f = forward_flops(model, i, output_shapes[i], images.shape()[0]);
    // Backward: the weight gradient, and the input gradient except for the first layer.
    const double flops = flops_f * (i > 0 ? 3.0 : 2.0);
    total_s += f + b;
    total_flops += flops;
    std::string row = str_cat("  ", i, ".", model.layer(i).kind());
    row.resize(std::max<size_t>(row.size() + 1, 19), ' ');
    std::string shape = shape_str(output_shapes[i]);
    shape.resize(std::max<size_t>(shape.size() + 1, 14), ' ');
    row += str_cat(shape, fixed(f * 1e3, 3), "  ", fixed(b * 1e3, 3));
    if (flops > 0) {
      gemm_s += f + b;
      const double rate = flops / (f + b) / 1e9;
      row += str_cat("  ", fixed(flops / 1e6, 1), "  ", fixed(rate, 1), "  ", fixed(100.0 * rate / sgemm, 1));
    }
    chief_print(row);
  }
  const double rate = total_flops / total_s / 1e9;
  chief_print(str_cat("  all layers: ", fixed(total_s * 1e3, 3), " ms (", fixed(gemm_s * 1e3, 3),
                      " in convolution and linear layers), ", fixed(total_flops / 1e6, 1), " MFLOP, ",
                      fixed(rate, 1), " GFLOP/s = ", fixed(100.0 * rate / sgemm, 1), "% of sgemm"));
  chief_print(str_cat("layers_ms=", fixed(total_s * 1e3, 3), " sgemm_gflops=", fixed(sgemm, 1),
                      " percent_of_sgemm=", fixed(100.0 * rate / sgemm, 1)));
  return 0;
}

}  // namespace mirrored::cli
