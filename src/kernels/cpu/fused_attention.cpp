// Fused causal self-attention on the CPU (FlashAttention 2's schedule): per (batch, head),
// blocks of kKeyBlock keys meet tiles of kTileRows queries with a running softmax, so no
// T x T matrix exists and blocks above the diagonal are never touched. Forward keeps one
// log-sum-exp per query row; backward recomputes the probabilities from it, one key block
// at a time, holding that block's dK and dV and the head's dQ in scratch.
//
// Speed: the products run in register tiles as large as the vector registers allow (4 rows
// x 64 keys and 8 rows x 32 channels with AVX-512), and a row's softmax step stays in
// registers with the key count fixed when compiling (16, 32, 48 or 64): the exponential
// (simd_exp.h), the causal mask as bit masks, and its maximum and sum reduced by a tree.
//
// Bits: every output element is a chain of IEEE operations in a fixed order set by the
// block sizes only (keys in increasing order, the head dimension in increasing order,
// query rows in increasing order; a row's maximum and sum over a key block in kLanes
// partial results by key modulo kLanes, then reduce_lanes's tree), computed by one thread.
// The (batch, head) pairs are spread over OpenMP threads, never split, so 1 or N threads
// give the same bits; vectors of 4, 8 or 16 floats (the clones of simd_dispatch.h) only
// ever hold independent elements, never a sum across lanes, so every SIMD width gives the
// same bits too, and so does the shape of a register tile.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_kernels.h"
#include "mirrored/kernels/transformer_math.h"
#include "simd_dispatch.h"
#include "simd_exp.h"

