#include <boost/program_options.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "parse_options.h"
#include "mirrored/core/error.h"
#include "mirrored/core/log.h"
#include "mirrored/data/hdf5_dataset.h"
#include "mirrored/data/idx.h"
#include "mirrored/data/text_import.h"

namespace mirrored::cli {
namespace po = boost::program_options;
namespace {

int import_idx_command(const Args& args) {
  po::options_description desc("mirrored data import-idx options");
  desc.add_options()("help,h", "print this help")(
      "images", po::value<std::string>()->required(), "IDX images file, gzip'd or plain ([N, H, W] uint8)")(
      "labels", po::value<std::string>()->required(), "IDX labels file, gzip'd or plain ([N] uint8)")(
      "out", po::value<std::string>()->required(), "HDF5 file to write (/images, /labels)")(
      "shard_mb", po::value<int64_t>()->default_value(0),
      "write shards of at most this many MiB of samples each, OUT-00000-of-0000N.h5 and on (0: one file)");
  po::variables_map values;
  if (!parse_options(args, desc, nullptr, values, "data import-idx")) return 0;
  const auto out = values["out"].as<std::string>();
  const int64_t shard_mb = values["shard_mb"].as<int64_t>();
  if (shard_mb < 0 || shard_mb > (int64_t{1} << 30))
    throw InputError(str_cat("--shard_mb ", shard_mb, ": expected 0 (one file) to 2^30 MiB"), ExitCode::kUsage);
  const data::ImportedShards written = data::import_idx_shards(
      values["images"].as<std::string>(), values["labels"].as<std::string>(), out, shard_mb << 20);
  if (written.paths.size() == 1) {
    chief_print(str_cat("wrote ", written.samples, " samples to ", out));
  } else {
    const auto count = static_cast<int64_t>(written.paths.size());
    std::string glob = data::shard_name(out, 0, count);
    glob.replace(glob.rfind("-00000-of-"), 10, "-*-of-");
    chief_print(str_cat("wrote ", written.samples, " samples in ", count, " shards, ", written.paths.front(), " to ",
                        written.paths.back(), " (data.train = '", glob, "' reads them as one set)"));
  }
  return 0;
}

// The progress of reading the corpus, on stderr: rewritten in place on a terminal (at most
// 10 times a second), a line every 10 seconds otherwise (a log stays readable).
class ImportProgressLine {
 public:
  ImportProgressLine() : terminal_(isatty(fileno(stderr)) == 1), start_(Clock::now()), last_(start_) {}

