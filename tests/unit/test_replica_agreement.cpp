// What replicas compare at start-up, and how a difference is named.
#include <gtest/gtest.h>

#include "mirrored/comm/local_communicator.h"
#include "mirrored/distribute/replica_agreement.h"
#include "mirrored/nn/builders.h"

namespace mirrored {
namespace {

std::vector<std::string> describe(std::vector<int64_t> hidden, Precision precision = Precision::kF32,
                                  bool shard = false) {
  nn::Model model = nn::mlp({hidden, 10});
  model.build({1, 4, 4});
  distribute::ReducerOptions reducer;
  reducer.shard = shard;
  return distribute::describe_replica(model.parameters(), reducer, 1, precision);
}

TEST(ReplicaAgreement, SameStartDescribesTheSame) {
  EXPECT_EQ(describe({8}), describe({8}));
  EXPECT_EQ(distribute::first_difference(describe({8}), describe({8})), "");
}

TEST(ReplicaAgreement, ADifferentWidthIsNamedWithBothValues) {
  const std::string difference = distribute::first_difference(describe({8}), describe({9}));
  EXPECT_EQ(difference.rfind("parameter 0.", 0), 0u) << difference;
  EXPECT_NE(difference.find("' on the chief vs '"), std::string::npos) << difference;
}

TEST(ReplicaAgreement, PrecisionAndShardingAreCompared) {
  EXPECT_EQ(distribute::first_difference(describe({8}), describe({8}, Precision::kBF16)),
            "precision: 'fp32' on the chief vs 'bf16'");
  EXPECT_EQ(distribute::first_difference(describe({8}), describe({8}, Precision::kF32, true)),
            "optimizer.shard: 'false' on the chief vs 'true'");
}

TEST(ReplicaAgreement, AMissingLineIsNamed) {
  auto shorter = describe({8});
  shorter.pop_back();
  EXPECT_NE(distribute::first_difference(describe({8}), shorter).find("on the chief is missing"), std::string::npos);
}

TEST(ReplicaAgreement, AWorldOfOneHasNothingToCompare) {
  comm::LocalCommunicator local;
  EXPECT_NO_THROW(distribute::require_same_replicas(describe({8}), local));
}

}  // namespace
}  // namespace mirrored
