#pragma once
// CUDA implementations of the op set (kernels.h), on raw device buffers. dispatch_*.cpp have
// checked shapes, dtypes and devices; these functions only compute. Everything runs on
// the device's compute stream (core/cuda_resources.h), in issue order, so a caller never
// synchronises between ops; the few ops that return a value to the host
// (softmax_cross_entropy, all_finite) wait for their own result only.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "../shared.h"
#include "library_handles.h"
#include "mirrored/core/cuda_resources.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored::kernels::cuda {

namespace dnn {
class ConvPlanCache;  // cudnn_ops.h
}

// One device's kernel state: the compute stream, the library handles bound to it, scratch
// areas and the cuDNN convolution plans with their shared workspace. Owned by
// kernels::DeviceContext (device_context.h), which the Runtime creates for its GPU; the
// constructor registers it (and its stream as the device's compute stream), the
// destructor waits for the stream and unregisters it. Members are destroyed in reverse
// order: plans and workspace, handles, scratch, and the stream last.
class Context {
  // Declared first, so destroyed last: everything below is bound to the stream.
  CudaStream stream_;
  std::once_flag cublas_once_, cudnn_once_;
  CublasHandle cublas_;
  CudnnHandle cudnn_;
  DeviceBuffer workspace_;
  DeviceBuffer bf16_scratch_[3];
  DeviceBuffer exact_grid_layout_;

