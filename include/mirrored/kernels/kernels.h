#pragma once
// The op set. Every op takes Tensors and runs on the device they live on: the CPU
// implementation is in src/kernels/cpu/, the CUDA one (same header) in src/kernels/cuda/.
// Shapes are checked once, in the dispatching layer (src/kernels/dispatch_*.cpp, one file
// per op family).
//
// Conventions: row-major; activations are [batch, features] for dense ops; "accumulate"
// ops add into their output (parameter gradients accumulate until zeroed, which is what
// gradient accumulation over micro-batches needs).
#include <cstdint>
#include <string>
#include <vector>

#include "mirrored/core/precision.h"
#include "mirrored/core/tensor.h"

namespace mirrored::kernels {

// c = alpha * op(a) @ op(b) + beta * c, where op transposes when asked. 2-D tensors.
// Precision::kBF16 (core/precision.h): a and b rounded to bfloat16, products accumulated in
// float32; c is float32. On the CPU a or b may also be a kBF16 tensor (round_to_bf16's), used
// as it is: the same bits as its float32 original, without rounding it again.
void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b, float beta,
          Tensor& c, Precision precision = Precision::kF32);
// out = x rounded to bfloat16 (core/bf16.h: to nearest, ties to even), a kBF16 tensor shaped
// like x (made so if it is not). For an operand of several bf16 products, rounded once: a
// layer's input, weight and output gradient each take part in two of its three products.
void round_to_bf16(const Tensor& x, Tensor& out);

// y[n, f] += bias[f]
void add_bias(Tensor& y, const Tensor& bias);
// dbias[f] += sum_n dy[n, f]
void accumulate_bias_grad(const Tensor& dy, Tensor& dbias);

// y = max(x, 0); dx = dy where y > 0 else 0 (y is the forward output). May run in place.
void relu_forward(const Tensor& x, Tensor& y);
void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

// Mean softmax cross-entropy over the rows of `logits` [N, C] with int32 `labels` [N].
// Returns the summed (not averaged) loss and the count of rows whose arg-max is the label;
// when `dlogits` is given it receives (softmax - onehot) * grad_scale.
struct CrossEntropyResult {
  double loss_sum = 0.0;
  int64_t correct = 0;
};
CrossEntropyResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                                         float grad_scale);
// The same loss left on the device for the training step: mean_loss (f32 [1], on the logits'
// device) = float(loss_sum / N), the CPU's value bit for bit there, queued without a host
// wait. `workspace` belongs to the caller, sized by the op (the GPU's per-row losses). On a
// GPU a label outside [0, C) gives a NaN loss instead of an error (reporting it would stall
// the stream); the CPU still fails its check.
void softmax_cross_entropy_mean(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_scale,
                                Tensor& mean_loss, Tensor& workspace);

// x *= alpha
void scale(Tensor& x, float alpha);
// The same on raw memory of `device` that no Tensor owns (communication buffers): x[0, n) *= alpha.
void scale(float* x, int64_t n, Device device, float alpha);
// bfloat16 wire format for compressed gradients, rounding as core/bf16.h, on raw memory of
// `device`: wire[i] = bf16(x[i]); and x[i] = float(wire[i]) * alpha.
void to_bf16(const float* x, uint16_t* wire, int64_t n, Device device);
void from_bf16(const uint16_t* wire, float* x, int64_t n, Device device, float alpha);

// The grid conversions of an exact sum over ranks (comm/exact_sum.h), on raw memory of
// `device`, with the formulas of kernels/exact_grid.h (the same bits on every device). A
// buffer of offsets.back() floats is cut into segments [offsets[s], offsets[s + 1])
// (`offsets`: host, offsets[0] == 0); `terms` point at such buffers, and `exponents`
// (int32, one per segment), `sums` (int64, one per float), `plain` and `out` live on
// `device` too. `out` may be one of the terms: each op reads its inputs before it writes.
// exponents[s] = grid_exponent of the largest magnitude in segment s over every term.
void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          int32_t* exponents, Device device);
// CPU buffers only: the same where the largest magnitudes of other terms, set aside earlier,
// are known: segment s starts from known_largest[s] (magnitude_bits, host memory).
void exact_grid_exponents(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          const uint32_t* known_largest, int32_t* exponents, Device device);
// CPU buffers only: largest[s] = the largest magnitude's bits (magnitude_bits) in segment s
// of x. A term set aside until the exact sum (distribute/virtual_replica_gradients.h) is
// scanned while it is still in cache, and not read again to find its grid.
void exact_grid_largest(const float* x, const std::vector<size_t>& offsets, uint32_t* largest, Device device);
// sums[i] = the terms' i-th values on segment s's grid (exponents[s], agreed over ranks),
// as integers added up; 0 where the segment is all zero or not finite.
void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums, Device device);
// CPU buffers only: the same, and afterwards each of `spent` (some of the terms, which
// nothing reads again) holds +0 at every value: each block is zeroed right after its sums
// are formed, while it is in cache, for a caller that would otherwise zero it cold later.
void exact_grid_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums,
                     const std::vector<float*>& spent, Device device);
