// Channels in blocks of 8 (backends/cpu/passes/blocked_convs.cc, conv2d's and pool2d's
// NCHW8c kernels, the transpose kernel's 32-byte rows): which chains the
// stage moves, that they compute what the NHWC chains did (on any CPU:
// oneDNN runs nChw8c convolutions everywhere), and that inference refuses
// malformed blocked ops.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/passes/cpu_passes.h"
#include "compile/driver.h"
#include "core/error.h"
#include "ir/ops/op_helpers.h"
#include "passes/pass.h"
#include "test_graphs.h"

namespace tiller::passes {
namespace {

using cpu::BlockConvChains;

using ir::Graph;
using ir::Value;
using test_util::Conv;
using test_util::Param;
using test_util::Random;

Value* Pool(Graph& g, Value* x, const char* type, std::vector<int64_t> k, std::vector<int64_t> s,
            std::vector<int64_t> p, bool adaptive = false) {
  return g.Add1("pool2d", {x},
                {{"pooling_type", std::string(type)},
                 {"ksize", std::move(k)},
                 {"strides", std::move(s)},
                 {"pads", std::move(p)},
                 {"ceil_mode", !adaptive},
                 {"adaptive", adaptive}});
}

// A ResNet stem and bottleneck (strided, 1 x 1 and 3 x 3 convolutions, a
// residual, max and global average pooling), a UNet-like concat of two
// branches, and a last convolution of 12 channels (no blocks of 8).
void Network(Graph& g, std::mt19937& rng, const Shape& in) {
  Value* x = g.AddInput("x", {DType::kF32, in});
  Value* h = g.Add1("relu", {Conv(g, x, "stem", in[1], 32, 3, rng, 2)});
  h = Pool(g, h, "max", {3, 3}, {2, 2}, {1, 1, 1, 1});
  Value* b = g.Add1("relu", {Conv(g, h, "b1", 32, 16, 1, rng)});
  b = g.Add1("relu", {Conv(g, b, "b2", 16, 16, 3, rng)});
  b = Conv(g, b, "b3", 16, 32, 1, rng);
  h = g.Add1("relu", {g.Add1("add", {b, h})});
  Value* left = g.Add1("relu", {Conv(g, h, "l", 32, 24, 3, rng)});
  Value* right = Pool(g, h, "avg", {3, 3}, {1, 1}, {1, 1, 1, 1});
  h = g.Add1("concat", {left, right}, {{"axis", int64_t{1}}});
  h = g.Add1("relu", {Conv(g, h, "mix", 56, 40, 3, rng)});
  Value* narrow = Conv(g, h, "narrow", 40, 12, 1, rng);
  Value* pooled = Pool(g, h, "avg", {1, 1}, {1, 1}, {0, 0, 0, 0}, true);
  auto flat = [&](Value* v) {
    return g.Add1("reshape", {v}, {{"shape", Shape{in[0], NumElements(v->shape()) / in[0]}}});
  };
  g.AddOutput("y", g.Add1("concat", {flat(narrow), flat(pooled)}, {{"axis", int64_t{1}}}));
}

int NhwcPasses(Graph& g) {
  return ChannelsLast(g) + FuseConvAdd(g) + FuseActivation(g);
}

int Count(const Graph& g, const std::string& type, const std::string& format = "") {
  int n = 0;
  for (const auto& op : g.ops()) {
    n += op->type == type && (format.empty() || op->GetStr("data_format") == format);
  }
  return n;
}

int RankFiveTransposes(const Graph& g) {
  int n = 0;
  for (const auto& op : g.ops()) n += op->type == "transpose" && op->inputs[0]->rank() == 5;
  return n;
}

TEST(BlockedConvs, MovesConvChainsIntoBlocksAndComputesWhatNhwcDid) {
  for (const Shape& in : {Shape{1, 3, 64, 64}, Shape{3, 3, 47, 33}}) {
    std::mt19937 rng(1);
    auto input = Random(in, rng, 1.0f);
    std::vector<float> out[2];
    for (int blocked = 0; blocked < 2; ++blocked) {
      auto g = std::make_unique<Graph>();
      std::mt19937 wrng(2);  // the same weights both times
      Network(*g, wrng, in);
      NhwcPasses(*g);
      EXPECT_EQ(Count(*g, "conv2d", "NHWC"), 7);
      if (blocked) {
        // 5 convolutions, 2 poolings, the concat of the two branches; the
        // stem (3 channels in), the 12-channel convolution and the max
        // pooling of the stem's result (a pooling never starts a chain)
        // stay NHWC.
        EXPECT_EQ(BlockConvChains(*g), 8) << ShapeToString(in);
        EXPECT_EQ(BlockConvChains(*g), 0);  // nothing NHWC left to move
        EXPECT_EQ(Count(*g, "conv2d", ir::kBlockedFormat), 5);
        EXPECT_EQ(Count(*g, "conv2d", "NHWC"), 2);
        EXPECT_EQ(Count(*g, "pool2d", ir::kBlockedFormat), 2);
        // In: the max pooling's result. Out: the narrow convolution's
        // input and the global pooling's result.
        EXPECT_EQ(RankFiveTransposes(*g), 3);
      }
      ir::Verify(*g);
      out[blocked] = test_util::RunGraph(std::move(g), *input);
    }
    double scale = 0;
    const double rel = test_util::RelativeDifference(out[0], out[1], &scale);
    // Measured 0 on AVX2 (oneDNN's nChw8c and NHWC kernels sum a window in
    // the same order there); other CPUs' kernels may order sums
    // differently: float32 rounding, well below 1e-6 of the largest output.
    // A misplaced channel or pixel differs by the outputs' own size.
    EXPECT_LE(rel, 1e-6) << ShapeToString(in);
    EXPECT_GT(scale, 0.1);
  }
}

// A squeeze-excitation gate between depthwise convolutions (which stay
// NHWC): its two 1 x 1 convolutions on a pooled vector would convert the
// large gated tensor in and the product out to save a few thousand flops.
// The two 3 x 3 convolutions after it carry their conversions.
TEST(BlockedConvs, LeavesChainsWhoseConversionsOutweighTheirWork) {
  Graph g;
  std::mt19937 rng(3);
  Value* x = g.AddInput("x", {DType::kF32, {2, 64, 28, 28}});
  auto depthwise = [&](Value* v, const std::string& name) {
    return g.Add1("conv2d", {v, Param(g, name, {64, 1, 3, 3}, rng, 0.3f)},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t{64}}});
  };
  Value* h = depthwise(x, "dw1");
  Value* s = Pool(g, h, "avg", {1, 1}, {1, 1}, {0, 0, 0, 0}, true);
  s = g.Add1("relu", {Conv(g, s, "reduce", 64, 16, 1, rng)});
  s = g.Add1("sigmoid", {Conv(g, s, "expand", 16, 64, 1, rng)});
  h = depthwise(g.Add1("mul", {h, s}), "dw2");
  h = g.Add1("relu", {Conv(g, h, "c1", 64, 64, 3, rng)});
  g.AddOutput("y", Conv(g, h, "c2", 64, 64, 3, rng));
  NhwcPasses(g);
  EXPECT_EQ(Count(g, "conv2d", "NHWC"), 6);
  EXPECT_EQ(BlockConvChains(g), 2);
  ir::Verify(g);
  for (const auto& op : g.ops()) {
    if (op->type != "conv2d") continue;
    const bool three_by_three = op->inputs[1]->shape()[1] == 64 && op->inputs[1]->shape()[2] == 3;
    EXPECT_EQ(op->GetStr("data_format"), three_by_three ? ir::kBlockedFormat : "NHWC") << op->name;
  }
}

