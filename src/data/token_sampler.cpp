#include "mirrored/data/token_sampler.h"

#include <algorithm>

#include "mirrored/core/counter_rng.h"
#include "mirrored/core/error.h"
#include "mirrored/core/rng.h"

namespace mirrored::data {
namespace {

// Window starts draw from their own family of Rng streams, apart from weight
// initialisation's and the image sampler's epoch streams.
constexpr uint64_t kWindowStreams = 0x746F6B656E73ull;  // "tokens"

}  // namespace

int64_t window_starts(int64_t num_tokens, int64_t context, const std::string& source) {
  if (context < 1) {
    throw InputError(str_cat("context = ", context, ", expected a positive number of tokens"), ExitCode::kUsage);
  }
  if (context >= num_tokens) {
    throw InputError(str_cat("'", source, "': context ", context, " is longer than the data: /tokens holds ",
                             num_tokens, " tokens and a window needs context + 1 = ", context + 1),
                     ExitCode::kUsage);
  }
  return num_tokens - context;
}

int64_t window_offset(uint64_t seed, int64_t step, int64_t index, int64_t starts) {
  MIRRORED_CHECK(step >= 0 && index >= 0 && starts >= 1, "window_offset(seed, ", step, ", ", index, ", ", starts, ")");
  // One short stream per (step, index): its key mixes the step in, its stream number is
  // the index, so no value depends on how many others were drawn before it.
  Rng rng(counter_stream_key(seed, kWindowStreams + static_cast<uint64_t>(step)), static_cast<uint64_t>(index));
  return static_cast<int64_t>(rng.below(static_cast<uint64_t>(starts)));
}

std::vector<int64_t> window_offsets(uint64_t seed, int64_t step, int64_t first, int64_t count, int64_t starts) {
  std::vector<int64_t> offsets(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) offsets[static_cast<size_t>(i)] = window_offset(seed, step, first + i, starts);
  return offsets;
}

int64_t eval_window_count(int64_t num_tokens, int64_t context, int64_t max_windows, const std::string& source) {
  window_starts(num_tokens, context, source);
  const int64_t windows = (num_tokens - 1) / context;
  return max_windows > 0 ? std::min(windows, max_windows) : windows;
}

}  // namespace mirrored::data