// plain[i] = the float32 sum of the terms' i-th values, in term order, where segment s is
// not finite (exponents[s] == kGridNonFinite); 0 elsewhere.
void exact_grid_plain_sums(const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                           const int32_t* exponents, float* plain, Device device);
// out[i] = sums[i] back to float on its segment's grid, rounded once; plain[i] where the
// segment is not finite (`plain` may be null when no segment is).
void exact_grid_round(const int64_t* sums, const float* plain, const std::vector<size_t>& offsets,
                      const int32_t* exponents, int64_t total_terms, float* out, Device device);
// y += alpha * x
void axpy(float alpha, const Tensor& x, Tensor& y);
// dst = src (same shape; any devices). Within one GPU it is queued on the compute stream;
// a copy to or from the host returns once the host side may be used.
void copy(const Tensor& src, Tensor& dst);
// True when every element is finite. On a GPU the host waits for the answer.
bool all_finite(const Tensor& x);
// The same test without a host wait: flag (int32 [1], on x's device) = 1 when x holds a NaN
// or an infinity, else 0, queued like any kernel. Given to an optimizer update as its
// skip flag, it makes the update leave parameters and state untouched; the host can read
// the flag later (after the step) to count or report the skipped step.
void flag_non_finite(const Tensor& x, Tensor& flag);
// The guard's bookkeeping over several steps, on the device (no host wait). After
// flag_non_finite for update `step` (1-based, < 2^31): when `flag` is set, tally (int32 [2],
// same device) = {tally[0] + 1, tally[1] ? tally[1] : step}, i.e. the steps flagged and the
// first of them since the tally was zeroed. With `latch`, a tally that has counted a step
// sets `flag` again, so no later update applies until the host has read and zeroed it.
void tally_non_finite(Tensor& flag, Tensor& tally, int64_t step, bool latch);

// Gradient clipping by global L2 norm, torch.nn.utils.clip_grad_norm_ semantics, in two
// device steps so that the sum can be added over replicas in between (a sharded gradient):
// sum_squares[0] = sum x^2 (f32 [1]; summed in double, in a fixed order on every device);
// then x *= clip_scale(sqrt(sum), max_norm) (kernels/clip_math.h) and norm[0] = sqrt(sum).
// `workspace` belongs to the caller, sized by the op (the GPU's per-block partial sums).
void sum_squares(const Tensor& x, Tensor& sum, Tensor& workspace);
void scale_by_clip(Tensor& x, const Tensor& sum_squares, float max_norm, Tensor& norm);
// The second step without touching x, for an update that scales each gradient as it reads
// it (sgd_update's and adam_update's grad_scale): factor[0] = clip_scale(sqrt(sum), max_norm)
// and norm[0] = sqrt(sum), f32 [1] each beside the sum. That update gives the bits of
// scale_by_clip followed by the plain update, in one pass over the gradient instead of two.
void clip_factor(const Tensor& sum_squares, float max_norm, Tensor& norm, Tensor& factor);

// SGD with momentum and L2 weight decay, PyTorch semantics:
//   g' = g + weight_decay * p;  v = momentum * v + g';  p -= lr * (nesterov ? g' + momentum * v : v)
struct SgdHyper {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};
// skip_flag (optional, int32 [1] on param's device, see flag_non_finite): when it holds a
// non-zero value the update does nothing. grad_scale (optional, f32 [1] on param's device,
// see clip_factor): each gradient is multiplied by it (scaled_gradient in
// optimizer_math.h) before the update uses it. The same holds for adam_update.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& velocity, const SgdHyper& hyper,
                const Tensor* skip_flag = nullptr, const Tensor* grad_scale = nullptr);

// Adam / AdamW, PyTorch semantics. `step` counts from 1 (bias correction).
// decoupled_weight_decay=false: g' = g + wd * p (Adam). true: p *= 1 - lr * wd first (AdamW).
struct AdamHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled_weight_decay = false;
};
void adam_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamHyper& hyper,
                 int64_t step, const Tensor* skip_flag = nullptr, const Tensor* grad_scale = nullptr);

