#include "mirrored/config/config.h"

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "mirrored/comm/health/flight_recorder.h"
#include "mirrored/core/error.h"
#include "mirrored/core/host_memory.h"
#include "mirrored/core/strings.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::config {
namespace po = boost::program_options;
namespace {

// data.cache_mb's largest value: 16 TiB per rank, far past any host's memory, and small
// enough that the bound in bytes (MiB << 20) cannot overflow.
constexpr int64_t kMaxCacheMb = int64_t{1} << 24;

// One option: key, help, how to read a value into the config and write it back, and
// whether a different value changes what training computes (the resume check warns about
// those; the others, like `out` or `threads`, only change how or where it runs).
struct Option {
  std::string key;
  std::string help;
  std::function<void(TrainConfig&, const std::string& value, const std::string& origin)> parse;
  std::function<std::string(const TrainConfig&)> print;
  bool changes_result = true;
};

// Marks an option that does not change the trained result.
Option operational(Option option) {
  option.changes_result = false;
  return option;
}

[[noreturn]] void bad_value(const std::string& origin, const std::string& key, const std::string& value,
                            const std::string& expected) {
  throw InputError(str_cat(origin, ": ", key, " = '", value, "': expected ", expected), ExitCode::kUsage);
}

int64_t parse_int(const std::string& origin, const std::string& key, const std::string& text, int64_t min) {
  const std::string value = trim(text);
  int64_t parsed = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (ec != std::errc() || end != value.data() + value.size() || parsed < min)
    bad_value(origin, key, text, min == 0 ? "an integer >= 0" : str_cat("an integer >= ", min));
  return parsed;
}

double parse_real(const std::string& origin, const std::string& key, const std::string& text, double min,
                  double max, bool min_exclusive, bool max_exclusive, const std::string& expected) {
  const std::string value = trim(text);
  double parsed = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  const bool ok = ec == std::errc() && end == value.data() + value.size() && std::isfinite(parsed) &&
                  (min_exclusive ? parsed > min : parsed >= min) && (max_exclusive ? parsed < max : parsed <= max);
  if (!ok) bad_value(origin, key, text, expected);
  return parsed;
}

// The shortest text that parses back to the same double: 0.05 prints as written, and
// config.ini still reproduces the run bit for bit.
std::string print_real(double value) {
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  return ec == std::errc() ? std::string(text, end) : std::string("?");
}

template <typename T>
Option int_option(std::string key, std::string help, T TrainConfig::*field, int64_t min) {
  return {key, std::move(help),
          [key, field, min](TrainConfig& c, const std::string& v, const std::string& origin) {
            c.*field = static_cast<T>(parse_int(origin, key, v, min));
          },
          [field](const TrainConfig& c) { return std::to_string(c.*field); }};
}

// An integer option whose value is memory held per rank (`bytes_per_unit` each): refused past
// `max` with the memory it would take, before anything is allocated (2e8 recorded
// collectives would take 16 GiB per rank; a cache of 2^44 MiB would wrap to "no bound").
Option memory_option(std::string key, std::string help, int64_t TrainConfig::*field, int64_t max,
                     double bytes_per_unit, std::string unit, std::string takes = "would take") {
  return {key, std::move(help),
          [=](TrainConfig& c, const std::string& v, const std::string& origin) {
            const int64_t value = parse_int(origin, key, v, 0);
            if (value > max)
              throw InputError(str_cat(origin, ": ", key, " = ", value, " ", takes, " ",
                                       bytes_str(static_cast<double>(value) * bytes_per_unit), " per rank",
                                       unit.empty() ? "" : str_cat(" (", bytes_str(bytes_per_unit), " per ", unit, ")"),
                                       "; expected 0 to ", max, " (", bytes_str(static_cast<double>(max) * bytes_per_unit),
                                       ")"),
                               ExitCode::kUsage);
            c.*field = value;
          },
          [field](const TrainConfig& c) { return std::to_string(c.*field); }};
}

Option real_option(std::string key, std::string help, double TrainConfig::*field, double min, double max,
                   bool min_exclusive, bool max_exclusive, std::string expected) {
  return {key, std::move(help),
          [=](TrainConfig& c, const std::string& v, const std::string& origin) {
            c.*field = parse_real(origin, key, v, min, max, min_exclusive, max_exclusive, expected);
          },
          [field](const TrainConfig& c) { return print_real(c.*field); }};
}

Option string_option(std::string key, std::string help, std::string TrainConfig::*field) {
  return {key, std::move(help),
          [key, field](TrainConfig& c, const std::string& v, const std::string& origin) {
            if (trim(v).empty()) bad_value(origin, key, v, "a non-empty value");
            c.*field = trim(v);
          },
          [field](const TrainConfig& c) { return c.*field; }};
}

// An enumerated option: `names` are the canonical spellings (the first one naming a value
// is how it prints), `aliases` further spellings accepted on input.
template <typename E>
struct Named {
  const char* name;
  E value;
};

template <typename E>
Option enum_option(std::string key, std::string help, E TrainConfig::*field, std::vector<Named<E>> names,
                   std::vector<Named<E>> aliases = {}) {
  std::vector<std::string> valid;
  for (const auto& n : names) valid.emplace_back(n.name);
  help += str_cat(" (", join(valid, " | "), ")");
  return {key, std::move(help),
          [key, field, names, aliases, valid](TrainConfig& c, const std::string& v, const std::string& origin) {
            const std::string value = trim(v);
            for (const auto* list : {&names, &aliases})
              for (const auto& n : *list)
                if (value == n.name) {
                  c.*field = n.value;
                  return;
                }
            bad_value(origin, key, v, str_cat("one of: ", join(valid, ", ")));
          },
          [field, names](const TrainConfig& c) {
            for (const auto& n : names)
              if (n.value == c.*field) return std::string(n.name);
            return std::string("?");
          }};
}

Option list_option(std::string key, std::string help, std::vector<int64_t> TrainConfig::*field, int64_t min) {
  return {key, std::move(help),
          [key, field, min](TrainConfig& c, const std::string& v, const std::string& origin) {
            (c.*field).clear();
            for (const auto& part : split(v, ',')) (c.*field).push_back(parse_int(origin, key, part, min));
            if ((c.*field).empty()) bad_value(origin, key, v, "a comma-separated list of integers");
          },
          [field](const TrainConfig& c) { return join(c.*field, ","); }};
}

Option bool_option(std::string key, std::string help, bool TrainConfig::*field) {
  return {key, std::move(help),
          [key, field](TrainConfig& c, const std::string& v, const std::string& origin) {
            const std::string value = trim(v);
            if (value != "true" && value != "false") bad_value(origin, key, v, "one of: true, false");
            c.*field = value == "true";
          },
          [field](const TrainConfig& c) { return std::string(c.*field ? "true" : "false"); }};
}

Option optional_string_option(std::string key, std::string help, std::string TrainConfig::*field) {
  return {key, std::move(help),
          [field](TrainConfig& c, const std::string& v, const std::string&) { c.*field = trim(v); },
          [field](const TrainConfig& c) { return c.*field; }};
}

// data.shape: C,H,W (three integers >= 1), or empty for the shape of the data.
Option image_shape_option() {
  const std::string key = "data.shape";
  return {key,
          "image models: C,H,W the samples of data.train and data.test must have (a mismatch is an error "
          "naming both); unset: the model takes its input shape from the data",
          [key](TrainConfig& c, const std::string& v, const std::string& origin) {
            c.data_shape.clear();
            if (trim(v).empty()) return;
            for (const auto& part : split(v, ',')) c.data_shape.push_back(parse_int(origin, key, part, 1));
            if (c.data_shape.size() != 3) bad_value(origin, key, v, "C,H,W: three integers (channels, height, width)");
          },
          [](const TrainConfig& c) { return join(c.data_shape, ","); }};
}

// resume: auto, never, or a path (anything else that is not empty).
Option resume_option() {
  return {"resume", "auto: newest valid checkpoint in <out>/checkpoints, if written with the same result-changing "
                    "options (else an error); never: start over, removing the earlier run there (checkpoints, "
                    "TensorBoard events, metrics.jsonl, final.h5); or a checkpoint file/dir",
          [](TrainConfig& c, const std::string& v, const std::string& origin) {
            const std::string value = trim(v);
            if (value.empty()) bad_value(origin, "resume", v, "auto, never or a checkpoint file or directory");
            c.resume = value == "auto" ? ResumeMode::kAuto : value == "never" ? ResumeMode::kNever : ResumeMode::kPath;
            c.resume_path = c.resume == ResumeMode::kPath ? value : std::string();
          },
          [](const TrainConfig& c) {
            return c.resume == ResumeMode::kAuto ? std::string("auto")
                   : c.resume == ResumeMode::kNever ? std::string("never")
                                                    : c.resume_path;
          }};
}

// out: where runs go. In a file (or by default) a parent folder, each run in a subfolder of
// it (resolve_run_directory); --out on the command line names the run directory itself.
// Prints what was given, so a run's config.ini read back with --config finds the same run.
Option out_option() {
  return {"out",
          "runs folder: each run goes to <out>/slurm-<job id> under Slurm, else <out>/run-<hash of the "
          "result-changing keys>; --out DIR on the command line is the run directory itself (metrics.jsonl, "
          "config.ini, checkpoints/, final.h5)",
          [](TrainConfig& c, const std::string& v, const std::string& origin) {
            if (trim(v).empty()) bad_value(origin, "out", v, "a non-empty value");
            c.out = trim(v);
            c.out_parent.clear();
          },
          [](const TrainConfig& c) { return c.out_parent.empty() ? c.out : c.out_parent; }};
}

}  // namespace

