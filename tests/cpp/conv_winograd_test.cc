// Winograd convolutions (backends/cpu/passes/conv_winograd.cc and conv2d's CPU kernel):
// which convolutions the pass chooses, that the kernel runs oneDNN's
// Winograd algorithm for them in every layout the conv passes leave (NCHW,
// NHWC, NHWC with a fused residual and relu) and that its results are the
// direct convolution's within float32 rounding, and that conv2d's
// inference refuses the attribute where the algorithm does not apply.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/dnnl_context.h"
#include "backends/cpu/kernel.h"
#include "backends/cpu/passes/cpu_passes.h"
#include "compile/executable.h"
#include "core/error.h"
#include "passes/pass.h"
#include "test_graphs.h"

namespace tiller::passes {
namespace {

using cpu::ChooseWinogradConvs;

using ir::Graph;
using ir::Value;

using test_util::Conv;
using test_util::Param;
using test_util::Random;
using test_util::RunKernel;

// ResNet-18's basic block: conv3x3 -> relu -> conv3x3 -> add(x) -> relu.
void BasicBlock(Graph& g, std::mt19937& rng, const Shape& in) {
  Value* x = g.AddInput("x", {DType::kF32, in});
  const int64_t c = in[1];
  Value* h = g.Add1("relu", {Conv(g, x, "c1", c, c, 3, rng)});
  h = Conv(g, h, "c2", c, c, 3, rng);
  g.AddOutput("y", g.Add1("relu", {g.Add1("add", {h, x})}));
}

std::vector<std::string> Algorithms(const Graph& g) {
  std::vector<std::string> out;
  for (const auto& op : g.ops()) {
    if (op->type == "conv2d") out.push_back(op->GetStr("algorithm"));
  }
  return out;
}

TEST(ConvWinograd, ChoosesThreeByThreeFloat32ConvsOfStrideOneWithEnoughChannels) {
  Graph g;
  std::mt19937 rng(3);
  Value* x = g.AddInput("x", {DType::kF32, {1, 64, 16, 16}});
  Value* w_in = g.AddInput("w", {DType::kF32, {64, 64, 3, 3}});
  std::vector<Value*> ys{
      Conv(g, x, "yes", 64, 64, 3, rng),
      Conv(g, x, "pointwise", 64, 64, 1, rng),
      Conv(g, x, "strided", 64, 64, 3, rng, 2),
      Conv(g, x, "grouped", 64, 64, 3, rng, 1, 2),
      Conv(g, x, "dilated", 64, 64, 3, rng, 1, 1, 2),
      Conv(g, x, "narrow_out", 64, 16, 3, rng),
      g.Add1("conv2d", {x, w_in}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}),  // variable filter
  };
  for (size_t i = 0; i < ys.size(); ++i) g.AddOutput("y" + std::to_string(i), ys[i]);
  EXPECT_EQ(ChooseWinogradConvs(g), 1);
  ir::Verify(g);
  EXPECT_EQ(Algorithms(g), (std::vector<std::string>{"winograd", "direct", "direct", "direct",
                                                     "direct", "direct", "direct"}));
  EXPECT_EQ(ChooseWinogradConvs(g), 0);  // chosen once
}

TEST(ConvWinograd, ConvInferenceRefusesWinogradWhereItDoesNotApply) {
  Graph g;
  std::mt19937 rng(4);
  Value* x = g.AddInput("x", {DType::kF32, {1, 32, 8, 8}});
  Value* w3 = Param(g, "w3", {32, 32, 3, 3}, rng, 0.1f);
  Value* w1 = Param(g, "w1", {32, 32, 1, 1}, rng, 0.1f);
  auto attrs = [](const char* algorithm, int64_t stride) {
    return ir::AttrMap{{"algorithm", std::string(algorithm)},
                       {"strides", std::vector<int64_t>{stride, stride}}};
  };
  EXPECT_NO_THROW(g.Add1("conv2d", {x, w3}, attrs("winograd", 1)));
  EXPECT_THROW(g.Add1("conv2d", {x, w3}, attrs("winograd", 2)), Error);
  EXPECT_THROW(g.Add1("conv2d", {x, w1}, attrs("winograd", 1)), Error);
  try {
    g.Add1("conv2d", {x, w3}, attrs("fft", 1));
    FAIL() << "an unknown algorithm was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("algorithm 'fft'"), std::string::npos) << e.what();
  }
}

// The block run as built (direct, NCHW), and after `rewrite`; returns the
// largest difference relative to the largest output.
double RewriteDifference(const Shape& in, int (*rewrite)(Graph&), size_t* winograd_kernels) {
  std::mt19937 rng(9);
  auto input = Random(in, rng, 1.0f);
  std::vector<float> out[2];
  for (int rewritten = 0; rewritten < 2; ++rewritten) {
    auto g = std::make_unique<Graph>();
    std::mt19937 wrng(5);  // the same weights both times
    BasicBlock(*g, wrng, in);
    if (rewritten) rewrite(*g);
    ir::Verify(*g);
    const size_t before = cpu::WinogradConvolutionsCreated();
    out[rewritten] = test_util::RunGraph(std::move(g), *input);
    if (rewritten) *winograd_kernels = cpu::WinogradConvolutionsCreated() - before;
  }
  double scale = 0;
  const double rel = test_util::RelativeDifference(out[0], out[1], &scale);
  EXPECT_GT(scale, 0.5);
  return rel;
}

TEST(ConvWinograd, GivesTheDirectResultsInEveryLayoutTheConvPassesLeave) {
  if (!cpu::DnnlRunsWinograd()) GTEST_SKIP() << "oneDNN has no Winograd kernels for this CPU";
  auto nchw = [](Graph& g) { return ChooseWinogradConvs(g); };
  auto nhwc = [](Graph& g) {  // the second conv adds the residual and applies relu
    return ChannelsLast(g) + FuseConvAdd(g) + FuseActivation(g) + ChooseWinogradConvs(g);
  };
  // Batch 1 and 8 take oneDNN's F(2x2, 3x3) and F(4x4, 3x3) kernels on
  // these sizes; 13 x 13 leaves partial tiles at the edges.
  for (const Shape& in : {Shape{1, 64, 14, 14}, Shape{8, 32, 13, 13}, Shape{2, 48, 28, 28}}) {
    for (auto rewrite : {+nchw, +nhwc}) {
      size_t kernels = 0;
      const double rel = RewriteDifference(in, rewrite, &kernels);
      EXPECT_EQ(kernels, 2u) << ShapeToString(in);
      // Measured 1e-6-3e-6 on these blocks: Winograd's transforms add and
      // subtract inputs before the products, so float32 rounding grows
      // several times over the direct sum's, and no more.
      EXPECT_LE(rel, 2e-5) << ShapeToString(in);
    }
  }
}

// A Winograd kernel built for two threads and run by a halved team (the
// worker's response to contention, cpu_backend.h) runs its direct twin: the
// direct kernel's result to the bit; with its full team, Winograd's.
TEST(ConvWinograd, AHalvedTeamRunsTheDirectTwin) {
  if (!cpu::DnnlRunsWinograd()) GTEST_SKIP() << "oneDNN has no Winograd kernels for this CPU";
  const int saved = omp_get_max_threads();
  std::mt19937 rng(6);
  Graph g;
  const Shape nhwc{2, 14, 14, 64};
  auto constant = [&](const std::string& name, const Shape& s, float scale) {
    return g.AddData(name, {DType::kF32, s}, ir::ValueKind::kConstant, Random(s, rng, scale));
  };
  Value* x = constant("x", nhwc, 1.0f);  // data the kernel reads as any input
  Value* w = Param(g, "w", {64, 64, 3, 3}, rng, 1.0f / 24);
  Value* b = Param(g, "b", {64}, rng, 0.1f);
  Value* r = constant("r", nhwc, 1.0f);
  auto conv = [&](const char* algorithm) {
    return g
        .Add1("conv2d", {x, w, b, r},
              {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
               {"data_format", std::string("NHWC")},
               {"activation", std::string("relu")},
               {"algorithm", std::string(algorithm)}})
        ->producer;
  };
  const ir::Op* wino_op = conv("winograd");
  const ir::Op* direct_op = conv("direct");
  omp_set_num_threads(2);
  const size_t before = cpu::WinogradConvolutionsCreated();
  auto wino = cpu::CreateKernel(*wino_op);
  EXPECT_EQ(cpu::WinogradConvolutionsCreated(), before + 1);
  omp_set_num_threads(1);
  auto direct = cpu::CreateKernel(*direct_op);
  const std::vector<float> want = RunKernel(*direct_op, *direct);
  EXPECT_EQ(RunKernel(*wino_op, *wino), want);  // the halved team: the twin
  omp_set_num_threads(2);
  const std::vector<float> full = RunKernel(*wino_op, *wino);
  omp_set_num_threads(saved);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(full[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  EXPECT_GT(diff, 0.0);  // Winograd rounds differently: it ran
  EXPECT_LE(diff, 2e-5 * scale);
}

}  // namespace
}  // namespace tiller::passes
