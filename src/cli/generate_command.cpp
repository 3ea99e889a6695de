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
// the key/value cache (nn/gpt_decoder.h) a token costs one position (plus, once per half a
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
#include <fstream>
#include <numeric>
#include <optional>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/checkpoint/saved_model.h"
#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/rng.h"
#include "mirrored/nn/gpt_decoder.h"

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
      "a gpt run's checkpoint (checkpoints/ckpt-*.h5), final.h5, or its directory")(
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
    throw InputError(str_cat("generate: ", saved.config_origin, " names model = ",
                             config::model_kind_name(saved.lib.model.kind), "; generate needs a gpt"),
                     ExitCode::kUsage);
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

// float32 [rows, cols] as NumPy's .npy (format 1.0): the magic, a header dict padded to a
// multiple of 64 bytes, then the values little-endian.
void write_npy(const std::string& path, const std::vector<float>& values, int64_t rows, int64_t cols) {
  std::string header = str_cat("{'descr': '<f4', 'fortran_order': False, 'shape': (", rows, ", ", cols, "), }");
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  FileReplacement out(path);
  const auto length = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(&length, 2);
  out.write(header);
  out.write(values.data(), values.size() * sizeof(float));
  out.commit();
}

// The next-token logits of the window tokens[start, end), by one of the two paths. The first
// call also returns every window position's logits in `all` when asked.
class NextTokenLogits {
 public:
  NextTokenLogits(LoadedModel& loaded, bool cached) : loaded_(loaded), vocab_(loaded.spec.vocab) {
    if (cached) {
      decoder_.emplace(loaded.model.parameters(), loaded.spec);
    } else {
      window_ = Tensor({1, loaded.spec.context}, DType::kI32);
    }
  }

  const float* operator()(const std::vector<int32_t>& tokens, size_t start, std::vector<float>* all) {
    const size_t end = tokens.size();
    if (decoder_) {
      // A new window start invalidates every cached position (they hold absolute positions).
      if (start != cache_start_) {
        decoder_->reset();
        cache_start_ = start;
      }
      const std::vector<float>* logits = nullptr;
      for (size_t i = start + static_cast<size_t>(decoder_->position()); i < end; ++i) {
        logits = &decoder_->step(tokens[i]);
        if (all) all->insert(all->end(), logits->begin(), logits->end());
      }
      MIRRORED_CHECK(logits != nullptr, "no new token for the cache");
      return logits->data();
    }
    const int64_t n = static_cast<int64_t>(end - start);
    int32_t* ids = window_.data<int32_t>();
    std::fill(ids, ids + loaded_.spec.context, 0);
    std::copy(tokens.begin() + static_cast<std::ptrdiff_t>(start), tokens.end(), ids);
    // Causal attention: the padding after position n - 1 cannot change its logits.
    const Tensor& logits = loaded_.model.forward(window_, nn::Mode::kEval);  // [1, context, vocab]
    if (all) all->assign(logits.data<float>(), logits.data<float>() + n * vocab_);
    return logits.data<float>() + (n - 1) * vocab_;
  }

 private:
  LoadedModel& loaded_;
  int64_t vocab_;
  std::optional<nn::GptDecoder> decoder_;
  size_t cache_start_ = SIZE_MAX;
  Tensor window_;
};

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
  NextTokenLogits next_logits(loaded, options.kv_cache);
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
      write_npy(options.logits_out, prompt_logits, rows, loaded.spec.vocab);
      std::string ids;  // what another implementation must be fed to compare
      for (size_t k = start; k < sequence.size(); ++k) ids += str_cat(ids.empty() ? "" : ",", sequence[k]);
      std::fprintf(stderr, "generate: logits [%lld, %lld] of the window's tokens %s written to %s\n",
                   static_cast<long long>(rows), static_cast<long long>(loaded.spec.vocab), ids.c_str(),
                   options.logits_out.c_str());
      if (options.tokens == 0) break;
    }
    const int32_t next = sample_token(logits, loaded.spec.vocab, options.temperature, options.top_k, rng);
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
