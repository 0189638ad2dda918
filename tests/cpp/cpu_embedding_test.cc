// embedding's CPU kernel (backends/cpu/kernels/embedding.cc): padding and
// out-of-range ids.
#include <gtest/gtest.h>

#include <vector>

#include "backends/cpu/kernel.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::Graph;
using ir::Value;
using kernel_test::ExpectEq;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RunOp;

TEST(CpuKernelEmbedding, PaddingAndOutOfRangeIdsGiveZeroRows) {
  std::vector<float> table = RandF(10 * 16);
  for (DType it : {DType::kI32, DType::kI64}) {
    Graph g;
    Value* o = g.Add1("embedding",
                      {g.AddInput("t", {DType::kF32, {10, 16}}), g.AddInput("i", {it, {2, 4}})},
                      {{"padding_idx", int64_t{3}}});
    ASSERT_EQ(o->shape(), (Shape{2, 4, 16}));
    std::vector<int64_t> ids64 = {0, 3, 9, 10, -1, 5, 5, 2};
    std::vector<int32_t> ids32(ids64.begin(), ids64.end());
    auto r = RunOp(*o->producer, {table.data(), it == DType::kI64 ? (const void*)ids64.data()
                                                                  : (const void*)ids32.data()});
    std::vector<float> want;
    for (int64_t id : ids64)
      for (int j = 0; j < 16; ++j)
        want.push_back(id < 0 || id >= 10 || id == 3 ? 0 : table[id * 16 + j]);
    ExpectEq(Ptr<float>(r[0]), want, "embedding");
  }
}

}  // namespace
}  // namespace tiller::cpu