namespace mirrored::kernels::cpu {
namespace {

// Vectors pass between always-inlined functions only, never through a call: GCC's notes on
// the AVX and AVX-512 calling conventions do not apply (to the end of the file, where the
// templates are instantiated).
#pragma GCC diagnostic ignored "-Wpsabi"

constexpr int64_t kLanes = 16;      // keys are padded to multiples of this; partial maxima and sums
constexpr int64_t kKeyBlock = 64;   // keys per block: the scores of a tile stay in L1
constexpr int64_t kScoreRows = 4;   // query rows of one register tile of scores
constexpr int64_t kTileRows = 8;    // forward: query rows that share one pass over the key blocks
constexpr int64_t kQueryBlock = 16;  // backward: query rows per pass over a key block's dK, dV
constexpr int64_t kWidthStep = 32;   // head channels per pass of accumulate_rows

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The layout of one (batch, head)'s packed operands: rows padded to a whole key block, the
// head dimension to kWidthStep, all padding zero.
struct HeadLayout {
  int64_t t = 0, hs = 0, c = 0;
  int64_t rows = 0;   // t rounded up to kKeyBlock
  int64_t width = 0;  // hs rounded up to kWidthStep
  float scale = 0.0f;
};

HeadLayout head_layout(int64_t t, int64_t c, int64_t heads) {
  HeadLayout l;
  l.t = t;
  l.c = c;
  l.hs = c / heads;
  l.rows = round_up(t, kKeyBlock);
  l.width = round_up(l.hs, kWidthStep);
  l.scale = 1.0f / std::sqrt(static_cast<float>(l.hs));
  return l;
}

// rows x width, row-major: src rows of hs floats (stride ld) copied, the rest zero (only
// the padding is cleared: the scratch is reused for every head).
MIRRORED_ALWAYS_INLINE void pack_rows(const float* src, int64_t ld, const HeadLayout& l, float* dst) {
  for (int64_t r = 0; r < l.t; ++r) {
    std::memcpy(dst + r * l.width, src + r * ld, static_cast<size_t>(l.hs) * sizeof(float));
    std::memset(dst + r * l.width + l.hs, 0, static_cast<size_t>(l.width - l.hs) * sizeof(float));
  }
  std::memset(dst + l.t * l.width, 0, static_cast<size_t>((l.rows - l.t) * l.width) * sizeof(float));
}

// Whether the row-major operands (q, k, v, dO) can be read where they are, rows ld apart,
// instead of from packed copies: when a row needs no padding (hs a multiple of kWidthStep)
// and no tile of kScoreRows query rows reaches past row t - 1 (t a multiple of
// kScoreRows; every other read stops at the last real row). The values read are the same
// either way, so are the bits; the copies cost about a tenth of the core at context 64.
bool rows_in_place(const HeadLayout& l) { return l.hs == l.width && l.t % kScoreRows == 0; }

// One row-major operand: its first row and the distance between rows.
struct Rows {
  const float* data;
  int64_t ld;
  const float* row(int64_t r) const { return data + r * ld; }
};

// `src` itself (rows ld apart) when rows_in_place, else `packed` after pack_rows into it.
MIRRORED_ALWAYS_INLINE Rows row_operand(const float* src, int64_t ld, const HeadLayout& l, float* packed) {
  if (rows_in_place(l)) return {src, ld};
  pack_rows(src, ld, l, packed);
  return {packed, l.width};
}

// The transpose, one key block after another: block r / kKeyBlock is hs x kKeyBlock floats
// at (r / kKeyBlock) hs kKeyBlock, so a block's rows are kKeyBlock floats apart (rows a
// whole context apart would fall into the same L1 sets); columns past t zero. Squares of
// 4 x 4 go through registers (four loads, eight shuffles, four stores, against sixteen
// scalar stores a whole block row apart).
MIRRORED_ALWAYS_INLINE void pack_transposed(const float* src, int64_t ld, const HeadLayout& l, float* dst) {
  using Quad = float __attribute__((vector_size(16)));
  const int64_t t4 = l.t / 4 * 4, hs4 = l.hs / 4 * 4;
  for (int64_t r = 0; r < t4; r += 4) {
    float* block = dst + (r / kKeyBlock) * l.hs * kKeyBlock + r % kKeyBlock;
    for (int64_t d = 0; d < hs4; d += 4) {
      Quad x[4];
      for (int64_t i = 0; i < 4; ++i) std::memcpy(&x[i], src + (r + i) * ld + d, sizeof(Quad));
      const Quad lo01 = __builtin_shufflevector(x[0], x[1], 0, 4, 1, 5), hi01 = __builtin_shufflevector(x[0], x[1], 2, 6, 3, 7);
      const Quad lo23 = __builtin_shufflevector(x[2], x[3], 0, 4, 1, 5), hi23 = __builtin_shufflevector(x[2], x[3], 2, 6, 3, 7);
      const Quad y[4] = {__builtin_shufflevector(lo01, lo23, 0, 1, 4, 5), __builtin_shufflevector(lo01, lo23, 2, 3, 6, 7),
                         __builtin_shufflevector(hi01, hi23, 0, 1, 4, 5), __builtin_shufflevector(hi01, hi23, 2, 3, 6, 7)};
      for (int64_t i = 0; i < 4; ++i) std::memcpy(block + (d + i) * kKeyBlock, &y[i], sizeof(Quad));
    }
    for (int64_t d = hs4; d < l.hs; ++d)
      for (int64_t i = 0; i < 4; ++i) block[d * kKeyBlock + i] = src[(r + i) * ld + d];
  }
  for (int64_t r = t4; r < l.t; ++r) {
    float* block = dst + (r / kKeyBlock) * l.hs * kKeyBlock + r % kKeyBlock;
    for (int64_t d = 0; d < l.hs; ++d) block[d * kKeyBlock] = src[r * ld + d];
  }
  // Only the last block has columns past t.
  if (l.t < l.rows) {
    const int64_t last = l.rows - kKeyBlock, from = l.t - last;
    for (int64_t d = 0; d < l.hs; ++d)
      std::memset(dst + last * l.hs + d * kKeyBlock + from, 0, static_cast<size_t>(kKeyBlock - from) * sizeof(float));
  }
}

template <class V>
constexpr int64_t kWidth = sizeof(V) / sizeof(float);

template <class V>
MIRRORED_ALWAYS_INLINE V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
MIRRORED_ALWAYS_INLINE void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Register tiles, sized so that their accumulators (plus the operands of one step) fit the
// vector registers: 32 with AVX-512, 16 with AVX2 and SSE2. Every sum keeps its own
// accumulator and adds its terms in increasing order, so the tile shape changes only the
// speed, never the bits.
template <class V>
constexpr int64_t kScoreVectors = kWidth<V> == 16 ? 4 : kLanes / kWidth<V>;  // of keys: 4 x 64 keys or 4 x 16
template <class V>
constexpr int64_t kAccumulateRows = kWidth<V> == 16 ? 8 : 2;  // x kWidthStep channels: 8 x 2 or 2 x 4 vectors

// s[i][j] = sum_d a[i][d] bt[d][j] for kScoreRows rows i and kVectors vectors of keys from j0.
template <class V, int64_t kVectors>
MIRRORED_ALWAYS_INLINE void score_tile(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t depth,
                                       int64_t j0, float* s /* [kScoreRows][kKeyBlock] */) {
  V acc[kScoreRows][kVectors] = {};
  for (int64_t d = 0; d < depth; ++d) {
    V b[kVectors];
    for (int64_t v = 0; v < kVectors; ++v) b[v] = load<V>(bt + d * ldb + j0 + v * kWidth<V>);
    for (int64_t i = 0; i < kScoreRows; ++i) {
      const float f = a[i * lda + d];
      for (int64_t v = 0; v < kVectors; ++v) acc[i][v] += f * b[v];
    }
  }
  for (int64_t i = 0; i < kScoreRows; ++i)
    for (int64_t v = 0; v < kVectors; ++v) store<V>(s + i * kKeyBlock + j0 + v * kWidth<V>, acc[i][v]);
}

// score_tile for keys [0, key_count), key_count a multiple of kLanes: the scores (a = q,
// bt = k^T) or the probability gradients (a = dO, bt = v^T) of kScoreRows query rows.
template <class V>
MIRRORED_ALWAYS_INLINE void tile_products(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t depth,
                                          int64_t key_count, float* s) {
  constexpr int64_t kWide = kScoreVectors<V> * kWidth<V>;
  int64_t j = 0;
  for (; j + kWide <= key_count; j += kWide) score_tile<V, kScoreVectors<V>>(a, lda, bt, ldb, depth, j, s);
  if constexpr (kWide > kLanes)
    for (; j < key_count; j += kLanes) score_tile<V, kLanes / kWidth<V>>(a, lda, bt, ldb, depth, j, s);
}

// acc[i][:width] += sum_{j < count} coef(i, j) m[j][:width] for kRows rows, j increasing,
// where coef(i, j) = coef[i * coef_row + j * coef_col]: a matrix read as it is stored or
// as its transpose, so that neither P nor dS is ever copied to transpose it.
template <class V, int64_t kRows>
MIRRORED_ALWAYS_INLINE void accumulate_rows(float* acc, int64_t ldacc, const float* coef, int64_t coef_row,
                                            int64_t coef_col, const float* m, int64_t ldm, int64_t count,
                                            int64_t width) {
  constexpr int64_t kVectors = kWidthStep / kWidth<V>;
  for (int64_t c0 = 0; c0 < width; c0 += kWidthStep) {
    V a[kRows][kVectors];
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t v = 0; v < kVectors; ++v) a[i][v] = load<V>(acc + i * ldacc + c0 + v * kWidth<V>);
    for (int64_t j = 0; j < count; ++j) {
      V b[kVectors];
      for (int64_t v = 0; v < kVectors; ++v) b[v] = load<V>(m + j * ldm + c0 + v * kWidth<V>);
      for (int64_t i = 0; i < kRows; ++i) {
        const float f = coef[i * coef_row + j * coef_col];
        for (int64_t v = 0; v < kVectors; ++v) a[i][v] += f * b[v];
      }
    }
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t v = 0; v < kVectors; ++v) store<V>(acc + i * ldacc + c0 + v * kWidth<V>, a[i][v]);
  }
}