const char* model_kind_name(ModelKind kind) {
  switch (kind) {
    case ModelKind::kMlp: return "mlp";
    case ModelKind::kCnn: return "cnn";
    case ModelKind::kResnet: return "resnet";
    case ModelKind::kGpt: return "gpt";
  }
  return "unknown";
}

namespace {

const std::vector<Option>& options() {
  using runtime::Allreduce;
  using runtime::DeviceChoice;
  using distribute::GradCompression;
  using runtime::Launch;
  using distribute::Overlap;
  using optim::LrScheduleKind;
  static const std::vector<Option> table = {
      string_option("data.train", "training set (HDF5: /images, /labels; model = gpt: a token file from data import-text); "
                    "a list (a.h5,b.h5) or glob (DIR/train-*.h5) of shards reads as one set",
                    &TrainConfig::train_data),
      operational(string_option("data.test", "test set, evaluated at each epoch end (or every eval_every steps)", &TrainConfig::test_data)),
      image_shape_option(),
      enum_option<ModelKind>("model", "model architecture", &TrainConfig::model,
                             {{model_kind_name(ModelKind::kMlp), ModelKind::kMlp},
                              {model_kind_name(ModelKind::kCnn), ModelKind::kCnn},
                              {model_kind_name(ModelKind::kResnet), ModelKind::kResnet},
                              {model_kind_name(ModelKind::kGpt), ModelKind::kGpt}}),
      {"model.hidden", "hidden layer widths of the mlp, comma separated",
       [](TrainConfig& c, const std::string& v, const std::string& origin) {
         c.hidden.clear();
         for (const auto& part : split(v, ',')) c.hidden.push_back(parse_int(origin, "model.hidden", part, 1));
       },
       [](const TrainConfig& c) { return join(c.hidden, ","); }},
      list_option("cnn.channels", "cnn: output channels of each conv + maxpool stage", &TrainConfig::cnn_channels, 1),
      int_option("cnn.kernel_size", "cnn: square kernel of the convolutions", &TrainConfig::cnn_kernel, 1),
      int_option("cnn.padding", "cnn: zero padding of the convolutions", &TrainConfig::cnn_padding, 0),
      list_option("cnn.fc", "cnn: widths of the fully connected layers before the classifier", &TrainConfig::cnn_fc,
                  1),
      bool_option("cnn.batchnorm", "cnn: batch norm after each convolution", &TrainConfig::cnn_batchnorm),
      list_option("resnet.channels", "resnet: channels of each stage (the stem uses the first)",
                  &TrainConfig::resnet_channels, 1),
      int_option("resnet.blocks", "resnet: residual blocks per stage", &TrainConfig::resnet_blocks, 1),
      // model = gpt: a byte-level language model on token files (data.train, data.test).
      int_option("gpt.layers", "gpt: transformer blocks", &TrainConfig::gpt_layers, 1),
      int_option("gpt.heads", "gpt: attention heads per block (gpt.width must be a multiple)", &TrainConfig::gpt_heads,
                 1),
      int_option("gpt.width", "gpt: embedding width", &TrainConfig::gpt_width, 1),
      int_option("gpt.context", "gpt: tokens per training and validation window", &TrainConfig::gpt_context, 1),
      real_option("gpt.dropout", "gpt: dropout after the embeddings, attention projections and MLPs",
                  &TrainConfig::gpt_dropout, 0, 1, false, true, "a number in [0, 1)"),
      optional_string_option("init_from",
                             "gpt: start a new run from this model directory or safetensors file in GPT-2's layout "
                             "(mirrored export writes them) instead of random weights; the gpt.* shape comes "
                             "from it (a gpt.* key given must agree)",
                             &TrainConfig::init_from),
      operational(memory_option("data.cache_mb", "token and image files: MiB of the file held in the block cache; an image set smaller than this is loaded whole (0: no bound, load image sets whole)",
                                &TrainConfig::data_cache_mb, kMaxCacheMb, 1 << 20, "",
                                "would let the block cache hold up to")),
      operational(int_option("eval_every", "evaluate every N steps (0: at each epoch end)", &TrainConfig::eval_every,
                             0)),
      operational(int_option("eval_windows", "token models: validation windows evaluated (0: every one that fits)",
                             &TrainConfig::eval_windows, 0)),
      int_option("lr_warmup_steps", "linear warmup in steps, in place of lr_warmup_epochs (0: use lr_warmup_epochs)",
                 &TrainConfig::lr_warmup_steps, 0),
      int_option("lr_decay_steps", "cosine: reach lr_min at this step, not at the end of the last epoch (0: off)",
                 &TrainConfig::lr_decay_steps, 0),
      bool_option("model.sync_batchnorm", "batch norm statistics over the global batch (all replicas)",
                  &TrainConfig::sync_batchnorm),
      real_option("model.dropout", "cnn: dropout probability after each hidden fully connected layer",
                  &TrainConfig::dropout, 0, 1, false, true, "a number in [0, 1)"),
      bool_option("augment.flip", "training images mirrored left-right with probability 1/2, per sample and epoch",
                  &TrainConfig::augment_flip),
      int_option("augment.crop_padding",
                 "training images shifted by up to N pixels each way (zero fill), like RandomCrop(padding = N)",
                 &TrainConfig::augment_crop_padding, 0),
      int_option("batch_size", "global batch, split evenly over replicas", &TrainConfig::batch_size, 1),
      operational(int_option("eval_batch_size", "evaluation batch per replica", &TrainConfig::eval_batch_size, 1)),
      // A run extended by more epochs, or stopped early, continues the same run.
      operational(int_option("epochs", "passes over the training set", &TrainConfig::epochs, 1)),
      operational(int_option("max_steps", "stop after this many steps in total (0: no limit)",
                             &TrainConfig::max_steps, 0)),
      enum_option<OptimizerKind>(
          "optimizer", "update rule", &TrainConfig::optimizer,
          {{"sgd", OptimizerKind::kSgd}, {"adam", OptimizerKind::kAdam}, {"adamw", OptimizerKind::kAdamW}}),
      real_option("lr", "learning rate", &TrainConfig::lr, 0, 1e6, true, false, "a number > 0"),
      real_option("momentum", "sgd momentum", &TrainConfig::momentum, 0, 1, false, true, "a number in [0, 1)"),
      real_option("weight_decay", "L2 penalty (decoupled for adamw), on weights (>= 2-D tensors) only",
                  &TrainConfig::weight_decay, 0, 1e6, false, false, "a number >= 0"),
      real_option("grad_clip", "clip the averaged gradient to this global L2 norm before each update (0: off)",
                  &TrainConfig::grad_clip, 0, 1e6, false, false, "a number >= 0"),
      enum_option<LrScheduleKind>(
          "lr_schedule",
          "learning rate after warmup: constant, cosine (decays to lr_min at the end of the last epoch) or step "
          "(times lr_gamma after each of lr_milestones)",
          &TrainConfig::lr_schedule,
          {{"constant", LrScheduleKind::kConstant}, {"cosine", LrScheduleKind::kCosine}, {"step", LrScheduleKind::kStep}}),
      real_option("lr_warmup_epochs", "epochs of linear warmup to lr (fractions allowed; 0: none)",
                  &TrainConfig::lr_warmup_epochs, 0, 1e6, false, false, "a number >= 0"),
      real_option("lr_min", "cosine: the learning rate reached at the end of the last epoch", &TrainConfig::lr_min, 0, 1e6,
                  false, false, "a number >= 0"),
      {"lr_milestones", "step: epochs after which the learning rate is multiplied by lr_gamma, comma separated",
       [](TrainConfig& c, const std::string& v, const std::string& origin) {
         c.lr_milestones.clear();
         if (trim(v).empty()) return;
         for (const auto& part : split(v, ',')) c.lr_milestones.push_back(parse_int(origin, "lr_milestones", part, 1));
         for (size_t i = 1; i < c.lr_milestones.size(); ++i)
           if (c.lr_milestones[i] <= c.lr_milestones[i - 1]) bad_value(origin, "lr_milestones", v, "increasing epochs");
       },
       [](const TrainConfig& c) { return join(c.lr_milestones, ","); }},
      real_option("lr_gamma", "step: factor applied at each milestone", &TrainConfig::lr_gamma, 0, 1, true, false,
                  "a number in (0, 1]"),
      real_option("adam.beta1", "adam first-moment decay", &TrainConfig::beta1, 0, 1, false, true,
                  "a number in [0, 1)"),
      real_option("adam.beta2", "adam second-moment decay", &TrainConfig::beta2, 0, 1, false, true,
                  "a number in [0, 1)"),
      real_option("adam.eps", "adam denominator epsilon", &TrainConfig::eps, 0, 1, true, false, "a number > 0"),
      int_option("seed", "seed for initial weights and data order", &TrainConfig::seed, 0),
      operational(out_option()),
      operational(int_option("log_every", "steps between training log lines and metrics records",
                             &TrainConfig::log_every, 1)),
      operational(int_option("threads", "CPU threads per rank (0: cores on the host / ranks on the host)",
                             &TrainConfig::threads, 0)),
      operational(enum_option<Launch>("launch", "auto: MPI under mpirun/srun, else one local process",
                                      &TrainConfig::launch,
                                      {{"auto", Launch::kAuto}, {"mpi", Launch::kMpi}, {"local", Launch::kLocal}})),
      operational(enum_option<DeviceChoice>(
          "device", "where each replica computes; auto: a GPU per rank when every rank has one, else the CPU",
          &TrainConfig::device,
          {{"auto", DeviceChoice::kAuto}, {"cpu", DeviceChoice::kCpu}, {"cuda", DeviceChoice::kCuda}})),
      operational(enum_option<runtime::BindCores>(
          "bind_cores",
          "auto: each rank's threads on cores of their own, unless the launcher bound the ranks or they "
          "outnumber the cores; off: leave the CPU affinity as the process found it",
          &TrainConfig::bind_cores, {{"auto", runtime::BindCores::kAuto}, {"off", runtime::BindCores::kOff}})),
      real_option("bucket_mb", "gradient bucket size cap in MB (all-reduced as soon as backward fills one)",
                  &TrainConfig::bucket_mb, 0, 1e6, true, false, "a number > 0"),
      // Every mode reduces the same buckets in the same order: bit-identical results.
      operational(enum_option<Overlap>(
          "overlap",
          "how gradient all-reduces overlap backward: thread (a communication thread), inline (nonblocking, "
          "advanced at layer boundaries), off (after backward), auto (thread where a core is free, else inline); "
          "true = thread, false = off",
          &TrainConfig::overlap,
          {{"auto", Overlap::kAuto}, {"thread", Overlap::kThread}, {"inline", Overlap::kInline}, {"off", Overlap::kOff}},
          {{"true", Overlap::kThread}, {"false", Overlap::kOff}})),
      enum_option<Allreduce>("allreduce",
                             "gradient all-reduce: flat, hierarchical (reduce in each node, all-reduce among node "
                             "leaders, broadcast in each node), or auto (hierarchical on several nodes with several "
                             "ranks each)",
                             &TrainConfig::allreduce,
                             {{"auto", Allreduce::kAuto}, {"flat", Allreduce::kFlat},
                              {"hierarchical", Allreduce::kHierarchical}}),
      enum_option<GradCompression>("grad_compression", "gradient wire format; bf16 halves traffic and changes numerics",
                                   &TrainConfig::grad_compression,
                                   {{"none", GradCompression::kNone}, {"bf16", GradCompression::kBf16}}),
      enum_option<Precision>("precision",
                             "matrix products and convolutions: fp32, or bf16 (bfloat16 inputs, float32 "
                             "accumulation; weights, optimizer state, norms, softmax, loss and all-reduce stay fp32)",
                             &TrainConfig::precision, {{"fp32", Precision::kF32}, {"bf16", Precision::kBF16}}),
      int_option("accumulate_steps", "micro-batches of batch_size per update, one all-reduce per update",
                 &TrainConfig::accumulate_steps, 1),
      enum_option<distribute::Reduction>(
          "reduction",
          "how gradients, losses and evaluations are summed over replicas: fast (all-reduce; the same model at "
          "any world size up to float summation order), invariant (the same bits at any world size from 1 to "
          "reduction.shards: per-virtual-replica gradients summed exactly)",
          &TrainConfig::reduction,
          {{"fast", distribute::Reduction::kFast}, {"invariant", distribute::Reduction::kInvariant}}),
      int_option("reduction.shards",
                 "reduction = invariant: virtual replicas per global batch, a divisor of batch_size and the most "
                 "ranks the run can use (0: the largest divisor of batch_size up to 8, or the world size if larger)",
                 &TrainConfig::reduction_shards, 0),
      // Sharding moves where sums are formed, not what is computed: the result equals the
      // unsharded one up to float summation order (as across world sizes), so a resume
      // that flips it is not warned about.
      operational(bool_option("optimizer.shard",
                              "ZeRO stage 1: each replica keeps optimizer state for its own shard of the parameters "
                              "(gradients reduce-scattered, updated shards all-gathered)",
                              &TrainConfig::optimizer_shard)),
      operational(real_option("collective_timeout_s", "abort the job when a collective waits longer (on_failure = shrink: go on without "
                              "the ranks that do not answer; 0: never)",
                              &TrainConfig::collective_timeout_s, 0, 1e9, false, false, "a number >= 0")),
      operational(memory_option("trace.collectives",
                                "flight recorder: each rank keeps its last N collectives, written to <out>/trace on a "
                                "collective timeout, a fatal error or SIGUSR2 (mirrored trace RUN_DIR reads them; 0: off)",
                                &TrainConfig::trace_collectives, comm::kMaxRecordedCollectives,
                                static_cast<double>(comm::FlightRecorder::kBytesPerCollective), "collective")),
      operational(real_option("straggler.threshold",
                              "a rank whose compute time per phase scores below this against the median rank "
                              "(median time / its time) is reported as a straggler",
                              &TrainConfig::straggler_threshold, 0, 1, true, false, "a number in (0, 1]")),
      operational(int_option("straggler.window", "log points in a row a rank must score below straggler.threshold",
                             &TrainConfig::straggler_window, 1)),
      operational(optional_string_option("timeline", "write a Chrome trace (chrome://tracing, Perfetto) to this file",
                                         &TrainConfig::timeline)),
      operational(int_option("timeline_steps", "steps recorded in the timeline", &TrainConfig::timeline_steps, 1)),
      operational(enum_option<ProgressSetting>(
          "progress",
          "rank-0 progress on stderr: auto (a live bar on a terminal, else a line every log_every steps), bar, "
          "plain, off",
          &TrainConfig::progress,
          {{"auto", ProgressSetting::kAuto}, {"bar", ProgressSetting::kBar}, {"plain", ProgressSetting::kPlain},
           {"off", ProgressSetting::kOff}})),
      operational(int_option("checkpoint.every_steps", "write a checkpoint every N steps (0: off)",
                             &TrainConfig::checkpoint_every_steps, 0)),
      operational(int_option("checkpoint.every_epochs", "write a checkpoint every N epochs (0: off)",
                             &TrainConfig::checkpoint_every_epochs, 0)),
      operational(int_option("checkpoint.keep", "newest checkpoints kept in <out>/checkpoints",
                             &TrainConfig::checkpoint_keep, 1)),
      operational(bool_option("checkpoint.async",
                              "write checkpoints on a background thread, which also takes the state's values while "
                              "the next step's forward and backward run (read in place on the CPU, copied on a side "
                              "stream on a GPU); needs an HDF5 built thread-safe, otherwise written in the step",
                              &TrainConfig::checkpoint_async)),
      operational(resume_option()),
      operational(enum_option<PreemptionSignal>(
          "preemption_signal",
          "on this signal (Slurm's --signal=B:USR1@N warning) every rank stops at the same step, the chief writes a "
          "checkpoint, and mirrored exits with status 7 so the job can be requeued",
          &TrainConfig::preemption_signal,
          {{"USR1", PreemptionSignal::kUsr1}, {"USR2", PreemptionSignal::kUsr2}, {"TERM", PreemptionSignal::kTerm},
           {"none", PreemptionSignal::kNone}})),
      operational(enum_option<NanPolicy>("nan_policy", "on a NaN/Inf gradient: stop (exit 6) or skip the step",
                                         &TrainConfig::nan_policy,
                                         {{"stop", NanPolicy::kStop}, {"skip", NanPolicy::kSkip}})),
      operational(enum_option<OnFailure>(
          "on_failure",
          "a lost rank (killed, lost node, silent past collective_timeout_s): abort the job (exit 5; resume from "
          "the newest checkpoint) or shrink (needs Open MPI 5 with ULFM, see mirrored info)",
          &TrainConfig::on_failure, {{"abort", OnFailure::kAbort}, {"shrink", OnFailure::kShrink}})),
      operational(int_option("shrink.min_replicas", "on_failure = shrink: the fewest replicas the run goes on with",
                             &TrainConfig::shrink_min_replicas, 1)),
      operational(int_option("shrink.spares",
                             "on_failure = shrink: hot spares, started beyond the ranks that train (the launcher "
                             "starts world + spares ranks; the highest wait); a lost rank's place goes to the lowest "
                             "spare left, so the world keeps its size, and only without one does it shrink",
                             &TrainConfig::shrink_spares, 0)),
  };
  return table;
}

const Option& find_option(const std::string& key) {
  for (const auto& option : options())
    if (option.key == key) return option;
  throw Error(ExitCode::kFailure, str_cat("no configuration key '", key, "'"));
}

// A flag without a value that may be given more than once (composed flag lists).
po::typed_value<std::vector<std::string>>* repeatable_switch() {
  return po::value<std::vector<std::string>>()->zero_tokens()->composing();
}

po::options_description describe(bool with_command_line_only) {
  po::options_description desc("mirrored train options (INI keys; [section] key = value)");
  if (with_command_line_only) {
    desc.add_options()("help,h", "print this help")("config",
        po::value<std::vector<std::string>>()->composing(), "INI configuration file")(
        "quiet", repeatable_switch(), "print only the final result")(
        "verbose", repeatable_switch(), "also print the model summary and every log line")(
        "dry_run", repeatable_switch(),
        "check the configuration (every key and combination), print it resolved with the run directory, and "
        "exit without reading data or training");
  }
  for (const auto& option : options()) {
    const TrainConfig defaults;
    // A vector of every occurrence: scripts compose flag lists, and the last one wins.
    desc.add_options()(option.key.c_str(),
                       po::value<std::vector<std::string>>()->composing()->value_name(option.print(defaults)),
                       option.help.c_str());
  }
  return desc;
}

// Levenshtein distance: insertions, deletions and substitutions that turn `a` into `b`.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// What other trainers call some keys (Keras, Hugging Face's TrainingArguments, nanoGPT),
// mapped to mirrored's: no edit distance finds `lr` from `learning_rate`.
const std::map<std::string, std::string>& key_aliases() {
  static const std::map<std::string, std::string> aliases = {
      {"learning_rate", "lr"},         {"num_epochs", "epochs"},          {"num_train_epochs", "epochs"},
      {"max_iters", "max_steps"},      {"batch", "batch_size"},           {"output_dir", "out"},
      {"n_layer", "gpt.layers"},       {"n_head", "gpt.heads"},           {"n_embd", "gpt.width"},
      {"block_size", "gpt.context"},   {"warmup_steps", "lr_warmup_steps"}, {"warmup_iters", "lr_warmup_steps"},
      {"lr_decay_iters", "lr_decay_steps"}, {"min_lr", "lr_min"},        {"max_grad_norm", "grad_clip"},
      {"gradient_accumulation_steps", "accumulate_steps"}, {"eval_interval", "eval_every"},
      {"log_interval", "log_every"},   {"dtype", "precision"},            {"init_from_pretrained", "init_from"}};
  return aliases;
}

// The keys nearest to an unknown one: a known alias, keys whose last part (after the
// section's dot) it names, and the keys within a few edits of it (a third of its length,
// at least 2), nearest first, at most 3.
std::vector<std::string> nearest_keys(const std::string& unknown) {
  std::vector<std::string> found;
  if (const auto alias = key_aliases().find(unknown); alias != key_aliases().end()) found.push_back(alias->second);
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, unknown.size() / 3);
  for (const std::string& key : train_config_keys()) {
    const size_t dot = key.rfind('.');
    if (dot != std::string::npos && key.substr(dot + 1) == unknown) scored.emplace_back(0, key);
    else if (const size_t d = edit_distance(unknown, key); d <= limit) scored.emplace_back(d, key);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [distance, key] : scored)
    if (std::find(found.begin(), found.end(), key) == found.end()) found.push_back(key);
  if (found.size() > 3) found.resize(3);
  return found;
}

