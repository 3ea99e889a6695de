// mirrored bench layers --config FILE [--steps N] [--warmup N] [--KEY VALUE ...]
//
// Where a step's compute goes, layer by layer: builds the configured model on this
// process alone (no replicas, no optimizer), runs forward, the loss and backward over a
// batch of the training data (images, or for model = gpt the first token windows of
// data.train), and times each layer's forward and backward; a transformer block's time is
// broken down into its parts. For the layers and parts that are matrix products
// (convolution, linear, the gpt's token projections, attention products and tied output
// head) it sets the time against their FLOPs and against this machine's sgemm rate at the
// same thread count, measured before and after the layers: the bound such a layer can
// reach when it is a GEMM.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "bench_attention_sweep.h"
#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/strings.h"
#include "mirrored/core/log.h"
#include "mirrored/core/timer.h"
#include "mirrored/data/dataset.h"
#include "mirrored/data/token_dataset.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/loss.h"
#include "mirrored/nn/model.h"
#include "mirrored/nn/transformer.h"
#include "mirrored/train/config.h"
#include "mirrored/train/library_options.h"
#include "mirrored/train/model_factory.h"
#include "mirrored/train/run_setup.h"

namespace mirrored::cli {
namespace {

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
// convolution or linear layer, 2 x outputs x (weights per output channel); for the tied
// output head, 2 x logits x width; 0 for the rest (elementwise, pooling, normalisation:
// memory-bound, reported by time only). A transformer block's come from its parts.
double forward_flops(nn::Model& model, size_t index, const Shape& input_sample, const Shape& output_sample,
                     int64_t batch) {
  const std::string kind = model.layer(index).kind();
  const double outputs = static_cast<double>(batch * shape_numel(output_sample));
  if (kind == "lm_head") return 2.0 * outputs * static_cast<double>(input_sample.back());
  if (kind != "conv" && kind != "linear") return 0.0;
  for (const auto& info : model.parameters().infos()) {
    if (info.layer != index || info.name.find("weight") == std::string::npos) continue;
    const double per_output = static_cast<double>(shape_numel(info.shape)) / static_cast<double>(info.shape[0]);
    return 2.0 * outputs * per_output;
  }
  return 0.0;
}

// Forward FLOPs of a transformer block's part (TransformerBlock::forward's names) for
// samples [T, C]: the token projections are [C] -> [3C], [C], [4C] and [4C] -> [C] per
// token; the attention core is q k^T and p v over the causal half, T (T + 1) / 2 pairs per
// head (the fused kernel skips the rest).
double part_forward_flops(const std::string& part, int64_t batch, const Shape& sample) {
  const double tokens = static_cast<double>(batch * sample[0]), c = static_cast<double>(sample[1]);
  if (part == "attn.qkv") return 2.0 * tokens * c * 3.0 * c;
  if (part == "attn.proj") return 2.0 * tokens * c * c;
  if (part == "mlp.fc" || part == "mlp.proj") return 2.0 * tokens * c * 4.0 * c;
  if (part == "attn.core") return 2.0 * tokens * static_cast<double>(sample[0] + 1) * c;
  return 0.0;
}

// Collects the block parts' times: summed within a step (a block adds its residual twice),
// one sample per timed step.
class StepPartTimes final : public nn::PartTimer {
 public:
  struct Times {
    std::vector<double> forward, backward;
  };
  void start(size_t layer, bool backward) {
    layer_ = layer;
    backward_ = backward;
  }
  void add(const char* part, double seconds) override {
    auto& [order, sums] = step_[layer_];
    auto [it, fresh] = sums.try_emplace(part, std::pair<double, double>{0.0, 0.0});
    if (fresh) order.push_back(part);
    (backward_ ? it->second.second : it->second.first) += seconds;
  }
  // Ends a step: its sums become one sample each (when `timed`), then reset.
  void finish_step(bool timed) {
    for (auto& [layer, entry] : step_) {
      auto& [order, sums] = entry;
      auto& parts = parts_[layer];
      if (parts.order.empty()) parts.order = order;
      for (auto& [part, sum] : sums) {
        if (timed) {
          parts.times[part].forward.push_back(sum.first);
          parts.times[part].backward.push_back(sum.second);
        }
        sum = {0.0, 0.0};
      }
    }
  }
  struct LayerParts {
    std::vector<std::string> order;  // first-forward order
    std::map<std::string, Times> times;
  };
  const LayerParts* parts(size_t layer) const {
    const auto it = parts_.find(layer);
    return it == parts_.end() ? nullptr : &it->second;
  }

