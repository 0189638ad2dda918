// Unary elementwise CPU kernels (backends/cpu/kernels/unary.cc) against
// double references: every activation and math op, the accuracy of the
// vectorized exp/erf/tanh/sigmoid/gelu, and gelu_grad.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/kernel.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::AttrMap;
using ir::Graph;
using ir::Value;
using kernel_test::ExpectClose;
using kernel_test::ExpectEq;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RandI;
using kernel_test::RunOp;

struct UnaryCase {
  std::string name;
  AttrMap attrs;
  std::function<double(double)> ref;
  float lo, hi;
};

double Sig(double x) {
  return 1 / (1 + std::exp(-x));
}

std::vector<UnaryCase> UnaryCases() {
  const double kInvSqrt2 = 0.70710678118654752, kC = 0.79788456080286536;
  return {
      {"relu", {}, [](double x) { return std::max(x, 0.0); }, -3, 3},
      {"gelu", {}, [=](double x) { return 0.5 * x * (1 + std::erf(x * kInvSqrt2)); }, -9, 9},
      {"gelu",
       {{"approximate", true}},
       [=](double x) { return 0.5 * x * (1 + std::tanh(kC * (x + 0.044715 * x * x * x))); },
       -9,
       9},
      {"tanh", {}, [](double x) { return std::tanh(x); }, -10, 10},
      {"sigmoid", {}, Sig, -30, 30},
      {"exp", {}, [](double x) { return std::exp(x); }, -80, 80},
      {"log", {}, [](double x) { return std::log(x); }, 0.01f, 100},
      {"sqrt", {}, [](double x) { return std::sqrt(x); }, 0, 100},
      {"rsqrt", {}, [](double x) { return 1 / std::sqrt(x); }, 0.01f, 100},
      {"abs", {}, [](double x) { return std::abs(x); }, -3, 3},
      {"neg", {}, [](double x) { return -x; }, -3, 3},
      {"erf", {}, [](double x) { return std::erf(x); }, -5, 5},
      {"reciprocal", {}, [](double x) { return 1 / x; }, 0.1f, 10},
      {"square", {}, [](double x) { return x * x; }, -3, 3},
      {"silu", {}, [](double x) { return x * Sig(x); }, -20, 20},
      {"swish", {{"beta", 1.5}}, [](double x) { return x * Sig(1.5 * x); }, -20, 20},
      {"leaky_relu", {{"alpha", 0.1}}, [](double x) { return x > 0 ? x : 0.1 * x; }, -3, 3},
      {"elu", {{"alpha", 0.7}}, [](double x) { return x > 0 ? x : 0.7 * std::expm1(x); }, -5, 3},
      {"hard_swish", {}, [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; }, -5, 5},
      {"hard_sigmoid",
       {},
       [](double x) { return std::clamp(0.1666667 * x + 0.5, 0.0, 1.0); },
       -5,
       5},
      {"relu6", {}, [](double x) { return std::clamp(x, 0.0, 6.0); }, -3, 9},
      {"softplus",
       {{"beta", 2.0}, {"threshold", 10.0}},
       [](double x) { return 2 * x > 10 ? x : std::log1p(std::exp(2 * x)) / 2; },
       -10,
       10},
      {"sin", {}, [](double x) { return std::sin(x); }, -6, 6},
      {"cos", {}, [](double x) { return std::cos(x); }, -6, 6},
      {"floor", {}, [](double x) { return std::floor(x); }, -6, 6},
      {"ceil", {}, [](double x) { return std::ceil(x); }, -6, 6},
      {"round", {}, [](double x) { return std::round(x); }, -6, 6},
      {"sign", {}, [](double x) { return double((x > 0) - (x < 0)); }, -3, 3},
      {"log1p", {}, [](double x) { return std::log1p(x); }, -0.9f, 10},
      {"pow_scalar", {{"factor", 3.0}}, [](double x) { return x * x * x; }, -3, 3},
      {"pow_scalar", {{"factor", 0.5}}, [](double x) { return std::sqrt(x); }, 0, 3},
      {"scale", {{"scale", 2.0}, {"bias", 0.5}}, [](double x) { return 2 * x + 0.5; }, -3, 3},
      {"scale",
       {{"scale", 2.0}, {"bias", 0.5}, {"bias_after_scale", false}},
       [](double x) { return 2 * (x + 0.5); },
       -3,
       3},
      {"clip",
       {{"min", -1.0}, {"max", 0.5}},
       [](double x) { return std::clamp(x, -1.0, 0.5); },
       -3,
       3},
  };
}

