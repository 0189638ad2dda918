// Gradient rules of the elementwise, matmul, shape and normalization ops
// against finite differences (grad_check.h explains the method and tolerance).
#include "grad_check.h"

namespace tiller::passes {
namespace {

using namespace grad_check;  // NOLINT: the helpers of this test family

TEST(Gradients, BinaryWithBroadcast) {
  for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
    SCOPED_TRACE(op);
    CheckGradient(
        [&](Graph& g, auto& in) {
          return Op1(g, op, {in[0], in[1]});
        },
        {{{2, 3, 4}}, {{3, 1}, 0.5f, 2.f}}, 24);
  }
}

TEST(Gradients, Unary) {
  struct U {
    const char* op;
    float lo, hi;
    ir::AttrMap attrs;
  };
  std::vector<U> ops = {{"relu", -1, 1, {}},
                        {"tanh", -2, 2, {}},
                        {"sigmoid", -3, 3, {}},
                        {"exp", -1, 1, {}},
                        {"log", 0.5f, 2, {}},
                        {"sqrt", 0.5f, 2, {}},
                        {"rsqrt", 0.5f, 2, {}},
                        {"square", -2, 2, {}},
                        {"gelu", -3, 3, {}},
                        {"silu", -3, 3, {}},
                        {"erf", -2, 2, {}},
                        {"reciprocal", 0.5f, 2, {}},
                        {"abs", 0.1f, 1, {}},
                        {"leaky_relu", -1, 1, {{"alpha", 0.1}}},
                        {"scale", -1, 1, {{"scale", 3.0}, {"bias", 1.0}}}};
  for (const auto& u : ops) {
    SCOPED_TRACE(u.op);
    CheckGradient([&](Graph& g, auto& in) { return Op1(g, u.op, {in[0]}, u.attrs); },
                  {{{3, 5}, u.lo, u.hi}}, 15);
  }
}

TEST(Gradients, MatmulAllTransposesAndBatchBroadcast) {
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb);
      Shape a = ta ? Shape{2, 1, 4, 3} : Shape{2, 1, 3, 4};
      Shape b = tb ? Shape{3, 5, 4} : Shape{3, 4, 5};
      CheckGradient(
          [&](Graph& g, auto& in) {
            return Op1(g, "matmul", {in[0], in[1]},
                       {{"transpose_a", bool(ta)}, {"transpose_b", bool(tb)}});
          },
          {{a}, {b}}, 2 * 3 * 3 * 5);
    }
  }
}

TEST(Gradients, Linear) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "linear", {in[0], in[1], in[2]});
      },
      {{{2, 3, 4}}, {{4, 5}}, {{5}}}, 30);
}

TEST(Gradients, ShapeOpsAndReductions) {
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* t = Op1(g, "transpose", {in[0]}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
        return Op1(g, "reshape", {t}, {{"shape", std::vector<int64_t>{4, 6}}});
      },
      {{{2, 3, 4}}}, 24);
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "reduce_mean", {in[0]},
                   {{"axes", std::vector<int64_t>{1, -1}}, {"keepdim", false}});
      },
      {{{2, 3, 4}}}, 2);
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "reduce_sum", {in[0]},
                   {{"axes", std::vector<int64_t>{0}}, {"keepdim", true}});
      },
      {{{2, 3}}}, 3);
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "expand", {in[0]}, {{"shape", std::vector<int64_t>{2, 3, 4}}});
      },
      {{{3, 1}}}, 24);
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* c = Op1(g, "concat", {in[0], in[1]}, {{"axis", 1}});
        ir::Op* s = g.AddOp("split", {c}, {{"axis", 0}, {"sections", std::vector<int64_t>{1, 1}}});
        return Op1(g, "mul", {s->outputs[0], s->outputs[1]});
      },
      {{{2, 2}}, {{2, 3}}}, 5);
}

