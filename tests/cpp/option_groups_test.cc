// The option groups (include/tiller/option_groups.h): one declaration held
// whole by every option set that has the group, one Validate() per group,
// and Paddle's IpuStrategy names filling them in one place.
#include "tiller/option_groups.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <type_traits>

#include "compile/options.h"
#include "runtime/training_ipu_options.h"
#include "runtime/training_options_check.h"
#include "tiller/ipu_options.h"
#include "tiller/planner.h"
#include "tiller/predictor.h"
#include "tiller/training.h"

namespace tiller {
namespace {

using training::SessionOptions;

// One group type, not parallel copies: a field added to a group reaches
// every option set that holds it.
static_assert(std::is_same_v<decltype(SessionOptions::accumulation),
                             decltype(compile::CompileOptions::accumulation)>);
static_assert(std::is_same_v<decltype(SessionOptions::accumulation),
                             decltype(planning::PlanRequest::accumulation)>);
static_assert(std::is_same_v<decltype(SessionOptions::loss_scale),
                             decltype(compile::CompileOptions::loss_scale)>);
static_assert(std::is_same_v<decltype(SessionOptions::recompute),
                             decltype(compile::CompileOptions::recompute)>);
static_assert(std::is_same_v<decltype(SessionOptions::recompute),
                             decltype(planning::PlanRequest::recompute)>);
static_assert(
    std::is_same_v<decltype(SessionOptions::pipeline), decltype(planning::PlanRequest::pipeline)>);
static_assert(std::is_same_v<decltype(SessionOptions::pipeline),
                             decltype(inference::Config::IpuSettings::pipeline)>);
static_assert(std::is_same_v<decltype(SessionOptions::precision),
                             decltype(planning::PlanRequest::precision)>);
static_assert(
    std::is_same_v<decltype(SessionOptions::split), decltype(planning::PlanRequest::split)>);
static_assert(std::is_same_v<decltype(SessionOptions::collectives),
                             decltype(planning::PlanRequest::collectives)>);
static_assert(std::is_same_v<decltype(SessionOptions::collectives),
                             decltype(compile::CompileOptions::collectives)>);

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OptionGroups, DefaultsAreValid) {
  EXPECT_EQ(ErrorOf([] { AccumulationSettings{}.Validate(); }), "(no error)");
  EXPECT_EQ(ErrorOf([] { PipelineSettings{}.Validate(); }), "(no error)");
  EXPECT_EQ(ErrorOf([] { PrecisionSettings{}.Validate(); }), "(no error)");
  EXPECT_EQ(ErrorOf([] { LossScalingSettings{}.Validate(); }), "(no error)");
  EXPECT_EQ(ErrorOf([] { StageSplitSettings{}.Validate(); }), "(no error)");
  EXPECT_EQ(ErrorOf([] { CollectiveSettings{}.Validate(); }), "(no error)");
}

TEST(OptionGroups, AccumulationNeedsItsSwitchAndAPositiveFactor) {
  AccumulationSettings a{.enabled = false, .factor = 4};
  EXPECT_NE(
      ErrorOf([&] { a.Validate(); }).find("accumulation_factor 4 needs gradient accumulation"),
      std::string::npos);
  EXPECT_EQ(a.steps(), 1);
  a.enabled = true;
  EXPECT_EQ(ErrorOf([&] { a.Validate(); }), "(no error)");
  EXPECT_EQ(a.steps(), 4);
  a.factor = 0;
  EXPECT_NE(ErrorOf([&] { a.Validate(); }).find("accumulation_factor must be >= 1, got 0"),
            std::string::npos);
}

TEST(OptionGroups, InFlightBelongsToA1F1BPipeline) {
  PipelineSettings p{.enabled = true, .in_flight = -1};
  EXPECT_NE(ErrorOf([&] { p.Validate(); }).find("pipeline_in_flight must be >= 0, got -1"),
            std::string::npos);
  p.in_flight = 3;
  EXPECT_EQ(ErrorOf([&] { p.Validate(); }), "(no error)");
  p.schedule = PipelineSettings::Schedule::kFillDrain;
  EXPECT_NE(ErrorOf([&] { p.Validate(); }).find("pipeline_in_flight 3 sets the micro-batches"),
            std::string::npos);
  p = {.enabled = false, .in_flight = 3};
  EXPECT_NE(ErrorOf([&] { p.Validate(); }).find("needs enable_pipelining"), std::string::npos);
}

TEST(OptionGroups, PrecisionNamesTheSettingItCameFrom) {
  PrecisionSettings p{.compute = "fp8"};
  EXPECT_NE(ErrorOf([&] {
              p.Validate("Config::SetPrecision");
            }).find("Config::SetPrecision: precision 'fp8' is not one of"),
            std::string::npos);
  for (const char* ok : {"float32", "fp32", "bfloat16", "bf16", "float16", "fp16", "half"}) {
    p.compute = ok;
    EXPECT_EQ(ErrorOf([&] { p.Validate(); }), "(no error)") << ok;
  }
  p.accl_types[1] = "DOUBLE";
  EXPECT_NE(
      ErrorOf([&] { p.Validate(); }).find("accl2_type must be 'FLOAT' or 'FLOAT16', got 'DOUBLE'"),
      std::string::npos);
}

TEST(OptionGroups, LossScalingRefusesWhatCannotWork) {
  EXPECT_NE(ErrorOf([] {
              LossScalingSettings{.dynamic = true, .automatic = true}.Validate();
            }).find("both steer the loss scale"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              LossScalingSettings{.dynamic = true, .decr_ratio = 1.5}.Validate();
            }).find("0 < decr_ratio < 1 (1.5)"),
            std::string::npos);
  // The ratios matter only when the scale is steered.
  EXPECT_EQ(ErrorOf([] { LossScalingSettings{.decr_ratio = 1.5}.Validate(); }), "(no error)");
  EXPECT_NE(ErrorOf([] {
              LossScalingSettings{.automatic = true, .update_period = 0}.Validate();
            }).find("update_period >= 1 (0)"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              LossScalingSettings{.gradient_statistics = true, .bin_edge_location = 2}.Validate();
            }).find("bin_edge_location must be in (0, 1], got 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              LossScalingSettings{.scale = 0}.Validate();
            }).find("loss scaling must be a finite number > 0, got 0"),
            std::string::npos);
  const LossScalingSettings automatic{.automatic = true};
  EXPECT_TRUE(automatic.steers());
  EXPECT_TRUE(automatic.counts_gradients());
}

