// The int8 passes (passes/int8_gemm.cc): quantize_matmuls, quantize_convs and
// fuse_requantize on Paddle's quantized pairs, and when they run.
#include <gtest/gtest.h>

#include <algorithm>
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

// A matmul between a quantized activation and an int8 weight (what Paddle's
// post-training quantization writes) runs as one int8 GEMM with the bias
// and the activation fused; a second GEMM on the same activation shares its
// int8 copy; a matmul whose activation pair has two different scales, and
// the dequantized weight it reads, stay float and fold (fold_deferred); the
// first GEMM writes the int8 operand of the quantized GEMM reading it
// (fuse_requantize).
// Paddle's quantized pairs around three matmuls (see the test below).
void BuildQuantizedMatmuls(Graph& g, std::mt19937& rng) {
  Value* x = g.AddInput("x", {DType::kF32, {3, 5, 8}});
  auto scale = [&](const char* n, std::vector<float> v) {
    auto buf = std::make_shared<AlignedBuffer>(v.size() * sizeof(float));
    std::memcpy(buf->data(), v.data(), buf->size());
    return g.AddData(n, {DType::kF32, {static_cast<int64_t>(v.size())}}, ir::ValueKind::kParam,
                     buf);
  };
  auto weight = [&](const char* n, int64_t cols, int64_t rows = 8) {
    auto buf = std::make_shared<AlignedBuffer>(rows * cols);
    std::uniform_int_distribution<int> d(-127, 127);
    for (int64_t i = 0; i < rows * cols; ++i) buf->as<int8_t>()[i] = static_cast<int8_t>(d(rng));
    return g.AddData(n, {DType::kI8, {rows, cols}}, ir::ValueKind::kParam, buf);
  };
  Value* sx = scale("sx", {0.9f});
  Value* dx = g.Add1("dequantize_linear", {g.Add1("quantize_linear", {x, sx}), sx});
  Value* w1 = g.Add1("dequantize_linear",
                     {weight("w1", 6), scale("sw1", {0.5f, 0.25f, 1.f, 2.f, 0.125f, 0.75f})},
                     {{"quant_axis", int64_t{1}}});
  Value* w2 = g.Add1("dequantize_linear", {weight("w2", 4), scale("sw2", {0.3f})});
  Value* b = g.AddData("b", {DType::kF32, {6}}, ir::ValueKind::kParam, Random({6}, rng));
  Value* y1 = g.Add1("relu", {g.Add1("add", {g.Add1("matmul", {dx, w1}), b})});
  Value* y2 = g.Add1("matmul", {dx, w2});
  // Quantized with one scale, dequantized with another: not one pair.
  Value* odd =
      g.Add1("dequantize_linear", {g.Add1("quantize_linear", {x, sx}), scale("s2", {1.1f})});
  Value* y3 = g.Add1("matmul", {odd, w2});
  // The next quantized GEMM reads y1: the first writes its int8 operand.
  Value* sy = scale("sy", {2.5f});
  Value* y1q = g.Add1("dequantize_linear", {g.Add1("quantize_linear", {y1, sy}), sy});
  Value* y4 = g.Add1(
      "matmul", {y1q, g.Add1("dequantize_linear", {weight("w4", 6, 6), scale("sw4", {0.4f})})});
  g.AddOutput("y", g.Add1("concat", {y4, y2, y3}, {{"axis", int64_t{-1}}}));
}

// Without exact int8 GEMMs on the devices the int8 passes leave Paddle's
// quantized pairs alone: they run as the float32 math of the dequantized
// values, which the int8 kernels reproduce where they exist.
TEST(Passes, Int8PassesRunOnlyWhereTheDevicesMultiplyInt8) {
  for (const bool int8 : {false, true}) {
    Graph g;
    std::mt19937 rng(11);
    BuildQuantizedMatmuls(g, rng);
    static auto host = backend::FindBackend("cpu")->CreateDevice(0, {1, 0});
    g.set_folder(compile::MakeFolder(*host));
    PassContext ctx;
    ctx.int8_gemms = int8;
    int rewrites = -1;
    for (auto& pass : OptimizationPasses()) {
      const PassRecord r = RunPass(*pass, g, ctx);
      if (std::string(pass->name()) == "int8_matmul") rewrites = r.rewrites;
    }
    const auto gemms = std::count_if(g.ops().begin(), g.ops().end(),
                                     [](const auto& op) { return op->type == "linear_int8"; });
    EXPECT_EQ(rewrites, int8 ? 3 : 0);
    EXPECT_EQ(gemms, int8 ? 3 : 0);
  }
}