 private:
  size_t layer_ = 0;
  bool backward_ = false;
  std::map<size_t, std::pair<std::vector<std::string>, std::map<std::string, std::pair<double, double>>>> step_;
  std::map<size_t, LayerParts> parts_;
};

// A batch of the training data: images and labels, or for a gpt the first `batch` windows
// of the token file (inputs and next-token targets), and what the model is built for.
struct BenchBatch {
  Tensor inputs, targets;
  Shape sample_shape;
  int num_classes = 0;
};

BenchBatch load_batch(const train::TrainConfig& config) {
  BenchBatch batch;
  if (config.model == train::ModelKind::kGpt) {
    const auto tokens = data::load_token_dataset(config.train_data, config.data_cache_mb);
    const int64_t context = config.gpt_context;
    const int64_t windows = std::min(config.batch_size, std::max<int64_t>(1, (tokens->size() - 1) / context));
    std::vector<int64_t> offsets(static_cast<size_t>(windows));
    for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<int64_t>(i) * context;
    data::assemble_token_batch(*tokens, offsets, context, batch.inputs, batch.targets);
    batch.sample_shape = {context};
    batch.num_classes = static_cast<int>(tokens->vocab_size());
    return batch;
  }
  const auto dataset = train::load_dataset(config.train_data);
  std::vector<int64_t> indices(static_cast<size_t>(std::min(config.batch_size, dataset->size)));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  data::assemble_batch(*dataset, indices, batch.inputs, batch.targets);
  batch.sample_shape = dataset->sample_shape;
  batch.num_classes = dataset->num_classes;
  return batch;
}

// One table row: name, output shape, medians in ms, and FLOPs against sgemm when > 0.
std::string table_row(std::string row, const std::string& shape_text, double f, double b, double flops,
                      double sgemm) {
  row.resize(std::max<size_t>(row.size() + 1, 19), ' ');
  std::string shape = shape_text;
  shape.resize(std::max<size_t>(shape.size() + 1, 14), ' ');
  row += str_cat(shape, fixed(f * 1e3, 3), "  ", fixed(b * 1e3, 3));
  if (flops > 0) {
    const double rate = flops / (f + b) / 1e9;
    row += str_cat("  ", fixed(flops / 1e6, 1), "  ", fixed(rate, 1), "  ", fixed(100.0 * rate / sgemm, 1));
  }
  return row;
}

}  // namespace

int bench_layers(int&, char**&, const Args& args) {
  StepCounts counts{20, 3};
  bool help = false;
  const train::TrainConfig config = train::parse_train_config(take_step_counts(args, counts), &help);
  if (help) {
    std::puts("usage: mirrored bench layers --config FILE [--steps N (20)] [--warmup N (3)] [--KEY VALUE ...]\n"
              "Times each layer's forward and backward on one process (medians over N steps), a\n"
              "transformer block's parts too, and the loss, and sets the matrix-product layers\n"
              "(convolution, linear, token projections, attention, the tied output head) against\n"
              "this machine's sgemm rate at the same thread count (--threads; 0: every core).");
    return 0;
  }
  const int threads = config.threads > 0 ? static_cast<int>(config.threads)
                                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::set_cpu_threads(threads);
  const BenchBatch data = load_batch(config);
  nn::Model model = train::build_model(train::library_options(config).model, data.sample_shape, data.num_classes);
  model.build(data.sample_shape);
  model.initialize(config.seed);
  const int64_t batch = data.inputs.shape()[0];

  const size_t layers = model.num_layers();
  StepPartTimes part_times;
  for (size_t i = 0; i < layers; ++i)
    if (auto* block = dynamic_cast<nn::TransformerBlock*>(&model.layer(i))) block->set_part_timer(&part_times);

  const double sgemm_before = sgemm_gflops();
  std::vector<std::vector<double>> forward_s(layers), backward_s(layers);
  std::vector<double> loss_s;
  std::vector<Shape> input_shapes(layers), output_shapes(layers);
  nn::CrossEntropyLoss loss;
  Tensor mean_loss({1});
  for (int64_t step = 0; step < counts.warmup + counts.steps; ++step) {
    const bool timed = step >= counts.warmup;
    const Tensor* x = &data.inputs;
    for (size_t i = 0; i < layers; ++i) {
      input_shapes[i] = Shape(x->shape().begin() + 1, x->shape().end());
      part_times.start(i, false);
      Stopwatch clock;
      x = &model.layer(i).forward(*x, nn::Mode::kTrain);
      if (timed) forward_s[i].push_back(clock.seconds());
      output_shapes[i] = Shape(x->shape().begin() + 1, x->shape().end());
    }
    Stopwatch loss_clock;
    loss.forward_to(*x, data.targets, mean_loss);
    if (timed) loss_s.push_back(loss_clock.seconds());
    const Tensor* grad = &loss.grad();
    for (size_t i = layers; i-- > 0;) {
      part_times.start(i, true);
      Stopwatch clock;
      grad = &model.layer(i).backward(*grad, i > 0);
      if (timed) backward_s[i].push_back(clock.seconds());
    }
    part_times.finish_step(timed);
  }

  // Measured on both sides of the layers, so a machine whose speed drifts (shared hosts)
  // is compared against its mean speed over the run.
  const double sgemm_after = sgemm_gflops();
  const double sgemm = 0.5 * (sgemm_before + sgemm_after);
  chief_print(str_cat("mirrored bench layers: model ", train::option_value(config, "model"), ", batch ", batch, ", ",
                      threads, " thread(s), medians over ", counts.steps, " steps after ", counts.warmup,
                      " warm-up; sgemm 512^3: ", fixed(sgemm, 1), " GFLOP/s (", fixed(sgemm_before, 1),
                      " before the layers, ", fixed(sgemm_after, 1), " after)"));
  chief_print("  layer            output        fwd_ms  bwd_ms  MFLOP(f+b)  GFLOP/s  %sgemm");
  double total_s = 0.0, total_flops = 0.0, gemm_s = 0.0;
  for (size_t i = 0; i < layers; ++i) {
    const double f = median(forward_s[i]), b = median(backward_s[i]);
    // Backward: the weight (or key/value) gradient, and the input gradient except for the
    // first layer.
    const double backward_factor = i > 0 ? 3.0 : 2.0;
    double flops = forward_flops(model, i, input_shapes[i], output_shapes[i], batch) * backward_factor;
    const auto* parts = part_times.parts(i);
    if (parts)
      for (const auto& part : parts->order) flops += part_forward_flops(part, batch, input_shapes[i]) * 3.0;
    total_s += f + b;
    total_flops += flops;
    if (flops > 0) gemm_s += f + b;
    chief_print(table_row(str_cat("  ", i, ".", model.layer(i).kind()), shape_str(output_shapes[i]), f, b, flops,
                          sgemm));
    if (!parts) continue;
    for (const auto& part : parts->order) {
      const auto& times = parts->times.at(part);
      chief_print(table_row(str_cat("    ", part), "", median(times.forward), median(times.backward),
                            part_forward_flops(part, batch, input_shapes[i]) * 3.0, sgemm));
    }
  }
  const double rate = total_flops / total_s / 1e9;
  chief_print(str_cat("  loss (softmax cross-entropy and its gradient, ", data.num_classes, " classes): ",
                      fixed(median(loss_s) * 1e3, 3), " ms, not in the total"));
  chief_print(str_cat("  all layers: ", fixed(total_s * 1e3, 3), " ms (", fixed(gemm_s * 1e3, 3),
                      " in layers with matrix products), ", fixed(total_flops / 1e6, 1), " MFLOP, ", fixed(rate, 1),
                      " GFLOP/s = ", fixed(100.0 * rate / sgemm, 1), "% of sgemm"));
  if (config.model == train::ModelKind::kGpt)
    print_attention_context_sweep(config.gpt_width, config.gpt_heads, batch * config.gpt_context,
                                  static_cast<int>(counts.steps), sgemm);
  chief_print(str_cat("layers_ms=", fixed(total_s * 1e3, 3), " sgemm_gflops=", fixed(sgemm, 1),
                      " percent_of_sgemm=", fixed(100.0 * rate / sgemm, 1)));
  return 0;
}

}  // namespace mirrored::cli
