#pragma once
// The training configuration: an INI file whose every key is also a command-line flag
// (`--section.key value` overrides the file). One table of options declares the key, its
// default, its help text, how to parse it and how to print it back, so `--help`, the
// parser and the resolved config.ini written to the run directory cannot drift.
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::train {

struct TrainConfig {
  std::string config_file;          // where the values came from (empty: defaults + flags)
  // data
  std::string train_data = "data/fashion-mnist/train.h5";
  std::string test_data = "data/fashion-mnist/test.h5";
  // model
  std::string model = "mlp";
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
  // cnn and resnet
  bool sync_batchnorm = false;      // batch statistics over the global batch
  double dropout = 0.0;             // cnn: after each hidden fully connected layer
  // training-time augmentation (data/augment.h)
  bool augment_flip = false;
  int64_t augment_crop_padding = 0;
  // schedule
  int64_t batch_size = 128;         // global, split evenly over replicas
  int64_t eval_batch_size = 1000;   // per replica
  int64_t epochs = 3;
  int64_t max_steps = 0;            // 0: no limit
  // optimizer
  std::string optimizer = "sgd";
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // learning-rate schedule (optim/lr_schedule.h), in epochs of the training set
  std::string lr_schedule = "constant";  // constant | cosine | step
  double lr_warmup_epochs = 0.0;    // linear warmup from lr / warmup steps to lr
  double lr_min = 0.0;              // cosine: the rate at the last step
  std::vector<int64_t> lr_milestones;  // step: epochs after which the rate is multiplied by lr_gamma
  double lr_gamma = 0.1;            // step: the factor
  // run
  uint64_t seed = 7;
  std::string out = "runs/default";
  int64_t log_every = 100;
  int64_t threads = 0;              // per rank; 0: cores on this host / ranks on this host
  std::string launch = "auto";      // auto | mpi | local
  std::string device = "cpu";       // auto | cpu | cuda
  // communication
  double bucket_mb = 25.0;          // gradient bucket cap (the first bucket is capped at 1 MB)
  bool overlap = true;              // all-reduce buckets while backward still runs
  std::string allreduce = "auto";   // auto | flat | hierarchical (one leader per node)
  std::string grad_compression = "none";  // none | bf16 (changes numerics)
  int64_t accumulate_steps = 1;     // micro-batches per update (one all-reduce per update)
  double collective_timeout_s = 300.0;
  std::string timeline;             // Chrome trace JSON file (empty: off)
  int64_t timeline_steps = 20;      // steps recorded in the timeline
  std::string progress = "auto";    // auto | bar | plain | off (rank-0 progress on stderr)
  bool quiet = false;               // command line only: the final result alone
  bool verbose = false;             // command line only: model summary, every log line
  // checkpoints (<out>/checkpoints) and failure handling
  int64_t checkpoint_every_steps = 0;   // 0: not by step count
  int64_t checkpoint_every_epochs = 1;  // 0: not at epoch ends
  int64_t checkpoint_keep = 3;          // newest files kept
  std::string resume = "auto";          // auto | never | PATH (a checkpoint file or directory)
  std::string nan_policy = "stop";      // stop | skip
  std::string preemption_signal = "USR1";  // checkpoint and exit 7 on it: USR1 | USR2 | TERM | none
};

// Parses `args` (the words after `mirrored train`). `--config FILE` names the INI file.
// Throws InputError(kUsage) naming the file or flag, the key and what was expected; an
// unknown key lists the valid ones. Sets *help_requested on --help and returns defaults.
TrainConfig parse_train_config(const std::vector<std::string>& args, bool* help_requested = nullptr);
std::string train_config_help();
std::vector<std::string> train_config_keys();
// The resolved configuration as INI text (parses back to the same TrainConfig).
std::string to_ini(const TrainConfig& config);

}  // namespace mirrored::train
