// Checked entry points of the ops that keep a training step's statistics on the device:
// the loss left where it was computed, the non-finite tally, gradient clipping. None of
// them makes the host wait for a GPU.
#include <algorithm>
#include <limits>

#include "cpu/cpu_kernels.h"
#include "dispatch_checks.h"

namespace mirrored::kernels {
using namespace checks;
namespace {

void require_scalar(const char* op, const Tensor& t, DType dtype, int64_t numel, const char* what) {
  MIRRORED_CHECK(t.defined() && t.dtype() == dtype && t.numel() == numel, op, ": ", what, " must be ", numel, " ",
                 dtype_name(dtype), ", got ", t.defined() ? dtype_name(t.dtype()) : "nothing", " ",
                 t.defined() ? shape_str(t.shape()) : "");
}

}  // namespace

void softmax_cross_entropy_mean(const Tensor& logits, const Tensor& labels, Tensor* dlogits, float grad_scale,
                                Tensor& mean_loss, Tensor& workspace) {
  const char* op = "softmax_cross_entropy_mean";
  const bool cuda = dlogits ? on_cuda(op, {&logits, &labels, dlogits, &mean_loss})
                            : on_cuda(op, {&logits, &labels, &mean_loss});
  require_f32(op, {&logits});
  require_matrix(op, logits);
  require_scalar(op, mean_loss, DType::kF32, 1, "mean_loss");
  MIRRORED_CHECK(logits.dim(1) > 0, op, ": no classes in logits ", shape_str(logits.shape()));
  MIRRORED_CHECK(labels.dtype() == DType::kI32, op, ": labels must be int32, got ", dtype_name(labels.dtype()));
  MIRRORED_CHECK(labels.rank() == 1 && labels.dim(0) == logits.dim(0), op, ": labels ", shape_str(labels.shape()),
                 " for logits ", shape_str(logits.shape()));
  if (dlogits) {
    require_f32(op, {dlogits});
    require_same_shape(op, logits, *dlogits);
  }
  const int64_t rows = logits.dim(0);
  float* grad = dlogits ? dlogits->data<float>() : nullptr;
  if (cuda) {
    // A double and an int32 per row, counted in floats.
    ensure_shape(workspace, {std::max<int64_t>(rows * 3, 1)}, DType::kF32, logits.device());
    MIRRORED_ON_CUDA(logits, softmax_cross_entropy_mean, logits.data<float>(), labels.data<int32_t>(), rows,
                     logits.dim(1), grad, grad_scale, mean_loss.data<float>(), workspace.raw());
  }
  const CrossEntropyResult r =
      cpu::softmax_cross_entropy(logits.data<float>(), labels.data<int32_t>(), rows, logits.dim(1), grad, grad_scale);
  mean_loss.data<float>()[0] = rows > 0 ? static_cast<float>(r.loss_sum / static_cast<double>(rows)) : 0.0f;
}

void tally_non_finite(Tensor& flag, Tensor& tally, int64_t step, bool latch) {
  const char* op = "tally_non_finite";
  const bool cuda = on_cuda(op, {&flag, &tally});
  require_scalar(op, flag, DType::kI32, 1, "the flag");
  require_scalar(op, tally, DType::kI32, 2, "the tally");
  MIRRORED_CHECK(step >= 1 && step <= std::numeric_limits<int32_t>::max(), op, ": step ", step,
                 " outside [1, 2^31)");
  const auto step32 = static_cast<int32_t>(step);
  if (cuda) MIRRORED_ON_CUDA(flag, tally_non_finite, flag.data<int32_t>(), tally.data<int32_t>(), step32, latch);
  cpu::tally_non_finite(flag.data<int32_t>(), tally.data<int32_t>(), step32, latch);
}

void sum_squares(const Tensor& x, Tensor& sum, Tensor& workspace) {
  const char* op = "sum_squares";
  const bool cuda = on_cuda(op, {&x, &sum});
  require_f32(op, {&x});
  require_scalar(op, sum, DType::kF32, 1, "the sum");
  if (cuda) {
#ifdef MIRRORED_WITH_CUDA
    ensure_shape(workspace, {2 * cuda::sum_squares_partials(x.numel())}, DType::kF32, x.device());  // doubles
#endif
    MIRRORED_ON_CUDA(x, sum_squares, x.data<float>(), x.numel(), sum.data<float>(),
                     static_cast<double*>(workspace.raw()));
  }
  sum.data<float>()[0] = static_cast<float>(cpu::sum_squares(x.data<float>(), x.numel()));
}

void scale_by_clip(Tensor& x, const Tensor& sum_squares, float max_norm, Tensor& norm) {
  const char* op = "scale_by_clip";
  const bool cuda = on_cuda(op, {&x, &sum_squares, &norm});
  require_f32(op, {&x});
  require_scalar(op, sum_squares, DType::kF32, 1, "the sum of squares");
  require_scalar(op, norm, DType::kF32, 1, "the norm");
  MIRRORED_CHECK(max_norm > 0.0f, op, ": max_norm ", max_norm, " must be > 0");
  if (cuda)
    MIRRORED_ON_CUDA(x, scale_by_clip, x.data<float>(), x.numel(), sum_squares.data<float>(), max_norm,
                     norm.data<float>());
  cpu::scale_by_clip(x.data<float>(), x.numel(), sum_squares.data<float>()[0], max_norm, norm.data<float>());
}

void clip_factor(const Tensor& sum_squares, float max_norm, Tensor& norm, Tensor& factor) {
  const char* op = "clip_factor";
  const bool cuda = on_cuda(op, {&sum_squares, &norm, &factor});
  require_scalar(op, sum_squares, DType::kF32, 1, "the sum of squares");
  require_scalar(op, norm, DType::kF32, 1, "the norm");
  require_scalar(op, factor, DType::kF32, 1, "the factor");
  MIRRORED_CHECK(max_norm > 0.0f, op, ": max_norm ", max_norm, " must be > 0");
  if (cuda)
    MIRRORED_ON_CUDA(sum_squares, clip_factor, sum_squares.data<float>(), max_norm, norm.data<float>(),
                     factor.data<float>());
  cpu::clip_factor(sum_squares.data<float>()[0], max_norm, norm.data<float>(), factor.data<float>());
}

}  // namespace mirrored::kernels
