// mirrored generate --checkpoint F [--prompt TEXT] [--tokens N] [--temperature T] [--top_k K]
//                   [--seed S] [--config F]
// Text from a trained gpt: the prompt's bytes, then N tokens sampled one at a time from the
// model's next-token distribution (softmax of logits / T over the K most likely tokens), on
// one CPU process. The same checkpoint, prompt and seed print the same text.
//
// The model is rebuilt from the run's resolved configuration (train/saved_model.h): a
// checkpoint file carries it; for a parameter file (final.h5) it is the config.ini next to
// it, or --config.
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"
#include "mirrored/train/saved_model.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

struct GenerateArgs {
  std::string checkpoint, config, prompt = "\n";
  int64_t tokens = 256;
  double temperature = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
};

bool parse_generate_args(const Args& args, GenerateArgs& out) {
  po::options_description desc("usage: mirrored generate --checkpoint FILE [options]");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&out.checkpoint)->required(),
      "a gpt run's checkpoint (checkpoints/ckpt-*.h5), final.h5, or its directory")(
      "config", po::value(&out.config), "for a final.h5: the run's config.ini (default: next to it)")(
      "prompt", po::value(&out.prompt)->default_value("\n", "newline"), "text the model continues")(
      "tokens", po::value(&out.tokens)->default_value(256), "tokens (bytes) to sample")(
      "temperature", po::value(&out.temperature)->default_value(1.0),
      "divides the logits: < 1 sharper, > 1 flatter; 0 takes the most likely token")(
      "top_k", po::value(&out.top_k)->default_value(0), "sample among the K most likely tokens (0: all)")(
      "seed", po::value(&out.seed)->default_value(0), "seed of the sampler");
  po::variables_map values;
  if (!parse_options(args, desc, nullptr, values, "generate")) return false;
  if (out.tokens < 0)
    throw InputError(str_cat("generate: --tokens ", out.tokens, ": expected an integer >= 0"), ExitCode::kUsage);
  if (!(out.temperature >= 0.0) || !std::isfinite(out.temperature))
    throw InputError(str_cat("generate: --temperature ", out.temperature, ": expected a number >= 0"),
                     ExitCode::kUsage);
  if (out.top_k < 0)
    throw InputError(str_cat("generate: --top_k ", out.top_k, ": expected an integer >= 0"), ExitCode::kUsage);
  if (out.prompt.empty())
    throw InputError("generate: --prompt is empty: expected at least one byte to continue", ExitCode::kUsage);
  return true;
}

// A trained gpt with its parameters, from either kind of file, on this process.
struct LoadedModel {
  int64_t context = 0;
  int64_t vocab = 0;
  nn::Model model;
};

LoadedModel load_model(const GenerateArgs& args) {
  const train::SavedModel saved = train::find_saved_model("generate", args.checkpoint, args.config);
  if (saved.lib.model.kind != train::ModelKind::kGpt)
    throw InputError(str_cat("generate: ", saved.config_origin, " names model = ",
                             train::model_kind_name(saved.lib.model.kind), "; generate needs a gpt"),
                     ExitCode::kUsage);
  const train::ModelInputs inputs = train::saved_token_model_inputs(saved);
  if (inputs.num_classes > 256)
    throw InputError(str_cat("generate: '", saved.parameters, "' is a model of ", inputs.num_classes,
                             " tokens; generate prints byte tokens (a vocabulary of at most 256)"),
                     ExitCode::kUsage);
  return {saved.lib.data.context, inputs.num_classes, train::load_saved_model(saved, inputs)};
}

// One token from `logits` [V]: the most likely at temperature 0, else a draw from the
// softmax of logits / temperature restricted to the top_k most likely (ties keep the lower
// token id, so the choice is a function of the logits and the generator alone).
int32_t sample_token(const float* logits, int64_t vocab, double temperature, int64_t top_k, Rng& rng) {
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (temperature == 0.0) return order.front();
  const size_t keep = top_k > 0 ? static_cast<size_t>(std::min(top_k, vocab)) : order.size();
  std::vector<double> weights(keep);
  const double top = logits[order.front()];
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += weights[i] = std::exp((logits[order[i]] - top) / temperature);
  double u = static_cast<double>(rng.uniform()) * total;
  for (size_t i = 0; i < keep; ++i) {
    if (u < weights[i]) return order[i];
    u -= weights[i];
  }
  return order[keep - 1];
}

}  // namespace

int generate_command(const Args& args) {
  GenerateArgs options;
  if (!parse_generate_args(args, options)) return 0;
  LoadedModel loaded = load_model(options);
  const int64_t context = loaded.context;
  const int64_t vocab = loaded.vocab;
  std::vector<int32_t> sequence;
  for (const char c : options.prompt) {
    const int32_t token = static_cast<uint8_t>(c);  // bytes, not signed chars
    if (token >= vocab)
      throw InputError(str_cat("generate: the prompt holds byte ", token, ", outside the model's vocabulary of ",
                               vocab, " tokens"),
                       ExitCode::kUsage);
    sequence.push_back(token);
  }
  Rng rng(options.seed);
  // Every step runs one full window: tokens at positions 0..n-1, the rest padding. The
  // attention is causal, so the padding after position n-1 cannot change its logits.
  Tensor window({1, context}, DType::kI32);
  std::fwrite(options.prompt.data(), 1, options.prompt.size(), stdout);
  for (int64_t i = 0; i < options.tokens; ++i) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(sequence.size()), context);
    int32_t* ids = window.data<int32_t>();
    std::fill(ids, ids + context, 0);
    std::copy(sequence.end() - n, sequence.end(), ids);
    const Tensor& logits = loaded.model.forward(window, nn::Mode::kEval);  // [1, context, vocab]
    const int32_t next = sample_token(logits.data<float>() + (n - 1) * vocab, vocab, options.temperature,
                                      options.top_k, rng);
    sequence.push_back(next);
    const char byte = static_cast<char>(next);
    std::fwrite(&byte, 1, 1, stdout);
  }
  std::fputc('\n', stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace mirrored::cli
