#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "mirrored/core/error.h"
#include "mirrored/optim/lr_schedule.h"

using namespace mirrored;
using mirrored::optim::LrSchedule;
using mirrored::optim::LrScheduleKind;
using mirrored::optim::LrScheduleSpec;

TEST(LrSchedule, ConstantIsTheBaseRate) {
  const LrSchedule schedule({.kind = LrScheduleKind::kConstant, .base_lr = 0.05, .total_steps = 100});
  for (int64_t step : {0, 1, 50, 99, 500}) EXPECT_EQ(schedule.lr_at(step), 0.05) << step;
}

TEST(LrSchedule, LinearWarmupReachesTheBaseRateAtItsLastStep) {
  const LrSchedule schedule({.kind = LrScheduleKind::kConstant, .base_lr = 0.4, .warmup_steps = 4});
  EXPECT_DOUBLE_EQ(schedule.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(schedule.lr_at(1), 0.2);
  EXPECT_DOUBLE_EQ(schedule.lr_at(3), 0.4);
  EXPECT_DOUBLE_EQ(schedule.lr_at(4), 0.4);
}

TEST(LrSchedule, CosineFallsFromBaseToMinOverTheStepsAfterWarmup) {
  const LrSchedule schedule(
      {.kind = LrScheduleKind::kCosine, .base_lr = 0.1, .warmup_steps = 10, .total_steps = 110, .min_lr = 0.01});
  EXPECT_DOUBLE_EQ(schedule.lr_at(9), 0.1);    // last warmup step
  EXPECT_DOUBLE_EQ(schedule.lr_at(10), 0.1);   // cosine at t = 0
  EXPECT_NEAR(schedule.lr_at(60), 0.055, 1e-15);  // t = 1/2: halfway between base and min
  EXPECT_NEAR(schedule.lr_at(35), 0.01 + 0.09 * 0.5 * (1 + std::cos(std::numbers::pi / 4)), 1e-15);
  EXPECT_DOUBLE_EQ(schedule.lr_at(110), 0.01);
  EXPECT_DOUBLE_EQ(schedule.lr_at(1000), 0.01);  // past the end: stays at the floor
  for (int64_t step = 11; step <= 110; ++step) EXPECT_LT(schedule.lr_at(step), schedule.lr_at(step - 1)) << step;
}

TEST(LrSchedule, StepMultipliesByGammaAtEachMilestone) {
  const LrSchedule schedule(
      {.kind = LrScheduleKind::kStep, .base_lr = 0.1, .milestones = {300, 400}, .gamma = 0.1});
  EXPECT_DOUBLE_EQ(schedule.lr_at(299), 0.1);
  EXPECT_DOUBLE_EQ(schedule.lr_at(300), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(schedule.lr_at(399), 0.1 * 0.1);
  EXPECT_DOUBLE_EQ(schedule.lr_at(400), 0.1 * 0.1 * 0.1);
}

TEST(LrSchedule, RejectsInconsistentSpecs) {
  EXPECT_THROW(LrSchedule({.kind = LrScheduleKind::kStep, .base_lr = 0.1}), InputError);  // no milestones
  EXPECT_THROW(LrSchedule({.kind = LrScheduleKind::kStep, .base_lr = 0.1, .milestones = {5, 5}}), InputError);
  EXPECT_THROW(LrSchedule({.kind = LrScheduleKind::kCosine, .base_lr = 0.1, .total_steps = 10, .min_lr = 0.2}),
               InputError);
  EXPECT_THROW(optim::lr_schedule_kind("linear"), InputError);
  EXPECT_EQ(optim::lr_schedule_name(optim::lr_schedule_kind("cosine")), "cosine");
}
