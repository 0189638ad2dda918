// The memory planner: overlapping lifetimes never share bytes, disjoint ones
// do, views alias their source, graph outputs survive to the end.
#include "compile/memory_plan.h"

#include <gtest/gtest.h>

#include "ir/graph.h"

namespace tiller::compile {
namespace {

using ir::Graph;
using ir::Value;

bool Overlap(size_t a, size_t an, size_t b, size_t bn) {
  return a < b + bn && b < a + an;
}

TEST(MemoryPlan, ChainReusesMemory) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {1024}});
  Value* v = x;
  for (int i = 0; i < 10; ++i) v = g.Add1("relu", {v});
  g.AddOutput("y", v);
  MemoryPlan plan = PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
  // A chain needs two live buffers at any time (input and output of one op).
  EXPECT_EQ(plan.tensor_bytes, 2 * 4096u);
  EXPECT_EQ(plan.naive_bytes, 11 * 4096u);
}

TEST(MemoryPlan, LiveTensorsNeverOverlap) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {100}});
  Value* a = g.Add1("relu", {x});
  Value* b = g.Add1("exp", {x});
  Value* c = g.Add1("add", {a, b});
  Value* d = g.Add1("tanh", {c});
  Value* e = g.Add1("add", {d, a});  // keeps `a` alive across c and d
  g.AddOutput("e", e);
  MemoryPlan plan = PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
  std::vector<Value*> all{x, a, b, c, d, e};
  auto pos = [&](Value* v) -> int {
    for (size_t i = 0; i < g.ops().size(); ++i) {
      if (g.ops()[i]->outputs[0] == v) return static_cast<int>(i);
    }
    return -1;
  };
  auto last_use = [&](Value* v) -> int {
    int last = pos(v);
    for (size_t i = 0; i < g.ops().size(); ++i) {
      for (Value* in : g.ops()[i]->inputs) {
        if (in == v) last = std::max(last, static_cast<int>(i));
      }
    }
    return v == e ? 1 << 20 : last;
  };
  for (Value* p : all) {
    for (Value* q : all) {
      if (p == q) continue;
      bool live_together = pos(p) <= last_use(q) && pos(q) <= last_use(p);
      if (live_together) {
        EXPECT_FALSE(Overlap(plan.offset.at(p), p->bytes(), plan.offset.at(q), q->bytes()))
            << p->name << " and " << q->name;
      }
    }
  }
}

TEST(MemoryPlan, ViewsAliasAndExtendLifetime) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
  Value* r = g.Add1("relu", {x});
  Value* v = g.Add1("reshape", {r}, {{"shape", std::vector<int64_t>{32}}});
  Value* y = g.Add1("exp", {v});
  g.AddOutput("y", y);
  g.AddOutput("v", v);
  MemoryPlan plan = PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
  EXPECT_EQ(plan.alias_of.at(v), r);
  EXPECT_EQ(plan.offset.count(v), 0u);
  EXPECT_FALSE(Overlap(plan.offset.at(r), r->bytes(), plan.offset.at(y), y->bytes()));
}

// conv2d's residual (OpSchema::inplace_input): the result takes the
// residual's storage when nothing reads the residual afterwards, chains of
// them share one buffer, and a residual read later or fetched keeps its own.
TEST(MemoryPlan, AResidualDeadAfterItsConvGivesTheResultItsStorage) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {1, 4, 4, 8}});
  Value* w = g.AddInput("w", {DType::kF32, {8, 8, 1, 1}});
  Value* b = g.AddInput("b", {DType::kF32, {8}});
  const ir::AttrMap nhwc = {{"data_format", std::string("NHWC")}};
  Value* r = g.Add1("relu", {x});
  Value* y1 = g.Add1("conv2d", {r, w, b, g.Add1("exp", {r})}, nhwc);  // residual exp(r): dead after
  Value* y2 = g.Add1("conv2d", {y1, w, b, y1}, nhwc);                 // y1 read twice here: no
  Value* y3 = g.Add1("conv2d", {y2, w, b, y2}, nhwc);
  Value* kept = g.Add1("tanh", {y2});
  Value* y4 = g.Add1("conv2d", {kept, w, b, y3}, nhwc);  // chains onto y3's storage
  Value* fetched = g.Add1("sigmoid", {y4});
  Value* y5 = g.Add1("conv2d", {x, w, b, fetched}, nhwc);
  g.AddOutput("y", y5);
  g.AddOutput("fetched", fetched);
  MemoryPlan plan = PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
  const Value* exp_r = y1->producer->inputs[3];
  EXPECT_EQ(plan.alias_of.at(y1), exp_r);
  EXPECT_EQ(plan.alias_of.count(y2), 0u);
  EXPECT_EQ(plan.alias_of.count(y3), 0u);  // y2 is read later by tanh
  EXPECT_EQ(plan.alias_of.at(y4), y3);
  EXPECT_EQ(plan.alias_of.count(y5), 0u);  // its residual is a graph output
  EXPECT_FALSE(Overlap(plan.offset.at(y3), y3->bytes(), plan.offset.at(kept), kept->bytes()));
}

TEST(MemoryPlan, WorkspaceIsSharedMaximum) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {16}});
  g.AddOutput("y", g.Add1("relu", {g.Add1("relu", {x})}));
  MemoryPlan plan = PlanMemory(g, {100, 1000});
  EXPECT_EQ(plan.workspace_bytes, 1024u);
  EXPECT_EQ(plan.arena_bytes(), plan.tensor_bytes + 1024u);
}

}  // namespace
}  // namespace tiller::compile
