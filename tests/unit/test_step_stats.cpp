// The ops that keep a step's statistics on the device (kernels.h): the loss left where it
// was computed, the NaN/Inf tally, gradient clipping by global norm. On the CPU always, on
// the GPU when one is present; both against the formulas written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "devices.h"
#include "mirrored/distribute/gradient_clipper.h"
#include "mirrored/kernels/clip_math.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

Tensor labels_on(const std::vector<int32_t>& values, Device device) {
  Tensor host({static_cast<int64_t>(values.size())}, DType::kI32);
  for (size_t i = 0; i < values.size(); ++i) host.data<int32_t>()[i] = values[i];
  return testing::to_device(host, device);
}

std::vector<int32_t> ints(const Tensor& t) {
  Tensor host(t.shape(), DType::kI32);
  kernels::copy(t, host);
  return {host.data<int32_t>(), host.data<int32_t>() + host.numel()};
}

class StepStats : public testing::DeviceTest {};

TEST_P(StepStats, MeanLossIsTheReadBackLossOverTheRows) {
  std::vector<float> values(5 * 7);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.7f * static_cast<float>(i)) * 3.0f;
  const Tensor logits_host = Tensor::from(values, {5, 7});
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  Tensor expected_grad({5, 7});
  const auto reference = kernels::softmax_cross_entropy(logits_host, labels_on(labels, Device::cpu()),
                                                        &expected_grad, 0.2f);
  Tensor dlogits({5, 7}, DType::kF32, device()), mean({1}, DType::kF32, device()), workspace;
  kernels::softmax_cross_entropy_mean(on_device(logits_host), labels_on(labels, device()), &dlogits, 0.2f, mean,
                                      workspace);
  const float expected = static_cast<float>(reference.loss_sum / 5.0);
  if (device().is_cpu())
    EXPECT_EQ(mean.to_vector()[0], expected);  // the value the step always reported, bit for bit
  else
    EXPECT_NEAR(mean.to_vector()[0], expected, 1e-6f * expected);
  const auto grad = dlogits.to_vector(), want = expected_grad.to_vector();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(grad[i], want[i], 1e-6f) << i;
}

TEST_P(StepStats, BadLabelFailsOnTheCpuAndGivesNanOnTheGpu) {
  const Tensor logits = on_device(Tensor::from({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2}));
  Tensor mean({1}, DType::kF32, device()), workspace;
  if (device().is_cpu()) {
    EXPECT_THROW(kernels::softmax_cross_entropy_mean(logits, labels_on({0, 2}, device()), nullptr, 1.0f, mean,
                                                     workspace),
                 Error);
  } else {
    kernels::softmax_cross_entropy_mean(logits, labels_on({0, 2}, device()), nullptr, 1.0f, mean, workspace);
    EXPECT_TRUE(std::isnan(mean.to_vector()[0]));  // reporting it would stall the stream
  }
}

TEST_P(StepStats, TallyCountsFlaggedStepsAndKeepsTheFirst) {
  Tensor flag({1}, DType::kI32, device()), tally({2}, DType::kI32, device());
  const std::vector<float> finite = {1.0f, 2.0f}, bad = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  const std::vector<std::vector<float>> steps = {finite, bad, finite, bad, bad, finite};
  for (size_t i = 0; i < steps.size(); ++i) {
    kernels::flag_non_finite(on_device(Tensor::from(steps[i], {2})), flag);
    kernels::tally_non_finite(flag, tally, static_cast<int64_t>(i + 1), /*latch=*/false);
    EXPECT_EQ(ints(flag)[0], steps[i] == finite ? 0 : 1) << "step " << i + 1 << ": without latch a flag is its own";
  }
  EXPECT_EQ(ints(tally), (std::vector<int32_t>{3, 2}));
}

TEST_P(StepStats, LatchedTallyFlagsEveryLaterStep) {
  Tensor flag({1}, DType::kI32, device()), tally({2}, DType::kI32, device());
  const std::vector<float> finite = {1.0f, 2.0f}, bad = {std::numeric_limits<float>::infinity(), 0.0f};
  const std::vector<std::vector<float>> steps = {finite, bad, finite, finite};
  const std::vector<int32_t> flags = {0, 1, 1, 1};
  for (size_t i = 0; i < steps.size(); ++i) {
    kernels::flag_non_finite(on_device(Tensor::from(steps[i], {2})), flag);
    kernels::tally_non_finite(flag, tally, static_cast<int64_t>(i + 1), /*latch=*/true);
    EXPECT_EQ(ints(flag)[0], flags[i]) << "step " << i + 1;
  }
  EXPECT_EQ(ints(tally), (std::vector<int32_t>{3, 2}));
  tally.zero();  // the host has read it: updates apply again
  kernels::flag_non_finite(on_device(Tensor::from(finite, {2})), flag);
  kernels::tally_non_finite(flag, tally, 5, true);
  EXPECT_EQ(ints(flag)[0], 0);
}

