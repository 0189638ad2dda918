// fuse_linear (passes/fuse_linear.cc): matmul + bias add fused into linear.
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(Passes, FuseLinearThenActivation) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 5, 8}});
    Value* w = g.AddData("w", {DType::kF32, {8, 6}}, ir::ValueKind::kParam, Random({8, 6}, rng));
    Value* b = g.AddData("b", {DType::kF32, {6}}, ir::ValueKind::kParam, Random({6}, rng));
    Value* y = g.Add1("add", {g.Add1("matmul", {x, w}), b});
    g.AddOutput("y", g.Add1("gelu", {y}));
  };
  Compared lin = RunBothWays(build, FuseLinear, {2, 5, 8});
  EXPECT_EQ(lin.ops_after, (std::vector<std::string>{"linear", "gelu"}));
  ExpectNear(lin.plain, lin.rewritten, 1e-5f);
  auto both = [](Graph& g) { return FuseLinear(g) + FuseActivation(g); };
  Compared all = RunBothWays(build, +both, {2, 5, 8});
  EXPECT_EQ(all.ops_after, (std::vector<std::string>{"linear"}));
  EXPECT_EQ(all.rewrites, 2);
  ExpectNear(all.plain, all.rewritten, 1e-5f);
}

// Training's matmul + bias: W and b computed at run time (here from the
// input) fuse into linear when there is a bias add; a bare matmul of a
// variable W stays.
TEST(Passes, FuseLinearTakesAVariableWeightWithABias) {
  for (bool with_bias : {true, false}) {
    auto build = [with_bias](Graph& g, std::mt19937&) {
      Value* t = g.AddInput("t", {DType::kF32, {6, 6}});
      Value* w = g.Add1("relu", {t});
      Value* y = g.Add1("matmul", {t, w});
      if (with_bias)
        y = g.Add1("add", {y, g.Add1("reduce_sum", {t}, {{"axes", std::vector<int64_t>{0}}})});
      g.AddOutput("y", g.Add1("tanh", {y}));
    };
    Compared c = RunBothWays(build, FuseLinear, {6, 6});
    EXPECT_EQ(c.rewrites, with_bias ? 1 : 0);
    EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "linear"), with_bias ? 1 : 0);
    ExpectNear(c.plain, c.rewritten, 1e-6f);
  }
}

}  // namespace
}  // namespace tiller::passes
