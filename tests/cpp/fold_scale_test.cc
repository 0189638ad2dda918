// fold_scale (passes/fold_scale.cc): power-of-two scales folded into the
// alpha of the matmuls beside them, with fold_transpose on attention's heads.
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

// Attention's q * 2^-3 before q·kᵀ: folded into the matmul's alpha, bit for
// bit; a scale that is not a power of two (rounding would move) is kept.
TEST(Passes, FoldScaleIntoMatmulExactlyForPowersOfTwo) {
  for (double s : {0.125, 0.1}) {
    auto build = [s](Graph& g, std::mt19937& rng) {
      Value* q = g.AddInput("q", {DType::kF32, {2, 3, 5, 8}});
      Value* k = g.AddData("k", {DType::kF32, {2, 3, 5, 8}}, ir::ValueKind::kConstant,
                           Random({2, 3, 5, 8}, rng));
      Value* scaled = g.Add1("scale", {q}, {{"scale", s}, {"bias", 0.0}});
      g.AddOutput("att", g.Add1("matmul", {scaled, k}, {{"transpose_b", true}}));
    };
    Compared c = RunBothWays(build, FoldScaleIntoMatmul, {2, 3, 5, 8});
    if (s == 0.125) {
      EXPECT_EQ(c.rewrites, 1);
      EXPECT_EQ(c.ops_after, (std::vector<std::string>{"matmul"}));
      EXPECT_EQ(c.plain, c.rewritten);
    } else {
      EXPECT_EQ(c.rewrites, 0);
    }
  }
}

// A training graph reads attention's scaled q and its heads in the forward
// and the backward matmuls: a scale or transpose every reader of which is a
// matmul folds into all of them; a matmul's only reader that is a power-of-
// two scale folds into it. Powers of two: bit for bit.
TEST(Passes, FoldScaleAndTransposeIntoEveryMatmulReadingThem) {
  auto constant = [](Graph& g, std::mt19937& rng) {
    return g.AddData("k", {DType::kF32, {2, 3, 5, 8}}, ir::ValueKind::kConstant,
                     Random({2, 3, 5, 8}, rng));
  };
  auto scaled_q = [&](Graph& g, std::mt19937& rng) {
    Value* q = g.AddInput("q", {DType::kF32, {2, 3, 5, 8}});
    Value* scaled = g.Add1("scale", {q}, {{"scale", 0.125}, {"bias", 0.0}});
    Value* scores = g.Add1("matmul", {scaled, constant(g, rng)}, {{"transpose_b", true}});
    g.AddOutput("ctx", g.Add1("matmul", {scores, scaled}));  // scaled read twice
  };
  Compared c = RunBothWays(scaled_q, FoldScaleIntoMatmul, {2, 3, 5, 8});
  EXPECT_EQ(c.rewrites, 1);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"matmul", "matmul"}));
  EXPECT_EQ(c.plain, c.rewritten);

  auto scaled_product = [&](Graph& g, std::mt19937& rng) {
    Value* q = g.AddInput("q", {DType::kF32, {2, 3, 5, 8}});
    Value* p = g.Add1("matmul", {q, constant(g, rng)}, {{"transpose_b", true}});
    g.AddOutput("p", g.Add1("scale", {p}, {{"scale", 0.25}, {"bias", 0.0}}));
  };
  c = RunBothWays(scaled_product, FoldScaleIntoMatmul, {2, 3, 5, 8});
  EXPECT_EQ(c.rewrites, 1);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"matmul"}));
  EXPECT_EQ(c.plain, c.rewritten);

  for (bool other_reader : {false, true}) {
    auto heads = [&](Graph& g, std::mt19937& rng) {
      Value* x = g.AddInput("x", {DType::kF32, {2, 5, 3, 8}});
      Value* t = g.Add1("transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
      Value* scores = g.Add1("matmul", {t, constant(g, rng)}, {{"transpose_b", true}});
      Value* ctx = g.Add1("matmul", {scores, t});
      g.AddOutput("ctx", other_reader ? g.Add1("add", {ctx, g.Add1("relu", {t})}) : ctx);
    };
    c = RunBothWays(heads, FoldTransposeIntoMatmul, {2, 5, 3, 8});
    EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "transpose"),
              other_reader ? 1 : 0);
    ExpectNear(c.plain, c.rewritten, 1e-6f);
  }
}

}  // namespace
}  // namespace tiller::passes
