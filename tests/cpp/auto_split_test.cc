// auto_split (passes/auto_split.cc): pipeline stages split by the cost model,
// balanced over the devices.
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
using pass_test::Random;

// A chain of matmul + relu layers and a wider head, as forward ops of known
// cost (ForwardOpCost).
std::vector<ir::Op*> LayersAndHead(Graph& g, int layers) {
  std::mt19937 rng(3);
  Value* h = g.AddInput("x", {DType::kF32, {16, 64}});
  for (int l = 0; l < layers; ++l) {
    Value* w = g.AddData("w" + std::to_string(l), {DType::kF32, {64, 64}}, ir::ValueKind::kParam,
                         Random({64, 64}, rng));
    h = g.Add1("relu", {g.Add1("matmul", {h, w})});
  }
  Value* head =
      g.AddData("head", {DType::kF32, {64, 256}}, ir::ValueKind::kParam, Random({64, 256}, rng));
  g.AddOutput("y", g.Add1("matmul", {h, head}));
  std::vector<ir::Op*> ops;
  for (const auto& op : g.ops()) ops.push_back(op.get());
  return ops;
}

TEST(Passes, AutoSplitInterleavesStagesOverDevicesAndBalancesTheDevices) {
  Graph g;
  std::vector<ir::Op*> ops = LayersAndHead(g, 6);
  SplitResult r = AutoSplitStages(g, 4, /*training=*/false, 1, /*devices=*/2);
  ASSERT_EQ(r.cost.size(), 4u);
  // Contiguous stages in op order, stage s on device s % 2.
  int stage = 0;
  for (const ir::Op* op : ops) {
    EXPECT_GE(op->placement.stage, stage) << op->type;
    stage = op->placement.stage;
    EXPECT_EQ(op->placement.shard, op->placement.stage % 2) << op->type;
  }
  EXPECT_EQ(ops.back()->placement.stage, 3);
  // The busiest device carries within 1% of the least any contiguous
  // 4-stage split can give it (every split of the 13 ops tried). The split
  // is a local search (moves of one or two stage bounds), not exhaustive; 1%
  // is well inside the cost model's own error (measured stage times differ
  // from its estimates by 5-10% on BERT).
  std::vector<double> prefix{0};
  for (const ir::Op* op : ops) prefix.push_back(prefix.back() + ForwardOpCost(*op));
  const size_t n = ops.size();
  double best = prefix[n];
  for (size_t a = 0; a <= n; ++a)
    for (size_t b = a; b <= n; ++b)
      for (size_t c = b; c <= n; ++c) {
        const double d0 = prefix[a] + (prefix[c] - prefix[b]);
        best = std::min(best, std::max(d0, prefix[n] - d0));
      }
  const double busiest = std::max(r.cost[0] + r.cost[2], r.cost[1] + r.cost[3]);
  EXPECT_GE(busiest, best);
  EXPECT_LE(busiest, 1.01 * best);
  // The head's stage is more than a quarter of the cost (the head alone is a
  // quarter), and device 1 makes up for it with a stage of less than one.
  EXPECT_GT(r.cost[3], prefix[n] / 4);
  EXPECT_LT(r.cost[1], prefix[n] / 4);
  EXPECT_NE(r.detail.find("stage 3 (device 1)"), std::string::npos) << r.detail;
}

TEST(Passes, AutoSplitGivesEveryStageAnOp) {
  // One matmul holds nearly all the cost, then a few cheap ops: balancing
  // the devices alone is as good with an empty stage as without, and an
  // empty stage is a pipeline hop doing nothing.
  Graph g;
  std::mt19937 rng(5);
  Value* h = g.AddInput("x", {DType::kF32, {64, 512}});
  h = g.Add1("matmul", {h, g.AddData("w", {DType::kF32, {512, 512}}, ir::ValueKind::kParam,
                                     Random({512, 512}, rng))});
  for (int i = 0; i < 4; ++i) h = g.Add1("relu", {h});
  g.AddOutput("y", h);
  SplitResult r = AutoSplitStages(g, 4, /*training=*/true, /*micro_batches=*/8, /*devices=*/2);
  ASSERT_EQ(r.ops.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_GE(r.ops[s], 1) << "stage " << s << ": " << r.detail;
}

TEST(Passes, AutoSplitWithAStagePerDeviceMinimisesTheLargestStage) {
  Graph g;
  std::vector<ir::Op*> ops = LayersAndHead(g, 6);
  SplitResult r = AutoSplitStages(g, 2);
  std::vector<double> prefix{0};
  for (const ir::Op* op : ops) prefix.push_back(prefix.back() + ForwardOpCost(*op));
  double best = prefix.back();
  for (double p : prefix) best = std::min(best, std::max(p, prefix.back() - p));
  EXPECT_NEAR(std::max(r.cost[0], r.cost[1]), best, 1e-6 * prefix.back());
  for (const ir::Op* op : ops) EXPECT_EQ(op->placement.shard, op->placement.stage);
  EXPECT_EQ(r.detail.find("(device"), std::string::npos) << r.detail;
}

}  // namespace
}  // namespace tiller::passes
