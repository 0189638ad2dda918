// scale_tensor's CPU kernel (backends/cpu/kernels/scale_tensor.cc): computed
// in x's type, as Paddle's scale kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/half.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::Graph;
using ir::Value;
using kernel_test::ExpectEq;
using kernel_test::Ptr;
using kernel_test::RunOp;

// scale_tensor computes in x's type as Paddle's scale kernel: integers wrap
// and a bias outside the type wraps too (uint8 -1 is 255); float16 and
// bfloat16 round the product before adding the bias.
TEST(CpuKernelUnary, ScaleTensorWrapsIntegersAndRoundsHalvesPerOperation) {
  auto run = [](DType dt, const void* x, const void* s, int64_t n, double bias, bool after) {
    Graph g;
    Value* o = g.Add1("scale_tensor", {g.AddInput("x", {dt, {n}}), g.AddInput("s", {dt, {}})},
                      {{"bias", bias}, {"bias_after_scale", after}});
    return RunOp(*o->producer, {x, s});
  };
  const std::vector<int64_t> x64 = {std::numeric_limits<int64_t>::max(), -3};
  const int64_t s64 = 2;
  auto r64 = run(DType::kI64, x64.data(), &s64, 2, 1.9, true);
  ExpectEq(Ptr<int64_t>(r64[0]), std::vector<int64_t>{-1, -5}, "int64 wraps, bias truncates");
  const std::vector<uint8_t> x8 = {200, 3};
  const uint8_t s8 = 2;
  auto r8 = run(DType::kU8, x8.data(), &s8, 2, -1.0, true);
  ExpectEq(Ptr<uint8_t>(r8[0]), std::vector<int>{143, 5}, "uint8: 400 - 1 mod 256");
  auto r8b = run(DType::kU8, x8.data(), &s8, 2, -1.0, false);
  ExpectEq(Ptr<uint8_t>(r8b[0]), std::vector<int>{142, 4}, "uint8: (x - 1) * 2");
  // (1 + 2^-10)^2 rounds to 1 + 2^-9; + 2^-11 is then a tie, to even:
  // 1 + 2^-9. One rounding of the exact sum would give 1 + 3 * 2^-10.
  const double v = 1.0 + std::ldexp(1.0, -10), b = std::ldexp(1.0, -11);
  const uint16_t xh = FloatToHalf(static_cast<float>(v));
  auto rh = run(DType::kF16, &xh, &xh, 1, b, true);
  EXPECT_EQ(HalfToFloat(*Ptr<uint16_t>(rh[0])), 1.0f + std::ldexp(1.0f, -9));
  const double vb = 1.0 + std::ldexp(1.0, -7), bb = std::ldexp(1.0, -8);
  const uint16_t xb = FloatToBF16(static_cast<float>(vb));
  auto rb = run(DType::kBF16, &xb, &xb, 1, bb, true);
  EXPECT_EQ(BF16ToFloat(*Ptr<uint16_t>(rb[0])), 1.0f + std::ldexp(1.0f, -6));
}

}  // namespace
}  // namespace tiller::cpu
