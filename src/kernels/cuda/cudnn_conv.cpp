// Convolution through cuDNN: algorithms chosen once per shape and context, deterministic
// ones only, run in FMA math (no TF32 tensor cores), under a workspace cap, sharing the
// context's workspace.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "cudnn_check.h"
#include "cudnn_ops.h"
#include "mirrored/core/cuda_check.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda::dnn {
namespace {

constexpr int kCandidates = 16;

std::string describe(const Conv2dShape& s) {
  return str_cat("conv x [", s.n, ", ", s.c, ", ", s.h, ", ", s.w, "] w [", s.k, ", ", s.c, ", ", s.r, ", ", s.s,
                 "] pad ", s.pad_h, "x", s.pad_w, " stride ", s.stride_h, "x", s.stride_w);
}

// The workspace one pass may take now: the cap, and a quarter of what is free beside the
// workspace the context already holds.
size_t workspace_limit(Context& ctx) {
  size_t free_bytes = 0, total_bytes = 0;
  MIRRORED_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return std::min(kMaxConvWorkspaceBytes, ctx.workspace_bytes() + free_bytes / 4);
}

// Why candidate `p` cannot run here (null when it can); when it can, its workspace is
// allocated and `bytes` holds its size. `trial(algo, workspace, bytes)` runs the pass once
// on scratch tensors: cuDNN checks at the call whether the algorithm has a kernel for this
// shape in FMA math, so a candidate that has none is passed over here, not in a step.
template <typename Perf, typename WorkspaceSize, typename Trial>
const char* unusable(Context& ctx, cudnnConvolutionDescriptor_t conv, const Perf& p, size_t limit,
                     WorkspaceSize workspace_size, Trial trial, size_t* bytes) {
  if (p.status != CUDNN_STATUS_SUCCESS) return cudnnGetErrorString(p.status);
  if (p.determinism != CUDNN_DETERMINISTIC) return "not deterministic";
  // cuDNN 9's math types (cudnnMathType_t): TENSOR_OP_MATH and TENSOR_OP_MATH_ALLOW_CONVERSION
  // ask for tensor cores, which for float32 means TF32 (10-bit mantissas) and would break the
  // agreement with the CPU kernels: refused. DEFAULT_MATH and FMA_MATH candidates are kept:
  // the heuristics may label a float32 candidate DEFAULT_MATH even when the descriptor asked
  // for FMA, and every candidate is then run with the descriptor in CUDNN_FMA_MATH, which
  // restricts cuDNN to FMA kernels (a candidate that has none fails the workspace query or
  // its first run below, and the next one is taken).
  if (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
    return "tensor-core math";
  if (cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH) != CUDNN_STATUS_SUCCESS) return "FMA math refused";
  if (workspace_size(p.algo, bytes) != CUDNN_STATUS_SUCCESS) return "no workspace size";
  if (*bytes > limit) return "workspace over the limit";
  void* workspace = nullptr;
  try {
    workspace = ctx.workspace_of_size(*bytes);
  } catch (const Error&) {
    (void)cudaGetLastError();  // an out-of-memory error is not sticky: the next one may fit
    return "workspace allocation failed";
  }
  if (trial(p.algo, workspace, *bytes) != CUDNN_STATUS_SUCCESS) return "refused in FMA math at a trial run";
  return nullptr;
}

// Scratch tensors of a plan's shapes for the trial runs, zeroed (the values do not matter;
// zeros keep the trial quick and finite). Freed once the algorithms are chosen.
struct TrialTensors {
  DeviceBuffer x, w, y;
  TrialTensors(int device, const Conv2dShape& s, int64_t out_h, int64_t out_w, cudaStream_t stream)
      : x(static_cast<size_t>(s.n * s.c * s.h * s.w) * sizeof(float), device),
        w(static_cast<size_t>(s.k * s.c * s.r * s.s) * sizeof(float), device),
        y(static_cast<size_t>(s.n * s.k * out_h * out_w) * sizeof(float), device) {
    for (const DeviceBuffer* b : {&x, &w, &y}) MIRRORED_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), stream));
  }
};

