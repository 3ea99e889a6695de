#pragma once
// Which windows of a token sequence a language-model step reads. A training window is
// context + 1 consecutive tokens (inputs, and targets shifted by one), starting anywhere in
// [0, N - context - 1]. The start of sequence `index` of global batch `step` is a pure
// function of (seed, step, index): every rank computes the same global batch, replica r
// takes positions [r*B, (r+1)*B) of it (B = global_batch / world), so the world size does
// not change what is trained on. Evaluation reads fixed non-overlapping windows.
#include <cstdint>
#include <string>
#include <vector>

namespace mirrored::data {

// Number of valid window starts, N - context. InputError naming `source` and the
// context when a window (context + 1 tokens) does not fit in the N tokens.
int64_t window_starts(int64_t num_tokens, int64_t context, const std::string& source);

// Uniform over [0, starts), unbiased; a function of its arguments alone.
int64_t window_offset(uint64_t seed, int64_t step, int64_t index, int64_t starts);

// Starts of positions [first, first + count) of global batch `step`.
std::vector<int64_t> window_offsets(uint64_t seed, int64_t step, int64_t first, int64_t count, int64_t starts);

// Evaluation windows: window w starts at w * context; its inputs never overlap another
// window's. There are (N - 1) / context of them, capped at `max_windows` when positive.
// InputError (as window_starts) when not even one fits.
int64_t eval_window_count(int64_t num_tokens, int64_t context, int64_t max_windows, const std::string& source);

}  // namespace mirrored::data
