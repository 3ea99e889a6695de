// CrossEntropyLoss over a language model's logits [B, T, V] against targets [B, T]: the same
// loss and gradient as the [B*T, V] rows it flattens to, the gradient in the logits' shape.
#include <gtest/gtest.h>

#include "mirrored/core/rng.h"
#include "mirrored/nn/loss.h"

namespace mirrored {
namespace {

TEST(CrossEntropyShapes, SequenceLogitsEqualTheirFlattenedRows) {
  const int64_t batch = 3, steps = 5, vocab = 7;
  Tensor logits({batch, steps, vocab});
  Tensor targets({batch, steps}, DType::kI32);
  Rng rng(4);
  for (int64_t i = 0; i < logits.numel(); ++i) logits.data<float>()[i] = rng.uniform(-2.0f, 2.0f);
  for (int64_t i = 0; i < targets.numel(); ++i)
    targets.data<int32_t>()[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));

  nn::CrossEntropyLoss sequence, rows;
  const auto a = sequence.forward(logits, targets);
  const auto b = rows.forward(logits.reshape({batch * steps, vocab}), targets.reshape({batch * steps}));
  EXPECT_EQ(a.count, batch * steps);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(a.mean_loss, b.mean_loss);
  EXPECT_EQ(a.correct, b.correct);
  ASSERT_EQ(sequence.grad().shape(), logits.shape());
  EXPECT_EQ(sequence.grad().to_vector(), rows.grad().to_vector());
}

TEST(CrossEntropyShapes, TargetsMustMatchTheLeadingDimensions) {
  nn::CrossEntropyLoss loss;
  EXPECT_ANY_THROW(loss.forward(Tensor({2, 4, 7}), Tensor({2, 3}, DType::kI32)));
  EXPECT_ANY_THROW(loss.forward(Tensor({2, 4, 7}), Tensor({8}, DType::kI32)));
  EXPECT_ANY_THROW(loss.forward(Tensor({7}), Tensor({}, DType::kI32)));
}

}  // namespace
}  // namespace mirrored
