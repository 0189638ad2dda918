// conv2d_1x1_depthwise and conv2d_depthwise_1x1 (backends/cpu/passes/fuse_depthwise.cc
// and their CPU kernel, kernels/fused_depthwise.cc): which convolution
// pairs the passes fuse, that the fused kernels give the two convolutions'
// results (oneDNN's kernels, run unfused) for every window the kernel has a
// path for, odd sizes, partial channel vectors, asymmetric padding, a
// residual and each activation, that their results do not depend on how
// many threads split an image's rows, and what the ops' inference refuses.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/passes/cpu_passes.h"
#include "compile/executable.h"
#include "core/error.h"
#include "passes/pass.h"
#include "test_graphs.h"

namespace tiller::passes {
namespace {

using cpu::FuseDepthwisePointwise;
using cpu::FusePointwiseDepthwise;

using ir::Graph;
using ir::Value;

using test_util::Param;
using test_util::Random;

// A channel-last conv2d as the channels_last pass leaves it, with a bias.
struct Conv {
  Shape filter;
  std::vector<int64_t> strides{1, 1}, pads{0, 0, 0, 0};
  int64_t groups = 1;
  std::string activation;
};

// `residual` (fuse_conv_add's form: added before the activation), if given.
Value* AddConv(Graph& g, Value* x, const std::string& name, const Conv& c, std::mt19937& rng,
               Value* filter = nullptr, Value* residual = nullptr) {
  const float fan_in = static_cast<float>(c.filter[1] * c.filter[2] * c.filter[3]);
  if (!filter) filter = Param(g, name, c.filter, rng, 1.0f / std::sqrt(fan_in));
  std::vector<Value*> ins{x, filter, Param(g, name + ".b", {c.filter[0]}, rng, 0.1f)};
  if (residual) ins.push_back(residual);
  return g.Add1("conv2d", std::move(ins),
                {{"strides", c.strides},
                 {"pads", c.pads},
                 {"groups", c.groups},
                 {"data_format", std::string("NHWC")},
                 {"activation", c.activation}});
}

Conv Pointwise(int64_t in, int64_t out, const std::string& act) {
  return {{out, in, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1, act};
}

Conv Depthwise(int64_t ch, int64_t kh, int64_t kw, std::vector<int64_t> strides,
               std::vector<int64_t> pads, const std::string& act) {
  return {{ch, 1, kh, kw}, std::move(strides), std::move(pads), ch, act};
}

size_t Count(const Graph& g, const std::string& type) {
  size_t n = 0;
  for (const auto& op : g.ops()) n += op->type == type;
  return n;
}

TEST(FusePointwiseDepthwise, FusesAOneByOneConvolutionReadOnlyByADepthwiseOne) {
  Graph g;
  std::mt19937 rng(1);
  Value* x = g.AddInput("x", {DType::kF32, {1, 8, 8, 16}});
  Value* wide = g.AddInput("wide", {DType::kF32, {1, 8, 8, 80}});
  const Conv dw = Depthwise(32, 3, 3, {1, 1}, {1, 1, 1, 1}, "hard_swish");
  std::vector<Value*> ys;
  // Fused: pointwise (relu) -> depthwise (hard_swish).
  Value* fused = AddConv(g, AddConv(g, x, "pw", Pointwise(16, 32, "relu"), rng), "dw", dw, rng);
  ys.push_back(fused);
  // Not fused: more than 64 input channels (a GEMM oneDNN runs at its rate).
  ys.push_back(AddConv(g, AddConv(g, wide, "pw80", Pointwise(80, 32, ""), rng), "dw80", dw, rng));
  // Not fused: the expanded tensor has a second reader.
  Value* shared = AddConv(g, x, "pw_shared", Pointwise(16, 32, ""), rng);
  ys.push_back(AddConv(g, shared, "dw_shared", dw, rng));
  ys.push_back(shared);
  // Not fused: an activation the kernel does not apply.
  ys.push_back(
      AddConv(g, AddConv(g, x, "pw_tanh", Pointwise(16, 32, "tanh"), rng), "dw_t", dw, rng));
  // Not fused: a variable filter; a strided pointwise convolution; a full
  // 3 x 3 convolution after the pointwise one.
  Value* w_in = g.AddInput("w", {DType::kF32, {32, 16, 1, 1}});
  ys.push_back(
      AddConv(g, AddConv(g, x, "pw_var", Pointwise(16, 32, ""), rng, w_in), "dw_v", dw, rng));
  Conv strided = Pointwise(16, 32, "");
  strided.strides = {2, 2};
  ys.push_back(AddConv(g, AddConv(g, x, "pw_s2", strided, rng), "dw_s2", dw, rng));
  ys.push_back(AddConv(g, AddConv(g, x, "pw_full", Pointwise(16, 32, ""), rng), "full",
                       Conv{{32, 32, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1, ""}, rng));
  for (size_t i = 0; i < ys.size(); ++i) g.AddOutput("y" + std::to_string(i), ys[i]);
  const size_t convs = Count(g, "conv2d");
  EXPECT_EQ(FusePointwiseDepthwise(g, 0), 1);
  ir::Verify(g);
  EXPECT_EQ(Count(g, "conv2d_1x1_depthwise"), 1u);
  EXPECT_EQ(Count(g, "conv2d"), convs - 2);
  const ir::Op* op = g.outputs()[0].second->producer;
  ASSERT_EQ(op->type, "conv2d_1x1_depthwise");
  EXPECT_EQ(op->GetStr("pointwise_activation"), "relu");
  EXPECT_EQ(op->GetStr("activation"), "hard_swish");
  EXPECT_EQ(op->GetInts("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(op->outputs[0]->shape(), (Shape{1, 8, 8, 32}));
  EXPECT_EQ(FusePointwiseDepthwise(g, 0), 0);
}

// By default only expanded tensors past the L2 (more than 1 MiB) are fused:
// smaller ones stay in the cache between oneDNN's two kernels.
TEST(FusePointwiseDepthwise, FusesOnlyExpandedTensorsLargerThanTheBound) {
  Graph g;
  std::mt19937 rng(2);
  const Conv dw = Depthwise(64, 3, 3, {2, 2}, {1, 1, 1, 1}, "relu");
  // 1 x 64 x 64 x 64 floats: exactly 1 MiB; 1 x 64 x 65 x 64: past it.
  for (int64_t w : {64, 65}) {
    Value* x = g.AddInput("x" + std::to_string(w), {DType::kF32, {1, 64, w, 16}});
    Value* e = AddConv(g, x, "pw" + std::to_string(w), Pointwise(16, 64, "relu"), rng);
    g.AddOutput("y" + std::to_string(w), AddConv(g, e, "dw" + std::to_string(w), dw, rng));
  }
  EXPECT_EQ(FusePointwiseDepthwise(g), 1);
  EXPECT_EQ(g.outputs()[0].second->producer->type, "conv2d");
  EXPECT_EQ(g.outputs()[1].second->producer->type, "conv2d_1x1_depthwise");
}

struct Case {
  Shape x;  // NHWC
  int64_t expand;
  Conv depthwise;  // its channels: expand
  std::string pointwise_act;
};

// A graph of input x built by `build` (its weights drawn from the rng it is
// given, the same both times), run by oneDNN's kernels as built and after
// `fuse` (which must make one op of `fused_type`); the largest difference
// relative to the largest output.
double FusionDifference(const Shape& in,
                        const std::function<Value*(Graph&, Value*, std::mt19937&)>& build,
                        int (*fuse)(Graph&, int64_t), const char* fused_type) {
  std::mt19937 rng(7);
  auto input = Random(in, rng, 1.0f);
  std::vector<float> out[2];
  for (int fused = 0; fused < 2; ++fused) {
    auto g = std::make_unique<Graph>();
    std::mt19937 wrng(8);
    g->AddOutput("y", build(*g, g->AddInput("x", {DType::kF32, in}), wrng));
    if (fused) {
      EXPECT_EQ(fuse(*g, 0), 1);
    }
    ir::Verify(*g);
    EXPECT_EQ(Count(*g, fused_type), static_cast<size_t>(fused));
    out[fused] = test_util::RunGraph(std::move(g), *input);
  }
  double scale = 0;
  const double rel = test_util::RelativeDifference(out[0], out[1], &scale);
  EXPECT_GT(scale, 0.5);
  return rel;
}

// The case's pointwise -> depthwise pair.
double FusedDifference(const Case& c) {
  return FusionDifference(
      c.x,
      [&](Graph& g, Value* x, std::mt19937& rng) {
        Value* e = AddConv(g, x, "pw", Pointwise(c.x[3], c.expand, c.pointwise_act), rng);
        return AddConv(g, e, "dw", c.depthwise, rng);
      },
      [](Graph& g, int64_t bytes) { return FusePointwiseDepthwise(g, bytes); },
      "conv2d_1x1_depthwise");
}

TEST(FusePointwiseDepthwise, TheFusedKernelGivesTheTwoConvolutionsResults) {
  const std::vector<Case> cases = {
      // MobileNetV3's first expansion: 16 -> 64, 3 x 3 stride 2.
      {{2, 16, 16, 16}, 64, Depthwise(64, 3, 3, {2, 2}, {1, 1, 1, 1}, "relu"), "relu"},
      // 5 x 5 windows at both strides; channels not a whole number of vectors.
      {{3, 12, 12, 24}, 72, Depthwise(72, 5, 5, {2, 2}, {2, 2, 2, 2}, "hard_swish"), "hard_swish"},
      {{1, 14, 14, 40}, 120, Depthwise(120, 5, 5, {1, 1}, {2, 2, 2, 2}, ""), "hard_swish"},
      // Odd sizes, 20 channels (one and a quarter vectors), relu6 and none.
      {{1, 9, 11, 16}, 20, Depthwise(20, 3, 3, {1, 1}, {1, 1, 1, 1}, "relu6"), ""},
      // Paddle's "SAME" padding at stride 2: nothing before, one after.
      {{2, 7, 13, 8}, 64, Depthwise(64, 3, 3, {2, 2}, {0, 1, 0, 1}, "relu"), "relu6"},
      // Windows without an unrolled path: 7 x 7, 3 x 5 with strides (1, 2),
      // and padding wider than the window reaches (rows of padding only).
      {{1, 5, 5, 4}, 36, Depthwise(36, 7, 7, {1, 1}, {3, 3, 3, 3}, "relu"), ""},
      {{2, 10, 10, 16}, 32, Depthwise(32, 3, 5, {1, 2}, {1, 1, 2, 2}, "hard_swish"), "relu"},
      {{1, 4, 6, 16}, 16, Depthwise(16, 3, 3, {1, 1}, {3, 3, 1, 1}, ""), "relu"},
      // Fewer output rows than threads, and three images on two threads.
      {{1, 3, 30, 16}, 32, Depthwise(32, 3, 3, {2, 2}, {1, 1, 1, 1}, "relu"), "relu"},
      {{3, 6, 6, 32}, 48, Depthwise(48, 3, 3, {1, 1}, {1, 1, 1, 1}, "relu"), "hard_swish"},
  };
  for (const Case& c : cases) {
    // Measured 1.0e-7-2.1e-7: float32 sums of <= 64 + 49 products, taken in
    // another order than oneDNN's, and hard_swish's / 6 a product by 1 / 6
    // here (one more rounding); the bound is ten times that.
    EXPECT_LE(FusedDifference(c), 2e-6)
        << ShapeToString(c.x) << " -> " << c.expand << " window "
        << ShapeToString(c.depthwise.filter) << " strides " << ShapeToString(c.depthwise.strides);
  }
}

// The rows of one image split among threads (batch 1) or not: each output
// is computed by the same arithmetic either way, to the bit, and a kernel
// built for two threads and run by a halved team (the worker's response to
// contention) gives it too.
TEST(FusePointwiseDepthwise, ResultsDoNotDependOnTheThreads) {
  const int saved = omp_get_max_threads();
  std::mt19937 rng(11);
  Graph g;
  Value* x = g.AddData("x", {DType::kF32, {1, 20, 20, 24}}, ir::ValueKind::kConstant,
                       Random({1, 20, 20, 24}, rng, 1.0f));
  Value* e = AddConv(g, x, "pw", Pointwise(24, 72, "relu"), rng);
  g.AddOutput("y", AddConv(g, e, "dw", Depthwise(72, 5, 5, {1, 1}, {2, 2, 2, 2}, "relu"), rng));
  ASSERT_EQ(FusePointwiseDepthwise(g, 0), 1);
  const ir::Op& op = *g.outputs()[0].second->producer;
  auto run = [&](backend::Kernel& k) { return test_util::RunKernel(op, k); };
  omp_set_num_threads(1);
  auto one = cpu::CreateKernel(op);
  const std::vector<float> want = run(*one);
  omp_set_num_threads(2);
  auto two = cpu::CreateKernel(op);
  EXPECT_EQ(run(*two), want);
  omp_set_num_threads(1);
  EXPECT_EQ(run(*two), want);
  omp_set_num_threads(saved);
}

TEST(FusePointwiseDepthwise, InferenceRefusesWhatTheKernelDoesNotCompute) {
  Graph g;
  std::mt19937 rng(12);
  Value* x = g.AddInput("x", {DType::kF32, {1, 8, 8, 16}});
  Value* w1 = Param(g, "w1", {32, 16, 1, 1}, rng, 0.1f);
  Value* b1 = Param(g, "b1", {32}, rng, 0.1f);
  Value* w2 = Param(g, "w2", {32, 1, 3, 3}, rng, 0.1f);
  Value* b2 = Param(g, "b2", {32}, rng, 0.1f);
  auto add = [&](std::vector<Value*> ins, ir::AttrMap attrs) {
    return g.Add1("conv2d_1x1_depthwise", std::move(ins), std::move(attrs));
  };
  auto fails = [&](std::vector<Value*> ins, ir::AttrMap attrs, const std::string& says) {
    try {
      add(std::move(ins), std::move(attrs));
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(says), std::string::npos) << err.what();
    }
  };
  Value* y = add({x, w1, b1, w2, b2}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                       {"strides", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(y->shape(), (Shape{1, 4, 4, 32}));
  Value* w1_wrong = Param(g, "w1_wrong", {32, 8, 1, 1}, rng, 0.1f);
  fails({x, w1_wrong, b1, w2, b2}, {}, "pointwise filter [32, 8, 1, 1] does not fit");
  Value* w2_wrong = Param(g, "w2_wrong", {32, 2, 3, 3}, rng, 0.1f);
  fails({x, w1, b1, w2_wrong, b2}, {}, "depthwise filter [32, 2, 3, 3] is not [32, 1, KH, KW]");
  fails({x, w1, b1, w2, b2}, {{"activation", std::string("gelu")}}, "activation 'gelu'");
  fails({x, w1, b1, w2, b2}, {{"strides", std::vector<int64_t>{0, 1}}}, "must be >= 1");
  Value* half = g.AddInput("half", {DType::kBF16, {1, 8, 8, 16}});
  fails({half, w1, b1, w2, b2}, {}, "input 0 is bfloat16, not float32");
}

// ---- conv2d_depthwise_1x1 ------------------------------------------------

TEST(FuseDepthwisePointwise, FusesADepthwiseConvolutionReadOnlyByAOneByOneOne) {
  Graph g;
  std::mt19937 rng(21);
  Value* x = g.AddInput("x", {DType::kF32, {1, 8, 8, 96}});
  const Conv dw = Depthwise(96, 3, 3, {1, 1}, {1, 1, 1, 1}, "relu");
  std::vector<Value*> ys;
  // Fused, with the residual fuse_conv_add leaves (96 channels in: wide
  // projections fuse too) ...
  ys.push_back(
      AddConv(g, AddConv(g, x, "dw", dw, rng), "pw", Pointwise(96, 96, "relu"), rng, nullptr, x));
  // ... and without one.
  ys.push_back(AddConv(g, AddConv(g, x, "dw2", dw, rng), "pw2", Pointwise(96, 24, ""), rng));
  // Not fused: a second reader of the depthwise result; a 3 x 3 convolution
  // after it; an activation the kernel does not apply.
  Value* shared = AddConv(g, x, "dw_shared", dw, rng);
  ys.push_back(AddConv(g, shared, "pw_shared", Pointwise(96, 24, ""), rng));
  ys.push_back(shared);
  ys.push_back(AddConv(g, AddConv(g, x, "dw_full", dw, rng), "full",
                       Conv{{24, 96, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1, ""}, rng));
  ys.push_back(AddConv(g, AddConv(g, x, "dw_t", dw, rng), "pw_t", Pointwise(96, 24, "tanh"), rng));
  for (size_t i = 0; i < ys.size(); ++i) g.AddOutput("y" + std::to_string(i), ys[i]);
  EXPECT_EQ(FuseDepthwisePointwise(g, 0), 2);
  ir::Verify(g);
  const ir::Op* op = g.outputs()[0].second->producer;
  ASSERT_EQ(op->type, "conv2d_depthwise_1x1");
  EXPECT_EQ(op->inputs.size(), 6u);
  EXPECT_EQ(op->inputs[5], x);
  EXPECT_EQ(op->GetStr("depthwise_activation"), "relu");
  EXPECT_EQ(op->GetStr("activation"), "relu");
  EXPECT_EQ(g.outputs()[1].second->producer->inputs.size(), 5u);
  EXPECT_EQ(g.outputs()[1].second->shape(), (Shape{1, 8, 8, 24}));
  EXPECT_EQ(FuseDepthwisePointwise(g, 0), 0);
}

// An expand-filter-project chain becomes one op when the depthwise result
// is past the bound too; otherwise the expansion takes the depthwise
// convolution and the projection stays oneDNN's.
TEST(FusePointwiseDepthwise, AnExpandFilterProjectChainBecomesOneOp) {
  for (const bool small_result : {false, true}) {
    Graph g;
    std::mt19937 rng(22);
    // 1 x 64 x 65 x 64 expanded floats pass 1 MiB; at stride 2 the
    // depthwise result (1 x 32 x 33 x 64) does not.
    const Shape in = small_result ? Shape{1, 64, 65, 16} : Shape{1, 8, 8, 16};
    const int64_t stride = small_result ? 2 : 1;
    Value* x = g.AddInput("x", {DType::kF32, in});
    Value* e = AddConv(g, x, "expand", Pointwise(16, 64, "relu"), rng);
    Value* d =
        AddConv(g, e, "dw", Depthwise(64, 3, 3, {stride, stride}, {1, 1, 1, 1}, "relu"), rng);
    g.AddOutput("y", AddConv(g, d, "project", Pointwise(64, 16, ""), rng, nullptr,
                             small_result ? nullptr : x));
    EXPECT_EQ(small_result ? FusePointwiseDepthwise(g) : FusePointwiseDepthwise(g, 0), 1);
    EXPECT_EQ(FuseDepthwisePointwise(g, 0), 0);
    ir::Verify(g);
    EXPECT_EQ(Count(g, "conv2d_1x1_depthwise_1x1"), small_result ? 0u : 1u);
    EXPECT_EQ(Count(g, "conv2d_1x1_depthwise"), small_result ? 1u : 0u);
    EXPECT_EQ(Count(g, "conv2d"), small_result ? 1u : 0u);
    if (!small_result) {
      const ir::Op* op = g.outputs()[0].second->producer;
      EXPECT_EQ(op->inputs.size(), 8u);
      EXPECT_EQ(op->inputs[7], x);
      EXPECT_EQ(op->GetStr("pointwise_activation"), "relu");
      EXPECT_EQ(op->GetStr("depthwise_activation"), "relu");
      EXPECT_EQ(op->GetStr("activation"), "");
    }
  }
}

struct InvertedCase {
  Shape x;  // NHWC
  int64_t expand;
  Conv depthwise;
  int64_t out;
  bool residual;  // the input added (stride 1, out = channels)
};

TEST(FusePointwiseDepthwise, TheThreeStageKernelGivesTheThreeConvolutionsResults) {
  const std::vector<InvertedCase> cases = {
      // MobileNetV3's second and third blocks: 16 -> 64 -> stride 2 -> 24,
      // 24 -> 72 -> 24 + input.
      {{2, 16, 16, 16}, 64, Depthwise(64, 3, 3, {2, 2}, {1, 1, 1, 1}, "relu"), 24, false},
      {{2, 12, 12, 24}, 72, Depthwise(72, 3, 3, {1, 1}, {1, 1, 1, 1}, "relu"), 24, true},
      // 5 x 5, partial vectors at every stage (20 -> 40 -> 20), hard_swish.
      {{1, 9, 11, 20}, 40, Depthwise(40, 5, 5, {1, 1}, {2, 2, 2, 2}, "hard_swish"), 20, true},
  };
  for (const InvertedCase& c : cases) {
    const double rel = FusionDifference(
        c.x,
        [&](Graph& g, Value* x, std::mt19937& rng) {
          Value* e = AddConv(g, x, "pw", Pointwise(c.x[3], c.expand, "relu6"), rng);
          Value* d = AddConv(g, e, "dw", c.depthwise, rng);
          return AddConv(g, d, "project", Pointwise(c.expand, c.out, ""), rng, nullptr,
                         c.residual ? x : nullptr);
        },
        [](Graph& g, int64_t bytes) { return FusePointwiseDepthwise(g, bytes); },
        "conv2d_1x1_depthwise_1x1");
    // Three float32 sums in another order than oneDNN's: as the two-stage
    // kernels' bound.
    EXPECT_LE(rel, 2e-6) << ShapeToString(c.x) << " -> " << c.expand << " -> " << c.out;
  }
}

struct SeparableCase {
  Shape x;  // NHWC
  Conv depthwise;
  int64_t out;
  std::string act;
  bool residual;  // the input added (stride 1, out = channels)
};

// The case's depthwise -> pointwise pair.
double SeparableDifference(const SeparableCase& c) {
  return FusionDifference(
      c.x,
      [&](Graph& g, Value* x, std::mt19937& rng) {
        Value* d = AddConv(g, x, "dw", c.depthwise, rng);
        return AddConv(g, d, "pw", Pointwise(c.x[3], c.out, c.act), rng, nullptr,
                       c.residual ? x : nullptr);
      },
      [](Graph& g, int64_t bytes) { return FuseDepthwisePointwise(g, bytes); },
      "conv2d_depthwise_1x1");
}

TEST(FuseDepthwisePointwise, TheFusedKernelGivesTheTwoConvolutionsResults) {
  const std::vector<SeparableCase> cases = {
      // MobileNetV3's first block: 16 channels, 3 x 3, projection + input.
      {{2, 16, 16, 16}, Depthwise(16, 3, 3, {1, 1}, {1, 1, 1, 1}, "relu"), 16, "", true},
      // MobileNetV1's: 32 -> 64, and a strided one; relu6 on both.
      {{1, 14, 14, 32}, Depthwise(32, 3, 3, {1, 1}, {1, 1, 1, 1}, "relu6"), 64, "relu6", false},
      {{3, 13, 11, 32}, Depthwise(32, 3, 3, {2, 2}, {1, 1, 1, 1}, "relu6"), 64, "relu6", false},
      // Partial vectors in and out (20 -> 72: 4.5 vectors, two tiles of
      // outputs), 5 x 5, hard_swish.
      {{2, 9, 10, 20},
       Depthwise(20, 5, 5, {1, 1}, {2, 2, 2, 2}, "hard_swish"),
       72,
       "hard_swish",
       false},
      // A window without an unrolled path, and a residual with 24 channels.
      {{1, 7, 9, 24}, Depthwise(24, 3, 5, {1, 1}, {1, 1, 2, 2}, ""), 24, "relu", true},
  };
  for (const SeparableCase& c : cases) {
    // As the other fused kernel's (the same float32 sums in another order).
    EXPECT_LE(SeparableDifference(c), 2e-6)
        << ShapeToString(c.x) << " window " << ShapeToString(c.depthwise.filter) << " -> " << c.out;
  }
}

TEST(FuseDepthwisePointwise, InferenceRefusesWhatTheKernelDoesNotCompute) {
  Graph g;
  std::mt19937 rng(23);
  Value* x = g.AddInput("x", {DType::kF32, {1, 8, 8, 16}});
  Value* w2 = Param(g, "w2", {16, 1, 3, 3}, rng, 0.1f);
  Value* b2 = Param(g, "b2", {16}, rng, 0.1f);
  Value* w3 = Param(g, "w3", {24, 16, 1, 1}, rng, 0.1f);
  Value* b3 = Param(g, "b3", {24}, rng, 0.1f);
  const ir::AttrMap same{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  Value* y = g.Add1("conv2d_depthwise_1x1", {x, w2, b2, w3, b3}, same);
  EXPECT_EQ(y->shape(), (Shape{1, 8, 8, 24}));
  auto fails = [&](std::vector<Value*> ins, const std::string& says) {
    try {
      g.Add1("conv2d_depthwise_1x1", std::move(ins), same);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(says), std::string::npos) << err.what();
    }
  };
  fails({x, w2, b2, Param(g, "w3_wrong", {24, 8, 1, 1}, rng, 0.1f), b3},
        "pointwise filter [24, 8, 1, 1] is not [O, 16, 1, 1]");
  fails({x, w2, b2, w3, b3, x}, "residual float32[1, 8, 8, 16] is not the result's type");
}

}  // namespace
}  // namespace tiller::passes
