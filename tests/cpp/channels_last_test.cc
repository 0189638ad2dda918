// channels_last (passes/channels_last.cc): NCHW convolution chains switched
// to NHWC, with fuse_conv_add and fuse_activation on the result.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pass_test_util.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;
using pass_test::Compared;
using pass_test::CountOps;
using pass_test::ExpectNear;
using pass_test::Random;
using pass_test::RunBothWays;

// A small residual CNN as Paddle exports one: convolutions with batch norm,
// a residual add + relu, max pooling, a squeeze-excitation branch (adaptive
// pool, 1x1 convs, hard_sigmoid, a broadcast multiply), an average pool
// with ceil_mode, a concat and a slice, then a reshape that needs NCHW order. `fetch_inner` also
// fetches two activations inside the chain.
void ResidualCnn(Graph& g, std::mt19937& rng, bool fetch_inner) {
  auto param = [&](const char* n, const Shape& s, float lo = -0.5f, float hi = 0.5f) {
    return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng, lo, hi));
  };
  auto conv = [&](Value* x, const char* n, int64_t in, int64_t out, int64_t k, int64_t groups = 1) {
    const int64_t p = k / 2;
    return g.Add1(
        "conv2d",
        {x, param(n, {out, in / groups, k, k}), param((std::string(n) + ".b").c_str(), {out})},
        {{"pads", std::vector<int64_t>{p, p, p, p}}, {"groups", groups}});
  };
  Value* x = g.AddInput("x", {DType::kF32, {2, 3, 13, 11}});
  Value* stem = g.Add1("relu", {conv(x, "stem", 3, 8, 3)});
  Value* body = g.Add1("relu", {conv(stem, "a", 8, 8, 3, 8)});  // depthwise
  body = conv(body, "b", 8, 8, 1);
  Value* block = g.Add1("relu", {g.Add1("add", {body, stem})});
  Value* pooled = g.Add1("pool2d", {block},
                         {{"pooling_type", "max"},
                          {"ksize", std::vector<int64_t>{3, 3}},
                          {"strides", std::vector<int64_t>{2, 2}},
                          {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value* se =
      g.Add1("pool2d", {pooled},
             {{"pooling_type", "avg"}, {"ksize", std::vector<int64_t>{1, 1}}, {"adaptive", true}});
  se = g.Add1("hard_sigmoid", {conv(g.Add1("relu", {conv(se, "se1", 8, 4, 1)}), "se2", 4, 8, 1)});
  Value* scaled = g.Add1("mul", {pooled, se});
  // A skip connection's concat along channels, then a crop of rows: axes
  // the pass renumbers.
  Value* both = g.Add1("concat", {pooled, scaled}, {{"axis", int64_t{-3}}});
  both = g.Add1("slice", {both},
                {{"axes", std::vector<int64_t>{2}},
                 {"starts", std::vector<int64_t>{1}},
                 {"ends", std::vector<int64_t>{7}}});
  Value* avg = g.Add1("pool2d", {both},
                      {{"pooling_type", "avg"},
                       {"ksize", std::vector<int64_t>{2, 2}},
                       {"strides", std::vector<int64_t>{2, 2}},
                       {"ceil_mode", true},
                       {"exclusive", false}});
  g.AddOutput("y", g.Add1("reshape", {avg}, {{"shape", std::vector<int64_t>{2, 144}}}));
  if (fetch_inner) {
    g.AddOutput("block", block);
    // The residual read after its add: the fused conv adds into a copy of it.
    g.AddOutput("late", g.Add1("tanh", {stem}));
  }
}

TEST(Passes, ChannelsLastKeepsTheChainInNhwcWithTransposesOnlyAtItsEdges) {
  auto all = [](Graph& g) { return ChannelsLast(g) + FuseConvAdd(g) + FuseActivation(g); };
  for (bool fetch_inner : {false, true}) {
    auto build = [&](Graph& g, std::mt19937& rng) { ResidualCnn(g, rng, fetch_inner); };
    auto g = std::make_unique<Graph>();
    std::mt19937 rng(11);
    build(*g, rng);
    all(*g);
    for (const auto& op : g->ops()) {
      if (op->type == "conv2d" || op->type == "pool2d") {
        EXPECT_EQ(op->GetStr("data_format"), "NHWC") << op->name;
      }
    }
    Compared c = RunBothWays(build, +all, {2, 3, 13, 11});
    // In: x. Out: before the reshape, and (fetched) two inner activations.
    EXPECT_EQ(CountOps(c.ops_after, "transpose"), fetch_inner ? 4 : 2);
    EXPECT_EQ(CountOps(c.ops_after, "add"), 0);   // into conv b, with its relu
    EXPECT_EQ(CountOps(c.ops_after, "relu"), 0);  // all fused
    EXPECT_EQ(CountOps(c.ops_after, "hard_sigmoid"), 0);
    // oneDNN sums a channel-last convolution in another order: rounding.
    ExpectNear(c.plain, c.rewritten, 1e-5f);
  }
}

TEST(Passes, ChannelsLastLeavesTrainingGraphsAndOtherLayoutsAlone) {
  auto g = std::make_unique<Graph>();
  std::mt19937 rng(11);
  ResidualCnn(*g, rng, false);
  for (auto& pass : OptimizationPasses()) {
    if (std::string(pass->name()) != "channels_last") continue;
    PassContext training;
    training.training = true;
    EXPECT_EQ(pass->Run(*g, training), 0);
    EXPECT_GT(pass->Run(*g, PassContext{}), 0);
    EXPECT_EQ(pass->Run(*g, PassContext{}), 0);  // nothing NCHW is left to switch
  }
  // An elementwise op between a chain value and a tensor that broadcasts
  // differently in NHWC (a per-width [W] vector) stays NCHW.
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 3, 6, 5}});
    Value* w = g.AddData("w", {DType::kF32, {4, 3, 1, 1}}, ir::ValueKind::kParam,
                         Random({4, 3, 1, 1}, rng));
    Value* row = g.AddData("row", {DType::kF32, {5}}, ir::ValueKind::kParam, Random({5}, rng));
    g.AddOutput("y", g.Add1("add", {g.Add1("conv2d", {x, w}), row}));
  };
  Compared c = RunBothWays(build, ChannelsLast, {2, 3, 6, 5});
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"transpose", "conv2d", "transpose", "add"}));
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

