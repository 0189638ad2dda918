// compile/measured_cost.h: each forward op's time on one device, with the
// backward ops derived from it, for the automatic pipeline split.
#include "compile/measured_cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/aligned_buffer.h"

namespace tiller::compile {
namespace {

using ir::Graph;
using ir::Value;

TEST(MeasuredCost, TimesEachForwardOpWithTheGradientsDerivedFromIt) {
  Graph g;
  // A deep product into few outputs: 2 x 4096 flops per element the
  // elementwise ops touch, so the matmul outweighs them even in the
  // sanitizer build, whose own kernels are unoptimised (-O0) while oneDNN's
  // are not (a 256 x 512 x 512 product measured 3.7 ms there against 6.8
  // for relu and its gradient).
  Value* x = g.AddInput("x", {DType::kF32, {64, 4096}});
  Value* w = g.AddState("w", {DType::kF32, {4096, 64}});
  Value* loss = g.Add1("reduce_mean", {g.Add1("relu", {g.Add1("matmul", {x, w})})},
                       {{"axes", std::vector<int64_t>{0, 1}}, {"keepdim", false}});
  AlignedBuffer w_data(w->bytes());
  const StateStorage states{{"w", w_data.data()}};
  MeasureOptions o;
  o.compile.devices = {DeviceSpec{}};
  o.compile.devices[0].threads = 1;
  o.compile.accumulation = {.enabled = true, .factor = 2};  // w's gradient goes into an accumulator
  o.runs = 3;
  const MeasuredCosts m = MeasureForwardOpCosts(g, loss, {w}, states, o);
  ASSERT_EQ(m.ms.size(), 3u);
  for (double t : m.ms) EXPECT_GE(t, 0.0);
  EXPECT_NEAR(std::accumulate(m.ms.begin(), m.ms.end(), 0.0), m.total_ms, 1e-9 * m.total_ms);
  // The matmul (34 MFLOP, and as much again for w's gradient) against
  // elementwise work on its 4096 outputs.
  EXPECT_GT(m.ms[0], m.ms[1]);
  EXPECT_GT(m.ms[0], m.ms[2]);
  EXPECT_EQ(m.runs, 3);
  EXPECT_FALSE(m.cached);
  // The measured graph is a copy: the step's own graph is as it was.
  EXPECT_EQ(g.ops().size(), 3u);
  for (const auto& op : g.ops()) EXPECT_EQ(op->placement.phase, ir::Phase::kForward);
  // A second compile of the same graph (another replica) reuses the
  // measurement, so every replica splits alike.
  const MeasuredCosts again = MeasureForwardOpCosts(g, loss, {w}, states, o);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.ms, m.ms);
}

TEST(MeasuredCost, InferenceTimesTheForwardOpsAlone) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {64, 128}});
  Value* w = g.AddData("w", {DType::kF32, {128, 128}}, ir::ValueKind::kParam,
                       std::make_shared<AlignedBuffer>(size_t{128} * 128 * sizeof(float)));
  g.Add1("tanh", {g.Add1("matmul", {x, w})});
  MeasureOptions o;
  o.runs = 1;
  const MeasuredCosts m = MeasureForwardOpCosts(g, nullptr, {}, {}, o);
  ASSERT_EQ(m.ms.size(), 2u);
  EXPECT_GT(m.total_ms, 0.0);
  EXPECT_FALSE(m.cached);
}

TEST(MeasuredCost, TimesTheGraphTheCompileRewritesWithMixedPrecisionAndRecomputation) {
  // The split by measured cost times what the compile will run: the copy
  // goes through the compile's rewrites, so a bfloat16 program with
  // recomputation is timed with its casts and its recomputed activations.
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {32, 64}});
  Value* w1 = g.AddState("w1", {DType::kF32, {64, 64}});
  Value* w2 = g.AddState("w2", {DType::kF32, {64, 64}});
  Value* h = g.Add1("tanh", {g.Add1("matmul", {x, w1})});
  Value* loss = g.Add1("reduce_mean", {g.Add1("relu", {g.Add1("matmul", {h, w2})})},
                       {{"axes", std::vector<int64_t>{0, 1}}, {"keepdim", false}});
  AlignedBuffer w1_data(w1->bytes()), w2_data(w2->bytes());
  const StateStorage states{{"w1", w1_data.data()}, {"w2", w2_data.data()}};
  MeasureOptions o;
  o.runs = 1;
  o.compile.precision = Precision::kBFloat16;
  o.compile.recompute.enabled = true;
  const MeasuredCosts both = MeasureForwardOpCosts(g, loss, {w1, w2}, states, o);
  ASSERT_EQ(both.ms.size(), 5u);
  EXPECT_NE(std::find(both.rewrites.begin(), both.rewrites.end(), "recompute"),
            both.rewrites.end());
  EXPECT_NE(std::find(both.rewrites.begin(), both.rewrites.end(), "mixed_precision"),
            both.rewrites.end());
  // Without the options, neither runs, and the measurement is not the
  // cached one of the rewritten copy.
  o.compile.precision = Precision::kFloat32;
  o.compile.recompute.enabled = false;
  const MeasuredCosts plain = MeasureForwardOpCosts(g, loss, {w1, w2}, states, o);
  EXPECT_FALSE(plain.cached);
  EXPECT_EQ(std::find(plain.rewrites.begin(), plain.rewrites.end(), "recompute"),
            plain.rewrites.end());
  EXPECT_EQ(std::find(plain.rewrites.begin(), plain.rewrites.end(), "mixed_precision"),
            plain.rewrites.end());
}

}  // namespace
}  // namespace tiller::compile