// accumulate_rows over `rows` rows: tiles of kAccumulateRows, then halves of that.
template <class V, int64_t kRows = kAccumulateRows<V>>
MIRRORED_ALWAYS_INLINE void accumulate_products(float* acc, int64_t ldacc, const float* coef, int64_t coef_row,
                                                int64_t coef_col, const float* m, int64_t ldm, int64_t rows,
                                                int64_t count, int64_t width) {
  int64_t i = 0;
  for (; i + kRows <= rows; i += kRows)
    accumulate_rows<V, kRows>(acc + i * ldacc, ldacc, coef + i * coef_row, coef_row, coef_col, m, ldm, count, width);
  if constexpr (kRows > 1)
    if (i < rows)
      accumulate_products<V, kRows / 2>(acc + i * ldacc, ldacc, coef + i * coef_row, coef_row, coef_col, m, ldm,
                                        rows - i, count, width);
}

// kLanes partial results reduced to one by a fixed tree (lane l with lane l + 8, then l + 4,
// l + 2, l + 1): the same operations at every vector width, 4 deep instead of 15.
template <class V, class Op>
MIRRORED_ALWAYS_INLINE float reduce_lanes(const V (&partial)[kLanes / kWidth<V>], Op op) {
  alignas(64) float lanes[kLanes];
  for (int64_t v = 0; v < kLanes / kWidth<V>; ++v) store<V>(lanes + v * kWidth<V>, partial[v]);
  for (int64_t l = 0; l < 8; ++l) lanes[l] = op(lanes[l], lanes[l + 8]);
  for (int64_t l = 0; l < 4; ++l) lanes[l] = op(lanes[l], lanes[l + 4]);
  for (int64_t l = 0; l < 2; ++l) lanes[l] = op(lanes[l], lanes[l + 2]);
  return op(lanes[0], lanes[1]);
}
MIRRORED_ALWAYS_INLINE float max_op(float a, float b) { return a > b ? a : b; }
MIRRORED_ALWAYS_INLINE float sum_op(float a, float b) { return a + b; }

