// fuse_activation (passes/fuse_activation.cc): an activation fused into the
// op before it.
#include <gtest/gtest.h>

#include <random>

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

TEST(Passes, NoFusionWhenIntermediateIsAlsoAnOutput) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
    Value* w = g.AddData("w", {DType::kF32, {8, 3}}, ir::ValueKind::kParam, Random({8, 3}, rng));
    Value* lin = g.Add1("linear", {x, w});
    g.AddOutput("y", g.Add1("relu", {lin}));
    g.AddOutput("pre", lin);  // the pre-activation is fetched too
  };
  Compared c = RunBothWays(build, FuseActivation, {4, 8});
  EXPECT_EQ(c.rewrites, 0);
  ExpectNear(c.plain, c.rewritten, 0.f);
}

}  // namespace
}  // namespace tiller::passes