TEST(Passes, QuantizeMatmulsRunsInt8GemmsOnPaddlesQuantizedPairs) {
  if (!CpuHasInt8Gemms()) GTEST_SKIP() << "no exact int8 GEMMs on this CPU (no VNNI)";
  auto build = BuildQuantizedMatmuls;
  auto all = [](Graph& g) {
    // As the compiler does: a folder on the host device, the passes in order.
    static auto host = backend::FindBackend("cpu")->CreateDevice(0, {1, 0});
    g.set_folder(compile::MakeFolder(*host));
    const int quantized = QuantizeMatmuls(g);
    const int folded = g.FoldDeferredOps();
    const int fused = FuseActivation(g);
    return quantized + folded + fused + FuseRequantize(g);
  };
  Compared c = RunBothWays(build, +all, {3, 5, 8});
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"quantize_linear", "linear_int8",
                                                   "quantize_linear", "dequantize_linear", "matmul",
                                                   "linear_int8", "linear_int8", "concat"}));
  // Integer products summed exactly and rescaled once, against float
  // products of the dequantized values summed in float32: rounding.
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

// Convolutions between quantized activations and int8 filters (Paddle's
// post-training quantization of a residual block) run as int8
// convolutions, and the conv passes treat them as conv2d: a bias add,
// batch norm folded into the output scale, channel-last chain, residual
// add and relu fused, the int8 operand of the next ones written by the
// convolution itself. A grouped (depthwise) strided one, a per-tensor
// filter scale, and a pair whose halves disagree (left float) too.
TEST(Passes, QuantizeConvsRunsInt8ConvolutionsThroughTheConvPasses) {
  if (!CpuHasInt8Gemms()) GTEST_SKIP() << "no exact int8 convolutions on this CPU (no VNNI)";
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 4, 7, 7}});
    auto param = [&](const char* n, const Shape& s, float lo, float hi) {
      return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng, lo, hi));
    };
    auto filter = [&](const char* n, const Shape& s, const std::vector<float>& scale) {
      auto buf = std::make_shared<AlignedBuffer>(NumElements(s));
      std::uniform_int_distribution<int> d(-127, 127);
      for (int64_t i = 0; i < NumElements(s); ++i)
        buf->as<int8_t>()[i] = static_cast<int8_t>(d(rng));
      auto sb = std::make_shared<AlignedBuffer>(scale.size() * sizeof(float));
      std::memcpy(sb->data(), scale.data(), sb->size());
      Value* sw =
          g.AddData(std::string(n) + ".scale", {DType::kF32, {static_cast<int64_t>(scale.size())}},
                    ir::ValueKind::kParam, sb);
      return g.Add1("dequantize_linear",
                    {g.AddData(n, {DType::kI8, s}, ir::ValueKind::kParam, buf), sw},
                    {{"quant_axis", int64_t{scale.size() == 1 ? -1 : 0}}});
    };
    auto pair = [&](Value* v, float s) {
      auto sb = std::make_shared<AlignedBuffer>(sizeof(float));
      sb->as<float>()[0] = s;
      Value* sv = g.AddData("s", {DType::kF32, {1}}, ir::ValueKind::kParam, sb);
      return g.Add1("dequantize_linear", {g.Add1("quantize_linear", {v, sv}), sv});
    };
    auto bn = [&](Value* v, const std::string& n) {
      return g.Add1(
          "batch_norm",
          {v, param((n + ".g").c_str(), {4}, 0.5, 2), param((n + ".b").c_str(), {4}, -1, 1),
           param((n + ".m").c_str(), {4}, -1, 1), param((n + ".v").c_str(), {4}, 0.1, 2)});
    };
    const ir::AttrMap pad1{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
    Value* y = g.Add1(
        "conv2d", {pair(x, 1.0f), filter("w1", {4, 4, 3, 3}, {0.02f, 0.03f, 0.01f, 0.02f})}, pad1);
    y = g.Add1("relu", {bn(y, "bn1")});
    // Two convolutions read one quantized activation (one int8 copy, which
    // the first convolution writes itself: fuse_requantize). The first
    // depthwise, stride 2, with Paddle's separate [1, O, 1, 1] bias add.
    Value* yq = pair(y, 3.0f);
    Value* d = g.Add1("conv2d", {yq, filter("w2", {4, 1, 3, 3}, {0.02f})},
                      {{"strides", std::vector<int64_t>{2, 2}}, {"groups", int64_t{4}}});
    d = g.Add1("add", {d, g.Add1("reshape", {param("b2", {4}, -1, 1)},
                                 {{"shape", std::vector<int64_t>{1, 4, 1, 1}}})});
    Value* y2 = g.Add1("conv2d", {yq, filter("w3", {4, 4, 1, 1}, {0.01f, 0.02f, 0.02f, 0.01f})});
    y2 = g.Add1("relu", {g.Add1("add", {bn(y2, "bn3"), x})});
    // Quantized with one scale, dequantized with another: stays float.
    auto s2 = std::make_shared<AlignedBuffer>(sizeof(float));
    s2->as<float>()[0] = 2.0f;
    Value* odd =
        g.Add1("dequantize_linear",
               {g.Add1("quantize_linear",
                       {y2, g.AddData("s2", {DType::kF32, {1}}, ir::ValueKind::kParam, s2)}),
                param("s3", {1}, 2.5, 2.5)});
    Value* y3 = g.Add1("conv2d", {odd, filter("w4", {4, 4, 1, 1}, {0.02f})});
    auto pool = [&](Value* v) {
      return g.Add1("pool2d", {v},
                    {{"pooling_type", "max"},
                     {"ksize", std::vector<int64_t>{2, 2}},
                     {"strides", std::vector<int64_t>{2, 2}}});
    };
    g.AddOutput("y", g.Add1("concat", {pool(y3), pool(y2), d}, {{"axis", int64_t{1}}}));
  };
  // All the conv passes, and all but channels_last (NCHW int8 convolutions:
  // oneDNN's blocked layouts, reordered through the kernel's workspace).
  for (const bool channels_last : {true, false}) {
    static bool nhwc;
    nhwc = channels_last;
    auto all = [](Graph& g) {
      static auto host = backend::FindBackend("cpu")->CreateDevice(0, {1, 0});
      g.set_folder(compile::MakeFolder(*host));
      const int quantized = QuantizeConvs(g);
      EXPECT_EQ(quantized, 3);
      int n = quantized + g.FoldDeferredOps() + FuseConvBias(g) + FoldBatchNorm(g);
      if (nhwc) n += ChannelsLast(g) + FuseConvAdd(g);
      n += FuseActivation(g);
      const int requantized = FuseRequantize(g);
      EXPECT_EQ(requantized, 1);
      return n + requantized;
    };
    Compared c = RunBothWays(build, +all, {2, 4, 7, 7});
    if (channels_last) {
      EXPECT_EQ(c.ops_after, (std::vector<std::string>{
                                 "quantize_linear", "transpose", "conv2d_int8", "conv2d_int8",
                                 "transpose", "conv2d_int8", "quantize_linear", "dequantize_linear",
                                 "conv2d", "pool2d", "pool2d", "concat", "transpose"}));
    } else {
      EXPECT_EQ(c.ops_after, (std::vector<std::string>{"quantize_linear", "conv2d_int8",
                                                       "conv2d_int8", "conv2d_int8", "add", "relu",
                                                       "quantize_linear", "dequantize_linear",
                                                       "conv2d", "pool2d", "pool2d", "concat"}));
    }
    // Integer products summed exactly and rescaled once, against float
    // products of the dequantized values summed in float32: rounding. A
    // value on a rounding boundary of the second quantization would move
    // by a quantum (3 / 127): these inputs have none.
    ExpectNear(c.plain, c.rewritten, 1e-5f);
  }
}

}  // namespace
}  // namespace tiller::passes