// sum_d a[d] b[d] over d < n: lane d % kLanes of kLanes partial sums, each in increasing d,
// then reduce_lanes's tree.
template <class V>
MIRRORED_ALWAYS_INLINE float row_dot(const float* a, const float* b, int64_t n) {
  constexpr int64_t kGroups = kLanes / kWidth<V>;
  V partial[kGroups] = {};
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t d = 0; d < whole; d += kWidth<V>) partial[(d / kWidth<V>) % kGroups] += load<V>(a + d) * load<V>(b + d);
  if (whole < n) {
    alignas(64) float tail[kLanes] = {}, tail_b[kLanes] = {};
    std::memcpy(tail, a + whole, static_cast<size_t>(n - whole) * sizeof(float));
    std::memcpy(tail_b, b + whole, static_cast<size_t>(n - whole) * sizeof(float));
    for (int64_t g = 0; g < kGroups; ++g) partial[g] += load<V>(tail + g * kWidth<V>) * load<V>(tail_b + g * kWidth<V>);
  }
  return reduce_lanes<V>(partial, sum_op);
}

// Masks of the keys j < valid among kKeys, one per vector: the causal mask of one row.
template <class V, int64_t kKeys>
MIRRORED_ALWAYS_INLINE void causal_masks(int64_t valid, IntLanes<V> (&keep)[kKeys / kWidth<V>]) {
  IntLanes<V> index;
  for (int64_t l = 0; l < kWidth<V>; ++l) index[l] = static_cast<int32_t>(l);
  for (int64_t k = 0; k < kKeys / kWidth<V>; ++k)
    keep[k] = index + static_cast<int32_t>(k * kWidth<V>) < static_cast<int32_t>(valid);
}

// The masked maximum of one row's kKeys raw scores (keys from `valid` on are -inf).
template <class V, int64_t kKeys>
MIRRORED_ALWAYS_INLINE float masked_row_max(const float* s, int64_t valid) {
  using I = IntLanes<V>;
  constexpr int64_t kCount = kKeys / kWidth<V>, kGroups = kLanes / kWidth<V>;
  I keep[kCount];
  causal_masks<V, kKeys>(valid, keep);
  const I minus_inf = std::bit_cast<I>(V{} - INFINITY);
  V partial[kGroups];
  for (int64_t g = 0; g < kGroups; ++g) partial[g] = V{} - INFINITY;
  for (int64_t k = 0; k < kCount; ++k) {
    // Masked keys as -inf by bit operations: GCC splits a select on a combined mask into
    // one branch per lane.
    const I x = std::bit_cast<I>(load<V>(s + k * kWidth<V>));
    const V candidate = std::bit_cast<V>((x & keep[k]) | (minus_inf & ~keep[k]));
    V& m = partial[k % kGroups];
    m = candidate > m ? candidate : m;
  }
  return reduce_lanes<V>(partial, max_op);
}

