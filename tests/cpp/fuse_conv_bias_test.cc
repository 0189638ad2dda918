// fuse_conv_bias (passes/fuse_conv_bias.cc): a per-channel constant add
// taken into the convolution as its bias.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "pass_test_util.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;
using pass_test::Compared;
using pass_test::ExpectNear;
using pass_test::Random;
using pass_test::RunBothWays;

TEST(Passes, FuseConvBiasTakesAPerChannelConstantAddThenBatchNormFolds) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 3, 7, 7}});
    auto param = [&](const char* n, const Shape& s, float lo, float hi) {
      return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng, lo, hi));
    };
    Value* y = g.Add1("conv2d", {x, param("w", {4, 3, 3, 3}, -1, 1)});
    // Paddle's form: the [O] bias reshaped to [1, O, 1, 1].
    Value* b =
        g.Add1("reshape", {param("b", {4}, -1, 1)}, {{"shape", std::vector<int64_t>{1, 4, 1, 1}}});
    y = g.Add1("add", {y, b});
    y = g.Add1("batch_norm", {y, param("scale", {4}, 0.5, 2), param("shift", {4}, -1, 1),
                              param("mean", {4}, -1, 1), param("var", {4}, 0.1, 2)});
    // A [W] row is no channel bias: kept.
    y = g.Add1("conv2d", {y, param("w2", {4, 4, 1, 1}, -1, 1)});
    g.AddOutput("y", g.Add1("add", {y, param("row", {5}, -1, 1)}));
  };
  auto both = [](Graph& g) { return FuseConvBias(g) + FoldBatchNorm(g); };
  Compared c = RunBothWays(build, +both, {2, 3, 7, 7});
  EXPECT_EQ(c.rewrites, 2);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"conv2d", "conv2d", "add"}));
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

}  // namespace
}  // namespace tiller::passes