// A concat of a chain value and an NCHW tensor of the same size (UNet's
// skip connection after an upsampling that stays NCHW): the NCHW tensor is
// transposed in, instead of the chain value out and the result back.
TEST(Passes, ChannelsLastTransposesInAnOperandNoBiggerThanTheChainsOnes) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 3, 6, 5}});
    Value* w = g.AddData("w", {DType::kF32, {4, 3, 1, 1}}, ir::ValueKind::kParam,
                         Random({4, 3, 1, 1}, rng));
    Value* padded = g.Add1("pad_nd", {x}, {{"pads", std::vector<int64_t>{0, 0, 0, 1, 0, 0, 0, 0}}});
    Value* both = g.Add1("concat", {g.Add1("conv2d", {x, w}), padded}, {{"axis", int64_t{1}}});
    g.AddOutput("y", g.Add1("relu", {both}));
  };
  Compared c = RunBothWays(build, ChannelsLast, {2, 3, 6, 5});
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"pad_nd", "transpose", "conv2d", "transpose",
                                                   "concat", "relu", "transpose"}));
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

// A quantized model's per-tensor quantize/dequantize pair between two
// convolutions is elementwise: the chain stays NHWC through it.
TEST(Passes, ChannelsLastKeepsPerTensorQuantizationInTheChain) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 3, 6, 5}});
    auto w = [&](const char* n, int64_t c_in) {
      return g.AddData(n, {DType::kF32, {4, c_in, 1, 1}}, ir::ValueKind::kParam,
                       Random({4, c_in, 1, 1}, rng));
    };
    auto s = std::make_shared<AlignedBuffer>(sizeof(float));
    s->as<float>()[0] = 1.5f;
    Value* scale = g.AddData("s", {DType::kF32, {1}}, ir::ValueKind::kParam, s);
    Value* y = g.Add1("conv2d", {x, w("w0", 3)});
    y = g.Add1("dequantize_linear", {g.Add1("quantize_linear", {y, scale}), scale});
    g.AddOutput("y", g.Add1("conv2d", {y, w("w1", 4)}));
  };
  Compared c = RunBothWays(build, ChannelsLast, {2, 3, 6, 5});
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"transpose", "conv2d", "quantize_linear",
                                                   "dequantize_linear", "conv2d", "transpose"}));
  // The convolutions' summation order moves values by rounding; a value
  // that lands on a rounding boundary of the quantization could move by a
  // quantum (1.5 / 127): these inputs have none.
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

// UNet's decoder: an upsampling (bilinear and nearest, Paddle's align
// modes) of a chain value joins the chain, and its skip concat stays NHWC.
TEST(Passes, ChannelsLastResamplesInsideTheChain) {
  for (const char* method : {"linear", "nearest"}) {
    for (bool align_corners : {false, true}) {
      auto build = [&](Graph& g, std::mt19937& rng) {
        Value* x = g.AddInput("x", {DType::kF32, {2, 3, 6, 5}});
        auto conv = [&](Value* in, const char* n, int64_t c_in) {
          return g.Add1("conv2d",
                        {in, g.AddData(n, {DType::kF32, {4, c_in, 1, 1}}, ir::ValueKind::kParam,
                                       Random({4, c_in, 1, 1}, rng))});
        };
        Value* down = g.Add1("pool2d", {conv(x, "w0", 3)},
                             {{"pooling_type", "max"},
                              {"ksize", std::vector<int64_t>{2, 2}},
                              {"strides", std::vector<int64_t>{2, 2}}});
        Value* up = g.Add1("interp", {down},
                           {{"method", std::string(method)},
                            {"out_size", std::vector<int64_t>{6, 5}},
                            {"ratios", std::vector<double>{align_corners ? 2.0 / 5 : 0.5,
                                                           align_corners ? 1.0 / 4 : 0.4}},
                            {"align_corners", align_corners},
                            {"align_mode", int64_t{0}}});
        Value* skip = g.Add1("concat", {conv(x, "w1", 3), up}, {{"axis", int64_t{1}}});
        g.AddOutput("y", conv(skip, "w2", 8));
      };
      Compared c = RunBothWays(build, ChannelsLast, {2, 3, 6, 5});
      EXPECT_EQ(c.ops_after, (std::vector<std::string>{"transpose", "conv2d", "pool2d", "interp",
                                                       "conv2d", "concat", "conv2d", "transpose"}))
          << method;
      // oneDNN sums channel-last convolutions in another order; the NHWC
      // resampling multiplies its two weights before summing: rounding.
      ExpectNear(c.plain, c.rewritten, 1e-5f);
    }
  }
}

}  // namespace
}  // namespace tiller::passes