// exp(scale s - m) in place of one row's kKeys raw scores s, 0 from `valid` on; returns
// their sum (lane j % kLanes of kLanes partial sums, then the tree).
template <class V, int64_t kKeys>
MIRRORED_ALWAYS_INLINE float exp_row(float* s, int64_t valid, float scale, float m) {
  using I = IntLanes<V>;
  constexpr int64_t kCount = kKeys / kWidth<V>, kGroups = kLanes / kWidth<V>;
  I keep[kCount];
  causal_masks<V, kKeys>(valid, keep);
  V partial[kGroups] = {};
  for (int64_t k = 0; k < kCount; ++k) {
    const V e = std::bit_cast<V>(std::bit_cast<I>(softmax_exp_lanes(load<V>(s + k * kWidth<V>) * scale - m)) & keep[k]);
    store<V>(s + k * kWidth<V>, e);
    partial[k % kGroups] += e;
  }
  return reduce_lanes<V>(partial, sum_op);
}

// The online softmax's step for `rows` query rows against one key block of kKeys keys (a
// multiple of kLanes), row i seeing keys j < min(keys, diagonal + i): the raw scores s
// become exp(scale s - m), where m is the row's running maximum of scaled scores; its
// running sum and the output accumulated so far, o, follow m. Phase by phase over the rows
// (maxima, then exponentials, then the running state); the order changes no bits.
template <class V, int64_t kKeys>
MIRRORED_ALWAYS_INLINE void online_softmax_tile(float* s, int64_t rows, int64_t diagonal, int64_t keys, float scale,
                                                bool first, float* row_max, float* row_sum, float* o,
                                                int64_t width) {
  float new_max[kTileRows], block_sum[kTileRows];
  for (int64_t i = 0; i < rows; ++i) {
    // Rounding is monotone, so the maximum of the scaled scores is the scaled maximum.
    const float block_max = masked_row_max<V, kKeys>(s + i * kKeyBlock, std::min(keys, diagonal + i)) * scale;
    new_max[i] = first ? block_max : std::max(row_max[i], block_max);
  }
  for (int64_t i = 0; i < rows; ++i)
    block_sum[i] = exp_row<V, kKeys>(s + i * kKeyBlock, std::min(keys, diagonal + i), scale, new_max[i]);
  for (int64_t i = 0; i < rows; ++i) {
    if (first) {
      row_sum[i] = block_sum[i];
    } else {
      // Rescale what earlier blocks summed to the new maximum (by exactly 1 when it held).
      const float correction = softmax_exp(row_max[i] - new_max[i]);
      if (correction != 1.0f)
        for (int64_t d = 0; d < width; ++d) o[i * width + d] *= correction;
      row_sum[i] = row_sum[i] * correction + block_sum[i];
    }
    row_max[i] = new_max[i];
  }
}

// The backward's recomputation for one query row against kKeys keys: p = exp(scale s - lse)
// and ds = p (dp - delta) in place of the scores s and the probability gradients dp, both 0
// from `valid` on, whatever s and dp held there.
template <class V, int64_t kKeys>
MIRRORED_ALWAYS_INLINE void softmax_backward_row(float* s, float* dp, int64_t valid, float scale, float lse,
                                                 float delta) {
  using I = IntLanes<V>;
  constexpr int64_t kCount = kKeys / kWidth<V>;
  I keep[kCount];
  causal_masks<V, kKeys>(valid, keep);
  for (int64_t k = 0; k < kCount; ++k) {
    const V p = std::bit_cast<V>(std::bit_cast<I>(softmax_exp_lanes(load<V>(s + k * kWidth<V>) * scale - lse)) & keep[k]);
    store<V>(s + k * kWidth<V>, p);
    // Masked too: dp past the keys a tile computed is stale and may not be finite.
    const V ds = p * (load<V>(dp + k * kWidth<V>) - delta);
    store<V>(dp + k * kWidth<V>, std::bit_cast<V>(std::bit_cast<I>(ds) & keep[k]));
  }
}