TEST(CpuKernelUnary, Float32MatchesDoubleReference) {
  for (const UnaryCase& c : UnaryCases()) {
    for (int64_t n : {37, 40000 + 13}) {  // serial and parallel paths, vector tails
      Graph g;
      Value* out = g.Add1(c.name, {g.AddInput("x", {DType::kF32, {n}})}, c.attrs);
      std::vector<float> x = RandF(n, c.lo, c.hi);
      x[0] = c.lo;
      x[1] = c.hi;
      auto o = RunOp(*out->producer, {x.data()});
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = c.ref(x[i]);
      ExpectClose(Ptr<float>(o[0]), want, 2e-6, 1e-7, c.name);
    }
  }
}

TEST(CpuKernelUnary, Float64AndIntegers) {
  for (const UnaryCase& c : UnaryCases()) {
    Graph g;
    Value* out = g.Add1(c.name, {g.AddInput("x", {DType::kF64, {50}})}, c.attrs);
    std::vector<float> xf = RandF(50, c.lo, c.hi);
    std::vector<double> x(xf.begin(), xf.end()), want(50);
    auto o = RunOp(*out->producer, {x.data()});
    for (int i = 0; i < 50; ++i) want[i] = c.ref(x[i]);
    for (int i = 0; i < 50; ++i)
      EXPECT_NEAR(Ptr<double>(o[0])[i], want[i], 1e-6 + 1e-6 * std::abs(want[i])) << c.name;
  }
  std::vector<int64_t> x = RandI<int64_t>(40, -9, 9);
  const std::map<std::string, std::function<int64_t(int64_t)>> ops = {
      {"relu", [](int64_t v) { return std::max<int64_t>(v, 0); }},
      {"abs", [](int64_t v) { return std::abs(v); }},
      {"neg", [](int64_t v) { return -v; }},
      {"square", [](int64_t v) { return v * v; }},
      {"sign", [](int64_t v) { return (v > 0) - (v < 0); }}};
  for (const auto& [name, ref] : ops) {
    Graph g;
    Value* out = g.Add1(name, {g.AddInput("x", {DType::kI64, {40}})});
    auto o = RunOp(*out->producer, {x.data()});
    std::vector<int64_t> want(40);
    for (int i = 0; i < 40; ++i) want[i] = ref(x[i]);
    ExpectEq(Ptr<int64_t>(o[0]), want, name);
  }
}

// The vectorized math is checked on a dense grid against libm in double.
TEST(CpuKernelUnary, VectorMathAccuracy) {
  struct Fn {
    std::string name;
    AttrMap attrs;
    std::function<double(double)> ref;
    double lo, hi;
  };
  const std::vector<Fn> fns = {
      {"exp", {}, [](double x) { return std::exp(x); }, -87, 88.5},
      {"erf", {}, [](double x) { return std::erf(x); }, -6, 6},
      {"tanh", {}, [](double x) { return std::tanh(x); }, -12, 12},
      {"sigmoid", {}, Sig, -80, 80},
      {"gelu", {}, [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, -12, 12},
      {"silu", {}, [](double x) { return x * Sig(x); }, -80, 80}};
  const int64_t n = 400001;
  for (const Fn& f : fns) {
    Graph g;
    Value* out = g.Add1(f.name, {g.AddInput("x", {DType::kF32, {n}})}, f.attrs);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(f.lo + (f.hi - f.lo) * i / (n - 1));
    auto o = RunOp(*out->producer, {x.data()});
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      double want = f.ref(x[i]);
      if (want == 0) continue;
      worst = std::max(worst, std::abs(Ptr<float>(o[0])[i] - want) / std::abs(want));
    }
    EXPECT_LT(worst, 1e-6) << f.name;
  }
  // Special values: overflow, underflow and NaN pass through like libm.
  Graph g;
  Value* e = g.Add1("exp", {g.AddInput("x", {DType::kF32, {4}})});
  std::vector<float> x = {100.0f, -200.0f, NAN, -INFINITY};
  auto o = RunOp(*e->producer, {x.data()});
  EXPECT_TRUE(std::isinf(Ptr<float>(o[0])[0]));
  EXPECT_EQ(Ptr<float>(o[0])[1], 0.0f);
  EXPECT_TRUE(std::isnan(Ptr<float>(o[0])[2]));
  EXPECT_EQ(Ptr<float>(o[0])[3], 0.0f);
}

