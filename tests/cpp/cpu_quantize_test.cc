// quantize_linear's CPU kernel (backends/cpu/kernels/quantize.cc): rounding
// and clipping in float32 and int8 output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::AttrMap;
using ir::Graph;
using ir::Value;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RunOp;

// quantize_linear rounds k * x half to even and clips to [-qmax - 1, qmax],
// in float32 (Paddle's) or int8 (out_dtype, for the int8 GEMMs): both equal
// the scalar formula element for element, over a length that leaves a
// vector tail, with ties of both parities and values beyond the range.
TEST(CpuKernelQuantize, RoundsHalfToEvenAndClipsInEveryLane) {
  constexpr int64_t kN = 45;
  const float scale = 2.0f, qmax = 127.0f, k = qmax * (1.0f / scale);
  std::vector<float> x = RandF(kN, -3, 3);
  // Ties: x whose float product k * x is m + 0.5 exactly, m = -3..2 (the
  // nearest float to (m + 0.5) / k, or one of its neighbours).
  for (int i = 0; i < 6; ++i) {
    const float tie = static_cast<float>(i) - 2.5f;
    float t = tie / k;
    for (int step = 0; step < 8 && k * t != tie; ++step)
      t = std::nextafter(t, k * t < tie ? 1e9f : -1e9f);
    ASSERT_EQ(k * t, tie) << "no float x with k * x = " << tie;
    x[3 * i] = t;
  }
  x[20] = 10.0f;
  x[21] = -10.0f;
  x[22] = -0.0f;
  for (const char* out : {"float32", "int8"}) {
    Graph g;
    AttrMap attrs{{"quant_axis", int64_t{-1}}, {"qmax", int64_t{127}}, {"round_type", int64_t{0}}};
    if (std::string(out) == "int8") attrs.Set("out_dtype", std::string("int8"));
    Value* q =
        g.Add1("quantize_linear",
               {g.AddInput("x", {DType::kF32, {kN}}), g.AddInput("s", {DType::kF32, {1}})}, attrs);
    auto r = RunOp(*q->producer, {x.data(), &scale});
    for (int64_t i = 0; i < kN; ++i) {
      const float want = std::min(std::max(std::rint(k * x[i]), -qmax - 1.0f), qmax);
      const float got = std::string(out) == "int8" ? static_cast<float>(Ptr<int8_t>(r[0])[i])
                                                   : Ptr<float>(r[0])[i];
      EXPECT_EQ(got, want) << out << " element " << i << " = " << x[i];
    }
  }
}

}  // namespace
}  // namespace tiller::cpu
