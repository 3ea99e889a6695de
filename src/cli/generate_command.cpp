// mirrored generate --checkpoint F [--prompt TEXT] [--tokens N] [--temperature T] [--top_k K]
//                   [--seed S] [--config F] [--tokenizer F.model] [--kv_cache true|false]
//                   [--logits_out F.npy]
// Text from a trained gpt: the prompt, encoded with the run's tokenizer (bytes, or the
// SentencePiece model its token files name), then N tokens sampled one at a time from the
// model's next-token distribution (softmax of logits / T over the K most likely tokens),
// each printed as the bytes it decodes to, on one CPU process. The same checkpoint, prompt
// and seed print the same text.
//
// The window: the model sees at most `context` tokens. It starts with the prompt's newest
// `context`; when a new token would overflow it, it restarts from its newest half, so with
// the key/value cache (nn/text_generation.h, nn/gpt_decoder.h) a token costs one position (plus, once per half a
// context, a refill of half a context) rather than a pass over the whole window. Without the
// cache every token runs the whole window through Model::forward, over the same windows, so
// both give the same tokens up to float rounding (a test holds them to it).
//
// The model is rebuilt from the run's resolved configuration (checkpoint/saved_model.h): a
// checkpoint file carries it; for a parameter file (final.h5) it is the config.ini next to
// it, or --config.
#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/checkpoint/saved_model.h"
#include "mirrored/config/model_identity.h"
#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"
#include "mirrored/io/npy_file.h"
#include "mirrored/nn/text_generation.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

struct GenerateArgs {
  std::string checkpoint, config, prompt = "\n", tokenizer, logits_out;
  int64_t tokens = 256;
  double temperature = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool kv_cache = true;
};

bool parse_generate_args(const Args& args, GenerateArgs& out) {
  po::options_description desc("usage: mirrored generate --checkpoint FILE [options]");
  desc.add_options()("help,h", "print this help")(
      "checkpoint", po::value(&out.checkpoint)->required(),
      "a gpt run's checkpoint (checkpoints/ckpt-*.h5), final.h5, its directory, or its export (model directory or "
      ".safetensors)")(
      "config", po::value(&out.config), "for a final.h5: the run's config.ini (default: next to it)")(
      "prompt", po::value(&out.prompt)->default_value("\n", "newline"), "text the model continues")(
      "tokens", po::value(&out.tokens)->default_value(256), "tokens to sample")(
      "temperature", po::value(&out.temperature)->default_value(1.0),
      "divides the logits: < 1 sharper, > 1 flatter; 0 takes the most likely token")(
      "top_k", po::value(&out.top_k)->default_value(0), "sample among the K most likely tokens (0: all)")(
      "seed", po::value(&out.seed)->default_value(0), "seed of the sampler")(
      "tokenizer", po::value(&out.tokenizer),
      "the run's SentencePiece .model (default: the one its data.train names; bytes for a byte model)")(
      "kv_cache", po::value(&out.kv_cache)->default_value(true),
      "keep each position's keys and values, so a token costs one position (false: a forward pass over the "
      "whole window per token)")(
      "logits_out", po::value(&out.logits_out),
      "write the logits of the prompt's positions (float32 [positions, vocab], NumPy .npy) to this file");
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

// A trained gpt with its parameters and its tokenizer, on this process.
struct LoadedModel {
  nn::GptSpec spec;
  nn::Model model;
  data::Tokenizer tokenizer;
};

LoadedModel load_model(const GenerateArgs& args) {
  const checkpoint::SavedModel saved = checkpoint::find_saved_model("generate", args.checkpoint, args.config);
  if (saved.lib.model.kind != config::ModelKind::kGpt)
    throw InputError(str_cat("generate: ", config::held_model(saved.parameters, saved.config), "; generate needs a gpt"),
                     ExitCode::kCheckpoint);
  const config::ModelInputs inputs = checkpoint::saved_token_model_inputs(saved);
  nn::GptSpec spec = saved.lib.model.gpt;
  spec.vocab = inputs.num_classes;
  spec.context = saved.lib.data.context;
  data::Tokenizer tokenizer = [&] {
    try {
      return checkpoint::saved_tokenizer(saved, inputs.num_classes, args.tokenizer);
    } catch (const InputError& e) {
      throw InputError(str_cat("generate: ", e.what()), e.code());
    }
  }();
  return {spec, checkpoint::load_saved_model(saved, inputs), std::move(tokenizer)};
}

// The prompt's logits as --logits_out asks, with the command's name on its errors.
void write_prompt_logits(const std::string& path, const std::vector<float>& logits, int64_t rows, int64_t vocab) {
  try {
    io::write_npy_f32(path, logits, rows, vocab);
  } catch (const InputError& e) {
    throw InputError(str_cat("generate: ", e.what()), e.code());
  } catch (const Error& e) {
    throw Error(e.code(), str_cat("generate: ", e.what()));
  }
}

}  // namespace

int generate_command(const Args& args) {
  GenerateArgs options;
  if (!parse_generate_args(args, options)) return 0;
  LoadedModel loaded = load_model(options);
  const auto context = static_cast<size_t>(loaded.spec.context);
  std::vector<int32_t> sequence = loaded.tokenizer.encode(options.prompt);
  for (const int32_t token : sequence)
    if (token >= loaded.spec.vocab)
      throw InputError(str_cat("generate: the prompt holds byte ", token, ", outside the model's vocabulary of ",
                               loaded.spec.vocab, " tokens"),
                       ExitCode::kUsage);
  const size_t keep = std::max<size_t>(1, context / 2);  // what a full window restarts from
  size_t start = sequence.size() > context ? sequence.size() - context : 0;
  nn::NextTokenLogits next_logits(loaded.model, loaded.spec, options.kv_cache);
  Rng rng(options.seed);
  std::fwrite(options.prompt.data(), 1, options.prompt.size(), stdout);
  std::vector<float> prompt_logits;
  const auto began = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < options.tokens || (i == 0 && !options.logits_out.empty()); ++i) {
    if (sequence.size() - start > context) start = sequence.size() - keep;
    const bool first = i == 0 && !options.logits_out.empty();
    const float* logits = next_logits(sequence, start, first ? &prompt_logits : nullptr);
    if (first) {
      const int64_t rows = static_cast<int64_t>(prompt_logits.size()) / loaded.spec.vocab;
      write_prompt_logits(options.logits_out, prompt_logits, rows, loaded.spec.vocab);
      std::string ids;  // what another implementation must be fed to compare
      for (size_t k = start; k < sequence.size(); ++k) ids += str_cat(ids.empty() ? "" : ",", sequence[k]);
      std::fprintf(stderr, "generate: logits [%lld, %lld] of the window's tokens %s written to %s\n",
                   static_cast<long long>(rows), static_cast<long long>(loaded.spec.vocab), ids.c_str(),
                   options.logits_out.c_str());
      if (options.tokens == 0) break;
    }
    const int32_t next = nn::sample_token(logits, loaded.spec.vocab, options.temperature, options.top_k, rng);
    sequence.push_back(next);
    const std::string& text = loaded.tokenizer.token_bytes(next);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (options.tokens > 0)
    std::fprintf(stderr, "generate: %lld tokens in %.3f s, %.3f ms/token (%s, context %zu, tokenizer %s)\n",
                 static_cast<long long>(options.tokens), seconds, 1e3 * seconds / static_cast<double>(options.tokens),
                 options.kv_cache ? "key/value cache" : "no cache: the whole window per token", context,
                 loaded.tokenizer.name().c_str());
  return 0;
}

}  // namespace mirrored::cli
