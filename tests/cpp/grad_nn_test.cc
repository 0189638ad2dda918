// Gradient rules of the convolution, pooling and normalization ops, and of
// the training forms of batch_norm and dropout, against finite differences
// (grad_check.h). Also checks the training forward ops themselves: the batch
// statistics and running-statistics update of batch_norm_train against a
// double-precision reference, and dropout's mask statistics and
// reproducibility.
#include <cmath>

#include "grad_check.h"
#include "ir/ops/op_helpers.h"

namespace tiller::passes {
namespace {

using namespace grad_check;  // NOLINT: the helpers of this test family

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> strides, pads, dil;
  int64_t groups;
  bool bias;
};

TEST(Gradients, Conv2dGroupsStridesDilationsPads) {
  std::vector<ConvCase> cases = {
      {{2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      {{1, 4, 7, 7}, {6, 2, 3, 2}, {2, 1}, {0, 1, 2, 0}, {1, 2}, 2, false},  // asymmetric pads
      {{2, 4, 5, 5}, {4, 1, 3, 3}, {1, 2}, {1, 1, 1, 1}, {2, 1}, 4, true},   // depthwise
      {{1, 2, 8, 8}, {3, 2, 1, 1}, {3, 3}, {0, 0, 0, 0}, {1, 1}, 1, false},  // 1x1, stride 3
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(ShapeToString(k.x) + " * " + ShapeToString(k.w));
    std::vector<InputSpec> specs{{k.x}, {k.w}};
    if (k.bias) specs.push_back({{k.w[0]}});
    CheckGradient(
        [&](Graph& g, auto& in) {
          std::vector<Value*> ins{in[0], in[1]};
          if (k.bias) ins.push_back(in[2]);
          return Op1(g, "conv2d", ins,
                     {{"strides", k.strides},
                      {"pads", k.pads},
                      {"dilations", k.dil},
                      {"groups", k.groups}});
        },
        specs);
  }
}

TEST(Gradients, Conv2dTranspose) {
  // x [1, 4, 3, 3], w [4, 6 / groups, 3, 3], stride 2: output_size 7 (one more than the window
  // arithmetic gives).
  for (int64_t groups : {1, 2}) {
    SCOPED_TRACE(groups);
    CheckGradient(
        [&](Graph& g, auto& in) {
          return Op1(g, "conv2d_transpose", {in[0], in[1], in[2]},
                     {{"strides", std::vector<int64_t>{2, 2}},
                      {"pads", std::vector<int64_t>{1, 0, 0, 1}},
                      {"dilations", std::vector<int64_t>{1, 1}},
                      {"groups", groups},
                      {"output_size", std::vector<int64_t>{7, 7}}});
        },
        {{{1, 4, 3, 3}}, {{4, 6 / groups, 3, 3}}, {{6}}});
  }
}

TEST(Gradients, Pool2dMaxAvgPadsCeilAdaptive) {
  struct P {
    const char* name;
    ir::AttrMap attrs;
  };
  auto fixed = [](const char* type, bool exclusive, bool ceil) {
    return ir::AttrMap{{"pooling_type", std::string(type)},
                       {"ksize", std::vector<int64_t>{3, 3}},
                       {"strides", std::vector<int64_t>{2, 2}},
                       {"pads", std::vector<int64_t>{1, 0, 1, 1}},
                       {"exclusive", exclusive},
                       {"ceil_mode", ceil}};
  };
  auto adaptive = [](const char* type, std::vector<int64_t> k) {
    return ir::AttrMap{{"pooling_type", std::string(type)}, {"ksize", k}, {"adaptive", true}};
  };
  std::vector<P> cases = {{"max", fixed("max", true, false)},
                          {"max ceil", fixed("max", true, true)},
                          {"avg exclusive", fixed("avg", true, false)},
                          {"avg inclusive ceil", fixed("avg", false, true)},
                          {"avg adaptive", adaptive("avg", {3, 2})},
                          {"max global", adaptive("max", {1, 1})},
                          {"avg global", adaptive("avg", {1, 1})}};
  for (const auto& p : cases) {
    SCOPED_TRACE(p.name);
    // Distinct values 0.06 apart: no window's maximum changes under +-h.
    CheckGradient([&](Graph& g, auto& in) { return Op1(g, "pool2d", {in[0]}, p.attrs); },
                  {{{2, 2, 7, 6}, -5.f, 5.f, DType::kF32, true, true}});
  }
}

TEST(Gradients, MaxPoolWithIndexWithAndWithoutMask) {
  for (bool with_mask : {true, false}) {
    SCOPED_TRACE(with_mask);
    CheckGradient(
        [&](Graph& g, auto& in) {
          ir::Op* op = g.AddOp("max_pool2d_with_index", {in[0]},
                               {{"ksize", std::vector<int64_t>{2, 3}},
                                {"strides", std::vector<int64_t>{2, 2}},
                                {"pads", std::vector<int64_t>{0, 1, 1, 0}},
                                {"with_mask", with_mask}});
          return op->outputs[0];
        },
        {{{1, 3, 6, 7}, -5.f, 5.f, DType::kF32, true, true}});
  }
}

TEST(Gradients, BatchNormInferenceAllInputs) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "batch_norm", {in[0], in[1], in[2], in[3], in[4]}, {{"epsilon", 1e-3}});
      },
      {{{2, 3, 2, 2}, -2, 2}, {{3}, 0.5f, 1.5f}, {{3}}, {{3}}, {{3}, 0.5f, 2.f}});
}