// Scratch of one thread, sized for one (batch, head).
struct ForwardScratch {
  std::vector<float> q, kt, v, o;
  explicit ForwardScratch(const HeadLayout& l)
      : q(static_cast<size_t>(l.rows * l.width)), kt(static_cast<size_t>(l.hs * l.rows)),
        v(static_cast<size_t>(l.rows * l.width)), o(static_cast<size_t>(kTileRows * l.width)) {}
};

template <class V>
MIRRORED_ALWAYS_INLINE void fused_attention_forward_head_body(const float* qkv, const HeadLayout* layout, float* out,
                                                              float* lse, ForwardScratch* scratch) {
  const HeadLayout& l = *layout;
  const int64_t ld = 3 * l.c;
  float* q = scratch->q.data();
  float* kt = scratch->kt.data();
  float* v = scratch->v.data();
  float* o = scratch->o.data();
  const Rows q_rows = row_operand(qkv, ld, l, q);
  pack_transposed(qkv + l.c, ld, l, kt);
  const Rows v_rows = row_operand(qkv + 2 * l.c, ld, l, v);
  alignas(64) float s[kTileRows * kKeyBlock];
  for (int64_t r0 = 0; r0 < l.t; r0 += kTileRows) {
    const int64_t last = std::min(r0 + kTileRows, l.t) - 1;  // the tile's last real row
    float row_max[kTileRows] = {}, row_sum[kTileRows] = {};
    std::memset(o, 0, static_cast<size_t>(kTileRows * l.width) * sizeof(float));
    // Key blocks start at multiples of kKeyBlock, tiles at multiples of kTileRows: every
    // block reached starts at or before the tile's first row.
    for (int64_t j0 = 0; j0 <= last; j0 += kKeyBlock) {
      const int64_t keys = std::min(kKeyBlock, last - j0 + 1);
      const int64_t keys_padded = round_up(keys, kLanes);
      for (int64_t i0 = 0; i0 <= last - r0; i0 += kScoreRows)
        tile_products<V>(q_rows.row(r0 + i0), q_rows.ld, kt + j0 * l.hs, kKeyBlock, l.hs, keys_padded,
                         s + i0 * kKeyBlock);
      // Row r0 + i sees keys j <= r0 + i. A key count known when compiling: loops without
      // remainders, unrolled.
      const int64_t rows = last - r0 + 1, diagonal = r0 - j0 + 1;
      switch (keys_padded / kLanes) {
        case 1: online_softmax_tile<V, 16>(s, rows, diagonal, keys, l.scale, j0 == 0, row_max, row_sum, o, l.width); break;
        case 2: online_softmax_tile<V, 32>(s, rows, diagonal, keys, l.scale, j0 == 0, row_max, row_sum, o, l.width); break;
        case 3: online_softmax_tile<V, 48>(s, rows, diagonal, keys, l.scale, j0 == 0, row_max, row_sum, o, l.width); break;
        default: online_softmax_tile<V, 64>(s, rows, diagonal, keys, l.scale, j0 == 0, row_max, row_sum, o, l.width);
      }
      accumulate_products<V>(o, l.width, s, kKeyBlock, 1, v_rows.row(j0), v_rows.ld, last - r0 + 1, keys, l.width);
    }
    for (int64_t i = 0; i <= last - r0; ++i) {
      const float inv = 1.0f / row_sum[i];
      float* dst = out + (r0 + i) * l.c;
      const float* oi = o + i * l.width;
      for (int64_t d = 0; d < l.hs; ++d) dst[d] = oi[d] * inv;
      lse[r0 + i] = row_max[i] + std::log(row_sum[i]);
    }
  }
}

MIRRORED_SIMD_DISPATCH_VECTOR(fused_attention_forward_head,
                       (const float* qkv, const HeadLayout* layout, float* out, float* lse, ForwardScratch* scratch),
                       (qkv, layout, out, lse, scratch))

