#include "mirrored/distribute/replica_agreement.h"

#include <algorithm>

#include "mirrored/core/error.h"
#include "mirrored/core/fingerprint.h"
#include "mirrored/core/strings.h"
#include "mirrored/distribute/gradient_buckets.h"

namespace mirrored::distribute {
namespace {
std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += str_cat(i ? "," : "", shape[i]);
  return text + "]";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + '\n';
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(text.substr(start, end - start));
  return lines;
}
}  // namespace

std::vector<std::string> describe_replica(const nn::ParameterArena& arena, const ReducerOptions& reducer,
                                          int accumulate_steps, Precision precision) {
  std::vector<std::string> lines;
  for (const auto& info : arena.infos())
    lines.push_back(str_cat("parameter ", info.name, ": shape ", shape_text(info.shape), " at ", info.offset));
  for (size_t i = 0; i < arena.num_buffers(); ++i)
    lines.push_back(str_cat("buffer ", arena.buffer_info(i).name, ": shape ", shape_text(arena.buffer_info(i).shape)));
  const auto buckets = plan_buckets(arena, reducer.caps);
  lines.push_back(str_cat("gradient buckets (bucket_mb): ", buckets.size(), ", capped at ",
                          reducer.caps.first_bucket_bytes, " bytes first, then ", reducer.caps.bucket_bytes));
  for (size_t b = 0; b < buckets.size(); ++b)
    lines.push_back(str_cat("gradient bucket ", b, ": elements ", buckets[b].begin, " to ", buckets[b].end));
  lines.push_back(str_cat("precision: ", precision_name(precision)));
  lines.push_back(str_cat("optimizer.shard: ", reducer.shard ? "true" : "false"));
  lines.push_back(str_cat("grad_compression: ", reducer.compression == GradCompression::kBf16 ? "bf16" : "none"));
  lines.push_back(str_cat("accumulate_steps: ", accumulate_steps));
  // Last: a model with the same first tensors and more of them is named by its count.
  lines.push_back(str_cat("parameters: ", arena.size(), " tensors, ", arena.numel(), " elements"));
  return lines;
}

std::string first_difference(const std::vector<std::string>& chief, const std::vector<std::string>& other) {
  const size_t common = std::min(chief.size(), other.size());
  for (size_t i = 0; i < common; ++i) {
    if (chief[i] == other[i]) continue;
    // Lines are "what: value"; the same "what" on both sides names the field.
    const size_t colon = chief[i].find(": ");
    if (colon != std::string::npos && other[i].compare(0, colon + 2, chief[i], 0, colon + 2) == 0)
      return str_cat(chief[i].substr(0, colon), ": '", chief[i].substr(colon + 2), "' on the chief vs '",
                     other[i].substr(colon + 2), "'");
    return str_cat("'", chief[i], "' on the chief vs '", other[i], "'");
  }
  if (chief.size() == other.size()) return "";
  return chief.size() > common ? str_cat("'", chief[common], "' on the chief is missing")
                               : str_cat("'", other[common], "' is not on the chief");
}

void require_same_replicas(const std::vector<std::string>& description, comm::Communicator& comm) {
  if (comm.size() == 1) return;
  const std::string text = joined(description);
  const auto fingerprints = comm.allgather_value<int64_t>(static_cast<int64_t>(fingerprint_text(text)));
  if (std::all_of(fingerprints.begin(), fingerprints.end(), [&](int64_t f) { return f == fingerprints[0]; })) return;
  const auto all = comm.allgather_strings(text);
  const auto chief = split_lines(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    const std::string difference = first_difference(chief, split_lines(all[r]));
    if (difference.empty()) continue;
    throw InputError(str_cat("the replicas were started differently: rank ", r, " differs from rank 0 in ",
                             difference, " (every rank must run the same model, configuration and build)"),
                     ExitCode::kUsage);
  }
  // Same text, different fingerprints: the hashes of equal texts are equal, so this is a
  // fault of this check itself.
  MIRRORED_CHECK(false, "replica descriptions agree but their fingerprints do not");
}

}  // namespace mirrored::distribute
