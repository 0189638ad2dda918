// The CPU attention kernel (backends/cpu/kernels/attention.cc): its workspace
// and the cost model's figure for it.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>

#include "backends/cpu/kernel.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;

TEST(Passes, AttentionKernelNeverHoldsTheWholeScoreTensor) {
  // 12 heads over 4096 positions: the unfused scores are 12 x 4096 x 4096
  // floats (768 MiB); the kernel's scratch per thread is one head's packed
  // keys and values (2 MiB) and a block of 6 query rows' scores.
  Graph g;
  Value* q = g.AddInput("q", {DType::kF32, {1, 4096, 768}});
  Value* y = g.Add1("attention", {q, q, q}, {{"heads", int64_t{12}}});
  g.AddOutput("y", y);
  auto kernel = cpu::CreateKernel(*y->producer);
  const size_t scores = size_t{12} * 4096 * 4096 * sizeof(float);
  const size_t per_thread = kernel->workspace_bytes() / std::max(1, omp_get_max_threads());
  EXPECT_LT(per_thread * 300, scores) << per_thread;
  // Its two products (the cost model's figure for pipeline splits and plans).
  EXPECT_EQ(OpFlops(*y->producer), 2.0 * 12 * 4096 * 4096 * (64 + 64));
}

}  // namespace
}  // namespace tiller::passes
