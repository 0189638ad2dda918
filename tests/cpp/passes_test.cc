// Rewrite passes: each must leave results unchanged (checked by running the
// graph before and after on the same inputs) and make the rewrite it claims.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backends/cpu/kernel.h"
#include "compile/executable.h"
#include "compile/fold.h"
#include "compile/half_fallback.h"
#include "compile/memory_plan.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;

std::shared_ptr<AlignedBuffer> Random(const Shape& shape, std::mt19937& rng, float lo = -1.f,
                                      float hi = 1.f) {
  auto buf = std::make_shared<AlignedBuffer>(NumElements(shape) * sizeof(float));
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < NumElements(shape); ++i) buf->as<float>()[i] = d(rng);
  return buf;
}

// Builds the graph twice (so each copy owns its values), runs one copy as is
// and the other after `pass`, and returns both outputs plus the op types left.
struct Compared {
  std::vector<float> plain, rewritten;
  std::vector<std::string> ops_after;
  int rewrites = 0;
};

template <typename Build>
Compared RunBothWays(Build build, int (*pass)(Graph&), const Shape& in_shape) {
  std::mt19937 rng(7);
  auto input = Random(in_shape, rng);
  Compared c;
  for (int rewritten = 0; rewritten < 2; ++rewritten) {
    auto g = std::make_unique<Graph>();
    std::mt19937 wrng(11);  // same weights both times
    build(*g, wrng);
    if (rewritten) {
      c.rewrites = pass(*g);
      ir::Verify(*g);
      for (const auto& op : g->ops()) c.ops_after.push_back(op->type);
    }
    auto exe = compile::Executable::Build(std::move(g), {});
    std::memcpy(exe->inputs()[0].data, input->data(), input->size());
    exe->Run();
    const auto& out = exe->outputs()[0];
    const float* p = static_cast<const float*>(out.data);
    (rewritten ? c.rewritten : c.plain).assign(p, p + NumElements(out.type.shape));
  }
  return c;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.f, std::abs(a[i]))) << i;
}

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

int CountOps(const std::vector<std::string>& ops, const std::string& type) {
  return static_cast<int>(std::count(ops.begin(), ops.end(), type));
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

// oneDNN's int8 GEMMs and convolutions are exact only with VNNI; without it
// the CPU backend has no int8 kernels (the int8 passes then do not run).
bool CpuHasInt8Gemms() {
  return compile::BackendMultipliesInt8(*backend::FindBackend("cpu"));
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

TEST(Passes, FuseConvBiasTakesAPerChannelConstantAddThenBatchNormFolds) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 3, 7, 7}});
    auto param = [&](const char* n, const Shape& s, float lo, float hi) {
      return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng, lo, hi));
    };
    Value* y = g.Add1("conv2d", {x, param("w", {4, 3, 3, 3}, -1, 1)});
    // Paddle's form: the [O] bias reshaped to [1, O, 1, 1].
    Value* b =
        g.Add1("reshape", {param("b", {4}, -1, 1)}, {{"shape", std::vector<int64_t>{1, 4, 1, 1}}});
    y = g.Add1("add", {y, b});
    y = g.Add1("batch_norm", {y, param("scale", {4}, 0.5, 2), param("shift", {4}, -1, 1),
                              param("mean", {4}, -1, 1), param("var", {4}, 0.1, 2)});
    // A [W] row is no channel bias: kept.
    y = g.Add1("conv2d", {y, param("w2", {4, 4, 1, 1}, -1, 1)});
    g.AddOutput("y", g.Add1("add", {y, param("row", {5}, -1, 1)}));
  };
  auto both = [](Graph& g) { return FuseConvBias(g) + FoldBatchNorm(g); };
  Compared c = RunBothWays(build, +both, {2, 3, 7, 7});
  EXPECT_EQ(c.rewrites, 2);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"conv2d", "conv2d", "add"}));
  ExpectNear(c.plain, c.rewritten, 1e-5f);
}

