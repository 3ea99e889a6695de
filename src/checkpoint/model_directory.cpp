#include "mirrored/checkpoint/model_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mirrored/core/error.h"
#include "mirrored/core/file_replacement.h"
#include "mirrored/core/strings.h"
#include "mirrored/io/jsonl_writer.h"

namespace mirrored::checkpoint {
namespace fs = std::filesystem;
namespace {

io::JsonText raw(std::string text) { return {std::move(text)}; }

// Creates `dir` when missing (0777 less the umask, as mkdir(1)), then checks what is there
// without following a symlink: a directory of this user.
void make_model_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw Error(ExitCode::kWriteFailed,
                str_cat("export: cannot create the directory '", dir, "': ", std::strerror(errno)));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const char* what =
        error == ELOOP || error == ENOTDIR ? "is a symlink or a file, not a directory" : std::strerror(error);
    throw Error(ExitCode::kWriteFailed,
                str_cat("export: '", dir, "' ", what, "; pass a new directory or a .safetensors file to --out"));
  }
  struct stat info {};
  const bool ours = ::fstat(fd, &info) == 0 && info.st_uid == ::geteuid();
  ::close(fd);
  if (!ours)
    throw Error(ExitCode::kWriteFailed, str_cat("export: the directory '", dir,
                                                "' belongs to another user; pass a directory of your own"));
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str_cat("export: cannot read the tokenizer model '", path, "'"), ExitCode::kUsage);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

int64_t positive_integer(const io::SafetensorsFile& file, const std::string& key) {
  const auto found = file.metadata().find(key);
  const std::string problem =
      found == file.metadata().end() ? "is missing" : str_cat("is '", found->second, "', expected a positive integer");
  if (found != file.metadata().end()) {
    const std::string& text = found->second;
    if (!text.empty() && text.size() <= 12 && text.find_first_not_of("0123456789") == std::string::npos) {
      const int64_t value = std::stoll(text);
      if (value > 0) return value;
    }
  }
  throw InputError(str_cat("'", file.path(), "': metadata key ", key, " ", problem,
                           " (a gpt's shape, as `mirrored export` writes it)"),
                   ExitCode::kUsage);
}

}  // namespace

std::string gpt2_config_json(const nn::GptSpec& spec) {
  const std::string dropout = str_cat(spec.dropout);
  return io::to_json({{"architectures", raw("[\"GPT2LMHeadModel\"]")},
                      {"model_type", std::string("gpt2")},
                      {"vocab_size", spec.vocab},
                      {"n_positions", spec.context},
                      {"n_ctx", spec.context},
                      {"n_embd", spec.width},
                      {"n_layer", spec.layers},
                      {"n_head", spec.heads},
                      // mirrored's MLP is 4 x wide, as GPT-2's default (null) says.
                      {"n_inner", 4 * spec.width},
                      // GPT-2's tanh approximation, which nn::gelu computes.
                      {"activation_function", std::string("gelu_new")},
                      {"layer_norm_epsilon", raw("1e-05")},
                      // Dropout after the embeddings and the residual branches; none on the
                      // attention weights.
                      {"embd_pdrop", raw(dropout)},
                      {"resid_pdrop", raw(dropout)},
                      {"attn_pdrop", raw("0.0")},
                      {"initializer_range", raw("0.02")},
                      {"scale_attn_weights", raw("true")},
                      {"tie_word_embeddings", raw("true")},
                      {"torch_dtype", std::string("float32")}}) +
         "\n";
}

std::string gpt2_generation_config_json(const nn::GptSpec& spec) {
  // `mirrored generate`'s defaults: sampling from the whole distribution at temperature 1.
  // The vocabularies mirrored trains have no bos/eos token, so none is named.
  return io::to_json({{"do_sample", raw("true")},
                      {"temperature", raw("1.0")},
                      {"top_k", int64_t{0}},
                      {"max_length", spec.context}}) +
         "\n";
}

void write_model_directory(const std::string& dir, const ModelDirectory& contents) {
  make_model_directory(dir);
  const fs::path folder(dir);
  // The tokenizer first: a model without the tokenizer it reads is of no use.
  const std::string tokenizer = (folder / kTokenizerFileName).string();
  if (!contents.tokenizer_model.empty()) {
    replace_file(tokenizer, read_whole(contents.tokenizer_model));
  } else if (::unlink(tokenizer.c_str()) != 0 && errno != ENOENT) {  // an earlier export's, of another model
    throw Error(ExitCode::kWriteFailed, str_cat("export: cannot remove the earlier '", tokenizer,
                                                "' (this model has none): ", std::strerror(errno)));
  }
  io::write_safetensors((folder / kModelFileName).string(), contents.tensors, contents.metadata);
  replace_file((folder / "config.json").string(), gpt2_config_json(contents.spec));
  replace_file((folder / "generation_config.json").string(), gpt2_generation_config_json(contents.spec));
}

std::string model_file_in(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const std::string file = (fs::path(path) / kModelFileName).string();
    if (!fs::exists(file, error))
      throw InputError(str_cat("the directory '", path, "' has no ", kModelFileName,
                               " (expected a model directory written by `mirrored export --out DIR`)"),
                       ExitCode::kCheckpoint);
    return file;
  }
  if (!fs::exists(path, error))
    throw InputError(str_cat("'", path, "' does not exist"), ExitCode::kCheckpoint);
  return path;
}

bool is_safetensors_model(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) return fs::exists(fs::path(path) / kModelFileName, error);
  return path.ends_with(".safetensors");
}

nn::GptSpec gpt2_spec_of(const std::string& path) {
  const io::SafetensorsFile file(model_file_in(path));
  nn::GptSpec spec;
  spec.layers = positive_integer(file, "n_layer");
  spec.heads = positive_integer(file, "n_head");
  spec.width = positive_integer(file, "n_embd");
  spec.context = positive_integer(file, "n_positions");
  spec.vocab = positive_integer(file, "vocab_size");
  return spec;
}

}  // namespace mirrored::checkpoint
