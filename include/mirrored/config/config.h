#pragma once
// The training configuration: an INI file whose every key is also a command-line flag
// (`--section.key value` overrides the file; a flag given twice keeps its last value). One
// table of options declares the key, its default, its help text, how to parse it, how to
// print it back and whether it changes the trained result, so `--help`, the parser, the
// resolved config.ini written to the run directory and the resume check cannot drift.
//
// Every enumerated option is parsed once, here, into its enum: an unknown name is an error
// that lists the valid ones, and nothing downstream maps strings again. library_options.h
// turns a TrainConfig into the library's option structs.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "mirrored/core/precision.h"
#include "mirrored/distribute/gradient_reducer.h"
#include "mirrored/distribute/strategy.h"
#include "mirrored/optim/lr_schedule.h"
#include "mirrored/runtime/runtime.h"

namespace mirrored::config {

enum class ModelKind { kMlp, kCnn, kResnet, kGpt };
enum class OptimizerKind { kSgd, kAdam, kAdamW };
enum class ProgressSetting { kAuto, kBar, kPlain, kOff };
enum class ResumeMode { kAuto, kNever, kPath };
enum class NanPolicy { kStop, kSkip };
enum class PreemptionSignal { kUsr1, kUsr2, kTerm, kNone };
// What a lost rank does to the run: abort it (resume from the newest checkpoint), or let the
// survivors shrink to a smaller world and go on (needs MPI with ULFM).
enum class OnFailure { kAbort, kShrink };

// The name config.ini gives the kind (model = mlp).
const char* model_kind_name(ModelKind kind);

struct TrainConfig {
  std::string config_file;          // where the values came from (empty: defaults + flags)
  // data
  std::string train_data = "data/fashion-mnist/train.h5";
  std::string test_data = "data/fashion-mnist/test.h5";
  // image models: the sample shape [C, H, W] the data must have; empty: taken from the data
  std::vector<int64_t> data_shape;
  // model
  ModelKind model = ModelKind::kMlp;
  std::vector<int64_t> hidden = {256, 128};
  // model = cnn
  std::vector<int64_t> cnn_channels = {32, 64};
  int64_t cnn_kernel = 5;
  int64_t cnn_padding = 0;
  std::vector<int64_t> cnn_fc = {128};
  bool cnn_batchnorm = false;
  // model = resnet
  std::vector<int64_t> resnet_channels = {16, 32, 64};
  int64_t resnet_blocks = 2;
  // model = gpt (data.train and data.test are token files, data/token_file.h)
  int64_t gpt_layers = 4;
  int64_t gpt_heads = 4;
  int64_t gpt_width = 128;
  int64_t gpt_context = 64;         // tokens per training window
  double gpt_dropout = 0.0;
  std::string init_from;            // a gpt's initial parameters (GPT-2 safetensors); empty: random
  int64_t data_cache_mb = 256;      // token files: bound of the block cache (0: no bound)
  int64_t eval_every = 0;           // steps between evaluations (0: at each epoch end)
  int64_t eval_windows = 0;         // token models: validation windows evaluated (0: all that fit)
  // cnn and resnet
  bool sync_batchnorm = false;      // batch statistics over the global batch
  double dropout = 0.0;             // cnn: after each hidden fully connected layer
  Precision precision = Precision::kF32;  // matrix products and convolutions (core/precision.h)
  // training-time augmentation (data/augment.h)
  bool augment_flip = false;
  int64_t augment_crop_padding = 0;
  // schedule
  int64_t batch_size = 128;         // global, split evenly over replicas
  int64_t eval_batch_size = 1000;   // per replica
  int64_t epochs = 3;
  int64_t max_steps = 0;            // 0: no limit
  // optimizer
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
  double grad_clip = 0.0;           // > 0: the averaged gradient's global L2 norm is clipped to it
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // learning-rate schedule (optim/lr_schedule.h), in epochs of the training set
  optim::LrScheduleKind lr_schedule = optim::LrScheduleKind::kConstant;
  double lr_warmup_epochs = 0.0;    // linear warmup from lr / warmup steps to lr
  double lr_min = 0.0;              // cosine: the rate at the last step
  std::vector<int64_t> lr_milestones;  // step: epochs after which the rate is multiplied by lr_gamma
  double lr_gamma = 0.1;            // step: the factor
  int64_t lr_warmup_steps = 0;      // > 0: warmup in steps, in place of lr_warmup_epochs
  int64_t lr_decay_steps = 0;       // > 0: cosine reaches lr_min at this step, not at the last epoch's end
  // run
  uint64_t seed = 7;
  std::string out = "runs/default";  // the run directory, once parse_train_config has resolved it
  // Not a key: `out` as the file or the default gave it, when the run went to a subfolder of
  // it (resolve_run_directory); empty when --out on the command line named the run directory.
  std::string out_parent;
  int64_t log_every = 100;
  int64_t threads = 0;              // per rank; 0: cores on this host / ranks on this host
  runtime::Launch launch = runtime::Launch::kAuto;
  runtime::DeviceChoice device = runtime::DeviceChoice::kAuto;
  runtime::BindCores bind_cores = runtime::BindCores::kAuto;  // see runtime/core_binding.h
  // communication
  double bucket_mb = 25.0;          // gradient bucket cap (the first bucket is capped at 1 MB)
  distribute::Overlap overlap = distribute::Overlap::kAuto;
  runtime::Allreduce allreduce = runtime::Allreduce::kAuto;
  distribute::GradCompression grad_compression = distribute::GradCompression::kNone;  // bf16 changes numerics
  int64_t accumulate_steps = 1;     // micro-batches per update (one all-reduce per update)
  distribute::Reduction reduction = distribute::Reduction::kFast;  // invariant: the same bits at any world size
  int64_t reduction_shards = 0;     // invariant: virtual replicas per global batch (0: a default)
  // Not a key: set for the Trainer of a shrunk world, whose ranks may then hold shares of
  // the global batch that differ by one sample in fast mode (a fresh start refuses them).
  bool uneven_batch_shares = false;
  bool optimizer_shard = false;     // ZeRO stage 1: optimizer state sharded over replicas
  double collective_timeout_s = 300.0;
  int64_t trace_collectives = 2000;  // flight recorder ring per rank (0: off)
  double straggler_threshold = 0.75;  // a rank scoring below this (median time / its time) is slow
  int64_t straggler_window = 3;       // ... at this many log points in a row: a straggler record
  std::string timeline;             // Chrome trace JSON file (empty: off)
  int64_t timeline_steps = 20;      // steps recorded in the timeline
  ProgressSetting progress = ProgressSetting::kAuto;  // rank-0 progress on stderr
  bool quiet = false;               // command line only: the final result alone
  bool verbose = false;             // command line only: model summary, every log line
  bool dry_run = false;             // command line only: check and print the configuration, train nothing
  // checkpoints (<out>/checkpoints) and failure handling
  int64_t checkpoint_every_steps = 0;   // 0: not by step count
  int64_t checkpoint_every_epochs = 1;  // 0: not at epoch ends
  int64_t checkpoint_keep = 3;          // newest files kept
  bool checkpoint_async = true;         // written on a background thread (checkpoint_writer.h)
  ResumeMode resume = ResumeMode::kAuto;
  std::string resume_path;              // resume = kPath: a checkpoint file or directory
  NanPolicy nan_policy = NanPolicy::kStop;
  PreemptionSignal preemption_signal = PreemptionSignal::kUsr1;  // checkpoint and exit 7 on it
  OnFailure on_failure = OnFailure::kAbort;
  int64_t shrink_min_replicas = 1;  // on_failure = shrink: fewer survivors end the run
  int64_t shrink_spares = 0;        // on_failure = shrink: ranks started beyond the world, waiting to replace a lost one
  // Not a key: the keys the config file or a flag set (the others hold defaults), so that a
  // shape read from init_from fills in what was left out and checks what was given.
  std::set<std::string> given_keys;
};

// Parses `args` (the words after `mirrored train`). `--config FILE` names the INI file;
// flags override it, and a flag given more than once keeps its last value. Throws
// InputError(kUsage) naming the file or flag, the key and what was expected; an unknown
// key or name lists the valid ones. Sets *help_requested on --help and returns defaults.
// Without --out on the command line, `out` is resolved to the run's subfolder
// (resolve_run_directory, reading SLURM_JOB_ID).
TrainConfig parse_train_config(const std::vector<std::string>& args, bool* help_requested = nullptr);
// INI text (a run's config.ini) through the same table. `origin` names it in errors; keys
// this version does not know are ignored when `ignore_unknown_keys` (an older run's file).
TrainConfig parse_config_text(const std::string& ini, const std::string& origin, bool ignore_unknown_keys = false);
std::string train_config_help();
std::vector<std::string> train_config_keys();
// The resolved configuration as INI text (parses back to the same TrainConfig).
std::string to_ini(const TrainConfig& config);
// The printed value of one key (as in config.ini), e.g. option_value(c, "overlap") == "auto".
std::string option_value(const TrainConfig& config, const std::string& key);
// The run directories (docs/training.md#run-directories). `out` from a file or the default
// is a parent: a run goes to <out>/slurm-<SLURM_JOB_ID> inside a Slurm job (a requeued job
// finds its own run and resumes), else to <out>/run-<8 hex digits>, a hash of the
// result-changing keys (the same configuration resumes its own run; a changed lr or seed
// starts a new one beside it). --out on the command line is the run directory itself.
// Every rank parses the same arguments in the same job, so every rank names the same folder.
std::string run_folder_name(const TrainConfig& config, const char* slurm_job_id);
// Sets out_parent to `out` (if not set yet) and out to its subfolder run_folder_name(...).
void resolve_run_directory(TrainConfig& config, const char* slurm_job_id);
// "key old -> new" for every option that changes what training computes (the table says
// which) and differs between the two configurations.
std::vector<std::string> result_changes(const TrainConfig& before, const TrainConfig& now);

}  // namespace mirrored::config