// ---- Convolution, pooling, normalisation, dropout: activations are NCHW [N, C, H, W].

// A 2-D convolution's geometry (square stride and padding on both sides, zeros outside).
struct Conv2dParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride = 1;
  int64_t padding = 0;
};
// Output extent along one dimension, or <= 0 when the kernel does not fit.
int64_t conv_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t padding);

// y = conv(x, weight) (+ bias), weight [OC, C, KH, KW] (PyTorch layout), bias [OC] or null.
// `workspace` belongs to the caller (a layer): the op sizes it and reuses it across calls;
// pass the same one to the matching backward.
// Precision::kBF16: x, weight (and in backward dy) rounded to bfloat16, float32 sums and outputs.
void conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor* bias, const Conv2dParams& params,
                    Tensor& y, Tensor& workspace, Precision precision = Precision::kF32);
// Accumulates dweight (and dbias) from dy; writes dx when it is given (not accumulated).
void conv2d_backward(const Tensor& x, const Tensor& weight, const Tensor& dy, const Conv2dParams& params,
                     Tensor* dx, Tensor& dweight, Tensor* dbias, Tensor& workspace,
                     Precision precision = Precision::kF32);

// Pooling windows: kernel_h x kernel_w, one stride for both dimensions, zero padding.
struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride = 2;
  int64_t padding = 0;
};
// Max pooling. `argmax` (int32, shaped like y) records the input index, within its
// [H, W] plane, that each output came from; padding never wins. Ties go to the first.
void max_pool2d_forward(const Tensor& x, const Pool2dParams& params, Tensor& y, Tensor& argmax);
// dx = 0, then dx[argmax] += dy, in output order; `params` are the forward's.
void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, const Pool2dParams& params, Tensor& dx);
// Average pooling; padded zeros count in the divisor (PyTorch's count_include_pad=True).
void avg_pool2d_forward(const Tensor& x, const Pool2dParams& params, Tensor& y);
void avg_pool2d_backward(const Tensor& dy, const Pool2dParams& params, Tensor& dx);

// Batch normalisation over N and the spatial dimensions of x [N, C, ...], in pieces so
// that the statistics can be summed across replicas between them (sync batch norm).
// sums [2C + 1] = {sum (x - shift), sum (x - shift)^2, count}: `shift` (e.g. the running
// mean) keeps the second sum from cancelling when the mean is large.
void batch_norm_sums(const Tensor& x, const Tensor& shift, Tensor& sums);
// From (possibly cross-replica) sums: mean, invstd = 1 / sqrt(var + eps) with the biased
// variance; running = (1 - momentum) running + momentum * stat, unbiased var (PyTorch).
void batch_norm_statistics(const Tensor& sums, const Tensor& shift, float eps, float momentum, Tensor& mean,
                           Tensor& invstd, Tensor& running_mean, Tensor& running_var);
// Inference: mean = running_mean, invstd = 1 / sqrt(running_var + eps).
void batch_norm_inference_statistics(const Tensor& running_mean, const Tensor& running_var, float eps,
                                     Tensor& mean, Tensor& invstd);
// y = (x - mean) * invstd * gamma + beta, per channel.
void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                      const Tensor& beta, Tensor& y);
// grad_sums [2C + 1] = {sum dy, sum dy * xhat, count}, xhat = (x - mean) * invstd.
void batch_norm_backward_sums(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                              Tensor& grad_sums);
// dx = gamma * invstd * (dy - sum dy / count - xhat * sum (dy xhat) / count), from
// (possibly cross-replica) grad_sums.
void batch_norm_backward_input(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                               const Tensor& gamma, const Tensor& grad_sums, Tensor& dx);

// Batch norm (with the statistics above), a 2x2 stride-2 max pool and relu, in one pass
// each way: the bits of batch_norm_apply, max_pool2d_forward and relu_forward run one
// after the other, and of their backward kernels, without the full-size tensors between
// them. x [N, C, H, W]; y and argmax (int32, as max_pool2d_forward's) [N, C, H/2, W/2].
// CPU only: a model on a GPU runs the three layers apart.
void batch_norm_max_pool_relu_forward(const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                      const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& argmax);
// batch_norm_backward_sums's grad_sums, from dy, the gradient of the forward's y.
void batch_norm_max_pool_relu_backward_sums(const Tensor& x, const Tensor& y, const Tensor& dy,
                                            const Tensor& argmax, const Tensor& mean, const Tensor& invstd,
                                            Tensor& grad_sums);
