// precision = fp32 | bf16 from the configuration to the model: parsed once into its enum,
// carried by the library options' model spec, and set on the built model's run context,
// which every layer reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "mirrored/config/config.h"
#include "mirrored/config/library_options.h"
#include "mirrored/config/model_factory.h"
#include "mirrored/core/error.h"
#include "mirrored/kernels/kernels.h"

namespace mirrored {
namespace {

TEST(PrecisionConfig, DefaultsToFp32AndReachesTheModel) {
  const auto fp32 = config::parse_train_config({});
  EXPECT_EQ(fp32.precision, Precision::kF32);
  EXPECT_EQ(config::option_value(fp32, "precision"), "fp32");
  const auto bf16 = config::parse_train_config({"--precision", "bf16"});
  EXPECT_EQ(bf16.precision, Precision::kBF16);
  EXPECT_EQ(config::option_value(bf16, "precision"), "bf16");
  EXPECT_EQ(config::parse_config_text(config::to_ini(bf16), "round trip").precision, Precision::kBF16);
  // It changes what training computes, so a resume across it is reported.
  const auto changes = config::result_changes(fp32, bf16);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], "precision fp32 -> bf16");

  const auto options = config::library_options(bf16);
  EXPECT_EQ(options.model.precision, Precision::kBF16);
  const nn::Model model = config::build_model(options.model, {784}, 10);
  EXPECT_EQ(model.context().precision, Precision::kBF16);
  EXPECT_EQ(config::build_model(config::library_options(fp32).model, {784}, 10).context().precision, Precision::kF32);
}

TEST(PrecisionConfig, AnUnknownNameListsTheValidOnes) {
  try {
    config::parse_train_config({"--precision", "fp16"});
    FAIL() << "fp16 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("precision = 'fp16': expected one of: fp32, bf16"), std::string::npos)
        << e.what();
  }
}

TEST(PrecisionConfig, OneWarningOnTheChiefWhereTheCpuLacksNativeBf16) {
  config::ModelSpec spec;
  spec.precision = Precision::kBF16;
  auto warning_of = [&](const config::ModelSpec& s, Device device, bool chief) {
    ::testing::internal::CaptureStderr();
    config::warn_about_slow_precision(s, device, chief);
    return ::testing::internal::GetCapturedStderr();
  };
  const std::string chief = warning_of(spec, Device::cpu(), true);
  if (kernels::cpu_bf16_runs_native()) {
    EXPECT_EQ(chief, "");
  } else {
    EXPECT_NE(chief.find(kernels::cpu_native_bf16() ? "this CPU has AVX512-BF16 or AMX-BF16, but"
                                                    : "precision = bf16 on a CPU without AVX512-BF16 or AMX-BF16"),
              std::string::npos)
        << chief;
    EXPECT_EQ(std::count(chief.begin(), chief.end(), '\n'), 1) << chief;
  }
  EXPECT_EQ(warning_of(spec, Device::cpu(), false), "") << "only the chief warns";
  // CPU check: cuda:0 is only named here (the warning's rule), nothing runs on it.
  EXPECT_EQ(warning_of(spec, Device::cuda(0), true), "") << "GPUs multiply bf16 natively";
  EXPECT_EQ(warning_of(config::ModelSpec{}, Device::cpu(), true), "") << "fp32 needs no warning";
}

TEST(PrecisionConfig, TheWarningNamesWhatIsMissingAndWhatItCosts) {
  config::ModelSpec bf16;
  bf16.precision = Precision::kBF16;
  // No bf16 instructions: every method is float32 arithmetic on rounded inputs.
  const std::string missing =
      config::slow_precision_warning(bf16, Device::cpu(), {false, false, "rounded inputs, float32 BLAS"});
  EXPECT_NE(missing.find("without AVX512-BF16 or AMX-BF16 (cpuid): no bf16 path here is faster than fp32"),
            std::string::npos) << missing;
  EXPECT_NE(missing.find("products run as rounded inputs, float32 BLAS"), std::string::npos) << missing;
  EXPECT_NE(missing.find("fp32's speed"), std::string::npos) << missing;
  EXPECT_NE(missing.find("precision = fp32 is faster on this CPU"), std::string::npos) << missing;
  EXPECT_EQ(missing.find('\n'), std::string::npos) << "one line";
  // Instructions present but unused (a build without oneDNN, or MIRRORED_CPU_BF16=rounded).
  const std::string unused =
      config::slow_precision_warning(bf16, Device::cpu(), {true, false, "rounded inputs, float32 BLAS"});
  EXPECT_NE(unused.find("this CPU has AVX512-BF16 or AMX-BF16, but products run as rounded inputs"),
            std::string::npos) << unused;
  EXPECT_NE(unused.find("MIRRORED_CPU_BF16=onednn or mkl"), std::string::npos) << unused;
  // Used: nothing to say; nor for fp32 or a GPU.
  // CPU check: cuda:0 is only named here (the warning's rule), nothing runs on it.
  EXPECT_EQ(config::slow_precision_warning(bf16, Device::cpu(), {true, true, "oneDNN bf16 matmul/convolution"}), "");
  EXPECT_EQ(config::slow_precision_warning(config::ModelSpec{}, Device::cpu(), {false, false, "x"}), "");
  EXPECT_EQ(config::slow_precision_warning(bf16, Device::cuda(0), {false, false, "x"}), "");
}

}  // namespace
}  // namespace mirrored