 public:
  explicit Context(int device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const { return stream_.get(); }
  // Created on first use (a test that never multiplies pays for no cuBLAS handle).
  cublasHandle_t cublas();
  cudnnHandle_t cudnn();
  // The shared cuDNN workspace, grown (never shrunk) to `bytes`; null for 0 bytes.
  void* workspace_of_size(size_t bytes);
  size_t workspace_bytes() const { return workspace_.bytes(); }
  // Scratch `which` (0-2) of at least `bytes`, grown like the workspace: the bfloat16
  // copies of a bf16 product's operands.
  void* bf16_scratch_of_size(int which, size_t bytes);
  // Room of at least `bytes` for an exact sum's segment offsets and term pointers, grown
  // like the workspace. Its users queue on this context's stream only, so an upload into it
  // is ordered after the kernels that read the previous one.
  void* exact_grid_layout_of_size(size_t bytes);

  const int device;
  std::mutex reduce_mutex;    // guards the scratch below (main and communication threads)
  DeviceBuffer scratch;       // per-block partial results
  PinnedBuffer host_scratch;  // their host copy
  // Per-block partial sums of the batch-norm reductions, combined on the device. The mutex
  // is held while a reduction's two kernels are queued, so they use the buffer in turn.
  std::mutex partials_mutex;
  DeviceBuffer partials;
  const std::unique_ptr<dnn::ConvPlanCache> conv_plans;
};

// The innermost live context of `device` (see DeviceContext); makes `device` current on
// this thread. Throws when there is none.
Context& context(int device);

void gemm(Context& ctx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          Precision precision = Precision::kF32);

void add_bias(Context& ctx, float* y, const float* bias, int64_t rows, int64_t cols);
void accumulate_bias_grad(Context& ctx, const float* dy, float* dbias, int64_t rows, int64_t cols);

void relu_forward(Context& ctx, const float* x, float* y, int64_t n);
void relu_backward(Context& ctx, const float* y, const float* dy, float* dx, int64_t n);

// Labels outside [0, classes) throw (checked on the device, reported on the host).
CrossEntropyResult softmax_cross_entropy(Context& ctx, const float* logits, const int32_t* labels, int64_t rows,
                                         int64_t classes, float* dlogits, float grad_scale);

void scale(Context& ctx, float* x, int64_t n, float alpha);
void axpy(Context& ctx, int64_t n, float alpha, const float* x, float* y);
bool all_finite(Context& ctx, const float* x, int64_t n);
void flag_non_finite(Context& ctx, const float* x, int64_t n, int32_t* flag);

// `skip` (nullable): a device flag; non-zero makes the kernel leave everything untouched.
// `scale` (nullable): a device float each gradient is multiplied by first (the clip's factor).
void sgd_update(Context& ctx, float* param, const float* grad, float* velocity, int64_t n, const SgdHyper& hyper,
                const int32_t* skip, const float* scale);
void adam_update(Context& ctx, float* param, const float* grad, float* m, float* v, int64_t n,
                 const AdamHyper& hyper, int64_t step, const int32_t* skip, const float* scale);

// ---- Convolution family (NCHW). Semantics as the CPU kernels (cpu_kernels.h).

// Through cuDNN (cudnn_ops.h): algorithms planned once per shape and context, the
// context's workspace.
// kBF16: the inputs are rounded to bfloat16 on the device and the float32 (FMA) plans run on
// them, which gives bf16 arithmetic but not bf16 speed.
void conv2d_forward(Context& ctx, const float* x, const float* weight, const float* bias, const ConvShape& s,
                    float* y, Precision precision = Precision::kF32);
// dweight and dbias accumulate; dx (may be null) is overwritten; dbias may be null.
void conv2d_backward(Context& ctx, const float* x, const float* weight, const float* dy, const ConvShape& s,
                     float* dx, float* dweight, float* dbias, Precision precision = Precision::kF32);

// Ties and padding as the CPU: the first maximum in row-major window order wins, padding
// never does. Backward gathers, for each input element, the gradients of the windows whose
// maximum it was, in output order: no atomics, the CPU's sums bit for bit.
void max_pool2d_forward(Context& ctx, const float* x, const PoolShape& s, float* y, int32_t* argmax);
void max_pool2d_backward(Context& ctx, const float* dy, const int32_t* argmax, const PoolShape& s, float* dx);
// count_include_pad, like the CPU (cuDNN's average pooling is the other convention).
void avg_pool2d_forward(Context& ctx, const float* x, const PoolShape& s, float* y);
void avg_pool2d_backward(Context& ctx, const float* dy, const PoolShape& s, float* dx);

// Batch norm over x [n, c, plane]; the [2c + 1] sums layouts of kernels.h. The counts stay
// on the device: a count <= 0 (an empty batch, refused on the CPU with an error) gives NaN
// statistics and a NaN dx rather than a host read-back that would stall the stream.
void batch_norm_sums(Context& ctx, const float* x, const float* shift, int64_t n, int64_t c, int64_t plane,
                     float* sums);
void batch_norm_statistics(Context& ctx, const float* sums, const float* shift, int64_t c, float eps,
                           float momentum, float* mean, float* invstd, float* running_mean, float* running_var);
void batch_norm_inference_statistics(Context& ctx, const float* running_mean, const float* running_var, int64_t c,
                                     float eps, float* mean, float* invstd);
void batch_norm_apply(Context& ctx, const float* x, const float* mean, const float* invstd, const float* gamma,
                      const float* beta, int64_t n, int64_t c, int64_t plane, float* y);
void batch_norm_backward_sums(Context& ctx, const float* x, const float* dy, const float* mean,
                              const float* invstd, int64_t n, int64_t c, int64_t plane, float* grad_sums);
void batch_norm_backward_input(Context& ctx, const float* x, const float* dy, const float* mean,
                               const float* invstd, const float* gamma, const float* grad_sums, int64_t n, int64_t c,
                               int64_t plane, float* dx);

// The CPU's masks bit for bit (core/counter_rng.h), one thread per element.
void dropout_forward(Context& ctx, const float* x, float p, uint64_t seed, int64_t first_sample, int64_t n,
                     int64_t sample_numel, float* mask, float* y);
void multiply(Context& ctx, const float* a, const float* b, float* y, int64_t n);
void add(Context& ctx, const float* a, const float* b, float* y, int64_t n);

// bfloat16 wire format for compressed gradient all-reduce, on `stream`:
// to_bf16: out = round_nearest_even(in); from_bf16: out = float(in) * scale.
void float_to_bf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);
// out = float(round_nearest_even(in)): bfloat16 values kept as floats (bf16 convolutions).
void round_to_bf16(const float* in, float* out, int64_t n, cudaStream_t stream);
void bf16_to_float(const uint16_t* in, float* out, int64_t n, float scale, cudaStream_t stream);
// x *= alpha on `stream` (the communication stream scales reduced buckets).
void scale_on(cudaStream_t stream, float* x, int64_t n, float alpha);

// ---- Transformer (kernels.h, "Transformer"); semantics as the CPU kernels (cpu_kernels.h).
// No atomics: every reduction has a fixed order, so results repeat bit for bit.