// A transformer's attention on [batch, seq, heads, head_dim] activations:
// heads split by transpose [0, 2, 1, 3] before both matmuls and merged after.
void Attention(Graph& g, std::mt19937& rng, const std::vector<int64_t>& k_perm, bool q_read_twice,
               const std::vector<int64_t>& heads = {0, 2, 1, 3}) {
  const Shape s{2, 5, 3, 4};
  Value* x = g.AddInput("x", {DType::kF32, s});
  Value* k =
      g.Add1("add", {x, g.AddData("ck", {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng))});
  Value* v =
      g.Add1("mul", {x, g.AddData("cv", {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng))});
  Value* qt = g.Add1("transpose", {x}, {{"perm", heads}});
  Value* kt = g.Add1("transpose", {k}, {{"perm", k_perm}});
  Value* vt = g.Add1("transpose", {v}, {{"perm", heads}});
  // k_perm [0, 2, 3, 1] gives K^T already: no transpose_b then.
  const bool kt_is_transposed = k_perm.back() != 3;
  Value* scores = g.Add1("matmul", {qt, kt}, {{"transpose_b", !kt_is_transposed}});
  Value* probs = g.Add1("softmax", {scores}, {{"axis", int64_t{-1}}});
  Value* ctx = g.Add1("transpose", {g.Add1("matmul", {probs, vt})}, {{"perm", heads}});
  if (q_read_twice) ctx = g.Add1("add", {ctx, g.Add1("transpose", {qt}, {{"perm", heads}})});
  g.AddOutput("y", ctx);
}

TEST(Passes, FoldTransposeIntoMatmulReadsAndWritesThroughStrides) {
  Compared c = RunBothWays(
      [](Graph& g, std::mt19937& rng) {
        Attention(g, rng, {0, 2, 1, 3}, false);
      },
      FoldTransposeIntoMatmul, {2, 5, 3, 4});
  // q, k, v into the matmuls, and the merge of the heads out of the second.
  EXPECT_EQ(c.rewrites, 4);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"add", "mul", "matmul", "softmax", "matmul"}));
  // The same GEMMs over the same numbers, through other strides.
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

TEST(Passes, FoldTransposeTakesPermutationsWithNegativeAxes) {
  // transpose accepts axes counted from the end (as Paddle's does); the
  // matmul gets the permutation normalized.
  Compared c = RunBothWays(
      [](Graph& g, std::mt19937& rng) {
        Attention(g, rng, {0, 2, 1, 3}, false, {0, -2, 1, -1});
      },
      FoldTransposeIntoMatmul, {2, 5, 3, 4});
  EXPECT_EQ(c.rewrites, 4);
  EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "transpose"), 0);
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

TEST(Passes, FoldTransposeLeavesTransposesOtherOpsNeedOrThatMoveTheRows) {
  // K transposed [0, 2, 3, 1] (its rows become columns: not a strided row
  // read), and q's transpose read by an add too: both stay.
  Compared c = RunBothWays(
      [](Graph& g, std::mt19937& rng) {
        Attention(g, rng, {0, 2, 3, 1}, true);
      },
      FoldTransposeIntoMatmul, {2, 5, 3, 4});
  EXPECT_EQ(c.rewrites, 2);  // v in, the heads' merge out
  EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "transpose"), 3);
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

TEST(Passes, FuseLinearThenActivation) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {2, 5, 8}});
    Value* w = g.AddData("w", {DType::kF32, {8, 6}}, ir::ValueKind::kParam, Random({8, 6}, rng));
    Value* b = g.AddData("b", {DType::kF32, {6}}, ir::ValueKind::kParam, Random({6}, rng));
    Value* y = g.Add1("add", {g.Add1("matmul", {x, w}), b});
    g.AddOutput("y", g.Add1("gelu", {y}));
  };
  Compared lin = RunBothWays(build, FuseLinear, {2, 5, 8});
  EXPECT_EQ(lin.ops_after, (std::vector<std::string>{"linear", "gelu"}));
  ExpectNear(lin.plain, lin.rewritten, 1e-5f);
  auto both = [](Graph& g) { return FuseLinear(g) + FuseActivation(g); };
  Compared all = RunBothWays(build, +both, {2, 5, 8});
  EXPECT_EQ(all.ops_after, (std::vector<std::string>{"linear"}));
  EXPECT_EQ(all.rewrites, 2);
  ExpectNear(all.plain, all.rewritten, 1e-5f);
}

