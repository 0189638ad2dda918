// fold_transpose (passes/fold_transpose.cc): transposes of attention's heads
// folded into the strides of the matmuls that read or write them.
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

// A transformer's attention on [batch, seq, heads, head_dim] activations:
// heads split by transpose [0, 2, 1, 3] before both matmuls and merged after.
void Attention(Graph& g, std::mt19937& rng, const std::vector<int64_t>& k_perm, bool q_read_twice,
               const std::vector<int64_t>& heads = {0, 2, 1, 3}) {
  const Shape s{2, 5, 3, 4};
  Value* x = g.AddInput("x", {DType::kF32, s});
  Value* k =
      g.Add1("add", {x, g.AddData("ck", {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng))});
  Value* v =
      g.Add1("mul", {x, g.AddData("cv", {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng))});
  Value* qt = g.Add1("transpose", {x}, {{"perm", heads}});
  Value* kt = g.Add1("transpose", {k}, {{"perm", k_perm}});
  Value* vt = g.Add1("transpose", {v}, {{"perm", heads}});
  // k_perm [0, 2, 3, 1] gives K^T already: no transpose_b then.
  const bool kt_is_transposed = k_perm.back() != 3;
  Value* scores = g.Add1("matmul", {qt, kt}, {{"transpose_b", !kt_is_transposed}});
  Value* probs = g.Add1("softmax", {scores}, {{"axis", int64_t{-1}}});
  Value* ctx = g.Add1("transpose", {g.Add1("matmul", {probs, vt})}, {{"perm", heads}});
  if (q_read_twice) ctx = g.Add1("add", {ctx, g.Add1("transpose", {qt}, {{"perm", heads}})});
  g.AddOutput("y", ctx);
}

TEST(Passes, FoldTransposeIntoMatmulReadsAndWritesThroughStrides) {
  Compared c = RunBothWays(
      [](Graph& g, std::mt19937& rng) {
        Attention(g, rng, {0, 2, 1, 3}, false);
      },
      FoldTransposeIntoMatmul, {2, 5, 3, 4});
  // q, k, v into the matmuls, and the merge of the heads out of the second.
  EXPECT_EQ(c.rewrites, 4);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"add", "mul", "matmul", "softmax", "matmul"}));
  // The same GEMMs over the same numbers, through other strides.
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

TEST(Passes, FoldTransposeTakesPermutationsWithNegativeAxes) {
  // transpose accepts axes counted from the end (as Paddle's does); the
  // matmul gets the permutation normalized.
  Compared c = RunBothWays(
      [](Graph& g, std::mt19937& rng) {
        Attention(g, rng, {0, 2, 1, 3}, false, {0, -2, 1, -1});
      },
      FoldTransposeIntoMatmul, {2, 5, 3, 4});
  EXPECT_EQ(c.rewrites, 4);
  EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "transpose"), 0);
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

TEST(Passes, FoldTransposeLeavesTransposesOtherOpsNeedOrThatMoveTheRows) {
  // K transposed [0, 2, 3, 1] (its rows become columns: not a strided row
  // read), and q's transpose read by an add too: both stay.
  Compared c = RunBothWays(
      [](Graph& g, std::mt19937& rng) {
        Attention(g, rng, {0, 2, 3, 1}, true);
      },
      FoldTransposeIntoMatmul, {2, 5, 3, 4});
  EXPECT_EQ(c.rewrites, 2);  // v in, the heads' merge out
  EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "transpose"), 3);
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

}  // namespace
}  // namespace tiller::passes