struct BackwardScratch {
  std::vector<float> q, kt, k, vt, dout, dq, dk, dv, delta;
  explicit BackwardScratch(const HeadLayout& l)
      : q(static_cast<size_t>(l.rows * l.width)), kt(static_cast<size_t>(l.hs * l.rows)),
        k(static_cast<size_t>(l.rows * l.width)), vt(static_cast<size_t>(l.hs * l.rows)),
        dout(static_cast<size_t>(l.rows * l.width)), dq(static_cast<size_t>(l.rows * l.width)),
        dk(static_cast<size_t>(kKeyBlock * l.width)), dv(static_cast<size_t>(kKeyBlock * l.width)),
        delta(static_cast<size_t>(l.rows)) {}
};

template <class V>
MIRRORED_ALWAYS_INLINE void fused_attention_backward_head_body(const float* qkv, const float* out, const float* lse,
                                                               const float* dout, const HeadLayout* layout,
                                                               float* dqkv, BackwardScratch* scratch) {
  const HeadLayout& l = *layout;
  const int64_t ld = 3 * l.c;
  BackwardScratch& w = *scratch;
  const Rows q_rows = row_operand(qkv, ld, l, w.q.data());
  pack_transposed(qkv + l.c, ld, l, w.kt.data());
  const Rows k_rows = row_operand(qkv + l.c, ld, l, w.k.data());
  pack_transposed(qkv + 2 * l.c, ld, l, w.vt.data());
  const Rows dout_rows = row_operand(dout, l.c, l, w.dout.data());
  std::fill(w.dq.begin(), w.dq.end(), 0.0f);
  // delta[r] = dO[r] . O[r] = sum_j P[r][j] dP[r][j], the softmax backward's row term.
  for (int64_t r = 0; r < l.t; ++r)
    w.delta[static_cast<size_t>(r)] = row_dot<V>(dout + r * l.c, out + r * l.c, l.hs);
  // P and dS of kQueryBlock query rows against one key block.
  alignas(64) float p[kQueryBlock * kKeyBlock], ds[kQueryBlock * kKeyBlock];
  for (int64_t j0 = 0; j0 < l.t; j0 += kKeyBlock) {
    const int64_t block_keys = std::min(kKeyBlock, l.t - j0);
    std::fill(w.dk.begin(), w.dk.end(), 0.0f);
    std::fill(w.dv.begin(), w.dv.end(), 0.0f);
    for (int64_t q0 = j0; q0 < l.t; q0 += kQueryBlock) {
      const int64_t query_rows = std::min(kQueryBlock, l.t - q0);
      const int64_t keys = std::min(block_keys, q0 + query_rows - j0);  // keys any row of the block sees
      const int64_t keys_padded = round_up(keys, kLanes);
      for (int64_t r0 = q0; r0 < q0 + query_rows; r0 += kScoreRows) {
        const int64_t rows = std::min(kScoreRows, q0 + query_rows - r0);
        float* tile_p = p + (r0 - q0) * kKeyBlock;
        float* tile_ds = ds + (r0 - q0) * kKeyBlock;
        // Only the keys this tile's rows see; the rest of their rows is masked to 0 below.
        const int64_t tile_keys = round_up(std::min(keys, r0 + rows - j0), kLanes);
        tile_products<V>(q_rows.row(r0), q_rows.ld, w.kt.data() + j0 * l.hs, kKeyBlock, l.hs, tile_keys,
                         tile_p);
        tile_products<V>(dout_rows.row(r0), dout_rows.ld, w.vt.data() + j0 * l.hs, kKeyBlock, l.hs, tile_keys,
                         tile_ds);
        for (int64_t i = 0; i < rows; ++i) {
          float* pi = tile_p + i * kKeyBlock;
          float* dsi = tile_ds + i * kKeyBlock;
          const int64_t valid = std::min(keys, r0 + i - j0 + 1);
          const float row_lse = lse[r0 + i], row_delta = w.delta[static_cast<size_t>(r0 + i)];
          switch (keys_padded / kLanes) {
            case 1: softmax_backward_row<V, 16>(pi, dsi, valid, l.scale, row_lse, row_delta); break;
            case 2: softmax_backward_row<V, 32>(pi, dsi, valid, l.scale, row_lse, row_delta); break;
            case 3: softmax_backward_row<V, 48>(pi, dsi, valid, l.scale, row_lse, row_delta); break;
            default: softmax_backward_row<V, 64>(pi, dsi, valid, l.scale, row_lse, row_delta);
          }
        }
      }
      // dQ[r] += dS[r][j] K[j] (scaled at the end), keys in increasing order per row.
      accumulate_products<V>(w.dq.data() + q0 * l.width, l.width, ds, kKeyBlock, 1, k_rows.row(j0), k_rows.ld,
                             query_rows, keys, l.width);
      // dV[j] += P[r][j] dO[r] and dK[j] += dS[r][j] Q[r], rows in increasing order per key:
      // P and dS read as their transposes.
      accumulate_products<V>(w.dv.data(), l.width, p, 1, kKeyBlock, dout_rows.row(q0), dout_rows.ld, keys,
                             query_rows, l.width);
      accumulate_products<V>(w.dk.data(), l.width, ds, 1, kKeyBlock, q_rows.row(q0), q_rows.ld, keys,
                             query_rows, l.width);
    }
    for (int64_t j = 0; j < block_keys; ++j) {
      float* dk = dqkv + (j0 + j) * ld + l.c;
      float* dv = dk + l.c;
      for (int64_t d = 0; d < l.hs; ++d) {
        dk[d] = w.dk[static_cast<size_t>(j * l.width + d)] * l.scale;
        dv[d] = w.dv[static_cast<size_t>(j * l.width + d)];
      }
    }
  }
  for (int64_t r = 0; r < l.t; ++r)
    for (int64_t d = 0; d < l.hs; ++d) dqkv[r * ld + d] = w.dq[static_cast<size_t>(r * l.width + d)] * l.scale;
}