// The first usable candidate of one pass (cuDNN lists them fastest, or most promising,
// first), with its workspace allocated and its size in `memory`.
template <typename Perf, typename WorkspaceSize, typename Trial>
Perf first_usable(Context& ctx, cudnnConvolutionDescriptor_t conv, const std::vector<Perf>& perfs, int returned,
                  WorkspaceSize workspace_size, Trial trial, const char* pass, const Conv2dShape& shape) {
  const size_t limit = workspace_limit(ctx);
  std::string passed_over;
  for (int i = 0; i < returned; ++i) {
    Perf p = perfs[static_cast<size_t>(i)];
    size_t bytes = 0;
    if (const char* why = unusable(ctx, conv, p, limit, workspace_size, trial, &bytes)) {
      passed_over += str_cat(" algo ", static_cast<int>(p.algo), ": ", why, ";");
      continue;
    }
    p.memory = bytes;
    return p;
  }
  throw Error(ExitCode::kFailure, str_cat("cuDNN offers no usable ", pass, " algorithm for ", describe(shape),
                                          " (limit ", limit, " workspace bytes):", passed_over));
}

}  // namespace

Conv2dPlan::Conv2dPlan(int device, const Conv2dShape& s, AlgoSearch search) : device_(device), shape_(s) {
  describe_tensors();
  choose_algorithms(search);
}

void Conv2dPlan::describe_tensors() {
  const Conv2dShape& s = shape_;
  x_desc_ = TensorDesc(s.n, s.c, s.h, s.w);
  MIRRORED_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_));
  MIRRORED_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(s.k),
                                                  static_cast<int>(s.c), static_cast<int>(s.r), static_cast<int>(s.s)));
  MIRRORED_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
  MIRRORED_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc_, s.pad_h, s.pad_w, s.stride_h, s.stride_w, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // Candidates are then listed for FMA math (see first_usable).
  MIRRORED_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, CUDNN_FMA_MATH));
  int n = 0, k = 0, h = 0, w = 0;
  MIRRORED_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_.get(), w_desc_, &n, &k, &h, &w));
  out_h_ = h;
  out_w_ = w;
  y_desc_ = TensorDesc(n, k, h, w);
  bias_desc_ = TensorDesc(1, s.k, 1, 1);
}

void Conv2dPlan::choose_algorithms(AlgoSearch search) {
  Context& ctx = context(device_);
  const cudnnHandle_t handle = ctx.cudnn();
  const bool find = search == AlgoSearch::kBenchmark;
  const auto x = x_desc_.get(), y = y_desc_.get();
  const auto w = w_desc_;
  const auto conv = conv_desc_;
  const TrialTensors scratch(device_, shape_, out_h_, out_w_, ctx.stream());
  const float one = 1.0f, zero = 0.0f;
  int returned = 0;

  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(kCandidates);
  MIRRORED_CUDNN_CHECK(find ? cudnnFindConvolutionForwardAlgorithm(handle, x, w, conv, y, kCandidates, &returned,
                                                                   fwd.data())
                            : cudnnGetConvolutionForwardAlgorithm_v7(handle, x, w, conv, y, kCandidates, &returned,
                                                                     fwd.data()));
  const auto fwd_choice = first_usable(
      ctx, conv, fwd, returned,
      [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(handle, x, w, conv, y, algo, bytes);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, void* workspace, size_t bytes) {
        return cudnnConvolutionForward(handle, &one, x, scratch.x.data(), w, scratch.w.data(), conv, algo, workspace,
                                       bytes, &zero, y, scratch.y.data());
      },
      "forward", shape_);

  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data(kCandidates);
  MIRRORED_CUDNN_CHECK(find ? cudnnFindConvolutionBackwardDataAlgorithm(handle, w, y, conv, x, kCandidates, &returned,
                                                                        bwd_data.data())
                            : cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w, y, conv, x, kCandidates,
                                                                          &returned, bwd_data.data()));
  const auto data_choice = first_usable(
      ctx, conv, bwd_data, returned,
      [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w, y, conv, x, algo, bytes);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, void* workspace, size_t bytes) {
        return cudnnConvolutionBackwardData(handle, &one, w, scratch.w.data(), y, scratch.y.data(), conv, algo,
                                            workspace, bytes, &zero, x, scratch.x.data());
      },
      "backward-data", shape_);

  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter(kCandidates);
  MIRRORED_CUDNN_CHECK(find ? cudnnFindConvolutionBackwardFilterAlgorithm(handle, x, y, conv, w, kCandidates,
                                                                          &returned, bwd_filter.data())
                            : cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x, y, conv, w, kCandidates,
                                                                            &returned, bwd_filter.data()));
  const auto filter_choice = first_usable(
      ctx, conv, bwd_filter, returned,
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x, y, conv, w, algo, bytes);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, void* workspace, size_t bytes) {
        return cudnnConvolutionBackwardFilter(handle, &one, x, scratch.x.data(), y, scratch.y.data(), conv, algo,
                                              workspace, bytes, &zero, w, scratch.w.data());
      },
      "backward-filter", shape_);

  fwd_algo_ = fwd_choice.algo;
  bwd_data_algo_ = data_choice.algo;
  bwd_filter_algo_ = filter_choice.algo;
  // Every chosen algorithm runs in FMA math, the descriptor's for all three passes.
  MIRRORED_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, CUDNN_FMA_MATH));
  // The trial runs read and write `scratch`: done before it is freed.
  MIRRORED_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
  workspace_bytes_ = std::max({fwd_choice.memory, data_choice.memory, filter_choice.memory});
  ctx.workspace_of_size(workspace_bytes_);  // allocate now, not in the first step
}