// `key` as the parser gave it: "--name" from the command line (suggested as flags too),
// "name" or "section.name" from a file.
[[noreturn]] void unknown_key(const std::string& origin, const std::string& key) {
  const size_t dashes = std::min(key.find_first_not_of('-'), key.size());
  std::vector<std::string> nearest = nearest_keys(key.substr(dashes));
  for (std::string& name : nearest) name.insert(0, key.substr(0, dashes));
  throw InputError(str_cat(origin, ": unknown key '", key, "'",
                           nearest.empty() ? std::string() : str_cat("; did you mean ", join(nearest, ", "), "?"),
                           " (mirrored train --help lists every key)"),
                   ExitCode::kUsage);
}

// Checks that need several keys at once.
void check_consistency(const TrainConfig& c, const std::string& origin) {
  if (c.model == ModelKind::kGpt && !c.data_shape.empty())
    throw InputError(str_cat(origin, ": data.shape = ", join(c.data_shape, ","),
                             " is for image models; a gpt's samples are gpt.context tokens"),
                     ExitCode::kUsage);
  if (c.lr_schedule == optim::LrScheduleKind::kCosine && c.lr_min > c.lr)
    throw InputError(str_cat(origin, ": lr_min = ", print_real(c.lr_min), ": expected at most lr = ", print_real(c.lr),
                             " (cosine decays from lr to lr_min)"),
                     ExitCode::kUsage);
  if (c.model == ModelKind::kGpt && c.gpt_width % c.gpt_heads != 0)
    throw InputError(str_cat(origin, ": gpt.width = ", c.gpt_width, " is not divisible by gpt.heads = ", c.gpt_heads,
                             ": each head takes gpt.width / gpt.heads channels"),
                     ExitCode::kUsage);
  if (c.model == ModelKind::kGpt && c.gpt_width / c.gpt_heads > kernels::kMaxAttentionHeadSize)
    throw InputError(str_cat(origin, ": gpt.width = ", c.gpt_width, " / gpt.heads = ", c.gpt_heads, " is a head size of ",
                             c.gpt_width / c.gpt_heads, ", above ", kernels::kMaxAttentionHeadSize,
                             ", the largest the attention supports on any device: raise gpt.heads (GPT-2 uses 64 "
                             "channels per head)"),
                     ExitCode::kUsage);
  if (c.lr_schedule == optim::LrScheduleKind::kStep && c.lr_milestones.empty())
    throw InputError(str_cat(origin, ": lr_schedule = step: expected lr_milestones, the epochs after which the "
                                     "rate drops (e.g. lr_milestones = 3,4)"),
                     ExitCode::kUsage);
  if (c.optimizer_shard && c.grad_compression != distribute::GradCompression::kNone)
    throw InputError(str_cat(origin, ": optimizer.shard = true with grad_compression = bf16: sharded gradients are "
                                     "reduce-scattered in float32; set grad_compression = none or optimizer.shard = false"),
                     ExitCode::kUsage);
  if (c.reduction == distribute::Reduction::kInvariant && c.grad_compression != distribute::GradCompression::kNone)
    throw InputError(str_cat(origin, ": reduction = invariant with grad_compression = bf16: invariant sums are exact "
                                     "sums of float32 gradients; set grad_compression = none or reduction = fast"),
                     ExitCode::kUsage);
  if (c.reduction == distribute::Reduction::kInvariant && c.sync_batchnorm)
    throw InputError(str_cat(origin, ": reduction = invariant with model.sync_batchnorm = true: batch statistics "
                                     "depend on how the batch is spread over replicas; set model.sync_batchnorm = "
                                     "false or reduction = fast"),
                     ExitCode::kUsage);
  if (c.shrink_spares > 0 && c.on_failure != OnFailure::kShrink)
    throw InputError(str_cat(origin, ": shrink.spares = ", c.shrink_spares,
                             " with on_failure = abort: spares take a lost rank's place, which needs on_failure = "
                             "shrink (Open MPI 5 with ULFM); set on_failure = shrink or shrink.spares = 0"),
                     ExitCode::kUsage);
  if (c.optimizer_shard && c.allreduce == runtime::Allreduce::kHierarchical)
    throw InputError(str_cat(origin, ": optimizer.shard = true with allreduce = hierarchical: sharded gradients are "
                                     "reduce-scattered over the flat communicator; set allreduce = flat or auto, or "
                                     "optimizer.shard = false"),
                     ExitCode::kUsage);
}