  void update(const data::CorpusProgress& progress) {
    const auto now = Clock::now();
    if (now - last_ < (terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(10000))) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "%sreading file %lld of %lld: %.1f MB of text from %.1f MB on disk, %.1f MB/s%s",
                 terminal_ ? "\r" : "", static_cast<long long>(std::min(progress.files_done + 1, progress.files_total)),
                 static_cast<long long>(progress.files_total), static_cast<double>(progress.text_bytes) / 1e6,
                 static_cast<double>(progress.file_bytes) / 1e6,
                 static_cast<double>(progress.text_bytes) / 1e6 / std::max(seconds, 1e-9), terminal_ ? "" : "\n");
    shown_ = true;
  }
  // Ends the line rewritten in place, so what is printed next starts on its own line.
  void finish() {
    if (shown_ && terminal_) std::fputc('\n', stderr);
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool terminal_;
  bool shown_ = false;
  Clock::time_point start_, last_;
};

// What import-text read, wrote and how fast, on stdout.
void print_text_import(const data::TextImportResult& result, bool trained, double seconds) {
  chief_print(str_cat("read ", result.parts.size(), " text file(s), ", result.total_bytes, " bytes (",
                      result.corpus.documents, " document(s), ", result.corpus.file_bytes, " bytes on disk)"));
  if (!result.corpus.skipped.empty()) chief_print(data::describe_skipped(result.corpus.skipped));
  if (!result.tokenizer_path.empty())
    chief_print(str_cat(trained ? "trained " : "copied ", "SentencePiece model (", result.vocab_size, " pieces) to ",
                        result.tokenizer_path));
  const auto wrote = [](int64_t tokens, const std::string& path, const std::vector<std::string>& shards) {
    if (shards.size() <= 1) return str_cat("wrote ", tokens, " tokens to ", path);
    return str_cat("wrote ", tokens, " tokens in ", shards.size(), " shards, ", shards.front(), " to ", shards.back(),
                   " ('", path, "' reads them as one set)");
  };
  chief_print(wrote(result.train_tokens, result.train_path, result.train_shards));
  chief_print(wrote(result.val_tokens, result.val_path, result.val_shards));
  const double per_second = 1.0 / std::max(seconds, 1e-9);
  chief_print(str_cat("imported in ", fixed(seconds, 2), " s: ",
                      fixed(static_cast<double>(result.total_bytes) / 1e6 * per_second, 1), " MB/s of text, ",
                      fixed(static_cast<double>(result.corpus.file_bytes) / 1e6 * per_second, 1), " MB/s from disk, ",
                      fixed(static_cast<double>(result.total_tokens) * per_second, 0), " tokens/s"));
}

int import_text_command(const Args& args) {
  po::options_description desc(
      "mirrored data import-text --out DIR [--tokenizer bytes|sentencepiece|FILE.model] [--field NAME]\n"
      "                          [--shard_mb N] FILE|DIR...\n"
      "Tokens of the inputs concatenated in the order given, nothing put between them. A directory\n"
      "contributes its .txt, .md and .jsonl files (each alone or .gz/.zst) in sorted path order,\n"
      "symlinks and other files skipped and counted; a .jsonl file the --field string of each record;\n"
      "a .gz or .zst file its decompressed text; a .whl or .zip its members matching --members, in\n"
      "sorted path order. The first 90% of the bytes goes to DIR/train.h5, the rest to DIR/val.h5\n"
      "(or shards of them, --shard_mb): byte tokens (uint8, vocabulary 256), or SentencePiece pieces\n"
      "(uint16) of a model trained on the training part (or given), written to DIR/tokenizer.model.\noptions");
  desc.add_options()("help,h", "print this help")(
      "out", po::value<std::string>()->required(), "directory to write train.h5 and val.h5 into")(
      "members", po::value<std::string>()->default_value(data::kDefaultMemberPattern),
      "archive members to import ('*' within a path segment, '**' across segments)")(
      "tokenizer", po::value<std::string>()->default_value("bytes"),
      "bytes, sentencepiece (train a model on the training part), or a SentencePiece .model file")(
      "vocab_size", po::value<int64_t>()->default_value(1024), "sentencepiece: pieces in the trained model")(
      "model_type", po::value<std::string>()->default_value("bpe"), "sentencepiece: bpe or unigram")(
      "field", po::value<std::string>(),
      "the field of each .jsonl record that holds its text (\"text\" in most public corpora)")(
      "shard_mb", po::value<int64_t>()->default_value(0),
      "write each split as shards of at most this many MiB of tokens, train-00000-of-0000N.h5 and on (0: one file)")(
      "input", po::value<std::vector<std::string>>(), "text files, directories or wheels (positional)");
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map values;
  if (!parse_options(args, desc, &positional, values, "data import-text")) return 0;

  if (!values.count("input")) {
    throw InputError("data import-text: no input files (expected text files, directories or a .whl after the options)",
                     ExitCode::kUsage);
  }
  const int64_t shard_mb = values["shard_mb"].as<int64_t>();
  if (shard_mb < 0 || shard_mb > (int64_t{1} << 30))
    throw InputError(str_cat("--shard_mb ", shard_mb, ": expected 0 (one file) to 2^30 MiB"), ExitCode::kUsage);
  data::TextImportOptions options;
  options.member_pattern = values["members"].as<std::string>();
  options.tokenizer = values["tokenizer"].as<std::string>();
  options.training.vocab_size = values["vocab_size"].as<int64_t>();
  options.training.model_type = values["model_type"].as<std::string>();
  if (values.count("field")) options.jsonl_field = values["field"].as<std::string>();
  options.shard_bytes = shard_mb << 20;
  ImportProgressLine progress_line;
  options.progress = [&progress_line](const data::CorpusProgress& progress) { progress_line.update(progress); };
  const bool trains = options.tokenizer == data::kSentencePieceTokenizer;
  if (!trains && (!values["vocab_size"].defaulted() || !values["model_type"].defaulted()))
    throw InputError("data import-text: --vocab_size and --model_type train a model: they need --tokenizer sentencepiece",
                     ExitCode::kUsage);
  const auto start = std::chrono::steady_clock::now();
  data::TextImportResult result;
  try {
    result = data::import_text(values["input"].as<std::vector<std::string>>(), values["out"].as<std::string>(), options);
  } catch (...) {
    progress_line.finish();
    throw;
  }
  progress_line.finish();
  print_text_import(result, trains, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace

int data_command(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::puts("usage: mirrored data import-idx --images FILE --labels FILE --out FILE.h5 [--shard_mb N]\n"
              "       mirrored data import-images --root DIR --out DIR [--size H,W] [--channels 1|3]\n"
              "                                   [--val DIR | --val_fraction F] [--shard_mb N] [--strict] [--threads N]\n"
              "       mirrored data import-text --out DIR [--members GLOB] [--tokenizer bytes|sentencepiece|FILE.model]\n"
              "                                 [--vocab_size N] [--model_type bpe|unigram] FILE...\n"
              "                                 [--field NAME] [--shard_mb N] (FILE: also a directory, .jsonl, .gz, .zst)\n"
              "       mirrored data inspect FILE.h5");
    return args.empty() ? static_cast<int>(ExitCode::kUsage) : 0;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "inspect") return data_inspect_command(rest);
  if (args[0] == "import-idx") return import_idx_command(rest);
  if (args[0] == "import-images") return import_images_command(rest);
  if (args[0] == "import-text") return import_text_command(rest);
  throw InputError(str_cat("unknown data command '", args[0], "'; valid: import-idx, import-images, import-text, inspect"),
                   ExitCode::kUsage);
}

}  // namespace mirrored::cli
