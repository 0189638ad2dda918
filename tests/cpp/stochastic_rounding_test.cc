// stochastic_cast (ir/ops/training.cc): float32 rounded to bfloat16 / float16
// up with probability equal to the distance from the value below, in ulps.
// Checked on values a quarter, half and three quarters of the way between
// two neighbours (normal and, for float16, subnormal), both signs: every
// result is one of the two neighbours, the share rounded up is within 5
// standard deviations of the distance, and the mean is the input's. Values
// already representable never move; NaN and Inf pass; the draws repeat for
// the same (seed, step) and change with the step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "compile/executable.h"
#include "core/half.h"
#include "ir/graph.h"

namespace tiller {
namespace {

std::vector<uint16_t> Round(const std::vector<float>& x, DType to, int64_t step, int64_t seed = 7) {
  auto g = std::make_unique<ir::Graph>();
  const int64_t n = static_cast<int64_t>(x.size());
  ir::Value* in = g->AddInput("x", {DType::kF32, {n}});
  ir::Value* s = g->AddInput(ir::kStepInputName, {DType::kI64, {1}});
  g->AddOutput("y", g->Add1("stochastic_cast", {in, s},
                            {{"dtype", std::string(DTypeName(to))}, {"seed", seed}}));
  auto exe = compile::Executable::Build(std::move(g), {});
  std::memcpy(exe->inputs()[0].data, x.data(), x.size() * sizeof(float));
  std::memcpy(exe->inputs()[1].data, &step, sizeof(step));
  exe->Run();
  std::vector<uint16_t> y(x.size());
  std::memcpy(y.data(), exe->outputs()[0].data, y.size() * sizeof(uint16_t));
  return y;
}

float Widen(uint16_t h, DType to) {
  return to == DType::kBF16 ? BF16ToFloat(h) : HalfToFloat(h);
}

TEST(StochasticRounding, RoundsUpInProportionToTheDistanceAndIsUnbiased) {
  constexpr int64_t kN = 200000;
  struct Between {
    DType to;
    float down, up;
  };
  const uint16_t neg = FloatToBF16(-3.0e-20f);  // two negative bfloat16 neighbours
  const Between cases[] = {
      {DType::kBF16, 1.0f, 1.0078125f},  // 2^-7 apart
      {DType::kBF16, BF16ToFloat(neg), BF16ToFloat(static_cast<uint16_t>(neg + 1))},
      {DType::kF16, 1.0f, 1.0f + 0x1.0p-10f},
      {DType::kF16, -1024.0f, -1025.0f},
      {DType::kF16, 2 * 0x1.0p-24f, 3 * 0x1.0p-24f},  // subnormal
  };
  for (const Between& c : cases) {
    for (double frac : {0.25, 0.5, 0.75}) {
      const float x = static_cast<float>(c.down + frac * (static_cast<double>(c.up) - c.down));
      const double p = (static_cast<double>(x) - c.down) / (static_cast<double>(c.up) - c.down);
      SCOPED_TRACE(testing::Message() << DTypeName(c.to) << " x " << x << " p " << p);
      const std::vector<uint16_t> y = Round(std::vector<float>(kN, x), c.to, 3);
      int64_t ups = 0;
      double sum = 0;
      for (uint16_t h : y) {
        const float v = Widen(h, c.to);
        ASSERT_TRUE(v == c.down || v == c.up) << v;
        ups += v == c.up;
        sum += v;
      }
      const double sigma = std::sqrt(kN * p * (1 - p));
      EXPECT_NEAR(static_cast<double>(ups), kN * p, 5 * sigma);
      EXPECT_NEAR(sum / kN, x, 5 * sigma / kN * std::fabs(c.up - c.down));
    }
  }
}

TEST(StochasticRounding, RepresentableValuesStayAndSpecialsPass) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.0f,     -0.0f, 1.0f, -2.5f,
                                65504.0f, inf,   -inf, std::numeric_limits<float>::quiet_NaN()};
  for (DType to : {DType::kBF16, DType::kF16}) {
    for (int64_t step = 0; step < 20; ++step) {
      const std::vector<uint16_t> y = Round(x, to, step);
      for (size_t i = 0; i + 1 < x.size(); ++i) {
        if (to == DType::kBF16 && x[i] == 65504.0f) continue;  // not a bfloat16 value
        EXPECT_EQ(std::bit_cast<uint32_t>(Widen(y[i], to)), std::bit_cast<uint32_t>(x[i]))
            << DTypeName(to) << " " << x[i];
      }
      EXPECT_TRUE(std::isnan(Widen(y.back(), to)));
    }
  }
}

TEST(StochasticRounding, DrawsRepeatForTheSameStepAndChangeWithIt) {
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i) * 1e-6f;
  for (DType to : {DType::kBF16, DType::kF16}) {
    EXPECT_EQ(Round(x, to, 5), Round(x, to, 5));
    EXPECT_NE(Round(x, to, 5), Round(x, to, 6));
    EXPECT_NE(Round(x, to, 5, 1), Round(x, to, 5, 2));
  }
}

}  // namespace
}  // namespace tiller