TEST(Gradients, SoftmaxLogSoftmaxLayerNorm) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "softmax", {in[0]}, {{"axis", 1}});
      },
      {{{2, 4, 3}}}, 24);
  // The last axis: rows of 20 (a full vector of 16 and a tail) in softmax_grad.
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "softmax", {in[0]}, {{"axis", -1}});
      },
      {{{3, 20}}}, 60);
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "log_softmax", {in[0]}, {{"axis", -1}});
      },
      {{{3, 5}}}, 15);
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "layer_norm", {in[0], in[1], in[2]}, {{"axis", 1}, {"epsilon", 1e-5}});
      },
      {{{3, 2, 4}, -2, 2}, {{8}, 0.5f, 1.5f}, {{8}}}, 24, 3e-2f, 5e-3f);
  // The fused layer_norm_grad sums dscale / dbias over blocks of 32 rows:
  // 70 rows span three blocks. Scale only; then neither.
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "layer_norm", {in[0], in[1]}, {{"axis", -1}, {"epsilon", 1e-5}});
      },
      {{{70, 6}, -2, 2}, {{6}, 0.5f, 1.5f}}, 420, 3e-2f, 5e-3f);
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "layer_norm", {in[0]}, {{"axis", 1}, {"epsilon", 1e-5}});
      },
      {{{40, 2, 3}, -2, 2}}, 240, 3e-2f, 5e-3f);
  // Rows of 40 (two vectors of 16 and a tail) in layer_norm_grad's row loop.
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "layer_norm", {in[0], in[1], in[2]}, {{"axis", -1}, {"epsilon", 1e-5}});
      },
      {{{4, 40}, -2, 2}, {{40}, 0.5f, 1.5f}, {{40}}}, 160, 3e-2f, 5e-3f);
}

TEST(Gradients, EmbeddingScatterAddsRepeatedIds) {
  // ids drawn from [0, 5): repeated ids must accumulate; padding row 2 gets none.
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "embedding", {in[0], in[1]}, {{"padding_idx", 2}});
      },
      {{{5, 3}}, {{2, 4}, 0.f, 4.99f, DType::kI64, false}}, 24);
}

TEST(Gradients, FanOutAccumulates) {
  // x is used three times: its gradient is the sum of the three paths.
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* x = in[0];
        return Op1(g, "add", {Op1(g, "mul", {x, x}), Op1(g, "tanh", {x})});
      },
      {{{4, 3}}}, 12);
}

TEST(Gradients, MoreUnary) {
  // Ranges keep inputs away from kinks and domain edges; ops with jumps
  // (hard_shrink, thresholded_relu) get explicit values off the threshold.
  struct U {
    const char* op;
    float lo, hi;
    ir::AttrMap attrs;
  };
  std::vector<U> ops = {{"sin", -3, 3, {}},
                        {"cos", -3, 3, {}},
                        {"tan", -1, 1, {}},
                        {"sinh", -2, 2, {}},
                        {"cosh", -2, 2, {}},
                        {"atan", -2, 2, {}},
                        {"asin", -0.8f, 0.8f, {}},
                        {"acos", -0.8f, 0.8f, {}},
                        {"asinh", -2, 2, {}},
                        {"acosh", 1.2f, 3, {}},
                        {"atanh", -0.7f, 0.7f, {}},
                        {"expm1", -2, 2, {}},
                        {"log1p", 0, 2, {}},
                        {"log2", 0.5f, 2, {}},
                        {"log10", 0.5f, 2, {}},
                        {"logsigmoid", -3, 3, {}},
                        {"softsign", -2, 2, {}},
                        {"tanh_shrink", -2, 2, {}},
                        {"elu", -2, 2, {{"alpha", 0.7}}},
                        {"celu", -2, 2, {{"alpha", 0.7}}},
                        {"celu", -2, 2, {{"alpha", -1.5}}},
                        {"selu", -2, 2, {}},
                        {"relu6", -1, 7, {}},
                        {"brelu", -1, 5, {{"t_min", 0.5}, {"t_max", 3.0}}},
                        {"clip", -1, 1, {{"min", -0.5}, {"max", 0.5}}},
                        {"hard_sigmoid", -4, 4, {}},
                        {"hard_swish", -4, 4, {}},
                        {"softplus", -3, 3, {{"beta", 2.0}, {"threshold", 4.0}}},
                        {"swish", -3, 3, {{"beta", 1.5}}},
                        {"mish", -3, 3, {{"threshold", 2.0}}},
                        {"softshrink", -1, 1, {{"lambda", 0.3}}},
                        {"pow_scalar", 0.5f, 2, {{"factor", 2.5}}},
                        {"gelu", -3, 3, {{"approximate", true}}},
                        {"floor", 0.1f, 0.9f, {}},
                        {"sign", 0.1f, 0.9f, {}}};
  for (const auto& u : ops) {
    SCOPED_TRACE(u.op);
    CheckGradient([&](Graph& g, auto& in) { return Op1(g, u.op, {in[0]}, u.attrs); },
                  {{{3, 5}, u.lo, u.hi, DType::kF32, true, true}});
  }
  std::vector<float> off_threshold = {-0.9f, -0.7f, -0.45f, -0.2f, 0.1f,
                                      0.3f,  0.44f, 0.6f,   0.8f,  1.2f};
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "hard_shrink", {in[0]}, {{"threshold", 0.5}});
      },
      {{{10}, 0, 0, DType::kF32, true, false, off_threshold}});
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "thresholded_relu", {in[0]}, {{"threshold", 0.5}});
      },
      {{{10}, 0, 0, DType::kF32, true, false, off_threshold}});
}