// Training's matmul + bias: W and b computed at run time (here from the
// input) fuse into linear when there is a bias add; a bare matmul of a
// variable W stays.
TEST(Passes, FuseLinearTakesAVariableWeightWithABias) {
  for (bool with_bias : {true, false}) {
    auto build = [with_bias](Graph& g, std::mt19937&) {
      Value* t = g.AddInput("t", {DType::kF32, {6, 6}});
      Value* w = g.Add1("relu", {t});
      Value* y = g.Add1("matmul", {t, w});
      if (with_bias)
        y = g.Add1("add", {y, g.Add1("reduce_sum", {t}, {{"axes", std::vector<int64_t>{0}}})});
      g.AddOutput("y", g.Add1("tanh", {y}));
    };
    Compared c = RunBothWays(build, FuseLinear, {6, 6});
    EXPECT_EQ(c.rewrites, with_bias ? 1 : 0);
    EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "linear"), with_bias ? 1 : 0);
    ExpectNear(c.plain, c.rewritten, 1e-6f);
  }
}

// A post-LN transformer block's two residual adds: into a projection's
// result as oneDNN writes it. The residual's storage becomes the result's
// (the in-place path: h, last read by the add), or is copied first (the
// graph's input x; h again when a later op still reads it).
TEST(Passes, FuseLinearResidualAddsTheResidualInTheGemm) {
  for (bool late_read : {false, true}) {
    auto build = [late_read](Graph& g, std::mt19937& rng) {
      auto param = [&](const char* n, const Shape& s) {
        return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng));
      };
      Value* x = g.AddInput("x", {DType::kF32, {3, 5, 16}});
      Value* h =
          g.Add1("add", {g.Add1("linear", {x, param("w1", {16, 16}), param("b1", {16})}), x});
      h = g.Add1("layer_norm", {h});
      Value* up = g.Add1("linear", {h, param("w2", {16, 32}), param("b2", {32})},
                         {{"activation", std::string("gelu")}});
      Value* y =
          g.Add1("add", {h, g.Add1("linear", {up, param("w3", {32, 16}), param("b3", {16})})});
      y = g.Add1("layer_norm", {y});
      if (late_read) y = g.Add1("mul", {y, h});
      g.AddOutput("y", y);
    };
    Compared c = RunBothWays(build, FuseLinearResidual, {3, 5, 16});
    EXPECT_EQ(c.rewrites, 2);
    EXPECT_EQ(CountOps(c.ops_after, "add"), 0);
    // The GEMM adds its bias, then the residual: the unfused order.
    ExpectNear(c.plain, c.rewritten, 1e-6f);
    // Which of the two took its residual's storage: the second, when
    // nothing reads h after it; never the first (x is the graph's input).
    Graph g;
    std::mt19937 rng(11);
    build(g, rng);
    FuseLinearResidual(g);
    const compile::MemoryPlan plan = compile::PlanMemory(g, std::vector<size_t>(g.ops().size(), 0));
    std::vector<bool> in_place;
    for (const auto& op : g.ops()) {
      if (op->type == "linear" && op->inputs.size() == 4) {
        auto alias = plan.alias_of.find(op->outputs[0]);
        in_place.push_back(alias != plan.alias_of.end() && alias->second == op->inputs[3]);
      }
    }
    EXPECT_EQ(in_place, (std::vector<bool>{false, !late_read}));
  }
}

