// Gradient rules against central finite differences. Each case builds
//   loss = sum(op(inputs) * R)        (R fixed random: every output element matters)
// differentiates it with BuildBackward, and compares d loss / d input with
// (loss(x + h) - loss(x - h)) / 2h per element. Float32 kernels with h = 1e-2
// give numeric derivatives good to ~1e-3 relative, hence the tolerance.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "ir/grad.h"
#include "passes/autodiff.h"
#include "runtime/executable.h"

namespace tiller::passes {
namespace {

using ir::Graph;
using ir::Value;

struct InputSpec {
  Shape shape;
  float lo = -1.f, hi = 1.f;
  DType dtype = DType::kF32;
  bool differentiate = true;
};

using Builder = std::function<Value*(Graph&, const std::vector<Value*>&)>;

std::unique_ptr<runtime::Executable> Compile(const Builder& build, const std::vector<InputSpec>& specs,
                                             bool with_grads, const std::vector<float>& weights) {
  auto g = std::make_unique<Graph>();
  std::vector<Value*> ins;
  for (size_t i = 0; i < specs.size(); ++i) ins.push_back(g->AddInput("in" + std::to_string(i), {specs[i].dtype, specs[i].shape}));
  Value* y = build(*g, ins);
  auto w = std::make_shared<AlignedBuffer>(y->bytes());
  std::memcpy(w->data(), weights.data(), y->bytes());
  Value* r = g->AddData("R", y->type, ir::ValueKind::kConstant, w);
  Value* loss = g->Add1("reduce_sum", {g->Add1("mul", {y, r})}, {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
  g->AddOutput("loss", loss);
  if (with_grads) {
    std::vector<Value*> wrt;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].differentiate) wrt.push_back(ins[i]);
    }
    auto grads = BuildBackward(*g, loss, wrt);
    for (Value* v : wrt) g->AddOutput(v->name + ".grad", grads.at(v));
  }
  ir::Verify(*g);
  return runtime::Executable::Build(std::move(g), {});
}

void CheckGradient(const Builder& build, const std::vector<InputSpec>& specs, int64_t out_numel,
                   float rtol = 2e-2f, float atol = 2e-3f) {
  std::mt19937 rng(42);
  std::vector<std::vector<float>> data;
  std::vector<std::vector<int64_t>> int_data;
  for (const auto& s : specs) {
    std::uniform_real_distribution<float> d(s.lo, s.hi);
    std::vector<float> v(NumElements(s.shape));
    for (auto& x : v) x = d(rng);
    data.push_back(v);
  }
  std::vector<float> weights(out_numel);
  std::uniform_real_distribution<float> wd(-1.f, 1.f);
  for (auto& w : weights) w = wd(rng);

  auto exe = Compile(build, specs, true, weights);
  auto plain = Compile(build, specs, false, weights);
  auto feed = [&](runtime::Executable& e) {
    for (size_t i = 0; i < specs.size(); ++i) {
      void* dst = e.inputs()[i].data;
      if (specs[i].dtype == DType::kF32) {
        std::memcpy(dst, data[i].data(), data[i].size() * sizeof(float));
      } else {  // integer inputs (ids): the value range, truncated
        for (size_t k = 0; k < data[i].size(); ++k) static_cast<int64_t*>(dst)[k] = static_cast<int64_t>(data[i][k]);
      }
    }
  };
  auto loss_at = [&]() {
    feed(*plain);
    plain->Run();
    return static_cast<double>(*static_cast<const float*>(plain->outputs()[0].data));
  };
  feed(*exe);
  exe->Run();
  size_t out = 1;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].differentiate) continue;
    const float* analytic = static_cast<const float*>(exe->outputs()[out++].data);
    const float h = 1e-2f;
    for (size_t k = 0; k < data[i].size(); ++k) {
      float saved = data[i][k];
      data[i][k] = saved + h;
      double up = loss_at();
      data[i][k] = saved - h;
      double down = loss_at();
      data[i][k] = saved;
      double numeric = (up - down) / (2 * h);
      ASSERT_NEAR(analytic[k], numeric, atol + rtol * std::abs(numeric))
          << "input " << i << " element " << k;
    }
  }
}

Value* Op1(Graph& g, const char* type, std::vector<Value*> in, ir::AttrMap a = {}) {
  return g.Add1(type, std::move(in), std::move(a));
}

TEST(Gradients, BinaryWithBroadcast) {
  for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
    SCOPED_TRACE(op);
    CheckGradient([&](Graph& g, auto& in) { return Op1(g, op, {in[0], in[1]}); },
                  {{{2, 3, 4}}, {{3, 1}, 0.5f, 2.f}}, 24);
  }
}

