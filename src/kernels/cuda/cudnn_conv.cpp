// Convolution through cuDNN: algorithms chosen once per shape, deterministic ones only,
// one shared workspace per device.
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "cudnn_check.h"
#include "cudnn_ops.h"
#include "mirrored/core/error.h"

namespace mirrored::kernels::cuda::dnn {
namespace {

constexpr int kCandidates = 16;

// The first candidate that ran, is deterministic and fits `limit` bytes of workspace.
// cuDNN returns candidates fastest (Find) or most promising (Get_v7) first.
template <typename Perf>
const Perf* first_usable(const std::vector<Perf>& perfs, int returned) {
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perfs[static_cast<size_t>(i)];
    if (p.status == CUDNN_STATUS_SUCCESS && p.determinism == CUDNN_DETERMINISTIC) return &p;
  }
  return nullptr;
}

std::string describe(const Conv2dShape& s) {
  return str_cat("conv x [", s.n, ", ", s.c, ", ", s.h, ", ", s.w, "] w [", s.k, ", ", s.c, ", ", s.r, ", ", s.s,
                 "] pad ", s.pad_h, "x", s.pad_w, " stride ", s.stride_h, "x", s.stride_w);
}

std::mutex plans_mutex;
size_t plans_created = 0;

}  // namespace

Conv2dPlan::Conv2dPlan(int device, const Conv2dShape& s, AlgoSearch search) : device_(device), shape_(s) {
  DnnContext& ctx = dnn_context(device);
  x_desc_ = TensorDesc(s.n, s.c, s.h, s.w);
  MIRRORED_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_));
  MIRRORED_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(s.k),
                                                  static_cast<int>(s.c), static_cast<int>(s.r), static_cast<int>(s.s)));
  MIRRORED_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
  MIRRORED_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc_, s.pad_h, s.pad_w, s.stride_h, s.stride_w, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // FMA math: no TF32 tensor cores (see the header).
  MIRRORED_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, CUDNN_FMA_MATH));
  int n = 0, k = 0, h = 0, w = 0;
  MIRRORED_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_.get(), w_desc_, &n, &k, &h, &w));
  out_h_ = h;
  out_w_ = w;
  y_desc_ = TensorDesc(n, k, h, w);
  bias_desc_ = TensorDesc(1, s.k, 1, 1);

  const cudnnHandle_t handle = ctx.handle.get();
  int returned = 0;
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(kCandidates);
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data(kCandidates);
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter(kCandidates);
  auto choose = [&](const auto& perfs, int count, const char* pass) {
    const auto* best = first_usable(perfs, count);
    MIRRORED_CHECK(best != nullptr, "cuDNN offers no deterministic ", pass, " algorithm for ", describe(s));
    workspace_bytes_ = std::max(workspace_bytes_, best->memory);
    return best->algo;
  };
  if (search == AlgoSearch::kBenchmark) {
    MIRRORED_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(handle, x_desc_.get(), w_desc_, conv_desc_,
                                                              y_desc_.get(), kCandidates, &returned, fwd.data()));
    fwd_algo_ = choose(fwd, returned, "forward");
    MIRRORED_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(handle, w_desc_, y_desc_.get(), conv_desc_,
                                                                   x_desc_.get(), kCandidates, &returned,
                                                                   bwd_data.data()));
    bwd_data_algo_ = choose(bwd_data, returned, "backward-data");
    MIRRORED_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(handle, x_desc_.get(), y_desc_.get(), conv_desc_,
                                                                     w_desc_, kCandidates, &returned,
                                                                     bwd_filter.data()));
    bwd_filter_algo_ = choose(bwd_filter, returned, "backward-filter");
  } else {
    MIRRORED_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_desc_.get(), w_desc_, conv_desc_,
                                                                y_desc_.get(), kCandidates, &returned, fwd.data()));
    fwd_algo_ = choose(fwd, returned, "forward");
    MIRRORED_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w_desc_, y_desc_.get(), conv_desc_,
                                                                     x_desc_.get(), kCandidates, &returned,
                                                                     bwd_data.data()));
    bwd_data_algo_ = choose(bwd_data, returned, "backward-data");
    MIRRORED_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x_desc_.get(), y_desc_.get(),
                                                                       conv_desc_, w_desc_, kCandidates, &returned,
                                                                       bwd_filter.data()));
    bwd_filter_algo_ = choose(bwd_filter, returned, "backward-filter");
  }
  ctx.workspace_of_size(workspace_bytes_);  // allocate now, not in the first step
}

Conv2dPlan::~Conv2dPlan() {
  if (conv_desc_) MIRRORED_CUDNN_LOG(cudnnDestroyConvolutionDescriptor(conv_desc_));
  if (w_desc_) MIRRORED_CUDNN_LOG(cudnnDestroyFilterDescriptor(w_desc_));
}

void Conv2dPlan::forward(const float* x, const float* w, const float* bias, float* y) const {
  DnnContext& ctx = dnn_context(device_);
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(cudnnConvolutionForward(ctx.handle.get(), &one, x_desc_.get(), x, w_desc_, w, conv_desc_,
                                               fwd_algo_, ctx.workspace_of_size(workspace_bytes_), workspace_bytes_,
                                               &zero, y_desc_.get(), y));
  if (bias) MIRRORED_CUDNN_CHECK(cudnnAddTensor(ctx.handle.get(), &one, bias_desc_.get(), bias, &one, y_desc_.get(), y));
}

void Conv2dPlan::backward_data(const float* w, const float* dy, float* dx) const {
  DnnContext& ctx = dnn_context(device_);
  const float one = 1.0f, zero = 0.0f;
  MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.handle.get(), &one, w_desc_, w, y_desc_.get(), dy, conv_desc_,
                                                    bwd_data_algo_, ctx.workspace_of_size(workspace_bytes_),
                                                    workspace_bytes_, &zero, x_desc_.get(), dx));
}

void Conv2dPlan::backward_filter(const float* x, const float* dy, float* dw, float* dbias) const {
  DnnContext& ctx = dnn_context(device_);
  const float one = 1.0f;
  MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.handle.get(), &one, x_desc_.get(), x, y_desc_.get(), dy,
                                                      conv_desc_, bwd_filter_algo_,
                                                      ctx.workspace_of_size(workspace_bytes_), workspace_bytes_, &one,
                                                      w_desc_, dw));
  if (dbias)
    MIRRORED_CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx.handle.get(), &one, y_desc_.get(), dy, &one,
                                                      bias_desc_.get(), dbias));
}

const Conv2dPlan& conv_plan(int device, const Conv2dShape& s, AlgoSearch search) {
  // Plans live for the process: layers ask for theirs every step, by shape.
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int>;
  static auto* plans = new std::map<Key, std::unique_ptr<Conv2dPlan>>;
  const Key key{device, static_cast<int>(search), s.n, s.c, s.h, s.w, s.k, s.r, s.s,
                s.pad_h, s.pad_w, s.stride_h, s.stride_w};
  std::lock_guard lock(plans_mutex);
  auto it = plans->find(key);
  if (it == plans->end()) {
    it = plans->emplace(key, std::make_unique<Conv2dPlan>(device, s, search)).first;
    ++plans_created;
  }
  return *it->second;
}

size_t conv_plans_created() {
  std::lock_guard lock(plans_mutex);
  return plans_created;
}

}  // namespace mirrored::kernels::cuda::dnn
