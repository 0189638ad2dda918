// The IR ops of Paddle AMP's loss scaling (ir/ops/training.cc):
// any_non_finite finds one NaN or Inf anywhere in many inputs of each float
// type (also past the multi-threaded threshold), and update_loss_scaling
// follows Paddle's rule through its branches and clamps. Against Paddle's
// executor, on whole decorated programs: tests/python/amp_program_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "compile/executable.h"
#include "core/error.h"
#include "core/half.h"
#include "ir/graph.h"

namespace tiller {
namespace {

using ir::Graph;
using ir::Value;

bool AnyNonFinite(DType dtype, const std::vector<int64_t>& sizes, int which, int64_t at,
                  float bad) {
  auto g = std::make_unique<Graph>();
  std::vector<Value*> ins;
  for (size_t i = 0; i < sizes.size(); ++i)
    ins.push_back(g->AddInput("x" + std::to_string(i), {dtype, {sizes[i]}}));
  g->AddOutput("found", g->Add1("any_non_finite", ins));
  auto exe = compile::Executable::Build(std::move(g), {});
  for (size_t i = 0; i < sizes.size(); ++i) {
    void* data = exe->inputs()[i].data;
    for (int64_t k = 0; k < sizes[i]; ++k) {
      // Large finite values (the half types' maxima) must not count.
      const float v = static_cast<int>(i) == which && k == at ? bad
                      : dtype == DType::kF16                  ? 65504.0f
                                                              : 3.0e38f;
      if (dtype == DType::kF32) {
        static_cast<float*>(data)[k] = v;
      } else if (dtype == DType::kBF16) {
        static_cast<uint16_t*>(data)[k] = FloatToBF16(v);
      } else {
        static_cast<uint16_t*>(data)[k] = FloatToHalf(v);
      }
    }
  }
  exe->Run();
  return *static_cast<const bool*>(exe->outputs()[0].data);
}

TEST(LossScalingOps, AnyNonFiniteFindsOneNaNOrInfAnywhere) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<int64_t> sizes = {7, 100003, 1};
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    EXPECT_FALSE(AnyNonFinite(dtype, sizes, -1, 0, 0));
    for (float bad : {nan, inf, -inf}) {
      EXPECT_TRUE(AnyNonFinite(dtype, sizes, 0, 6, bad)) << bad;
      EXPECT_TRUE(AnyNonFinite(dtype, sizes, 1, 0, bad)) << bad;
      EXPECT_TRUE(AnyNonFinite(dtype, sizes, 1, 77777, bad)) << bad;
      EXPECT_TRUE(AnyNonFinite(dtype, sizes, 2, 0, bad)) << bad;
    }
  }
}

struct ScaleState {
  float scale;
  int32_t good, bad;
};

ScaleState Update(bool found, ScaleState in, int64_t incr_every, int64_t decr_every,
                  double incr_ratio = 2.0, double decr_ratio = 0.5) {
  auto g = std::make_unique<Graph>();
  Value* f = g->AddInput("found", {DType::kBool, {1}});
  Value* s = g->AddInput("scale", {DType::kF32, {1}});
  Value* gd = g->AddInput("good", {DType::kI32, {1}});
  Value* bd = g->AddInput("bad", {DType::kI32, {1}});
  ir::Op* op = g->AddOp("update_loss_scaling", {f, s, gd, bd},
                        {{"incr_every_n_steps", incr_every},
                         {"decr_every_n_nan_or_inf", decr_every},
                         {"incr_ratio", incr_ratio},
                         {"decr_ratio", decr_ratio}});
  g->AddOutput("scale", op->outputs[0]);
  g->AddOutput("good", op->outputs[1]);
  g->AddOutput("bad", op->outputs[2]);
  auto exe = compile::Executable::Build(std::move(g), {});
  *static_cast<bool*>(exe->inputs()[0].data) = found;
  std::memcpy(exe->inputs()[1].data, &in.scale, 4);
  std::memcpy(exe->inputs()[2].data, &in.good, 4);
  std::memcpy(exe->inputs()[3].data, &in.bad, 4);
  exe->Run();
  ScaleState out{};
  std::memcpy(&out.scale, exe->outputs()[0].data, 4);
  std::memcpy(&out.good, exe->outputs()[1].data, 4);
  std::memcpy(&out.bad, exe->outputs()[2].data, 4);
  return out;
}

void ExpectState(ScaleState got, ScaleState want) {
  EXPECT_EQ(got.scale, want.scale);
  EXPECT_EQ(got.good, want.good);
  EXPECT_EQ(got.bad, want.bad);
}

TEST(LossScalingOps, UpdateLossScalingFollowsPaddlesRule) {
  // Clean steps count up; the incr_every-th doubles the scale and restarts.
  ExpectState(Update(false, {1024, 0, 1}, 3, 2), {1024, 1, 0});
  ExpectState(Update(false, {1024, 2, 0}, 3, 2), {2048, 0, 0});
  // A doubling that would overflow float32 keeps the scale (and restarts).
  ExpectState(Update(false, {3.0e38f, 2, 0}, 3, 2), {3.0e38f, 0, 0});
  // Overflows count up; the decr_every-th halves it, never below 1.
  ExpectState(Update(true, {1024, 2, 0}, 3, 2), {1024, 0, 1});
  ExpectState(Update(true, {1024, 0, 1}, 3, 2), {512, 0, 0});
  ExpectState(Update(true, {1.5f, 0, 0}, 3, 1), {1, 0, 0});
  // Ratios other than 2 in float32, as Paddle's kernel.
  ExpectState(Update(true, {1000, 0, 0}, 3, 1, 2.0, 0.8), {1000 * 0.8f, 0, 0});
}

TEST(LossScalingOps, UpdateLossScalingRefusesSettingsThatCannotWork) {
  EXPECT_THROW(Update(false, {1, 0, 0}, 0, 1), Error);
  EXPECT_THROW(Update(false, {1, 0, 0}, 1, 1, -2.0), Error);
}

}  // namespace
}  // namespace tiller
