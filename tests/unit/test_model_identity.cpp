// config/model_identity.h: the model a configuration builds, and the one message for a file
// of another model.
#include <gtest/gtest.h>

#include "mirrored/config/model_identity.h"

namespace mirrored::config {
namespace {

TrainConfig of(ModelKind kind) {
  TrainConfig config;
  config.model = kind;
  return config;
}

TEST(ModelIdentity, DescribesEachKindByItsShapeKeys) {
  EXPECT_EQ(model_description(of(ModelKind::kMlp)), "mlp (hidden 256,128)");
  EXPECT_EQ(model_description(of(ModelKind::kCnn)), "cnn (channels 32,64, kernel 5, padding 0, fc 128)");
  EXPECT_EQ(model_description(of(ModelKind::kResnet)), "resnet (channels 16,32,64, 2 blocks)");
  EXPECT_EQ(model_description(of(ModelKind::kGpt)), "gpt (4 layers, 4 heads, width 128, context 64)");
  TrainConfig bn = of(ModelKind::kCnn);
  bn.cnn_batchnorm = true;
  EXPECT_EQ(model_description(bn), "cnn (channels 32,64, kernel 5, padding 0, fc 128, batch norm)");
}

TEST(ModelIdentity, OnlyKindAndShapeKeysMakeAnotherModel) {
  TrainConfig a = of(ModelKind::kGpt), b = a;
  b.lr = 0.5;               // training settings do not change the parameters' shapes
  b.gpt_dropout = 0.1;
  EXPECT_TRUE(same_model(a, b));
  EXPECT_EQ(model_mismatch("f.h5", a, "this run builds", b), "");
  b.gpt_heads = 8;
  EXPECT_FALSE(same_model(a, b));
  EXPECT_EQ(model_mismatch("f.h5", a, "this run builds", b),
            "'f.h5' holds a gpt model (4 layers, 4 heads, width 128, context 64); this run builds a gpt "
            "(4 layers, 8 heads, width 128, context 64)");
  EXPECT_EQ(model_mismatch("m.h5", of(ModelKind::kMlp), "--config 'x.ini' builds", of(ModelKind::kCnn)),
            "'m.h5' holds an mlp model (hidden 256,128); --config 'x.ini' builds a cnn (channels 32,64, kernel 5, "
            "padding 0, fc 128)");
  EXPECT_EQ(held_model("m.h5", of(ModelKind::kMlp)), "'m.h5' holds an mlp model (hidden 256,128)");
}

}  // namespace
}  // namespace mirrored::config