TEST(Gradients, PreluWhereModPow) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "prelu", {in[0], in[1]});
      },
      {{{2, 3, 4}, -1, 1, DType::kF32, true, true}, {{1, 3, 1}, 0.1f, 0.5f}});
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* cond = Op1(g, "greater", {in[2], Const<float>(g, DType::kF32, {}, {0.f})});
        return Op1(g, "where", {cond, in[0], in[1]});
      },
      {{{3, 4}}, {{4}}, {{3, 4}, -1, 1, DType::kF32, false}});
  // floor(a / b) stays constant within +-h of these a and b.
  std::vector<float> a = {0.3f, -0.45f, 1.1f, 1.4f, -1.2f, 2.2f, 0.05f, -0.2f};
  std::vector<float> b = {0.65f, 0.8f, 0.75f, 0.9f};
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "mod", {in[0], in[1]});
      },
      {{{2, 4}, 0, 0, DType::kF32, true, false, a}, {{4}, 0, 0, DType::kF32, true, false, b}});
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "pow", {in[0], in[1]});
      },
      {{{3, 4}, 0.5f, 2.f}, {{4}, -1.f, 2.f}});
  // atan2 over every quadrant (away from the origin and from the negative
  // x axis, where the angle jumps by 2 pi), b broadcast.
  std::vector<float> ya = {0.8f, -0.9f, 1.3f, -1.1f, 0.5f, -0.6f};
  std::vector<float> xb = {1.2f, -0.7f, 0.9f};
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "atan2", {in[0], in[1]});
      },
      {{{2, 3}, 0, 0, DType::kF32, true, false, ya}, {{3}, 0, 0, DType::kF32, true, false, xb}});
}

TEST(Gradients, SliceGatherCumsum) {
  CheckGradient(
      [](Graph& g, auto& in) {
        return Op1(g, "slice", {in[0]},
                   {{"axes", std::vector<int64_t>{0, 2}},
                    {"starts", std::vector<int64_t>{-1, 1}},
                    {"ends", std::vector<int64_t>{-4, 6}},
                    {"steps", std::vector<int64_t>{-2, 2}}});
      },
      {{{4, 2, 6}}});
  // Repeated and negative indices: the repeated rows accumulate.
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* idx = Const<int64_t>(g, DType::kI64, {2, 2}, {2, 0, -1, 2});
        return Op1(g, "gather", {in[0], idx}, {{"axis", 1}});
      },
      {{{2, 3, 2}}});
  // gather_nd: rows of 2 indices into [3, 4, 2] (one repeated, negative
  // ones), and of 1 index into [3, 2].
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* idx = Const<int64_t>(g, DType::kI64, {2, 2, 2}, {2, 1, 0, -1, 2, 1, -3, 0});
        return Op1(g, "gather_nd", {in[0], idx});
      },
      {{{3, 4, 2}}});
  CheckGradient(
      [](Graph& g, auto& in) {
        Value* idx = Const<int32_t>(g, DType::kI32, {3, 1}, {1, -1, 1});
        return Op1(g, "gather_nd", {in[0], idx});
      },
      {{{3, 2}}});
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      CheckGradient(
          [&](Graph& g, auto& in) {
            return Op1(g, "cumsum", {in[0]},
                       {{"axis", 1}, {"exclusive", exclusive}, {"reverse", reverse}});
          },
          {{{2, 5}}});
    }
  }
  // cumprod along the middle axis (outer and inner lines) with zeros: of
  // its six lines, two hold two zeros, two one, two none (the outputs past
  // a zero are zero, but the zero's own gradient is not). Each output is
  // linear in each input, so central differences are exact up to rounding.
  std::vector<float> x = {0.9f,  -1.2f, 0.0f,  1.1f,  0.8f,  -0.7f, 1.3f,  0.0f, 1.4f,  0.0f,
                          0.6f,  1.05f, 0.0f,  0.0f,  -1.1f, 0.75f, 1.2f,  0.5f, 0.0f,  1.15f,
                          -0.9f, 1.25f, 0.85f, -1.3f, 1.0f,  0.7f,  0.95f, 1.1f, 0.65f, 1.2f};
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "cumprod exclusive " << exclusive << " reverse " << reverse);
      CheckGradient(
          [&](Graph& g, auto& in) {
            return Op1(g, "cumprod", {in[0]},
                       {{"axis", 1}, {"exclusive", exclusive}, {"reverse", reverse}});
          },
          {{{2, 5, 3}, 0, 0, DType::kF32, true, false, x}});
    }
  }
}