MIRRORED_SIMD_DISPATCH_VECTOR(fused_attention_backward_head,
                       (const float* qkv, const float* out, const float* lse, const float* dout,
                        const HeadLayout* layout, float* dqkv, BackwardScratch* scratch),
                       (qkv, out, lse, dout, layout, dqkv, scratch))

}  // namespace

// One (batch, head) per iteration, on whichever thread: see the note at the top on bits.
// `run(b, h, n, scratch)` computes head h of sample b (n = b * heads + h) with this thread's
// scratch.
template <typename Scratch, typename Run>
void for_each_head(const HeadLayout& layout, int64_t b_len, int64_t heads, const Run& run) {
  const int64_t pairs = b_len * heads;
#ifdef _OPENMP
#pragma omp parallel if (pairs > 1)
#endif
  {
    Scratch scratch(layout);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t n = 0; n < pairs; ++n) run(n / heads, n % heads, n, &scratch);
  }
}

void fused_attention_forward(const float* qkv, int64_t b_len, int64_t t_len, int64_t c, int64_t heads, float* out,
                             float* lse) {
  const HeadLayout layout = head_layout(t_len, c, heads);
  for_each_head<ForwardScratch>(layout, b_len, heads, [&](int64_t b, int64_t h, int64_t n, ForwardScratch* scratch) {
    fused_attention_forward_head(qkv + b * t_len * 3 * c + h * layout.hs, &layout, out + b * t_len * c + h * layout.hs,
                                 lse + n * t_len, scratch);
  });
}

void fused_attention_backward(const float* qkv, const float* out, const float* lse, const float* dout,
                              int64_t b_len, int64_t t_len, int64_t c, int64_t heads, float* dqkv) {
  const HeadLayout layout = head_layout(t_len, c, heads);
  for_each_head<BackwardScratch>(layout, b_len, heads, [&](int64_t b, int64_t h, int64_t n, BackwardScratch* scratch) {
    const int64_t offset = b * t_len * 3 * c + h * layout.hs;
    const int64_t row_offset = b * t_len * c + h * layout.hs;
    fused_attention_backward_head(qkv + offset, out + row_offset, lse + n * t_len, dout + row_offset, &layout,
                                  dqkv + offset, scratch);
  });
}

}  // namespace mirrored::kernels::cpu