void apply(TrainConfig& config, const po::variables_map& values, const std::string& origin) {
  for (const auto& option : options())
    if (values.count(option.key)) {
      option.parse(config, values[option.key].as<std::vector<std::string>>().back(), origin);
      config.given_keys.insert(option.key);
    }
}
}  // namespace

std::vector<std::string> train_config_keys() {
  std::vector<std::string> keys;
  for (const auto& option : options()) keys.push_back(option.key);
  return keys;
}

std::string train_config_help() {
  std::ostringstream out;
  out << "usage: mirrored train [--config FILE] [--KEY VALUE ...]\n\n" << describe(true);
  return out.str();
}

namespace {
// INI text into `config`, through the table (later lines win over earlier ones).
void apply_ini(TrainConfig& config, std::istream& text, const std::string& origin, bool ignore_unknown_keys) {
  po::variables_map values;
  try {
    po::store(po::parse_config_file(text, describe(false), ignore_unknown_keys), values);
  } catch (const po::unknown_option& e) {
    unknown_key(origin, e.get_option_name());
  } catch (const po::error& e) {
    throw InputError(str_cat(origin, ": ", e.what()), ExitCode::kUsage);
  }
  apply(config, values, origin);
}
}  // namespace

TrainConfig parse_train_config(const std::vector<std::string>& args, bool* help_requested) {
  TrainConfig config;
  po::variables_map command_line;
  try {
    po::store(po::command_line_parser(args).options(describe(true)).run(), command_line);
  } catch (const po::unknown_option& e) {
    unknown_key("command line", e.get_option_name());
  } catch (const po::error& e) {
    throw InputError(str_cat("command line: ", e.what()), ExitCode::kUsage);
  }
  if (command_line.count("help")) {
    if (help_requested) *help_requested = true;
    return config;
  }
  if (command_line.count("config")) {
    config.config_file = command_line["config"].as<std::vector<std::string>>().back();
    std::ifstream file(config.config_file);
    if (!file)
      throw InputError(str_cat("cannot read config file '", config.config_file, "'"), ExitCode::kUsage);
    apply_ini(config, file, str_cat("config file '", config.config_file, "'"), /*ignore_unknown_keys=*/false);
  }
  apply(config, command_line, "command line");  // flags override the file
  check_consistency(config, config.config_file.empty()
                                ? std::string("command line")
                                : str_cat("config file '", config.config_file, "' (with command-line overrides)"));
  if (!command_line.count("out")) resolve_run_directory(config, std::getenv("SLURM_JOB_ID"));
  config.quiet = command_line.count("quiet") > 0;
  config.verbose = command_line.count("verbose") > 0;
  config.dry_run = command_line.count("dry_run") > 0;
  if (config.quiet && config.verbose)
    throw InputError("command line: --quiet and --verbose exclude each other", ExitCode::kUsage);
  return config;
}