TEST(Gradients, ReduceMaxMinProd) {
  for (const char* op : {"reduce_max", "reduce_min", "reduce_prod"}) {
    SCOPED_TRACE(op);
    CheckGradient(
        [&](Graph& g, auto& in) {
          return Op1(g, op, {in[0]}, {{"axes", std::vector<int64_t>{1}}, {"keepdim", false}});
        },
        {{{3, 4, 2}, 0.5f, 1.5f, DType::kF32, true, true}});
  }
}

TEST(Gradients, LogSumExp) {
  // Rows, a column, a strided pair of axes (kept) and every axis; inputs up
  // to +-4 so the softmax weights differ widely.
  const std::vector<std::pair<std::vector<int64_t>, bool>> forms = {
      {{2}, false}, {{0}, false}, {{0, 2}, true}, {{}, false}};
  for (const auto& form : forms) {
    const std::vector<int64_t>& axes = form.first;
    const bool keep = form.second;
    SCOPED_TRACE(testing::Message() << "axes " << axes.size() << " keepdim " << keep);
    CheckGradient(
        [&](Graph& g, auto& in) {
          return Op1(g, "logsumexp", {in[0]}, {{"axes", axes}, {"keepdim", keep}});
        },
        {{{3, 4, 5}, -4.f, 4.f}});
  }
}

TEST(Gradients, ScaleTensorDifferentiatesXOnly) {
  // x * s + b and (x + b) * s with s an input: d/dx = s. s gets no gradient
  // (Paddle's scale_grad has none for ScaleTensor), so autodiff gives zeros.
  for (bool after : {true, false}) {
    SCOPED_TRACE(after);
    CheckGradient(
        [&](Graph& g, auto& in) {
          return Op1(g, "scale_tensor", {in[0], in[1]},
                     {{"bias", 0.5}, {"bias_after_scale", after}});
        },
        {{{3, 4}}, {{1}, 0.5f, 2.f, DType::kF32, /*differentiate=*/false}});
  }
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {3}});
  Value* s = g.AddInput("s", {DType::kF32, {}});
  Value* y = g.Add1("scale_tensor", {x, s});
  Value* loss = g.Add1("reduce_sum", {y}, {{"axes", std::vector<int64_t>{}}});
  auto grads = BuildBackward(g, loss, {x, s});
  EXPECT_EQ(grads.at(s)->kind, ir::ValueKind::kConstant);  // zeros: no path
}

TEST(Gradients, MissingRuleNamesTheOp) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {3}});
  // top_k values have no gradient rule (nothing Tiller trains uses them).
  Value* y = g.Add1("top_k", {x}, {{"k", 2}, {"indices", false}}, "top_k_3.tmp_0");
  Value* loss = g.Add1("reduce_sum", {y}, {{"axes", std::vector<int64_t>{}}});
  try {
    BuildBackward(g, loss, {x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("top_k_3.tmp_0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tiller::passes
