// fuse_embedding_grad_add (passes/fuse_embedding_grad_add.cc): a lookup's
// gradient scattered into the table's other gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
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
using pass_test::ExpectNear;
using pass_test::Random;
using pass_test::RunBothWays;

// A table's two gradients (a dense one and a lookup's): the lookup's is
// scattered into the dense one, in its storage, instead of a zero-filled
// table-sized tensor and an add. Ids repeat (rows 1 and 3 twice), so the
// sums run in another order: within float32 rounding. A lookup gradient
// read elsewhere too stays.
TEST(Passes, FuseEmbeddingGradAddScattersIntoTheOtherGradient) {
  for (bool also_output : {false, true}) {
    SCOPED_TRACE(also_output ? "lookup gradient also an output" : "fused");
    auto build = [also_output](Graph& g, std::mt19937& rng) {
      Value* t = g.AddInput("t", {DType::kF32, {6, 4}});
      Value* dense = g.Add1("scale", {t}, {{"scale", 3.0}, {"bias", 0.5}});
      Value* mix =
          g.AddData("mix", {DType::kF32, {7, 6}}, ir::ValueKind::kConstant, Random({7, 6}, rng));
      Value* dy = g.Add1("matmul", {mix, t});  // [7, 4], computed at run time
      auto ids_buf = std::make_shared<AlignedBuffer>(7 * sizeof(int64_t));
      const int64_t ids[] = {1, 3, 1, 5, 0, 3, 2};
      std::memcpy(ids_buf->data(), ids, sizeof(ids));
      Value* idv = g.AddData("ids", {DType::kI64, {7}}, ir::ValueKind::kConstant, ids_buf);
      Value* lookup = g.Add1("embedding_grad", {idv, dy}, {{"rows", int64_t{6}}});
      g.AddOutput("grad", g.Add1("add", {dense, lookup}));
      if (also_output) g.AddOutput("lookup", lookup);
    };
    Compared c = RunBothWays(build, FuseEmbeddingGradAdd, {6, 4});
    ExpectNear(c.plain, c.rewritten, 1e-6f);
    EXPECT_EQ(c.rewrites, also_output ? 0 : 1);
    const bool fused = std::count(c.ops_after.begin(), c.ops_after.end(), "embedding_grad_add");
    EXPECT_EQ(fused, !also_output);
    EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "add"), also_output ? 1 : 0);
    if (also_output) continue;
    // The sum takes the dense gradient's storage (nothing reads it after).
    Graph g;
    std::mt19937 rng(11);
    build(g, rng);
    FuseEmbeddingGradAdd(g);
    const Value* out = g.outputs()[0].second;
    ASSERT_EQ(out->producer->type, "embedding_grad_add");
    compile::MemoryPlan plan = compile::PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
    auto alias = plan.alias_of.find(out);
    ASSERT_NE(alias, plan.alias_of.end());
    EXPECT_EQ(alias->second, out->producer->inputs[0]);
  }
}

}  // namespace
}  // namespace tiller::passes