// Left alone: a linear with a fused activation (add after it), a residual
// broadcast along rows, a linear without a bias.
TEST(Passes, FuseLinearResidualNeedsABiasNoActivationAndTheResultsShape) {
  auto build = [](Graph& g, std::mt19937& rng) {
    auto param = [&](const char* n, const Shape& s) {
      return g.AddData(n, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng));
    };
    Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
    Value* a = g.Add1("add", {g.Add1("linear", {x, param("w1", {8, 8}), param("b1", {8})},
                                     {{"activation", std::string("relu")}}),
                              x});
    Value* row = g.Add1("reduce_sum", {a}, {{"axes", std::vector<int64_t>{0}}});
    Value* b = g.Add1("add", {g.Add1("linear", {a, param("w2", {8, 8}), param("b2", {8})}), row});
    Value* c = g.Add1("add", {g.Add1("linear", {b, param("w3", {8, 8})}), b});
    g.AddOutput("y", c);
  };
  Compared c = RunBothWays(build, FuseLinearResidual, {4, 8});
  EXPECT_EQ(c.rewrites, 0);
  ExpectNear(c.plain, c.rewritten, 0.f);
}

TEST(Passes, NoFusionWhenIntermediateIsAlsoAnOutput) {
  auto build = [](Graph& g, std::mt19937& rng) {
    Value* x = g.AddInput("x", {DType::kF32, {4, 8}});
    Value* w = g.AddData("w", {DType::kF32, {8, 3}}, ir::ValueKind::kParam, Random({8, 3}, rng));
    Value* lin = g.Add1("linear", {x, w});
    g.AddOutput("y", g.Add1("relu", {lin}));
    g.AddOutput("pre", lin);  // the pre-activation is fetched too
  };
  Compared c = RunBothWays(build, FuseActivation, {4, 8});
  EXPECT_EQ(c.rewrites, 0);
  ExpectNear(c.plain, c.rewritten, 0.f);
}

// Attention's q * 2^-3 before q·kᵀ: folded into the matmul's alpha, bit for
// bit; a scale that is not a power of two (rounding would move) is kept.
TEST(Passes, FoldScaleIntoMatmulExactlyForPowersOfTwo) {
  for (double s : {0.125, 0.1}) {
    auto build = [s](Graph& g, std::mt19937& rng) {
      Value* q = g.AddInput("q", {DType::kF32, {2, 3, 5, 8}});
      Value* k = g.AddData("k", {DType::kF32, {2, 3, 5, 8}}, ir::ValueKind::kConstant,
                           Random({2, 3, 5, 8}, rng));
      Value* scaled = g.Add1("scale", {q}, {{"scale", s}, {"bias", 0.0}});
      g.AddOutput("att", g.Add1("matmul", {scaled, k}, {{"transpose_b", true}}));
    };
    Compared c = RunBothWays(build, FoldScaleIntoMatmul, {2, 3, 5, 8});
    if (s == 0.125) {
      EXPECT_EQ(c.rewrites, 1);
      EXPECT_EQ(c.ops_after, (std::vector<std::string>{"matmul"}));
      EXPECT_EQ(c.plain, c.rewritten);
    } else {
      EXPECT_EQ(c.rewrites, 0);
    }
  }
}

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