TrainConfig parse_config_text(const std::string& ini, const std::string& origin, bool ignore_unknown_keys) {
  TrainConfig config;
  std::istringstream text(ini);
  apply_ini(config, text, origin, ignore_unknown_keys);
  check_consistency(config, origin);
  return config;
}

std::string option_value(const TrainConfig& config, const std::string& key) { return find_option(key).print(config); }

std::vector<std::string> result_changes(const TrainConfig& before, const TrainConfig& now) {
  std::vector<std::string> changes;
  for (const auto& option : options()) {
    if (!option.changes_result) continue;
    const std::string old_value = option.print(before), new_value = option.print(now);
    if (old_value != new_value) changes.push_back(str_cat(option.key, " ", old_value, " -> ", new_value));
  }
  return changes;
}

std::string run_folder_name(const TrainConfig& config, const char* slurm_job_id) {
  if (slurm_job_id && *slurm_job_id) {
    std::string id(slurm_job_id);
    // A job id from the environment becomes a path component: digits (and Slurm's
    // array/het separators) only, so no value can climb out of `out`.
    const bool plain = id.size() <= 32 && std::all_of(id.begin(), id.end(), [](char ch) {
                         return (ch >= '0' && ch <= '9') || ch == '_' || ch == '+';
                       });
    if (plain) return "slurm-" + id;
  }
  // FNV-1a (64 bits) over "key = value" of every result-changing option, in table order:
  // stable across ranks, hosts and builds, and independent of the operational keys.
  uint64_t hash = 14695981039346656037ull;
  for (const auto& option : options()) {
    if (!option.changes_result) continue;
    for (const char ch : str_cat(option.key, " = ", option.print(config), "\n")) {
      hash ^= static_cast<unsigned char>(ch);
      hash *= 1099511628211ull;
    }
  }
  char name[16];
  std::snprintf(name, sizeof name, "run-%08llx", static_cast<unsigned long long>(hash >> 32));
  return name;
}

void resolve_run_directory(TrainConfig& config, const char* slurm_job_id) {
  const std::string parent = config.out_parent.empty() ? config.out : config.out_parent;
  config.out = (std::filesystem::path(parent) / run_folder_name(config, slurm_job_id)).string();
  config.out_parent = parent;
}

std::string to_ini(const TrainConfig& config) {
  // Top-level keys first, then one [section] per dotted prefix, as INI readers expect.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> sections;
  for (const auto& option : options()) {
    const size_t dot = option.key.find('.');
    const std::string section = dot == std::string::npos ? "" : option.key.substr(0, dot);
    const std::string key = dot == std::string::npos ? option.key : option.key.substr(dot + 1);
    sections[section].emplace_back(key, option.print(config));
  }
  std::ostringstream out;
  out << "# resolved configuration of this run (mirrored " << MIRRORED_VERSION << ")\n";
  for (const auto& [section, entries] : sections) {
    if (!section.empty()) out << "\n[" << section << "]\n";
    for (const auto& [key, value] : entries) out << key << " = " << value << "\n";
  }
  return out.str();
}

}  // namespace mirrored::config