TEST(Gradients, Unary) {
  struct U { const char* op; float lo, hi; ir::AttrMap attrs; };
  std::vector<U> ops = {{"relu", -1, 1, {}},        {"tanh", -2, 2, {}},     {"sigmoid", -3, 3, {}},
                        {"exp", -1, 1, {}},         {"log", 0.5f, 2, {}},    {"sqrt", 0.5f, 2, {}},
                        {"rsqrt", 0.5f, 2, {}},     {"square", -2, 2, {}},   {"gelu", -3, 3, {}},
                        {"silu", -3, 3, {}},        {"erf", -2, 2, {}},      {"reciprocal", 0.5f, 2, {}},
                        {"abs", 0.1f, 1, {}},       {"leaky_relu", -1, 1, {{"alpha", 0.1}}},
                        {"scale", -1, 1, {{"scale", 3.0}, {"bias", 1.0}}}};
  for (const auto& u : ops) {
    SCOPED_TRACE(u.op);
    CheckGradient([&](Graph& g, auto& in) { return Op1(g, u.op, {in[0]}, u.attrs); }, {{{3, 5}, u.lo, u.hi}}, 15);
  }
}

TEST(Gradients, MatmulAllTransposesAndBatchBroadcast) {
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb);
      Shape a = ta ? Shape{2, 1, 4, 3} : Shape{2, 1, 3, 4};
      Shape b = tb ? Shape{3, 5, 4} : Shape{3, 4, 5};
      CheckGradient([&](Graph& g, auto& in) {
        return Op1(g, "matmul", {in[0], in[1]}, {{"transpose_a", bool(ta)}, {"transpose_b", bool(tb)}});
      }, {{a}, {b}}, 2 * 3 * 3 * 5);
    }
  }
}

TEST(Gradients, Linear) {
  CheckGradient([](Graph& g, auto& in) { return Op1(g, "linear", {in[0], in[1], in[2]}); },
                {{{2, 3, 4}}, {{4, 5}}, {{5}}}, 30);
}

TEST(Gradients, ShapeOpsAndReductions) {
  CheckGradient([](Graph& g, auto& in) {
    Value* t = Op1(g, "transpose", {in[0]}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
    return Op1(g, "reshape", {t}, {{"shape", std::vector<int64_t>{4, 6}}});
  }, {{{2, 3, 4}}}, 24);
  CheckGradient([](Graph& g, auto& in) {
    return Op1(g, "reduce_mean", {in[0]}, {{"axes", std::vector<int64_t>{1, -1}}, {"keepdim", false}});
  }, {{{2, 3, 4}}}, 2);
  CheckGradient([](Graph& g, auto& in) {
    return Op1(g, "reduce_sum", {in[0]}, {{"axes", std::vector<int64_t>{0}}, {"keepdim", true}});
  }, {{{2, 3}}}, 3);
  CheckGradient([](Graph& g, auto& in) {
    return Op1(g, "expand", {in[0]}, {{"shape", std::vector<int64_t>{2, 3, 4}}});
  }, {{{3, 1}}}, 24);
  CheckGradient([](Graph& g, auto& in) {
    Value* c = Op1(g, "concat", {in[0], in[1]}, {{"axis", 1}});
    ir::Op* s = g.AddOp("split", {c}, {{"axis", 0}, {"sections", std::vector<int64_t>{1, 1}}});
    return Op1(g, "mul", {s->outputs[0], s->outputs[1]});
  }, {{{2, 2}}, {{2, 3}}}, 5);
}

TEST(Gradients, SoftmaxLogSoftmaxLayerNorm) {
  CheckGradient([](Graph& g, auto& in) { return Op1(g, "softmax", {in[0]}, {{"axis", 1}}); }, {{{2, 4, 3}}}, 24);
  CheckGradient([](Graph& g, auto& in) { return Op1(g, "log_softmax", {in[0]}, {{"axis", -1}}); }, {{{3, 5}}}, 15);
  CheckGradient([](Graph& g, auto& in) {
    return Op1(g, "layer_norm", {in[0], in[1], in[2]}, {{"axis", 1}, {"epsilon", 1e-5}});
  }, {{{3, 2, 4}, -2, 2}, {{8}, 0.5f, 1.5f}, {{8}}}, 24, 3e-2f, 5e-3f);
}

TEST(Gradients, EmbeddingScatterAddsRepeatedIds) {
  // ids drawn from [0, 5): repeated ids must accumulate; padding row 2 gets none.
  CheckGradient([](Graph& g, auto& in) {
    return Op1(g, "embedding", {in[0], in[1]}, {{"padding_idx", 2}});
  }, {{{5, 3}}, {{2, 4}, 0.f, 4.99f, DType::kI64, false}}, 24);
}

TEST(Gradients, FanOutAccumulates) {
  // x is used three times: its gradient is the sum of the three paths.
  CheckGradient([](Graph& g, auto& in) {
    Value* x = in[0];
    return Op1(g, "add", {Op1(g, "mul", {x, x}), Op1(g, "tanh", {x})});
  }, {{{4, 3}}}, 12);
}

TEST(Gradients, MissingRuleNamesTheOp) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {3}});
  Value* y = g.Add1("sin", {x}, {}, "sin_3.tmp_0");
  Value* loss = g.Add1("reduce_sum", {y}, {{"axes", std::vector<int64_t>{}}});
  try {
    BuildBackward(g, loss, {x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("sin_3.tmp_0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tiller::passes