TEST(BlockedConvs, InferenceRefusesMalformedBlockedOps) {
  Graph g;
  std::mt19937 rng(4);
  Value* x4 = g.AddInput("x4", {DType::kF32, {1, 16, 8, 8}});
  Value* x5 = g.AddInput("x5", {DType::kF32, {1, 2, 8, 8, 8}});
  Value* w = Param(g, "w", {16, 16, 3, 3}, rng, 0.1f);
  Value* w12 = Param(g, "w12", {12, 16, 3, 3}, rng, 0.1f);
  const ir::AttrMap blocked{{"data_format", std::string(ir::kBlockedFormat)},
                            {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  Value* y = g.Add1("conv2d", {x5, w}, blocked);
  EXPECT_EQ(y->shape(), (Shape{1, 2, 8, 8, 8}));
  auto refused = [&](const std::string& type, std::vector<Value*> ins, const ir::AttrMap& attrs,
                     const std::string& message) {
    try {
      g.Add1(type, std::move(ins), attrs);
      ADD_FAILURE() << type << " accepted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused("conv2d", {x4, w}, blocked, "NCHW8c needs a [N, C / 8, H, W, 8] input");
  refused("conv2d", {x5, w12}, blocked, "NCHW8c needs a [N, C / 8, H, W, 8] input");
  ir::AttrMap pool = blocked;
  pool.Set("ksize", std::vector<int64_t>{2, 2});
  pool.Set("pads", std::vector<int64_t>{0, 0, 0, 0});
  EXPECT_EQ(g.Add1("pool2d", {x5}, pool)->shape(), (Shape{1, 2, 7, 7, 8}));
  refused("pool2d", {x4}, pool, "needs a [N, C / 8, H, W, 8] input");
  ir::AttrMap deconv{{"data_format", std::string(ir::kBlockedFormat)},
                     {"output_size", std::vector<int64_t>{}}};
  refused("conv2d_transpose", {x5, w}, deconv, "data_format 'NCHW8c' is not NCHW or NHWC");
}

TEST(BlockedConvs, TheCompilerRefusesOtherChannelBlocks) {
  compile::CompileOptions o;
  o.conv_channel_block = 16;
  try {
    compile::Compiler c(o);
    FAIL() << "a block of 16 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv_channel_block must be -1, 0 or 8, got 16"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tiller::passes