TEST(Gradients, BatchNormTrainUsesBatchStatistics) {
  for (Shape x : {Shape{4, 3, 2, 3}, Shape{6, 5}}) {
    SCOPED_TRACE(ShapeToString(x));
    int64_t c = x[1];
    CheckGradient(
        [](Graph& g, auto& in) {
          ir::Op* op = g.AddOp("batch_norm_train", {in[0], in[1], in[2], in[3], in[4]},
                               {{"epsilon", 1e-5}, {"momentum", 0.9}});
          return op->outputs[0];
        },
        {{x, -2, 2},
         {{c}, 0.5f, 1.5f},
         {{c}},
         {{c}, -1, 1, DType::kF32, false},
         {{c}, 0.5f, 2.f, DType::kF32, false}},
        -1, 3e-2f, 5e-3f);
  }
}

std::vector<float> Random(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(BatchNormTrain, StatisticsAndRunningUpdateMatchReference) {
  const int64_t n = 3, c = 4, s = 10;
  const float eps = 1e-5f, momentum = 0.8f;
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {n, c, 2, 5}});
  std::vector<Value*> ins{x};
  for (int i = 0; i < 4; ++i)
    ins.push_back(g->AddInput("p" + std::to_string(i), {DType::kF32, {c}}));
  ir::Op* op =
      g->AddOp("batch_norm_train", ins, {{"epsilon", double(eps)}, {"momentum", double(momentum)}});
  const char* names[] = {"y", "mean_out", "var_out", "saved_mean", "saved_inv_std"};
  for (int i = 0; i < 5; ++i) g->AddOutput(names[i], op->outputs[i]);
  auto exe = compile::Executable::Build(std::move(g), {});
  std::vector<std::vector<float>> in{Random(n * c * s, 1, -3, 5), Random(c, 2, 0.5f, 1.5f),
                                     Random(c, 3, -1, 1), Random(c, 4, -1, 1),
                                     Random(c, 5, 0.5f, 2)};
  for (size_t i = 0; i < in.size(); ++i)
    std::memcpy(exe->inputs()[i].data, in[i].data(), in[i].size() * sizeof(float));
  exe->Run();
  auto out = [&](int i) { return static_cast<const float*>(exe->outputs()[i].data); };
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i) sum += in[0][(b * c + ch) * s + i];
    double mean = sum / (n * s);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < s; ++i) sq += std::pow(in[0][(b * c + ch) * s + i] - mean, 2);
    double var = sq / (n * s);  // biased, as Paddle's running statistic
    double inv_std = 1.0 / std::sqrt(var + eps);
    // float32 statistics over 30 values: a few ulp of relative error.
    EXPECT_NEAR(out(3)[ch], mean, 1e-5);
    EXPECT_NEAR(out(4)[ch], inv_std, 1e-5 * inv_std);
    EXPECT_NEAR(out(1)[ch], in[3][ch] * momentum + mean * (1 - momentum), 1e-5);
    EXPECT_NEAR(out(2)[ch], in[4][ch] * momentum + var * (1 - momentum), 1e-5 * (1 + var));
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < s; ++i) {
        int64_t k = (b * c + ch) * s + i;
        double want = (in[0][k] - mean) * inv_std * in[1][ch] + in[2][ch];
        EXPECT_NEAR(out(0)[k], want, 1e-5 * (1 + std::abs(want))) << k;
      }
    }
  }
}