// A training graph reads attention's scaled q and its heads in the forward
// and the backward matmuls: a scale or transpose every reader of which is a
// matmul folds into all of them; a matmul's only reader that is a power-of-
// two scale folds into it. Powers of two: bit for bit.
TEST(Passes, FoldScaleAndTransposeIntoEveryMatmulReadingThem) {
  auto constant = [](Graph& g, std::mt19937& rng) {
    return g.AddData("k", {DType::kF32, {2, 3, 5, 8}}, ir::ValueKind::kConstant,
                     Random({2, 3, 5, 8}, rng));
  };
  auto scaled_q = [&](Graph& g, std::mt19937& rng) {
    Value* q = g.AddInput("q", {DType::kF32, {2, 3, 5, 8}});
    Value* scaled = g.Add1("scale", {q}, {{"scale", 0.125}, {"bias", 0.0}});
    Value* scores = g.Add1("matmul", {scaled, constant(g, rng)}, {{"transpose_b", true}});
    g.AddOutput("ctx", g.Add1("matmul", {scores, scaled}));  // scaled read twice
  };
  Compared c = RunBothWays(scaled_q, FoldScaleIntoMatmul, {2, 3, 5, 8});
  EXPECT_EQ(c.rewrites, 1);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"matmul", "matmul"}));
  EXPECT_EQ(c.plain, c.rewritten);

  auto scaled_product = [&](Graph& g, std::mt19937& rng) {
    Value* q = g.AddInput("q", {DType::kF32, {2, 3, 5, 8}});
    Value* p = g.Add1("matmul", {q, constant(g, rng)}, {{"transpose_b", true}});
    g.AddOutput("p", g.Add1("scale", {p}, {{"scale", 0.25}, {"bias", 0.0}}));
  };
  c = RunBothWays(scaled_product, FoldScaleIntoMatmul, {2, 3, 5, 8});
  EXPECT_EQ(c.rewrites, 1);
  EXPECT_EQ(c.ops_after, (std::vector<std::string>{"matmul"}));
  EXPECT_EQ(c.plain, c.rewritten);

  for (bool other_reader : {false, true}) {
    auto heads = [&](Graph& g, std::mt19937& rng) {
      Value* x = g.AddInput("x", {DType::kF32, {2, 5, 3, 8}});
      Value* t = g.Add1("transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
      Value* scores = g.Add1("matmul", {t, constant(g, rng)}, {{"transpose_b", true}});
      Value* ctx = g.Add1("matmul", {scores, t});
      g.AddOutput("ctx", other_reader ? g.Add1("add", {ctx, g.Add1("relu", {t})}) : ctx);
    };
    c = RunBothWays(heads, FoldTransposeIntoMatmul, {2, 5, 3, 8});
    EXPECT_EQ(std::count(c.ops_after.begin(), c.ops_after.end(), "transpose"),
              other_reader ? 1 : 0);
    ExpectNear(c.plain, c.rewritten, 1e-6f);
  }
}

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

// A transformer's attention block as Paddle exports it: three projections of
// x, heads split by reshape + transpose, scores scaled by alpha, an additive
// mask, softmax, the context merged back, an output projection.
struct AttentionSpec {
  int64_t batch = 2, seq = 5, heads = 3, head_dim = 4;
  Shape mask;          // empty: no mask
  int64_t kv_seq = 0;  // > 0: k and v project x's first kv_seq rows (cross-attention)
  bool fetch_probs = false;
  bool loaded = false;   // the parameters carry origins, as weights read from a file
  bool scale_q = false;  // 1/sqrt(head_dim) as Paddle's scale op on q's heads, not alpha
};