TEST_P(StepStats, SumOfSquaresAndClipFollowTheFormula) {
  std::vector<float> values(10000);
  double sum = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = std::cos(0.37f * static_cast<float>(i)) * 0.01f;
    sum += static_cast<double>(values[i]) * values[i];
  }
  Tensor x = on_device(Tensor::from(values, {10000}));
  Tensor squares({1}, DType::kF32, device()), norm({1}, DType::kF32, device()), workspace;
  kernels::sum_squares(x, squares, workspace);
  EXPECT_NEAR(squares.to_vector()[0], static_cast<float>(sum), 1e-6 * sum);
  const float max_norm = 0.1f;
  kernels::scale_by_clip(x, squares, max_norm, norm);
  const float total = std::sqrt(squares.to_vector()[0]);
  EXPECT_EQ(norm.to_vector()[0], total);
  const float factor = std::min(1.0f, max_norm / (total + 1e-6f));
  ASSERT_LT(factor, 0.5f) << "the case must clip";
  const auto clipped = x.to_vector();
  for (size_t i = 0; i < values.size(); i += 97) EXPECT_EQ(clipped[i], values[i] * factor) << i;
}

// torch.nn.utils.clip_grad_norm_ on the gradient [3, 4] (norm 5): max_norm 1 scales it by
// 1 / (5 + 1e-6); max_norm 10 leaves it as it is (the factor is clamped to 1).
TEST_P(StepStats, ClipperMatchesTorchOnAHandComputedCase) {
  distribute::GradientClipper clipper;
  Tensor grads = on_device(Tensor::from({3.0f, 4.0f}, {2}));
  clipper.clip(grads, 10.0f);
  EXPECT_EQ(grads.to_vector(), (std::vector<float>{3.0f, 4.0f}));
  EXPECT_EQ(clipper.norm().to_vector()[0], 5.0f);
  clipper.clip(grads, 1.0f);
  const float factor = 1.0f / (5.0f + 1e-6f);
  EXPECT_EQ(grads.to_vector(), (std::vector<float>{3.0f * factor, 4.0f * factor}));
  EXPECT_NEAR(grads.to_vector()[0], 0.6f, 1e-6f);
  EXPECT_NEAR(grads.to_vector()[1], 0.8f, 1e-6f);
  EXPECT_EQ(clipper.norm().to_vector()[0], 5.0f);  // the norm before clipping
}

TEST_P(StepStats, NonFiniteGradientGivesANonFiniteClip) {
  // As torch: the norm is NaN/Inf, and so is the clipped gradient; the NaN guard flags it
  // before the clip and the update is skipped.
  Tensor grads = on_device(Tensor::from({1.0f, std::numeric_limits<float>::quiet_NaN()}, {2}));
  distribute::GradientClipper clipper;
  clipper.clip(grads, 1.0f);
  EXPECT_TRUE(std::isnan(clipper.norm().to_vector()[0]));
  EXPECT_FALSE(kernels::all_finite(grads));
}

TEST(ClipMath, FactorIsTorchs) {
  EXPECT_EQ(kernels::clip_scale(5.0f, 10.0f), 1.0f);
  EXPECT_EQ(kernels::clip_scale(5.0f, 1.0f), 1.0f / (5.0f + 1e-6f));
  EXPECT_EQ(kernels::clip_scale(0.0f, 1.0f), 1.0f);
  EXPECT_TRUE(std::isnan(kernels::clip_scale(std::numeric_limits<float>::quiet_NaN(), 1.0f)));
}

// The CPU's order, worked out here: eight interleaved double sums added in lane order, then
// the tail. Fixed whatever the SIMD width, so the clip's bits do not depend on the CPU.
TEST(StepStatsOrder, CpuSumOfSquaresRunsInEightInterleavedSums) {
  for (const int64_t n : {1, 7, 8, 9, 10003}) {
    std::vector<float> values(static_cast<size_t>(n));
    for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(1.7f * static_cast<float>(i)) * 3.0f + 1e-4f;
    double lanes[8] = {};
    const int64_t n_lanes = n - n % 8;
    for (int64_t i = 0; i < n_lanes; ++i) lanes[i % 8] += static_cast<double>(values[i]) * values[i];
    double sum = 0.0;
    for (const double lane : lanes) sum += lane;
    for (int64_t i = n_lanes; i < n; ++i) sum += static_cast<double>(values[i]) * values[i];
    Tensor squares({1}), workspace;
    kernels::sum_squares(Tensor::from(values, {n}), squares, workspace);
    EXPECT_EQ(squares.to_vector()[0], static_cast<float>(sum)) << n;
  }
}

TEST(StepStatsChecks, RejectBadArguments) {
  Tensor x = Tensor::from({1.0f}, {1}), wrong({2}), norm({1}), workspace;
  EXPECT_THROW(kernels::sum_squares(x, wrong, workspace), Error);
  EXPECT_THROW(kernels::scale_by_clip(x, norm, 0.0f, norm), Error);
  Tensor flag({1}, DType::kI32), tally({2}, DType::kI32);
  EXPECT_THROW(kernels::tally_non_finite(flag, tally, 0, false), Error);
  EXPECT_THROW(kernels::tally_non_finite(flag, flag, 1, false), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, StepStats, ::testing::ValuesIn(testing::kTestDevices), testing::device_name);

}  // namespace
}  // namespace mirrored