// Runs dropout(x, step) once and returns {out, mask}.
struct DropoutRun {
  std::vector<float> out;
  std::vector<uint8_t> mask;
};
DropoutRun RunDropout(const std::vector<float>& x, double p, const std::string& mode, int64_t seed,
                      int64_t step) {
  auto g = std::make_unique<Graph>();
  Value* xv = g->AddInput("x", {DType::kF32, {static_cast<int64_t>(x.size())}});
  Value* sv = g->AddInput("step", {DType::kI64, {1}});
  ir::Op* op = g->AddOp("dropout", {xv, sv}, {{"p", p}, {"mode", mode}, {"seed", seed}});
  g->AddOutput("out", op->outputs[0]);
  g->AddOutput("mask", op->outputs[1]);
  auto exe = compile::Executable::Build(std::move(g), {});
  std::memcpy(exe->inputs()[0].data, x.data(), x.size() * sizeof(float));
  *static_cast<int64_t*>(exe->inputs()[1].data) = step;
  exe->Run();
  DropoutRun r;
  auto* o = static_cast<const float*>(exe->outputs()[0].data);
  auto* m = static_cast<const uint8_t*>(exe->outputs()[1].data);
  r.out.assign(o, o + x.size());
  r.mask.assign(m, m + x.size());
  return r;
}

TEST(Dropout, KeepFractionScalingAndReproducibility) {
  const size_t n = 100000;
  std::vector<float> x = Random(n, 7, 0.5f, 2.f);
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    SCOPED_TRACE(p);
    DropoutRun a = RunDropout(x, p, "upscale_in_train", 1234, 5);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_LE(a.mask[i], 1);
      kept += a.mask[i];
      float want = a.mask[i] ? x[i] / (1.0f - static_cast<float>(p)) : 0.0f;
      ASSERT_EQ(a.out[i], want) << i;
    }
    // Binomial(n, 1 - p): the kept count lies within 6 standard deviations.
    double mean = n * (1 - p), sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(kept), mean, 6 * sd);
    // Same seed and step: the same mask; another step or seed: another one.
    EXPECT_EQ(RunDropout(x, p, "upscale_in_train", 1234, 5).mask, a.mask);
    DropoutRun next = RunDropout(x, p, "upscale_in_train", 1234, 6);
    DropoutRun other = RunDropout(x, p, "upscale_in_train", 99, 5);
    size_t differ_step = 0, differ_seed = 0;
    for (size_t i = 0; i < n; ++i) {
      differ_step += next.mask[i] != a.mask[i];
      differ_seed += other.mask[i] != a.mask[i];
    }
    // Independent masks disagree on a fraction 2p(1-p) of elements.
    double expect = 2 * p * (1 - p) * n, sd2 = std::sqrt(expect);
    EXPECT_NEAR(static_cast<double>(differ_step), expect, 6 * sd2 + 0.01 * n);
    EXPECT_NEAR(static_cast<double>(differ_seed), expect, 6 * sd2 + 0.01 * n);
  }
}