// batch_norm_backward_input's dx [N, C, H, W], from dy and (possibly cross-replica) grad_sums.
void batch_norm_max_pool_relu_backward_input(const Tensor& x, const Tensor& y, const Tensor& dy,
                                             const Tensor& argmax, const Tensor& mean, const Tensor& invstd,
                                             const Tensor& gamma, const Tensor& grad_sums, Tensor& dx);

// Inverted dropout: each sample's mask is drawn from its own counter-based stream
// (core/counter_rng.h), keyed by `seed` and the sample's index `first_sample + n`, so a mask
// depends on which global sample it is and not on how the batch was split, nor on the
// device: CPU and CUDA draw the same bits. mask = 0 or 1 / (1 - p); y = x * mask.
void dropout_forward(const Tensor& x, float p, uint64_t seed, int64_t first_sample, Tensor& mask, Tensor& y);
// dx = dy * mask
void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx);

// y = a + b (same shapes; y may alias a or b)
void add(const Tensor& a, const Tensor& b, Tensor& y);

// Sets the number of threads the CPU kernels (and BLAS) use in this process.
void set_cpu_threads(int threads);
int cpu_threads();
// On: every CPU kernel gives the same bits at any thread count (reduction = invariant).
// Matrix products then run as fixed tiles of single-threaded sgemm spread over the
// threads, and convolutions through im2col; off: BLAS and oneDNN thread as they see fit.
void set_cpu_thread_invariant(bool on);

// Reads the CPU kernels' environment settings now (MIRRORED_CPU_SIMD, _GEMM, _BF16, _CONV;
// configuration.md), each read once: a value they do not take stops start-up with an
// InputError naming it, on every rank alike, rather than the first kernel that reads it.
void read_cpu_settings();

// The vector instructions the CPU kernels use: "avx512", "avx2" or "baseline" (SSE2). The
// widest the CPU has, or MIRRORED_CPU_SIMD's level where that is lower (an InputError names
// a value it does not know or one above the CPU's). Every level gives the same bits; a lower
// one runs what a CPU without those instructions runs: its OpenBLAS kernel set, oneDNN's
// instructions, the float32 products' backend and bf16 without native products.
std::string cpu_simd_level();

// The OpenBLAS kernel set in use ("SkylakeX", "Haswell", "Prescott", ...), and the one to
// switch to ("" when OpenBLAS's choice is fine): the widest this CPU's feature flags support
// when OpenBLAS fell back to an older set because the CPU model was not recognised, or the
// set of cpu_simd_level() when OpenBLAS chose a wider one. OpenBLAS reads
// OPENBLAS_CORETYPE once, when it loads: only a new process image can switch.
std::string cpu_blas_core();
std::string cpu_blas_core_to_switch_to();

// oneDNN's version ("2.6.3 (OpenMP)") when this build runs CPU convolutions on it, "" when not.
std::string cpu_onednn_version();

// Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16). Without it,
// Precision::kBF16 still computes bf16 products on the CPU (float32 arithmetic on rounded
// inputs), but more slowly than float32.
bool cpu_native_bf16();
// What computes the float32 matrix products of the default (fast) reduction: "oneDNN
// matmul" or "OpenBLAS sgemm" (MIRRORED_CPU_GEMM; reduction = invariant always tiles
// OpenBLAS).
std::string cpu_f32_gemm_method();
// How the CPU computes Precision::kBF16 products: "oneDNN bf16 matmul/convolution",
// "MKL cblas_gemm_bf16bf16f32" or "rounded inputs, float32 BLAS".
std::string cpu_bf16_method();
// Whether those products run on the CPU's bf16 instructions (oneDNN or MKL on a CPU with
// AVX512-BF16 or AMX-BF16): the only case in which precision = bf16 can beat fp32.
bool cpu_bf16_runs_native();

// ---- Transformer: activations are [B, T, C] (batch, tokens, channels), row-major; the
// token-wise ops see them as [B * T, C] rows. Checked in src/kernels/dispatch_transformer.cpp.

// out[b, t] = wte[tokens[b, t]] + wpe[t]: tokens int32 [B, T], wte [V, C], wpe [P, C] with
// T <= P, out [B, T, C]. A token id outside [0, V) is an error on the CPU; on a GPU it
// gives a NaN row instead (reporting it would stall the stream).
void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, Tensor& out);
// dwte[tokens[b, t]] += dout[b, t] and dwpe[t] += sum_b dout[b, t], both accumulating.
// Deterministic: every row of dwte sums its tokens in (b, t) order on every device, so the
// CPU and the GPU give the same bits, run after run.
void embedding_backward(const Tensor& tokens, const Tensor& dout, Tensor& dwte, Tensor& dwpe);

