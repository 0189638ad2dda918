// fuse_attention and merge_qkv (passes/fuse_attention.cc, merge_qkv.cc):
// a transformer's attention block fused into one op, its projections merged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// A transformer's attention block as Paddle exports it: three projections of
// x, heads split by reshape + transpose, scores scaled by alpha, an additive
// mask, softmax, the context merged back, an output projection.
struct AttentionSpec {
  int64_t batch = 2, seq = 5, heads = 3, head_dim = 4;
  Shape mask;          // empty: no mask
  int64_t kv_seq = 0;  // > 0: k and v project x's first kv_seq rows (cross-attention)
  bool fetch_probs = false;
  bool loaded = false;   // the parameters carry origins, as weights read from a file
  bool scale_q = false;  // 1/sqrt(head_dim) as Paddle's scale op on q's heads, not alpha
};

void TransformerAttention(Graph& g, std::mt19937& rng, const AttentionSpec& a) {
  const int64_t width = a.heads * a.head_dim;
  Value* x = g.AddInput("x", {DType::kF32, {a.batch, a.seq, width}});
  Value* kv_in = x;
  const int64_t sk = a.kv_seq ? a.kv_seq : a.seq;
  if (a.kv_seq)
    kv_in = g.Add1("slice", {x},
                   {{"axes", std::vector<int64_t>{1}},
                    {"starts", std::vector<int64_t>{0}},
                    {"ends", std::vector<int64_t>{a.kv_seq}}});
  uint64_t origin = 0x7e57'a000;
  auto param = [&](const std::string& name, const Shape& s, float scale) {
    auto data = Random(s, rng, -scale, scale);
    if (a.loaded) data->set_origin(++origin);
    return g.AddData(name, {DType::kF32, s}, ir::ValueKind::kParam, data);
  };
  auto heads = [&](Value* in, const std::string& name, int64_t len) {
    Value* y = g.Add1("linear", {in, param(name + ".w", {width, width}, 0.5f),
                                 param(name + ".b", {width}, 0.5f)});
    y = g.Add1("reshape", {y},
               {{"shape", std::vector<int64_t>{a.batch, len, a.heads, a.head_dim}}});
    return g.Add1("transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  Value* q = heads(x, "q", a.seq);
  Value* k = heads(kv_in, "k", sk);
  Value* v = heads(kv_in, "v", sk);
  const double s = 1.0 / std::sqrt(double(a.head_dim));
  if (a.scale_q) q = g.Add1("scale", {q}, {{"scale", s}, {"bias", 0.0}});
  Value* scores = g.Add1("matmul", {q, k}, {{"transpose_b", true}, {"alpha", a.scale_q ? 1.0 : s}});
  if (!a.mask.empty()) {
    // 0 or -10000 (a padded position), as BERT's mask.
    auto m = Random(a.mask, rng);
    for (int64_t i = 0; i < NumElements(a.mask); ++i)
      m->as<float>()[i] = m->as<float>()[i] < -0.5f ? -10000.f : 0.f;
    scores =
        g.Add1("add", {scores, g.AddData("mask", {DType::kF32, a.mask}, ir::ValueKind::kParam, m)});
  }
  Value* probs = g.Add1("softmax", {scores}, {{"axis", int64_t{-1}}});
  Value* ctx = g.Add1("transpose", {g.Add1("matmul", {probs, v})},
                      {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ctx = g.Add1("reshape", {ctx}, {{"shape", std::vector<int64_t>{a.batch, a.seq, width}}});
  g.AddOutput("y", g.Add1("linear", {ctx, param("o.w", {width, width}, 0.5f)}));
  if (a.fetch_probs) g.AddOutput("probs", probs);
}

int FoldFuseMerge(Graph& g) {
  return FoldTransposeIntoMatmul(g) + FuseAttention(g) + MergeQkv(g);
}

size_t Count(const std::vector<std::string>& ops, const std::string& type) {
  return static_cast<size_t>(std::count(ops.begin(), ops.end(), type));
}

TEST(Passes, FuseAttentionAndMergeQkvGiveTheUnfusedResults) {
  // Masks of every broadcast BERT-like models use, and none; 70 positions
  // make two query blocks (64 + 6 rows) and rows that end in a partial
  // vector; head_dim 20 is a full tile plus a tail on AVX2.
  const std::vector<AttentionSpec> specs = {
      {},
      {2, 5, 3, 4, {2, 1, 1, 5}},
      {2, 5, 3, 4, {1, 1, 5, 5}},
      {2, 5, 3, 4, {2, 3, 5, 5}},
      {1, 70, 2, 20, {1, 1, 1, 70}},
      {3, 9, 4, 8, {9}},
  };
  for (const AttentionSpec& a : specs) {
    Compared c = RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, a); },
                             FoldFuseMerge, {a.batch, a.seq, a.heads * a.head_dim});
    SCOPED_TRACE(ShapeToString(a.mask) + " seq " + std::to_string(a.seq));
    // One attention op reading one projection three times as wide.
    EXPECT_EQ(Count(c.ops_after, "attention"), 1u);
    EXPECT_EQ(Count(c.ops_after, "linear"), 2u);
    EXPECT_EQ(Count(c.ops_after, "softmax") + Count(c.ops_after, "matmul") +
                  Count(c.ops_after, "transpose") + Count(c.ops_after, "add"),
              0u);
    // Float sums in another order (the softmax's 1/sum after the product):
    // a few ulps of the outputs' O(1) magnitudes.
    ExpectNear(c.plain, c.rewritten, 2e-5f);
  }
}

TEST(Passes, FuseAttentionTakesTheScaleOfQueriesWhoseHeadDimIsNoPowerOfFour) {
  // Paddle's MultiHeadAttention scales q by head_dim^-0.5: for head_dim 8 a
  // scale op fold_scale cannot fold exactly, between q's transpose and the
  // matmul. The fusion takes it as alpha.
  AttentionSpec a{2, 5, 3, 8, {2, 1, 1, 5}};
  a.scale_q = true;
  Compared c = RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, a); },
                           FoldFuseMerge, {2, 5, 24});
  EXPECT_EQ(Count(c.ops_after, "attention"), 1u);
  EXPECT_EQ(Count(c.ops_after, "scale") + Count(c.ops_after, "transpose"), 0u);
  EXPECT_EQ(Count(c.ops_after, "linear"), 2u);
  ExpectNear(c.plain, c.rewritten, 2e-5f);
}

