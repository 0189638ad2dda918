// bucket_all_reduce and overlap_all_reduce (passes/bucket_all_reduce.cc):
// gradients' reductions merged into buckets, and started early.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "passes/pass.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;

// bucket_all_reduce: a bucket closes before the first reader of one of its
// results, and only reductions that agree (scale, dtype, placement) share a
// message.
TEST(Passes, BucketAllReduceMergesWhatAgreesAndClosesBeforeAReader) {
  Graph g;
  Value* x1 = g.AddInput("x1", {DType::kF32, {4}});
  Value* x2 = g.AddInput("x2", {DType::kF32, {2, 3}});
  Value* x3 = g.AddInput("x3", {DType::kF32, {5}});
  Value* x4 = g.AddInput("x4", {DType::kF32, {7}});
  Value* x5 = g.AddInput("x5", {DType::kF64, {3}});
  auto reduce = [&](Value* x, double scale) {
    return g.Add1("all_reduce", {x}, {{"reduction", "sum"}, {"scale", scale}});
  };
  Value* a1 = reduce(x1, 0.5);
  Value* a2 = reduce(x2, 0.5);
  g.AddOutput("r", g.Add1("relu", {a1}));  // a1, a2's bucket closes here
  Value* a3 = reduce(x3, 0.5);
  Value* a4 = reduce(x4, 0.25);  // another scale
  Value* a5 = reduce(x5, 0.5);   // another dtype
  Value* a6 = reduce(x1, 0.5);
  for (Value* v : {a2, a3, a4, a5, a6}) g.AddOutput("o", v);
  EXPECT_EQ(BucketAllReduce(g, 1 << 20), 4);
  std::vector<std::vector<std::string>> messages;
  for (const auto& op : g.ops()) {
    if (op->type != "all_reduce") continue;
    auto& names = messages.emplace_back();
    for (const Value* in : op->inputs) names.push_back(in->name);
  }
  using V = std::vector<std::string>;
  EXPECT_EQ(messages, (std::vector<V>{{"x1", "x2"}, {"x4"}, {"x5"}, {"x3", "x1"}}));
  // The relu reads the bucket's first result, placed before it.
  const ir::Op* relu = g.outputs()[0].second->producer;
  ASSERT_EQ(relu->type, "relu");
  EXPECT_EQ(relu->inputs[0]->producer->inputs.size(), 2u);
  // A bucket too small for two gradients leaves them apart.
  Graph h;
  Value* y1 = h.AddInput("y1", {DType::kF32, {4}});
  Value* y2 = h.AddInput("y2", {DType::kF32, {4}});
  h.AddOutput("o", h.Add1("all_reduce", {y1}));
  h.AddOutput("p", h.Add1("all_reduce", {y2}));
  EXPECT_EQ(BucketAllReduce(h, 31), 0);
  EXPECT_EQ(BucketAllReduce(h, 32), 2);
}

// overlap_all_reduce: a reduction of backward-phase gradients starts right
// after the last of them, in the backward phase; the update waits where the
// all_reduce was. Any other collective (here an accumulator's reduction)
// keeps every reduction whole.
TEST(Passes, OverlapAllReduceStartsAfterTheLastGradientAndWaitsInTheUpdate) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {4}});
  Value* acc = g.AddState("acc", {DType::kF32, {3}});
  ir::Placement back;
  back.phase = ir::Phase::kBackward;
  ir::Placement update;
  update.phase = ir::Phase::kUpdate;
  Value *g1, *g2, *late;
  {
    ir::ScopedPlacement p(g, back);
    g1 = g.Add1("relu", {x});
    g2 = g.Add1("scale", {x}, {{"scale", 2.0}});
    late = g.Add1("tanh", {x});  // more backward work after the gradients
  }
  ir::ScopedPlacement p(g, update);
  ir::Op* both = g.AddOp("all_reduce", {g1, g2}, {{"scale", 0.5}});
  Value* of_state = g.Add1("all_reduce", {acc});
  g.AddOutput("a", g.Add1("add", {both->outputs[0], late}));
  g.AddOutput("b", both->outputs[1]);
  g.AddOutput("c", of_state);
  // With an all_reduce of a state beside it, nothing is split: the state's
  // reduction runs on the device's stream and could meet the one in flight.
  EXPECT_EQ(OverlapAllReduce(g), 0);
  g.ReplaceAllUses(of_state, acc);
  g.RemoveDeadCode();
  EXPECT_EQ(OverlapAllReduce(g), 1);
  std::vector<std::string> order;
  for (const auto& op : g.ops()) order.push_back(op->type);
  EXPECT_EQ(order, (std::vector<std::string>{"relu", "scale", "all_reduce_start", "tanh",
                                             "all_reduce_wait", "add"}));
  const ir::Op* start = g.ops()[2].get();
  EXPECT_EQ(start->placement.phase, ir::Phase::kBackward);
  EXPECT_EQ(start->outputs[0]->shape(), (Shape{8}));
  EXPECT_DOUBLE_EQ(start->GetFloat("scale"), 0.5);
  const ir::Op* wait = g.ops()[4].get();
  EXPECT_EQ(wait->placement.phase, ir::Phase::kUpdate);
  EXPECT_EQ(g.outputs()[1].second, wait->outputs[1]);
  EXPECT_EQ(wait->outputs[1]->shape(), (Shape{4}));
}

}  // namespace
}  // namespace tiller::passes