// Token ids outside [0, vocab) give a NaN row (forward) and are skipped (backward).
void embedding_forward(Context& ctx, const int32_t* tokens, const float* wte, const float* wpe, int64_t batch,
                       int64_t tokens_per_row, int64_t vocab, int64_t c, float* out);
// The CPU's sums bit for bit: each row of dwte adds its tokens in (b, t) order.
void embedding_backward(Context& ctx, const int32_t* tokens, const float* dout, int64_t batch,
                        int64_t tokens_per_row, int64_t vocab, int64_t c, float* dwte, float* dwpe);
void layer_norm_forward(Context& ctx, const float* x, const float* gamma, const float* beta, float eps, int64_t rows,
                        int64_t c, float* y, float* mean, float* rstd);
// Floats of workspace layer_norm_backward needs (per-chunk partial sums of dgamma, dbeta).
int64_t layer_norm_backward_workspace_floats(int64_t rows, int64_t c);
void layer_norm_backward(Context& ctx, const float* x, const float* dy, const float* gamma, const float* mean,
                         const float* rstd, int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta,
                         float* workspace);
void gelu_forward(Context& ctx, const float* x, float* y, int64_t n);
void gelu_backward(Context& ctx, const float* x, const float* dy, float* dx, int64_t n);
// cuBLAS strided-batched products over the heads of one sequence at a time, fused causal
// softmax kernels in between.
void attention_forward(Context& ctx, const float* qkv, int64_t b, int64_t t, int64_t c, int64_t heads, float* out,
                       float* probs);
// Floats of workspace attention_backward needs: the score gradients of one sequence.
int64_t attention_backward_workspace_floats(int64_t t, int64_t heads);
void attention_backward(Context& ctx, const float* qkv, const float* probs, const float* dout, int64_t b, int64_t t,
                        int64_t c, int64_t heads, float* dqkv, float* workspace);
// Fused (fused_attention.cu): lse [b, heads, t]; backward's workspace holds one float per
// query row (dO . O).
void fused_attention_forward(Context& ctx, const float* qkv, int64_t b, int64_t t, int64_t c, int64_t heads,
                             float* out, float* lse);
int64_t fused_attention_backward_workspace_floats(int64_t b, int64_t t, int64_t heads);
void fused_attention_backward(Context& ctx, const float* qkv, const float* out, const float* lse, const float* dout,
                              int64_t b, int64_t t, int64_t c, int64_t heads, float* dqkv, float* workspace);

// ---- Per-step statistics (kernels.h; step_stats.cu): queued, never waited for.
// Row losses and the mean as softmax_cross_entropy, the mean summed on the device in row
// order; `rows_scratch` (the caller's workspace) holds `rows` doubles then `rows` int32.
void softmax_cross_entropy_mean(Context& ctx, const float* logits, const int32_t* labels, int64_t rows,
                                int64_t classes, float* dlogits, float grad_scale, float* mean_loss,
                                void* rows_scratch);
void tally_non_finite(Context& ctx, int32_t* flag, int32_t* tally, int32_t step, bool latch);
// `partials` holds sum_squares_partials(n) doubles of the caller's workspace.
int64_t sum_squares_partials(int64_t n);
void sum_squares(Context& ctx, const float* x, int64_t n, float* sum, double* partials);
void scale_by_clip(Context& ctx, float* x, int64_t n, const float* sum_squares, float max_norm, float* norm);
void clip_factor(Context& ctx, const float* sum_squares, float max_norm, float* norm, float* factor);

// Exact sums' grid conversions (kernels.h, "exact_grid_*"); exact_grid.cu.
void exact_grid_exponents(Context& ctx, const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                          int32_t* exponents);
void exact_grid_sums(Context& ctx, const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                     const int32_t* exponents, int64_t total_terms, int64_t* sums);
void exact_grid_plain_sums(Context& ctx, const std::vector<const float*>& terms, const std::vector<size_t>& offsets,
                           const int32_t* exponents, float* plain);
void exact_grid_round(Context& ctx, const int64_t* sums, const float* plain, const std::vector<size_t>& offsets,
                      const int32_t* exponents, int64_t total_terms, float* out);

}  // namespace mirrored::kernels::cuda
