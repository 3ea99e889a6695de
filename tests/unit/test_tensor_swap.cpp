// Tensor::swap_allocation (core/tensor.h): two whole allocations exchange memory, and every
// view of either follows; a view, or allocations of other sizes, are refused.
#include <gtest/gtest.h>

#include <vector>

#include "mirrored/core/tensor.h"

namespace mirrored {
namespace {

TEST(TensorSwap, ViewsFollowTheExchangedMemory) {
  Tensor a = Tensor::from({1, 2, 3, 4}, {4});
  Tensor b = Tensor::from({5, 6, 7, 8}, {4});
  const Tensor a_tail = a.view(2, {2});
  const float* b_memory = b.data<float>();
  a.swap_allocation(b);
  EXPECT_EQ(a.data<float>(), b_memory) << "no copy: a now owns b's memory";
  EXPECT_EQ(a.to_vector(), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(b.to_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(a_tail.to_vector(), (std::vector<float>{7, 8})) << "a view of a follows a";
  a_tail.data<float>()[0] = 0.5f;
  EXPECT_EQ(a.to_vector(), (std::vector<float>{5, 6, 0.5f, 8}));
}

TEST(TensorSwap, RefusesViewsAndOtherSizes) {
  Tensor a({4});
  Tensor b({5});
  Tensor a_view = a.view(1, {3});
  Tensor c({3});
  EXPECT_THROW(a.swap_allocation(b), std::exception);
  EXPECT_THROW(a_view.swap_allocation(c), std::exception);
}

}  // namespace
}  // namespace mirrored