TEST(OptionGroups, AutoRecomputationModes) {
  EXPECT_FALSE(RecomputeSettings::FromAutoRecomputation(0).enabled);
  const RecomputeSettings standard = RecomputeSettings::FromAutoRecomputation(1);
  EXPECT_TRUE(standard.enabled && !standard.all);
  for (int mode : {3, 4}) {
    const RecomputeSettings r = RecomputeSettings::FromAutoRecomputation(mode);
    EXPECT_TRUE(r.enabled && r.all) << mode;
  }
  for (int mode : {-1, 2, 5})
    EXPECT_NE(ErrorOf([&] {
                RecomputeSettings::FromAutoRecomputation(mode);
              }).find("0 none, 1 standard, 3 pipeline or 4 all"),
              std::string::npos)
        << mode;
}

// Paddle's IpuStrategy names land in the groups (runtime::FromIpuOptions),
// and the session's checks run each group's Validate().
TEST(OptionGroups, IpuStrategyNamesFillTheGroups) {
  training::IpuOptions o;
  o.Set("enable_gradient_accumulation", true);
  o.Set("accumulation_factor", int64_t{4});
  o.Set("accumulation_and_replication_reduction_type", int64_t{0});
  o.Set("num_ipus", int64_t{2});
  o.Set("enable_manual_shard", true);
  o.Set("enable_pipelining", true);
  o.Set("pipeline_schedule", std::string("fill_drain"));
  o.Set("auto_recomputation", int64_t{3});
  o.Set("enable_fp16", true);
  o.Set("half_dtype", std::string("bfloat16"));
  o.Set("accl1_type", std::string("FLOAT16"));
  o.Set("dynamic_loss_scaling", true);
  o.Set("loss_scaling", 512.0);
  const SessionOptions s = runtime::FromIpuOptions(o);
  EXPECT_TRUE(s.accumulation.enabled);
  EXPECT_EQ(s.accumulation.factor, 4);
  EXPECT_EQ(s.accumulation.reduction, AccumulationSettings::Reduction::kSum);
  EXPECT_TRUE(s.pipeline.enabled);
  EXPECT_FALSE(s.pipeline.continuous);  // accumulated
  EXPECT_EQ(s.pipeline.schedule, PipelineSettings::Schedule::kFillDrain);
  EXPECT_TRUE(s.recompute.enabled && s.recompute.all);
  EXPECT_EQ(s.precision.compute, "bfloat16");
  EXPECT_EQ(s.precision.accl_types[0], "FLOAT16");
  EXPECT_TRUE(s.loss_scale.dynamic);
  EXPECT_EQ(s.loss_scale.scale, 512.0);
  EXPECT_EQ(s.devices_per_replica, 2);

  SessionOptions bad = s;
  bad.accumulation.enabled = false;
  EXPECT_NE(ErrorOf([&] {
              runtime::ResolveSessionOptions(bad, "p.json");
            }).find("accumulation_factor 4 needs gradient accumulation"),
            std::string::npos);
  bad = s;
  bad.precision.compute = "fp8";
  EXPECT_NE(ErrorOf([&] {
              runtime::ResolveSessionOptions(bad, "p.json");
            }).find("precision 'fp8' is not one of"),
            std::string::npos);
}

// The planner validates the groups it is given, as the session does.
TEST(OptionGroups, ThePlannerChecksItsGroups) {
  planning::PlanRequest r;
  r.model = "never-read.json";
  r.accumulation.factor = 4;  // without enabled
  EXPECT_NE(ErrorOf([&] { planning::Plan(r); }).find("accumulation_factor 4 needs gradient"),
            std::string::npos);
  r.accumulation.enabled = true;
  r.precision.accl_types[2] = "HALF";
  EXPECT_NE(ErrorOf([&] { planning::Plan(r); }).find("accl3_type must be 'FLOAT' or 'FLOAT16'"),
            std::string::npos);
}

}  // namespace
}  // namespace tiller