TEST(Dropout, DowngradeModeAndExtremeProbabilities) {
  std::vector<float> x = Random(1000, 8, -1, 1);
  DropoutRun d = RunDropout(x, 0.4, "downgrade_in_infer", 3, 0);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(d.out[i], d.mask[i] ? x[i] : 0.0f);
  DropoutRun all = RunDropout(x, 1.0, "upscale_in_train", 3, 0);
  DropoutRun none = RunDropout(x, 0.0, "upscale_in_train", 3, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(all.out[i], 0.0f);
    ASSERT_EQ(all.mask[i], 0);
    ASSERT_EQ(none.out[i], x[i]);
    ASSERT_EQ(none.mask[i], 1);
  }
}

TEST(Gradients, DropoutFollowsItsMask) {
  // Without a step input the mask is fixed, so the loss is linear in x.
  for (const char* mode : {"upscale_in_train", "downgrade_in_infer"}) {
    SCOPED_TRACE(mode);
    CheckGradient(
        [&](Graph& g, auto& in) {
          return g
              .AddOp("dropout", {in[0]}, {{"p", 0.3}, {"mode", std::string(mode)}, {"seed", 11}})
              ->outputs[0];
        },
        {{{4, 6}}});
  }
}

TEST(Gradients, GroupNorm) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "group_norm", {in[0], in[1], in[2]}, {{"groups", 2}, {"epsilon", 1e-5}});
      },
      {{{2, 4, 3, 2}, -2, 2}, {{4}, 0.5f, 1.5f}, {{4}}}, -1, 3e-2f, 5e-3f);
}

TEST(Gradients, InterpNearestLinearCubic) {
  struct I {
    const char* method;
    Shape in;
    std::vector<int64_t> size;
    std::vector<double> ratios;
    bool align_corners;
    int64_t align_mode;
  };
  std::vector<I> cases = {
      {"nearest", {1, 2, 3, 4}, {5, 7}, {3.0 / 5, 4.0 / 7}, false, 1},
      {"linear", {2, 1, 4, 3}, {7, 5}, {3.0 / 6, 2.0 / 4}, true, 1},   // align_corners
      {"linear", {1, 2, 5, 4}, {3, 6}, {5.0 / 3, 4.0 / 6}, false, 0},  // half-pixel, down in H
      {"linear", {1, 2, 6}, {9}, {6.0 / 9}, false, 1},                 // 1 spatial dim
      {"cubic", {1, 1, 4, 4}, {6, 7}, {4.0 / 6, 4.0 / 7}, false, 0}};
  for (const auto& k : cases) {
    SCOPED_TRACE(std::string(k.method) + " " + ShapeToString(k.in));
    CheckGradient(
        [&](Graph& g, auto& in) {
          return Op1(g, "interp", {in[0]},
                     {{"method", std::string(k.method)},
                      {"out_size", k.size},
                      {"ratios", k.ratios},
                      {"align_corners", k.align_corners},
                      {"align_mode", k.align_mode}});
        },
        {{k.in}});
  }
}

TEST(Gradients, PadAllModes) {
  // Constant: grows and crops; the others repeat inputs, whose gradients sum.
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "pad_nd", {in[0]},
                   {{"pads", std::vector<int64_t>{1, -1, 0, 2, -1, 1}},
                    {"mode", std::string("constant")},
                    {"value", 0.5}});
      },
      {{{3, 2, 4}}});
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    SCOPED_TRACE(mode);
    CheckGradient(
        [&](Graph& g, auto& in) {
          return Op1(
              g, "pad_nd", {in[0]},
              {{"pads", std::vector<int64_t>{0, 0, 2, 1, 1, 3}}, {"mode", std::string(mode)}});
        },
        {{{2, 3, 4}}});
  }
}

}  // namespace
}  // namespace tiller::passes
