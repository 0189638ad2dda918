// fuse_linear_residual (passes/fuse_linear_residual.cc): a residual add taken
// into the linear before it, in place where the memory plan allows.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "compile/memory_plan.h"
#include "pass_test_util.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;
using pass_test::Compared;
using pass_test::CountOps;
using pass_test::ExpectNear;
using pass_test::Random;
using pass_test::RunBothWays;

// A post-LN transformer block's two residual adds: into a projection's
// result as oneDNN writes it. The residual's storage becomes the result's
// (the in-place path: h, last read by the add), or is copied first (the
// graph's input x; h again when a later op still reads it).
TEST(Passes, FuseLinearResidualAddsTheResidualInTheGemm) {
  for (bool late_read : {false, true}) {
    auto build = [late_read](Graph& g, std::mt19937& rng) {
      auto param = [&](const char* n, const Shape& s) {
        return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng));
      };
      Value* x = g.AddInput("x", {DType::kF32, {3, 5, 16}});
      Value* h =
          g.Add1("add", {g.Add1("linear", {x, param("w1", {16, 16}), param("b1", {16})}), x});
      h = g.Add1("layer_norm", {h});
      Value* up = g.Add1("linear", {h, param("w2", {16, 32}), param("b2", {32})},
                         {{"activation", std::string("gelu")}});
      Value* y =
          g.Add1("add", {h, g.Add1("linear", {up, param("w3", {32, 16}), param("b3", {16})})});
      y = g.Add1("layer_norm", {y});
      if (late_read) y = g.Add1("mul", {y, h});
      g.AddOutput("y", y);
    };
    Compared c = RunBothWays(build, FuseLinearResidual, {3, 5, 16});
    EXPECT_EQ(c.rewrites, 2);
    EXPECT_EQ(CountOps(c.ops_after, "add"), 0);
    // The GEMM adds its bias, then the residual: the unfused order.
    ExpectNear(c.plain, c.rewritten, 1e-6f);
    // Which of the two took its residual's storage: the second, when
    // nothing reads h after it; never the first (x is the graph's input).
    Graph g;
    std::mt19937 rng(11);
    build(g, rng);
    FuseLinearResidual(g);
    const compile::MemoryPlan plan = compile::PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
    std::vector<bool> in_place;
    for (const auto& op : g.ops()) {
      if (op->type == "linear" && op->inputs.size() == 4) {
        auto alias = plan.alias_of.find(op->outputs[0]);
        in_place.push_back(alias != plan.alias_of.end() && alias->second == op->inputs[3]);
      }
    }
    EXPECT_EQ(in_place, (std::vector<bool>{false, !late_read}));
  }
}

// Left alone: a linear with a fused activation (add after it), a residual
// broadcast along rows, a linear without a bias.
TEST(Passes, FuseLinearResidualNeedsABiasNoActivationAndTheResultsShape) {
  auto build = [](Graph& g, std::mt19937& rng) {
    auto param = [&](const char* n, const Shape& s) {
      return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng));
    };
    Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
    Value* a = g.Add1("add", {g.Add1("linear", {x, param("w1", {8, 8}), param("b1", {8})},
                                     {{"activation", std::string("relu")}}),
                              x});
    Value* row = g.Add1("reduce_sum", {a}, {{"axes", std::vector<int64_t>{0}}});
    Value* b = g.Add1("add", {g.Add1("linear", {a, param("w2", {8, 8}), param("b2", {8})}), row});
    Value* c = g.Add1("add", {g.Add1("linear", {b, param("w3", {8, 8})}), b});
    g.AddOutput("y", c);
  };
  Compared c = RunBothWays(build, FuseLinearResidual, {4, 8});
  EXPECT_EQ(c.rewrites, 0);
  ExpectNear(c.plain, c.rewritten, 0.f);
}

}  // namespace
}  // namespace tiller::passes
