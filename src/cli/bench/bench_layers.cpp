// mirrored bench layers --config FILE [--steps N] [--warmup N] [--KEY VALUE ...]
//
// Where a step's compute goes, layer by layer: builds the configured model on this
// process alone (no replicas, no optimizer), runs Model::forward, the loss and
// Model::backward (the calls of a training step) over a batch of the training data (images,
// or for model = gpt the first token windows of data.train), and times each layer's
// forward and backward through the model's LayerTimer; a composite layer's time (a
// transformer block's) is broken down into the parts it reports (Layer::parts). Each layer
// and part reports its FLOPs (Layer::forward_flops); where they are matrix products the
// time is set against them and against this machine's sgemm rate at the same thread
// count, measured before and after the layers: the bound such a layer can reach when it
// is a GEMM.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "../commands.h"
#include "../parse_options.h"
#include "bench_attention_sweep.h"
#include "sgemm_bound.h"
#include "mirrored/config/config.h"
#include "mirrored/config/library_options.h"
#include "mirrored/config/model_factory.h"
#include "mirrored/config/run_setup.h"
#include "mirrored/core/log.h"
#include "mirrored/core/strings.h"
#include "mirrored/core/timer.h"
#include "mirrored/kernels/kernels.h"
#include "mirrored/nn/loss.h"
#include "mirrored/nn/model.h"
#include "mirrored/nn/part_timer.h"
#include "mirrored/train/model_data.h"

namespace mirrored::cli {
namespace {

using Clock = double (*)();

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Collects the times of the layers' parts (Layer::parts): summed within a step (a block
// adds its residual twice), one sample per timed step.
class StepPartTimes final : public nn::PartTimer {
 public:
  explicit StepPartTimes(Clock clock) : clock_(clock) {}
  double now() const override { return clock_(); }
  struct Times {
    std::vector<double> forward, backward;
  };
  void start(size_t layer, bool backward) {
    layer_ = layer;
    backward_ = backward;
  }
  void add(const char* part, double seconds) override {
    auto& sum = step_[layer_][part];
    (backward_ ? sum.second : sum.first) += seconds;
  }
  // Ends a step: its sums become one sample each (when `timed`), then reset.
  void finish_step(bool timed) {
    for (auto& [layer, sums] : step_)
      for (auto& [part, sum] : sums) {
        if (timed) {
          times_[layer][part].forward.push_back(sum.first);
          times_[layer][part].backward.push_back(sum.second);
        }
        sum = {0.0, 0.0};
      }
  }
  // Null when the layer's part was never timed.
  const Times* times(size_t layer, const std::string& part) const {
    const auto in_layer = times_.find(layer);
    if (in_layer == times_.end()) return nullptr;
    const auto it = in_layer->second.find(part);
    return it == in_layer->second.end() || it->second.forward.empty() ? nullptr : &it->second;
  }

 private:
  Clock clock_;
  size_t layer_ = 0;
  bool backward_ = false;
  std::map<size_t, std::map<std::string, std::pair<double, double>>> step_;
  std::map<size_t, std::map<std::string, Times>> times_;
};

// One table row: name, output shape, medians in ms, the share of the step (`step` seconds),
// and FLOPs against sgemm when > 0.
std::string table_row(std::string row, const std::string& shape_text, double f, double b, double step, double flops,
                      double sgemm) {
  row.resize(std::max<size_t>(row.size() + 1, 19), ' ');
  std::string shape = shape_text;
  shape.resize(std::max<size_t>(shape.size() + 1, 14), ' ');
  row += str_cat(shape, fixed(f * 1e3, 3), "  ", fixed(b * 1e3, 3), "  ", fixed(100.0 * (f + b) / step, 1));
  if (flops > 0) {
    const double rate = flops / (f + b) / 1e9;
    row += str_cat("  ", fixed(flops / 1e6, 1), "  ", fixed(rate, 1), "  ", fixed(100.0 * rate / sgemm, 1));
  }
  return row;
}

// The row of a layer that another one computes (Model::computed_by): its time is that one's.
std::string fused_row(std::string row, std::string shape, const std::string& computed_by) {
  row.resize(std::max<size_t>(row.size() + 1, 19), ' ');
  shape.resize(std::max<size_t>(shape.size() + 1, 14), ' ');
  return str_cat(row, shape, "(in ", computed_by, ")");
}

// Every layer's forward and backward times over the timed steps (one sample a step), its
// parts' through the PartTimer, and the loss's, taken while Model::forward and
// Model::backward run as in a training step.
class LayerTimes final : public nn::LayerTimer {
 public:
  LayerTimes(size_t layers, Clock clock) : forward(layers), backward(layers), parts(clock), clock_(clock) {}
  double now() const override { return clock_(); }
  void begin(size_t layer, bool backward_pass) override { parts.start(layer, backward_pass); }
  void end(size_t layer, bool backward_pass, double seconds) override {
    if (timed) (backward_pass ? backward : forward)[layer].push_back(seconds);
  }