void TransformerAttention(Graph& g, std::mt19937& rng, const AttentionSpec& a) {
  const int64_t width = a.heads * a.head_dim;
  Value* x = g.AddInput("x", {DType::kF32, {a.batch, a.seq, width}});
  Value* kv_in = x;
  const int64_t sk = a.kv_seq ? a.kv_seq : a.seq;
  if (a.kv_seq)
    kv_in = g.Add1("slice", {x},
                   {{"axes", std::vector<int64_t>{1}},
                    {"starts", std::vector<int64_t>{0}},
                    {"ends", std::vector<int64_t>{a.kv_seq}}});
  uint64_t origin = 0x7e57'a000;
  auto param = [&](const std::string& name, const Shape& s, float scale) {
    auto data = Random(s, rng, -scale, scale);
    if (a.loaded) data->set_origin(++origin);
    return g.AddData(name, {DType::kF32, s}, ir::ValueKind::kParam, data);
  };
  auto heads = [&](Value* in, const std::string& name, int64_t len) {
    Value* y = g.Add1("linear", {in, param(name + ".w", {width, width}, 0.5f),
                                 param(name + ".b", {width}, 0.5f)});
    y = g.Add1("reshape", {y},
               {{"shape", std::vector<int64_t>{a.batch, len, a.heads, a.head_dim}}});
    return g.Add1("transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  Value* q = heads(x, "q", a.seq);
  Value* k = heads(kv_in, "k", sk);
  Value* v = heads(kv_in, "v", sk);
  const double s = 1.0 / std::sqrt(double(a.head_dim));
  if (a.scale_q) q = g.Add1("scale", {q}, {{"scale", s}, {"bias", 0.0}});
  Value* scores = g.Add1("matmul", {q, k}, {{"transpose_b", true}, {"alpha", a.scale_q ? 1.0 : s}});
  if (!a.mask.empty()) {
    // 0 or -10000 (a padded position), as BERT's mask.
    auto m = Random(a.mask, rng);
    for (int64_t i = 0; i < NumElements(a.mask); ++i)
      m->as<float>()[i] = m->as<float>()[i] < -0.5f ? -10000.f : 0.f;
    scores =
        g.Add1("add", {scores, g.AddData("mask", {DType::kF32, a.mask}, ir::ValueKind::kParam, m)});
  }
  Value* probs = g.Add1("softmax", {scores}, {{"axis", int64_t{-1}}});
  Value* ctx = g.Add1("transpose", {g.Add1("matmul", {probs, v})},
                      {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ctx = g.Add1("reshape", {ctx}, {{"shape", std::vector<int64_t>{a.batch, a.seq, width}}});
  g.AddOutput("y", g.Add1("linear", {ctx, param("o.w", {width, width}, 0.5f)}));
  if (a.fetch_probs) g.AddOutput("probs", probs);
}

int FoldFuseMerge(Graph& g) {
  return FoldTransposeIntoMatmul(g) + FuseAttention(g) + MergeQkv(g);
}

size_t Count(const std::vector<std::string>& ops, const std::string& type) {
  return static_cast<size_t>(std::count(ops.begin(), ops.end(), type));
}

TEST(Passes, FuseAttentionAndMergeQkvGiveTheUnfusedResults) {
  // Masks of every broadcast BERT-like models use, and none; 70 positions
  // make two query blocks (64 + 6 rows) and rows that end in a partial
  // vector; head_dim 20 is a full tile plus a tail on AVX2.
  const std::vector<AttentionSpec> specs = {
      {},
      {2, 5, 3, 4, {2, 1, 1, 5}},
      {2, 5, 3, 4, {1, 1, 5, 5}},
      {2, 5, 3, 4, {2, 3, 5, 5}},
      {1, 70, 2, 20, {1, 1, 1, 70}},
      {3, 9, 4, 8, {9}},
  };
  for (const AttentionSpec& a : specs) {
    Compared c = RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, a); },
                             FoldFuseMerge, {a.batch, a.seq, a.heads * a.head_dim});
    SCOPED_TRACE(ShapeToString(a.mask) + " seq " + std::to_string(a.seq));
    // One attention op reading one projection three times as wide.
    EXPECT_EQ(Count(c.ops_after, "attention"), 1u);
    EXPECT_EQ(Count(c.ops_after, "linear"), 2u);
    EXPECT_EQ(Count(c.ops_after, "softmax") + Count(c.ops_after, "matmul") +
                  Count(c.ops_after, "transpose") + Count(c.ops_after, "add"),
              0u);
    // Float sums in another order (the softmax's 1/sum after the product):
    // a few ulps of the outputs' O(1) magnitudes.
    ExpectNear(c.plain, c.rewritten, 2e-5f);
  }
}

TEST(Passes, FuseAttentionTakesTheScaleOfQueriesWhoseHeadDimIsNoPowerOfFour) {
  // Paddle's MultiHeadAttention scales q by head_dim^-0.5: for head_dim 8 a
  // scale op fold_scale cannot fold exactly, between q's transpose and the
  // matmul. The fusion takes it as alpha.
  AttentionSpec a{2, 5, 3, 8, {2, 1, 1, 5}};
  a.scale_q = true;
  Compared c = RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, a); },
                           FoldFuseMerge, {2, 5, 24});
  EXPECT_EQ(Count(c.ops_after, "attention"), 1u);
  EXPECT_EQ(Count(c.ops_after, "scale") + Count(c.ops_after, "transpose"), 0u);
  EXPECT_EQ(Count(c.ops_after, "linear"), 2u);
  ExpectNear(c.plain, c.rewritten, 2e-5f);
}