// gelu_grad = dy * gelu'(x), exact and tanh forms, on a dense grid against
// double. gelu' is a sum of two terms that cancel near its root (x ~ -0.75),
// so the error is bounded relative to |dy| (|term 1| + |term 2|): 1e-6 for
// float32 (the erfc fit alone is good to 1.2e-7; below float32's normal
// range, 1e-38, absolute), 1e-13 for float64. The tanh form's tails scale
// with exp(-2|u|), which turns float32's error in u (four roundings,
// 2^-22 relative) into 2|u| 2^-22 of the result: added to its float32 bound.
TEST(CpuKernelUnary, GeluGradAccuracy) {
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  // The two terms of gelu'(x).
  auto exact = [](double x) -> std::pair<double, double> {
    return {0.5 * std::erfc(-x / std::sqrt(2.0)), x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI)};
  };
  // (1 + t) / 2 and 1 - t^2 through e = exp(-2|u|): double's tanh is -1
  // for u < -19 and would make the reference 0 where float32 is not.
  auto tanh_form = [=](double x) -> std::pair<double, double> {
    const double u = k * (x + c * x * x * x), e = std::exp(-2 * std::abs(u));
    return {u < 0 ? e / (1 + e) : 1 / (1 + e),
            0.5 * x * 4 * e / ((1 + e) * (1 + e)) * k * (1 + 3 * c * x * x)};
  };
  const int64_t n = 200001;
  for (bool approximate : {false, true}) {
    SCOPED_TRACE(approximate ? "tanh form" : "exact");
    std::vector<float> x(n), dy = RandF(n, -2, 2);
    std::vector<double> xd(n), dyd(n), want(n), scale(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(-12.0 + 24.0 * i / (n - 1));
      xd[i] = x[i];
      dyd[i] = dy[i];
      auto [t1, t2] = approximate ? tanh_form(x[i]) : exact(x[i]);
      want[i] = dy[i] * (t1 + t2);
      scale[i] = std::abs(dy[i]) * (std::abs(t1) + std::abs(t2));
      if (approximate)
        scale[i] *= 1 + 2 * k * std::abs(x[i] + c * x[i] * x[i] * x[i]) * 0x1p-22 / 1e-6;
    }
    for (DType dt : {DType::kF32, DType::kF64}) {
      Graph g;
      Value* o = g.Add1("gelu_grad", {g.AddInput("x", {dt, {n}}), g.AddInput("dy", {dt, {n}})},
                        {{"approximate", approximate}});
      auto r = dt == DType::kF32 ? RunOp(*o->producer, {x.data(), dy.data()})
                                 : RunOp(*o->producer, {xd.data(), dyd.data()});
      const double tol = dt == DType::kF32 ? 1e-6 : 1e-13,
                   floor = dt == DType::kF32 ? 1e-38 : 1e-300;
      int bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double got = dt == DType::kF32 ? Ptr<float>(r[0])[i] : Ptr<double>(r[0])[i];
        if (!(std::abs(got - want[i]) <= tol * scale[i] + floor) && bad++ < 3)
          ADD_FAILURE() << DTypeName(dt) << " x " << x[i] << ": got " << got << " want " << want[i];
      }
    }
  }
}

}  // namespace
}  // namespace tiller::cpu
