// Gradient rules against central finite differences, shared by the
// Gradients* tests. Each case builds
//   loss = sum(op(inputs) * R)        (R fixed random: every output element matters)
// differentiates it with BuildBackward, and compares d loss / d input with
// (loss(x + h) - loss(x - h)) / 2h per element. Float32 kernels with h = 1e-2
// give numeric derivatives good to ~1e-3 relative, hence the default
// tolerance. Ops with kinks (max, relu) need inputs farther than h from them:
// `distinct` spreads values on a shuffled grid, `values` sets them outright.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "ir/grad.h"
#include "passes/autodiff.h"
#include "compile/executable.h"

namespace tiller::passes::grad_check {

using ir::Graph;
using ir::Value;

struct InputSpec {
  Shape shape;
  float lo = -1.f, hi = 1.f;
  DType dtype = DType::kF32;
  bool differentiate = true;
  bool distinct = false;  // a shuffled grid over [lo, hi): no two values closer than the step
  std::vector<float> values = {};  // explicit data (overrides lo/hi)
};

using Builder = std::function<Value*(Graph&, const std::vector<Value*>&)>;

inline Value* Op1(Graph& g, const char* type, std::vector<Value*> in, ir::AttrMap a = {}) {
  return g.Add1(type, std::move(in), std::move(a));
}

// A constant of the given values (ids, labels, conditions fixed by a test).
template <typename T>
Value* Const(Graph& g, DType dt, const Shape& shape, const std::vector<T>& values) {
  auto buf = std::make_shared<AlignedBuffer>(values.size() * sizeof(T));
  std::memcpy(buf->data(), values.data(), values.size() * sizeof(T));
  return g.AddData("const", {dt, shape}, ir::ValueKind::kConstant, buf);
}

inline std::unique_ptr<Graph> BuildForward(const Builder& build,
                                           const std::vector<InputSpec>& specs,
                                           std::vector<Value*>* ins, Value** y) {
  auto g = std::make_unique<Graph>();
  for (size_t i = 0; i < specs.size(); ++i)
    ins->push_back(g->AddInput("in" + std::to_string(i), {specs[i].dtype, specs[i].shape}));
  *y = build(*g, *ins);
  return g;
}

inline std::unique_ptr<compile::Executable> Compile(const Builder& build,
                                                    const std::vector<InputSpec>& specs,
                                                    bool with_grads,
                                                    const std::vector<float>& weights) {
  std::vector<Value*> ins;
  Value* y;
  auto g = BuildForward(build, specs, &ins, &y);
  auto w = std::make_shared<AlignedBuffer>(y->bytes());
  std::memcpy(w->data(), weights.data(), y->bytes());
  Value* r = g->AddData("R", y->type, ir::ValueKind::kConstant, w);
  Value* loss = g->Add1("reduce_sum", {g->Add1("mul", {y, r})},
                        {{"axes", std::vector<int64_t>{}}, {"keepdim", false}});
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
  return compile::Executable::Build(std::move(g), {});
}

inline std::vector<float> InputData(const InputSpec& s, std::mt19937& rng) {
  size_t n = static_cast<size_t>(NumElements(s.shape));
  if (!s.values.empty()) {
    EXPECT_EQ(s.values.size(), n) << "explicit values do not fill " << ShapeToString(s.shape);
    return s.values;
  }
  std::vector<float> v(n);
  if (s.distinct) {
    std::vector<size_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    // An offset of 0.37 steps keeps round numbers (0, thresholds) off the grid.
    for (size_t i = 0; i < n; ++i)
      v[i] = s.lo + (s.hi - s.lo) * (static_cast<float>(perm[i]) + 0.37f) / static_cast<float>(n);
    return v;
  }
  std::uniform_real_distribution<float> d(s.lo, s.hi);
  for (auto& x : v) x = d(rng);
  return v;
}

// out_numel < 0: taken from the built graph.
inline void CheckGradient(const Builder& build, const std::vector<InputSpec>& specs,
                          int64_t out_numel = -1, float rtol = 2e-2f, float atol = 2e-3f) {
  if (out_numel < 0) {
    std::vector<Value*> ins;
    Value* y;
    auto g = BuildForward(build, specs, &ins, &y);
    out_numel = NumElements(y->shape());
  }
  std::mt19937 rng(42);
  std::vector<std::vector<float>> data;
  for (const auto& s : specs) data.push_back(InputData(s, rng));
  std::vector<float> weights(out_numel);
  std::uniform_real_distribution<float> wd(-1.f, 1.f);
  for (auto& w : weights) w = wd(rng);

  auto exe = Compile(build, specs, true, weights);
  auto plain = Compile(build, specs, false, weights);
  auto feed = [&](compile::Executable& e) {
    for (size_t i = 0; i < specs.size(); ++i) {
      void* dst = e.inputs()[i].data;
      if (specs[i].dtype == DType::kF32) {
        std::memcpy(dst, data[i].data(), data[i].size() * sizeof(float));
      } else {  // integer inputs (ids): the value range, truncated
        for (size_t k = 0; k < data[i].size(); ++k)
          static_cast<int64_t*>(dst)[k] = static_cast<int64_t>(data[i][k]);
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

}  // namespace tiller::passes::grad_check