// Layer normalisation over the last dimension of x [..., C]:
// y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(biased var + eps). mean and rstd
// (one per row, shape [rows]) are saved for backward.
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y,
                        Tensor& mean, Tensor& rstd);
// dx (overwritten) = rstd * (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)) per row;
// dgamma += sum_rows dy xhat, dbeta += sum_rows dy. `workspace` belongs to the caller (a
// layer), sized by the op, reused across calls (the GPU's per-chunk partial sums).
void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, Tensor& workspace);
// A transformer block's residual add and the layer norm after it: sum = a + b (kept: it is
// the layer norm's input for backward and the next residual's), then y, mean, rstd as
// layer_norm_forward(sum). The same bits as add() then layer_norm_forward(); on the CPU one
// pass over the rows instead of two.
void add_layer_norm_forward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta, float eps,
                            Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd);
// layer_norm_backward whose dx is dresidual + the layer norm's input gradient (a residual
// branch meeting the skip path's gradient): the same bits as layer_norm_backward then
// add(dresidual, dx, dx), in one pass on the CPU. dresidual may not alias dx.
void layer_norm_backward_add(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                             const Tensor& rstd, const Tensor& dresidual, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                             Tensor& workspace);

// GPT-2's tanh approximation of GELU:
// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); dx (overwritten) = dy * y'(x).
void gelu_forward(const Tensor& x, Tensor& y);
void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);

// A dense layer's bias and GELU, one pass each way on the CPU. h [rows, cols] holds x W^T on
// entry and h + bias on return (kept for backward); y = gelu(h), the bits of add_bias then
// gelu_forward. th (h's shape) gets tanh of GELU's inner argument, which backward reads
// instead of recomputing it (on a GPU it is left unwritten and backward recomputes it). On
// the CPU y may be bfloat16: each value is then rounded as it is formed (round_to_bf16's
// bits), for bf16 products that take y as their operand.
void bias_gelu_forward(Tensor& h, const Tensor& bias, Tensor& th, Tensor& y);
// dh (overwritten) = dy * gelu'(h), the bits of gelu_backward; dbias += dh's column sums,
// the rows added in order (on a GPU: accumulate_bias_grad). On the CPU dh may be bfloat16:
// each value is then rounded as it is formed (round_to_bf16's bits), for a bf16 layer whose
// products take it as an operand; the column sums are the float32 values'.
void bias_gelu_backward(const Tensor& h, const Tensor& th, const Tensor& dy, Tensor& dh, Tensor& dbias);

// Causal multi-head self-attention on packed projections qkv [B, T, 3C] (q, k, v side by
// side; head h owns channels [h C/H, (h+1) C/H) of each): per (b, h),
// probs = softmax(q k^T / sqrt(C/H)) with position t attending to positions <= t (the
// entries above the diagonal are 0), out[b, :, head h] = probs v. probs [B, H, T, T] is
// saved for backward. The layers run the fused form below; this materialised one is what
// the fused kernels are tested and benchmarked against.
void attention_forward(const Tensor& qkv, int64_t heads, Tensor& out, Tensor& probs);
// dqkv [B, T, 3C] (overwritten) from dout [B, T, C]. `workspace` as for layer_norm_backward
// (the gradient of the scores).
void attention_backward(const Tensor& qkv, const Tensor& probs, const Tensor& dout, int64_t heads, Tensor& dqkv,
                        Tensor& workspace);

// The same attention, fused (FlashAttention 2's schedule): blocks of queries meet blocks of
// keys with a running softmax, blocks above the diagonal are skipped, and no T x T matrix
// is formed or kept. Forward writes out [B, T, C] and lse [B, H, T], each query row's
// log-sum-exp of its scaled scores, all that backward needs besides qkv and out: it
// recomputes the probabilities. dqkv [B, T, 3C] is overwritten; `workspace` as for
// layer_norm_backward (B H T floats on a GPU). On the CPU, the bits do not depend on the
// thread count or the SIMD width. Head sizes (C / H) up to kMaxAttentionHeadSize, on every
// device alike: the GPU kernel keeps a query row's vectors in registers, and the CPU refuses
// what the GPU cannot run, so a model that trains on one device trains on the other.
inline constexpr int64_t kMaxAttentionHeadSize = 128;
void fused_attention_forward(const Tensor& qkv, int64_t heads, Tensor& out, Tensor& lse);
void fused_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                              int64_t heads, Tensor& dqkv, Tensor& workspace);

}  // namespace mirrored::kernels