TEST(Passes, FuseAttentionTakesCrossAttentionAndLeavesFetchedProbabilities) {
  // k and v from 3 of x's 5 positions: fused (Sq 5, Sk 3), but the
  // projections read different inputs, so they stay three.
  AttentionSpec cross{2, 5, 3, 4, {2, 1, 1, 3}, 3};
  Compared c =
      RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, cross); },
                  FoldFuseMerge, {2, 5, 12});
  EXPECT_EQ(Count(c.ops_after, "attention"), 1u);
  EXPECT_EQ(Count(c.ops_after, "linear"), 4u);
  ExpectNear(c.plain, c.rewritten, 2e-5f);
  // Probabilities fetched: the softmax must stay, so nothing fuses.
  AttentionSpec fetched{2, 5, 3, 4, {2, 1, 1, 5}, 0, true};
  c = RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, fetched); },
                  FoldFuseMerge, {2, 5, 12});
  EXPECT_EQ(Count(c.ops_after, "attention"), 0u);
  EXPECT_EQ(Count(c.ops_after, "softmax"), 1u);
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

// The merged projection of weights loaded from a file has an origin derived
// from theirs: the same in every graph built from them (a predictor's other
// input shapes, its clones), so they share one packed copy of it.
TEST(Passes, MergeQkvGivesTheMergedWeightAnOriginDerivedFromTheLoadedOnes) {
  auto merged_origins = [](bool loaded) {
    Graph g;
    std::mt19937 rng(11);
    AttentionSpec a;
    a.loaded = loaded;
    TransformerAttention(g, rng, a);
    EXPECT_EQ(FoldFuseMerge(g), 4 + 1 + 1);  // 3 transposes in, 1 out; 1 fusion; 1 merge
    std::vector<uint64_t> origins;
    for (const auto& op : g.ops()) {
      if (op->type == "linear" && op->inputs[1]->shape()[1] == 36)
        for (size_t i = 1; i < op->inputs.size(); ++i)
          origins.push_back(op->inputs[i]->data->origin());
    }
    return origins;
  };
  const std::vector<uint64_t> first = merged_origins(true), second = merged_origins(true);
  ASSERT_EQ(first.size(), 2u);  // weight and bias
  EXPECT_NE(first[0], 0u);
  EXPECT_NE(first[1], 0u);
  EXPECT_NE(first[0], first[1]);
  EXPECT_EQ(first, second);
  // Weights of no known origin give a merged weight of none (packed per kernel).
  EXPECT_EQ(merged_origins(false), (std::vector<uint64_t>{0, 0}));
  // A derived origin is never one handed out for loaded bytes.
  EXPECT_GT(AlignedBuffer::NewOrigin(), std::max(first[0], first[1]));
}

}  // namespace
}  // namespace tiller::passes
