// fold_batch_norm (passes/fold_batch_norm.cc): batch norm folded into the
// convolution before it, float32 and int8.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compile/fold.h"
#include "pass_test_util.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;
using pass_test::Compared;
using pass_test::CpuHasInt8Gemms;
using pass_test::ExpectNear;
using pass_test::Random;
using pass_test::RunBothWays;

TEST(Passes, FoldBatchNormIntoConv) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 3, 9, 9}});
    auto param = [&](const char* n, const Shape& s, float lo, float hi) {
      return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng, lo, hi));
    };
    Value* y = g.Add1("conv2d", {x, param("w", {4, 3, 3, 3}, -1, 1), param("b", {4}, -1, 1)},
                      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    y = g.Add1("batch_norm",
               {y, param("scale", {4}, 0.5, 2), param("shift", {4}, -1, 1),
                param("mean", {4}, -1, 1), param("var", {4}, 0.1, 2)},
               {{"epsilon", 1e-5}});
    g.AddOutput("y", g.Add1("relu", {y}));
  };
  Compared c = RunBothWays(build, FoldBatchNorm, {2, 3, 9, 9});
  EXPECT_EQ(c.rewrites, 1);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"conv2d", "relu"}));
  // Folding reorders float operations on the weights: rounding-level changes.
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

// A batch norm that zeroes a channel (scale 0) stays after an int8
// convolution: oneDNN would need the bias divided by a zero output scale.
TEST(Passes, FoldBatchNormLeavesAnInt8ConvWhoseChannelItZeroes) {
  if (!CpuHasInt8Gemms()) GTEST_SKIP() << "no exact int8 convolutions on this CPU (no VNNI)";
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 3, 5, 5}});
    auto constant = [&](const char* n, const Shape& s, std::vector<float> v) {
      auto buf = std::make_shared<AlignedBuffer>(v.size() * sizeof(float));
      std::memcpy(buf->data(), v.data(), buf->size());
      return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, buf);
    };
    auto wq = std::make_shared<AlignedBuffer>(4 * 3 * 3 * 3);
    std::uniform_int_distribution<int> d(-127, 127);
    for (int i = 0; i < 4 * 27; ++i) wq->as<int8_t>()[i] = static_cast<int8_t>(d(rng));
    Value* sx = constant("sx", {1}, {1.0f});
    Value* xq = g.Add1("dequantize_linear", {g.Add1("quantize_linear", {x, sx}), sx});
    Value* w = g.Add1("dequantize_linear",
                      {g.AddData("w", {DType::kI8, {4, 3, 3, 3}}, ir::ValueKind::kParam, wq),
                       constant("sw", {1}, {0.05f})});
    Value* y = g.Add1("conv2d", {xq, w});
    g.AddOutput("y", g.Add1("batch_norm", {y, constant("g", {4}, {1.5f, 0.0f, 0.5f, 2.0f}),
                                           constant("b", {4}, {0.1f, 0.2f, -0.3f, 0.4f}),
                                           constant("m", {4}, {0.0f, 0.5f, -0.5f, 1.0f}),
                                           constant("v", {4}, {1.0f, 2.0f, 0.5f, 1.0f})}));
  };
  auto passes = [](Graph& g) {
    static auto host = backend::FindBackend("cpu")->CreateDevice(0, {1, 0});
    g.set_folder(compile::MakeFolder(*host));
    const int n = QuantizeConvs(g) + g.FoldDeferredOps();
    EXPECT_EQ(FoldBatchNorm(g), 0);
    return n;
  };
  Compared c = RunBothWays(build, +passes, {2, 3, 5, 5});
  EXPECT_EQ(c.ops_after,
            (std::vector<std::string>{"quantize_linear", "conv2d_int8", "batch_norm"}));
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

}  // namespace
}  // namespace tiller::passes