TEST(Passes, FuseAttentionTakesCrossAttentionAndLeavesFetchedProbabilities) {
  // k and v from 3 of x's 5 positions: fused (Sq 5, Sk 3), but the
  // projections read different inputs, so they stay three.
  AttentionSpec cross{2, 5, 3, 4, {2, 1, 1, 3}, 3};
  Compared c =
      RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, cross); },
                  FoldFuseMerge, {2, 5, 12});
  EXPECT_EQ(Count(c.ops_after, "attention"), 1u);
  EXPECT_EQ(Count(c.ops_after, "linear"), 4u);
  ExpectNear(c.plain, c.rewritten, 2e-5f);
  // Probabilities fetched: the softmax must stay, so nothing fuses.
  AttentionSpec fetched{2, 5, 3, 4, {2, 1, 1, 5}, 0, true};
  c = RunBothWays([&](Graph& g, std::mt19937& rng) { TransformerAttention(g, rng, fetched); },
                  FoldFuseMerge, {2, 5, 12});
  EXPECT_EQ(Count(c.ops_after, "attention"), 0u);
  EXPECT_EQ(Count(c.ops_after, "softmax"), 1u);
  ExpectNear(c.plain, c.rewritten, 1e-6f);
}

// The merged projection of weights loaded from a file has an origin derived
// from theirs: the same in every graph built from them (a predictor's other
// input shapes, its clones), so they share one packed copy of it.
TEST(Passes, MergeQkvGivesTheMergedWeightAnOriginDerivedFromTheLoadedOnes) {
  auto merged_origins = [](bool loaded) {
    Graph g;
    std::mt19937 rng(11);
    AttentionSpec a;
    a.loaded = loaded;
    TransformerAttention(g, rng, a);
    EXPECT_EQ(FoldFuseMerge(g), 4 + 1 + 1);  // 3 transposes in, 1 out; 1 fusion; 1 merge
    std::vector<uint64_t> origins;
    for (const auto& op : g.ops()) {
      if (op->type == "linear" && op->inputs[1]->shape()[1] == 36)
        for (size_t i = 1; i < op->inputs.size(); ++i)
          origins.push_back(op->inputs[i]->data->origin());
    }
    return origins;
  };
  const std::vector<uint64_t> first = merged_origins(true), second = merged_origins(true);
  ASSERT_EQ(first.size(), 2u);  // weight and bias
  EXPECT_NE(first[0], 0u);
  EXPECT_NE(first[1], 0u);
  EXPECT_NE(first[0], first[1]);
  EXPECT_EQ(first, second);
  // Weights of no known origin give a merged weight of none (packed per kernel).
  EXPECT_EQ(merged_origins(false), (std::vector<uint64_t>{0, 0}));
  // A derived origin is never one handed out for loaded bytes.
  EXPECT_GT(AlignedBuffer::NewOrigin(), std::max(first[0], first[1]));
}

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