Conv2dPlan::~Conv2dPlan() {
  if (conv_desc_) MIRRORED_CUDNN_LOG(cudnnDestroyConvolutionDescriptor(conv_desc_));
  if (w_desc_) MIRRORED_CUDNN_LOG(cudnnDestroyFilterDescriptor(w_desc_));
}

void Conv2dPlan::forward(const float* x, const float* w, const float* bias, float* y) const {
  Context& ctx = context(device_);
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn(), &one, x_desc_.get(), x, w_desc_, w, conv_desc_,
                                               fwd_algo_, ctx.workspace_of_size(workspace_bytes_), workspace_bytes_,
                                               &zero, y_desc_.get(), y));
  if (bias) MIRRORED_CUDNN_CHECK(cudnnAddTensor(ctx.cudnn(), &one, bias_desc_.get(), bias, &one, y_desc_.get(), y));
}

void Conv2dPlan::backward_data(const float* w, const float* dy, float* dx) const {
  Context& ctx = context(device_);
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn(), &one, w_desc_, w, y_desc_.get(), dy, conv_desc_,
                                                    bwd_data_algo_, ctx.workspace_of_size(workspace_bytes_),
                                                    workspace_bytes_, &zero, x_desc_.get(), dx));
}

void Conv2dPlan::backward_filter(const float* x, const float* dy, float* dw, float* dbias) const {
  Context& ctx = context(device_);
  const float one = 1.0f;
  MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn(), &one, x_desc_.get(), x, y_desc_.get(), dy,
                                                      conv_desc_, bwd_filter_algo_,
                                                      ctx.workspace_of_size(workspace_bytes_), workspace_bytes_, &one,
                                                      w_desc_, dw));
  if (dbias)
    MIRRORED_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(ctx.cudnn(), &one, y_desc_.get(), dy, &one, bias_desc_.get(), dbias));
}

struct ConvPlanCache::Plans {
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int>;
  std::mutex mutex;
  std::map<Key, std::unique_ptr<Conv2dPlan>> by_shape;
  size_t created = 0;
};

ConvPlanCache::ConvPlanCache() : plans_(std::make_unique<Plans>()) {}
ConvPlanCache::~ConvPlanCache() = default;

const Conv2dPlan& ConvPlanCache::get(int device, const Conv2dShape& s, AlgoSearch search) {
  const Plans::Key key{static_cast<int>(search), s.n, s.c, s.h, s.w, s.k, s.r, s.s,
                       s.pad_h, s.pad_w, s.stride_h, s.stride_w};
  std::lock_guard lock(plans_->mutex);
  auto it = plans_->by_shape.find(key);
  if (it == plans_->by_shape.end()) {
    it = plans_->by_shape.emplace(key, std::make_unique<Conv2dPlan>(device, s, search)).first;
    ++plans_->created;
  }
  return *it->second;
}

size_t ConvPlanCache::created() const {
  std::lock_guard lock(plans_->mutex);
  return plans_->created;
}

const Conv2dPlan& conv_plan(int device, const Conv2dShape& shape, AlgoSearch search) {
  return context(device).conv_plans->get(device, shape, search);
}

size_t conv_plans_created(int device) { return context(device).conv_plans->created(); }

}  // namespace mirrored::kernels::cuda::dnn