  bool timed = false;  // false during the warm-up steps
  std::vector<std::vector<double>> forward, backward;
  std::vector<double> loss;
  StepPartTimes parts;

 private:
  Clock clock_;
};

void time_layers(nn::Model& model, const train::HostBatch& data, const StepCounts& counts, LayerTimes& times) {
  model.set_layer_timer(&times);
  for (size_t i = 0; i < model.num_layers(); ++i) model.layer(i).set_part_timer(&times.parts);
  nn::CrossEntropyLoss loss;
  Tensor mean_loss({1});
  for (int64_t step = 0; step < counts.warmup + counts.steps; ++step) {
    times.timed = step >= counts.warmup;
    const Tensor& output = model.forward(data.inputs, nn::Mode::kTrain);
    const double loss_start = times.now();
    loss.forward_to(output, data.targets, mean_loss);
    if (times.timed) times.loss.push_back(times.now() - loss_start);
    model.backward(loss.grad());
    times.parts.finish_step(times.timed);
  }
  for (size_t i = 0; i < model.num_layers(); ++i) model.layer(i).set_part_timer(nullptr);
  model.set_layer_timer(nullptr);
}

// The step's matrix-product FLOPs and its time (layers and loss), as the table adds them up.
struct StepTotals {
  double flops = 0.0, seconds = 0.0;
};

// The table: a row per layer and per part it reports, then the totals.
StepTotals print_table(nn::Model& model, const LayerTimes& times, int64_t batch, int num_classes, double sgemm) {
  // The step: every layer's forward and backward, and the loss.
  double step_s = median(times.loss);
  for (size_t i = 0; i < model.num_layers(); ++i) step_s += median(times.forward[i]) + median(times.backward[i]);
  chief_print("  layer            output        fwd_ms  bwd_ms  %step  MFLOP(f+b)  GFLOP/s  %sgemm");
  double total_s = 0.0, total_flops = 0.0, gemm_s = 0.0;
  for (size_t i = 0; i < model.num_layers(); ++i) {
    const nn::Layer& layer = model.layer(i);
    const double f = median(times.forward[i]), b = median(times.backward[i]);
    // Backward: the weight (or key/value) gradient, and the input gradient except for the
    // first layer.
    const double flops = layer.forward_flops(batch) * (i > 0 ? 3.0 : 2.0);
    total_s += f + b;
    total_flops += flops;
    if (flops > 0) gemm_s += f + b;
    if (const size_t by = model.computed_by(i); by != i) {
      chief_print(fused_row(str_cat("  ", i, ".", layer.kind()), shape_str(model.layer_output_shape(i)),
                            str_cat(by, ".", model.layer(by).kind())));
      continue;
    }
    chief_print(table_row(str_cat("  ", i, ".", layer.kind()), shape_str(model.layer_output_shape(i)), f, b, step_s,
                          flops, sgemm));
    for (const nn::LayerPart& part : layer.parts(batch)) {
      const auto* part_times = times.parts.times(i, part.name);
      if (!part_times) continue;
      chief_print(table_row(str_cat("    ", part.name), "", median(part_times->forward), median(part_times->backward),
                            step_s, part.forward_flops * 3.0, sgemm));
    }
  }
  const double rate = total_flops / total_s / 1e9;
  const double loss_s = median(times.loss);
  chief_print(str_cat("  loss (softmax cross-entropy and its gradient, ", num_classes, " classes): ",
                      fixed(loss_s * 1e3, 3), " ms, ", fixed(100.0 * loss_s / step_s, 1), "% of the step"));
  chief_print(str_cat("  all layers: ", fixed(total_s * 1e3, 3), " ms (", fixed(gemm_s * 1e3, 3),
                      " in layers with matrix products), ", fixed(total_flops / 1e6, 1), " MFLOP, ", fixed(rate, 1),
                      " GFLOP/s = ", fixed(100.0 * rate / sgemm, 1), "% of sgemm"));
  // The bound: the step's products at the sgemm rate, against layers and loss together.
  const double bound_s = total_flops / (sgemm * 1e9);
  chief_print(str_cat("  step (layers + loss): ", fixed(step_s * 1e3, 3), " ms; bound (its FLOPs at the sgemm rate): ",
                      fixed(bound_s * 1e3, 3), " ms = ", fixed(100.0 * bound_s / step_s, 1), "% of the step"));
  chief_print(str_cat("layers_ms=", fixed(total_s * 1e3, 3), " sgemm_gflops=", fixed(sgemm, 1),
                      " percent_of_sgemm=", fixed(100.0 * rate / sgemm, 1),
                      " percent_of_bound=", fixed(100.0 * bound_s / step_s, 1)));
  return {total_flops, step_s};
}

// A bf16 step's products against the bf16 product's own rate (512^3, operands rounded
// once), which is several times sgemm's where the CPU multiplies bf16 natively.
void print_bf16_bound(const StepTotals& step, Clock clock) {
  const double rate = bf16_gemm_gflops(clock);
  const double bound_s = step.flops / (rate * 1e9);
  chief_print(str_cat("  bf16 bound: the same FLOPs at the 512^3 bf16 product rate of ", fixed(rate, 1), " GFLOP/s (",
                      kernels::cpu_bf16_method(), "): ", fixed(bound_s * 1e3, 3), " ms = ",
                      fixed(100.0 * bound_s / step.seconds, 1), "% of the step"));
  chief_print(str_cat("bf16_gflops=", fixed(rate, 1), " percent_of_bf16_bound=", fixed(100.0 * bound_s / step.seconds, 1)));
}

}  // namespace

int bench_layers(int&, char**&, const Args& args) {
  StepCounts counts{20, 3};
  bool help = false, cpu_time = false;
  const config::TrainConfig config =
      config::parse_train_config(take_step_counts(args, counts, {{"--cpu-time", &cpu_time}}), &help);
  if (help) {
    std::puts("usage: mirrored bench layers --config FILE [--steps N (20)] [--warmup N (3)] [--cpu-time]\n"
              "                              [--KEY VALUE ...]\n"
              "Times each layer's forward and backward on one process (medians over N steps), the\n"
              "parts a layer reports (a transformer block's) too, and the loss, with each one's share\n"
              "of the step, and sets the layers' FLOPs (convolution, dense, attention, the tied output\n"
              "head) against this machine's sgemm rate at the same thread count (--threads; 0: every\n"
              "core). --cpu-time: every time, sgemm's included, is the process's CPU time instead of\n"
              "wall time (a host shared with other work inflates wall time, far less CPU time).");
    return 0;
  }
  const config::LibraryOptions lib = config::library_options(config);
  const int threads = config::threads_for_one_process(lib.threads);
  kernels::read_cpu_settings();
  kernels::set_cpu_threads(threads);
  const train::HostBatch data = train::load_first_batch(lib.data, lib.data.train, lib.train_data.global_batch);
  const config::ModelInputs& inputs = data.model_inputs;
  nn::Model model = config::build_model(lib.model, inputs.sample_shape, inputs.num_classes);
  model.build(inputs.sample_shape);
  model.initialize(lib.train_data.seed);
  const int64_t batch = data.inputs.shape()[0];

  // sgemm measured on both sides of the layers, so a machine whose speed drifts (shared
  // hosts) is compared against its mean speed over the run.
  const Clock clock = cpu_time ? process_cpu_seconds : nn::wall_seconds;
  const double sgemm_before = sgemm_gflops(clock);
  LayerTimes times(model.num_layers(), clock);
  time_layers(model, data, counts, times);
  const double sgemm_after = sgemm_gflops(clock);
  const double sgemm = 0.5 * (sgemm_before + sgemm_after);
  chief_print(str_cat("mirrored bench layers: model ", config::model_kind_name(lib.model.kind), ", batch ", batch, ", ",
                      threads, " thread(s), ", cpu_time ? "CPU time" : "wall time", ", medians over ", counts.steps,
                      " steps after ", counts.warmup, " warm-up; sgemm 512^3: ", fixed(sgemm, 1), " GFLOP/s (", fixed(sgemm_before, 1),
                      " before the layers, ", fixed(sgemm_after, 1), " after)"));
  const StepTotals step = print_table(model, times, batch, inputs.num_classes, sgemm);
  if (lib.model.precision == Precision::kBF16) print_bf16_bound(step, clock);
  if (lib.model.kind == config::ModelKind::kGpt)
    print_attention_context_sweep(lib.model.gpt.width, lib.model.gpt.heads, batch * lib.model.gpt.context,
                                  static_cast<int>(counts.steps), sgemm, clock);
  return 0;
}

}  // namespace mirrored::cli