// bucket_all_reduce: a bucket closes before the first reader of one of its
// results, and only reductions that agree (scale, dtype, placement) share a
// message.
TEST(Passes, BucketAllReduceMergesWhatAgreesAndClosesBeforeAReader) {
  Graph g;
  Value* x1 = g.AddInput("x1", {DType::kF32, {4}});
  Value* x2 = g.AddInput("x2", {DType::kF32, {2, 3}});
  Value* x3 = g.AddInput("x3", {DType::kF32, {5}});
  Value* x4 = g.AddInput("x4", {DType::kF32, {7}});
  Value* x5 = g.AddInput("x5", {DType::kF64, {3}});
  auto reduce = [&](Value* x, double scale) {
    return g.Add1("all_reduce", {x}, {{"reduction", "sum"}, {"scale", scale}});
  };
  Value* a1 = reduce(x1, 0.5);
  Value* a2 = reduce(x2, 0.5);
  g.AddOutput("r", g.Add1("relu", {a1}));  // a1, a2's bucket closes here
  Value* a3 = reduce(x3, 0.5);
  Value* a4 = reduce(x4, 0.25);  // another scale
  Value* a5 = reduce(x5, 0.5);   // another dtype
  Value* a6 = reduce(x1, 0.5);
  for (Value* v : {a2, a3, a4, a5, a6}) g.AddOutput("o", v);
  EXPECT_EQ(BucketAllReduce(g, 1 << 20), 4);
  std::vector<std::vector<std::string>> messages;
  for (const auto& op : g.ops()) {
    if (op->type != "all_reduce") continue;
    auto& names = messages.emplace_back();
    for (const Value* in : op->inputs) names.push_back(in->name);
  }
  using V = std::vector<std::string>;
  EXPECT_EQ(messages, (std::vector<V>{{"x1", "x2"}, {"x4"}, {"x5"}, {"x3", "x1"}}));
  // The relu reads the bucket's first result, placed before it.
  const ir::Op* relu = g.outputs()[0].second->producer;
  ASSERT_EQ(relu->type, "relu");
  EXPECT_EQ(relu->inputs[0]->producer->inputs.size(), 2u);
  // A bucket too small for two gradients leaves them apart.
  Graph h;
  Value* y1 = h.AddInput("y1", {DType::kF32, {4}});
  Value* y2 = h.AddInput("y2", {DType::kF32, {4}});
  h.AddOutput("o", h.Add1("all_reduce", {y1}));
  h.AddOutput("p", h.Add1("all_reduce", {y2}));
  EXPECT_EQ(BucketAllReduce(h, 31), 0);
  EXPECT_EQ(BucketAllReduce(h, 32), 2);
}

// overlap_all_reduce: a reduction of backward-phase gradients starts right
// after the last of them, in the backward phase; the update waits where the
// all_reduce was. Any other collective (here an accumulator's reduction)
// keeps every reduction whole.
TEST(Passes, OverlapAllReduceStartsAfterTheLastGradientAndWaitsInTheUpdate) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {4}});
  Value* acc = g.AddState("acc", {DType::kF32, {3}});
  ir::Placement back;
  back.phase = ir::Phase::kBackward;
  ir::Placement update;
  update.phase = ir::Phase::kUpdate;
  Value *g1, *g2, *late;
  {
    ir::ScopedPlacement p(g, back);
    g1 = g.Add1("relu", {x});
    g2 = g.Add1("scale", {x}, {{"scale", 2.0}});
    late = g.Add1("tanh", {x});  // more backward work after the gradients
  }
  ir::ScopedPlacement p(g, update);
  ir::Op* both = g.AddOp("all_reduce", {g1, g2}, {{"scale", 0.5}});
  Value* of_state = g.Add1("all_reduce", {acc});
  g.AddOutput("a", g.Add1("add", {both->outputs[0], late}));
  g.AddOutput("b", both->outputs[1]);
  g.AddOutput("c", of_state);
  // With an all_reduce of a state beside it, nothing is split: the state's
  // reduction runs on the device's stream and could meet the one in flight.
  EXPECT_EQ(OverlapAllReduce(g), 0);
  g.ReplaceAllUses(of_state, acc);
  g.RemoveDeadCode();
  EXPECT_EQ(OverlapAllReduce(g), 1);
  std::vector<std::string> order;
  for (const auto& op : g.ops()) order.push_back(op->type);
  EXPECT_EQ(order, (std::vector<std::string>{"relu", "scale", "all_reduce_start", "tanh",
                                             "all_reduce_wait", "add"}));
  const ir::Op* start = g.ops()[2].get();
  EXPECT_EQ(start->placement.phase, ir::Phase::kBackward);
  EXPECT_EQ(start->outputs[0]->shape(), (Shape{8}));
  EXPECT_DOUBLE_EQ(start->GetFloat("scale"), 0.5);
  const ir::Op* wait = g.ops()[4].get();
  EXPECT_EQ(wait->placement.phase, ir::Phase::kUpdate);
  EXPECT_EQ(g.outputs()[1].second, wait->outputs[1]);
  EXPECT_EQ(wait->outputs[1]->shape(), (Shape{4}));
}

}  // namespace
}  // namespace tiller::passes
