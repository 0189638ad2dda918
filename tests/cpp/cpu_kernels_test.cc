// CPU kernels against naive double-precision references written here:
// broadcasting, attributes, negative axes, keepdim, reversed slices, pooling
// modes, and the accuracy of the vectorized exp/erf/tanh/sigmoid/gelu.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include "backends/cpu/kernel.h"
#include "core/error.h"
#include "core/half.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::AttrMap;
using ir::Graph;
using ir::Value;
using V = std::vector<int64_t>;

std::mt19937& Rng() {
  static std::mt19937 rng(1234);
  return rng;
}

std::vector<float> RandF(int64_t n, float lo = -3, float hi = 3) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(Rng());
  return v;
}

template <typename T>
std::vector<T> RandI(int64_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(Rng()));
  return v;
}

// Runs the op's kernel; outputs start filled with 0xCD so unwritten bytes show.
std::vector<AlignedBuffer> RunOp(const ir::Op& op, std::vector<const void*> ins) {
  auto k = CreateKernel(op);
  KernelArgs args;
  args.inputs = std::move(ins);
  std::vector<AlignedBuffer> outs;
  for (const Value* v : op.outputs) {
    outs.emplace_back(v->bytes());
    if (v->bytes()) std::memset(outs.back().data(), 0xCD, v->bytes());  // empty: data() is null
  }
  for (auto& b : outs) args.outputs.push_back(b.data());
  AlignedBuffer ws(k->workspace_bytes());
  args.workspace = ws.data();
  k->Run(args);
  return outs;
}

template <typename T>
const T* Ptr(const AlignedBuffer& b) {
  return b.as<T>();
}

void ExpectClose(const float* got, const std::vector<double>& want, double rtol, double atol,
                 const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double tol = atol + rtol * std::abs(want[i]);
    bool ok = std::abs(got[i] - want[i]) <= tol || (std::isnan(want[i]) && std::isnan(got[i])) ||
              (std::isinf(want[i]) && got[i] == want[i]);
    if (!ok && bad++ < 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << " want " << want[i];
  }
}

template <typename T, typename U>
void ExpectEq(const T* got, const std::vector<U>& want, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (static_cast<double>(got[i]) != static_cast<double>(want[i]) && bad++ < 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << +got[i] << " want " << +want[i];
  }
}

// Flat index into `in` of output element `flat`, numpy broadcasting.
int64_t BIndex(const Shape& out, const Shape& in, int64_t flat) {
  int64_t idx = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1, e = static_cast<int>(in.size()) - 1; d >= 0;
       --d, --e) {
    int64_t c = flat % out[d];
    flat /= out[d];
    if (e >= 0) {
      if (in[e] != 1) idx += c * stride;
      stride *= in[e];
    }
  }
  return idx;
}

double PyMod(double a, double b) {
  double r = std::fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

const std::vector<std::pair<Shape, Shape>> kBroadcastCases = {{{3, 5, 7}, {3, 5, 7}},
                                                              {{4, 5}, {}},
                                                              {{}, {4, 5}},
                                                              {{6, 33}, {33}},
                                                              {{6, 1}, {6, 33}},
                                                              {{2, 1, 5}, {3, 1}},
                                                              {{1, 3, 1, 4}, {2, 1, 5, 1}},
                                                              {{256, 300}, {300}},
                                                              {{70000}, {1}},
                                                              {{2, 3, 1, 1}, {1, 3, 4, 5}}};

TEST(CpuKernelBinary, FloatOpsBroadcast) {
  const std::map<std::string, std::function<double(double, double)>> ops = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"max", [](double a, double b) { return std::max(a, b); }},
      {"min", [](double a, double b) { return std::min(a, b); }},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
      {"mod", PyMod},
      {"floor_div", [](double a, double b) { return std::floor(a / b); }}};
  for (const auto& [name, ref] : ops) {
    for (const auto& [sa, sb] : kBroadcastCases) {
      Graph g;
      Value* va = g.AddInput("a", {DType::kF32, sa});
      Value* vb = g.AddInput("b", {DType::kF32, sb});
      Value* out = g.Add1(name, {va, vb});
      std::vector<float> a = RandF(NumElements(sa)), b = RandF(NumElements(sb));
      if (name == "pow") a = RandF(a.size(), 0.1f, 3);
      for (float& x : b) {  // keep divisors away from zero; integers for mod/floor_div
        if (name == "mod" || name == "floor_div") x = std::round(x * 5);
        if (std::abs(x) < 0.5f) x = x < 0 ? -0.5f : 1.0f;
      }
      if (name == "mod" || name == "floor_div")
        for (float& x : a) x = std::round(x * 20);
      auto o = RunOp(*out->producer, {a.data(), b.data()});
      std::vector<double> want(NumElements(out->shape()));
      for (size_t i = 0; i < want.size(); ++i)
        want[i] = ref(a[BIndex(out->shape(), sa, i)], b[BIndex(out->shape(), sb, i)]);
      ExpectClose(Ptr<float>(o[0]), want, 1e-6, 1e-6, name + ShapeToString(sa) + ShapeToString(sb));
    }
  }
}

template <typename T>
void CheckIntOps(DType dt) {
  auto div = [](int64_t a, int64_t b) { return b == 0 ? 0 : a / b; };
  auto mod = [](int64_t a, int64_t b) { return b == 0 ? 0 : (int64_t)PyMod(a, b); };
  auto fdiv = [](int64_t a, int64_t b) {
    return b == 0 ? 0 : (int64_t)std::floor((double)a / (double)b);
  };
  const std::map<std::string, std::function<int64_t(int64_t, int64_t)>> ops = {
      {"add", [](int64_t a, int64_t b) { return a + b; }},
      {"mul", [](int64_t a, int64_t b) { return a * b; }},
      {"max", [](int64_t a, int64_t b) { return std::max(a, b); }},
      {"div", div},
      {"mod", mod},
      {"floor_div", fdiv}};
  Shape sa{4, 1, 9}, sb{3, 9};
  for (const auto& [name, ref] : ops) {
    Graph g;
    Value* out = g.Add1(name, {g.AddInput("a", {dt, sa}), g.AddInput("b", {dt, sb})});
    std::vector<T> a = RandI<T>(36, -20, 20), b = RandI<T>(27, -6, 6);
    auto o = RunOp(*out->producer, {a.data(), b.data()});
    std::vector<int64_t> want(NumElements(out->shape()));
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = ref(a[BIndex(out->shape(), sa, i)], b[BIndex(out->shape(), sb, i)]);
    ExpectEq(Ptr<T>(o[0]), want, name);
  }
}

TEST(CpuKernelBinary, IntOpsFloorSemanticsAndZeroDivisor) {
  CheckIntOps<int32_t>(DType::kI32);
  CheckIntOps<int64_t>(DType::kI64);
}

TEST(CpuKernelBinary, ComparisonsAndLogic) {
  const std::map<std::string, std::function<bool(double, double)>> cmp = {
      {"equal", std::equal_to<double>()},  {"not_equal", std::not_equal_to<double>()},
      {"less", std::less<double>()},       {"less_equal", std::less_equal<double>()},
      {"greater", std::greater<double>()}, {"greater_equal", std::greater_equal<double>()}};
  Shape sa{5, 1, 7}, sb{4, 7};
  for (const auto& [name, ref] : cmp) {
    Graph g;
    Value* f =
        g.Add1(name, {g.AddInput("a", {DType::kF32, sa}), g.AddInput("b", {DType::kF32, sb})});
    Value* i =
        g.Add1(name, {g.AddInput("c", {DType::kI64, sa}), g.AddInput("d", {DType::kI64, sb})});
    ASSERT_EQ(f->dtype(), DType::kBool);
    std::vector<float> a(35), b(28);
    std::vector<int64_t> c = RandI<int64_t>(35, -2, 2), d = RandI<int64_t>(28, -2, 2);
    for (int k = 0; k < 35; ++k) a[k] = static_cast<float>(c[k]);  // ties are common
    for (int k = 0; k < 28; ++k) b[k] = static_cast<float>(d[k]);
    auto of = RunOp(*f->producer, {a.data(), b.data()});
    auto oi = RunOp(*i->producer, {c.data(), d.data()});
    std::vector<uint8_t> want(NumElements(f->shape()));
    for (size_t k = 0; k < want.size(); ++k)
      want[k] = ref(a[BIndex(f->shape(), sa, k)], b[BIndex(f->shape(), sb, k)]);
    ExpectEq(Ptr<uint8_t>(of[0]), want, name + " f32");
    ExpectEq(Ptr<uint8_t>(oi[0]), want, name + " i64");
  }
  const std::map<std::string, std::function<bool(bool, bool)>> logic = {
      {"logical_and", [](bool x, bool y) { return x && y; }},
      {"logical_or", [](bool x, bool y) { return x || y; }},
      {"logical_xor", [](bool x, bool y) { return x != y; }},
      {"equal", [](bool x, bool y) { return x == y; }},
      {"not_equal", [](bool x, bool y) { return x != y; }}};
  std::vector<uint8_t> a = RandI<uint8_t>(12, 0, 1), b = RandI<uint8_t>(4, 0, 1);
  for (const auto& [name, ref] : logic) {
    Graph g;
    Value* o = g.Add1(
        name, {g.AddInput("a", {DType::kBool, {3, 4}}), g.AddInput("b", {DType::kBool, {4}})});
    auto r = RunOp(*o->producer, {a.data(), b.data()});
    std::vector<uint8_t> want(12);
    for (int k = 0; k < 12; ++k) want[k] = ref(a[k], b[k % 4]);
    ExpectEq(Ptr<uint8_t>(r[0]), want, name);
  }
  Graph g;
  Value* n = g.Add1("logical_not", {g.AddInput("a", {DType::kBool, {12}})});
  auto r = RunOp(*n->producer, {a.data()});
  std::vector<uint8_t> want(12);
  for (int k = 0; k < 12; ++k) want[k] = !a[k];
  ExpectEq(Ptr<uint8_t>(r[0]), want, "logical_not");
}

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

// Reference reduction over `axes` (sorted, non-negative) of a row-major tensor.
std::vector<double> RefReduce(const std::vector<double>& x, const Shape& s,
                              const std::vector<int>& axes, const std::string& op) {
  Shape kept_shape;
  for (int d = 0; d < static_cast<int>(s.size()); ++d)
    kept_shape.push_back(std::count(axes.begin(), axes.end(), d) ? 1 : s[d]);
  int64_t n_out = NumElements(kept_shape), count = NumElements(s) / std::max<int64_t>(n_out, 1);
  double init = op == "reduce_max"    ? -INFINITY
                : op == "reduce_min"  ? INFINITY
                : op == "reduce_prod" ? 1
                                      : 0;
  std::vector<double> out(n_out, init);
  std::vector<int64_t> st = Strides(kept_shape);
  for (int64_t i = 0; i < NumElements(s); ++i) {
    int64_t rem = i, o = 0;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      if (kept_shape[d] != 1) o += (rem % s[d]) * st[d];
      rem /= s[d];
    }
    double& r = out[o];
    if (op == "reduce_max")
      r = std::max(r, x[i]);
    else if (op == "reduce_min")
      r = std::min(r, x[i]);
    else if (op == "reduce_prod")
      r *= x[i];
    else
      r += x[i];
  }
  if (op == "reduce_mean")
    for (double& v : out) v /= count;
  return out;
}

TEST(CpuKernelReduce, AxesKeepdimAndDtypes) {
  struct Case {
    Shape shape;
    V axes;
  };
  const std::vector<Case> cases = {
      {{4, 5, 6}, {}},        {{4, 5, 6}, {0}},       {{4, 5, 6}, {1}},      {{4, 5, 6}, {-1}},
      {{4, 5, 6}, {0, 2}},    {{4, 5, 6}, {0, 1}},    {{4, 5, 6}, {2, 1}},   {{2, 3, 4, 5}, {0, 2}},
      {{2, 3, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 3}}, {{3, 1, 4}, {1}},      {{300, 1000}, {-1}},
      {{300, 1000}, {0}},     {{70000}, {}},          {{1, 64, 1, 300}, {1}}};
  for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
    for (const Case& c : cases) {
      for (bool keep : {false, true}) {
        AttrMap attrs{{"axes", c.axes}, {"keepdim", keep}};
        int64_t n = NumElements(c.shape);
        std::vector<int> axes;
        for (int64_t a : c.axes) axes.push_back(static_cast<int>(a < 0 ? a + c.shape.size() : a));
        if (axes.empty())
          for (size_t d = 0; d < c.shape.size(); ++d) axes.push_back(static_cast<int>(d));
        std::sort(axes.begin(), axes.end());
        // Values near 1 keep products finite; small integers make int64 exact.
        std::vector<float> xf = RandF(n, std::string(op) == "reduce_prod" ? 0.9f : -3,
                                      std::string(op) == "reduce_prod" ? 1.1f : 3);
        std::vector<int64_t> xi = RandI<int64_t>(n, -3, 3);
        std::string what = std::string(op) + ShapeToString(c.shape) + ShapeToString(c.axes);
        Graph g;
        Value* of = g.Add1(op, {g.AddInput("x", {DType::kF32, c.shape})}, attrs);
        auto r = RunOp(*of->producer, {xf.data()});
        auto want = RefReduce(std::vector<double>(xf.begin(), xf.end()), c.shape, axes, op);
        ASSERT_EQ(static_cast<size_t>(NumElements(of->shape())), want.size()) << what;
        // Float accumulation error grows with the count of summed values.
        int64_t count = n / std::max<int64_t>(1, NumElements(of->shape()));
        ExpectClose(Ptr<float>(r[0]), want, 2e-5, 1e-6 * count, what);
        if (n > 1000 || std::string(op) == "reduce_prod") continue;
        Value* oi = g.Add1(op, {g.AddInput("y", {DType::kI64, c.shape})}, attrs);
        auto ri = RunOp(*oi->producer, {xi.data()});
        auto wi = RefReduce(std::vector<double>(xi.begin(), xi.end()), c.shape, axes, op);
        for (double& v : wi) v = std::trunc(v);
        ExpectEq(Ptr<int64_t>(ri[0]), wi, what + " int64");
      }
    }
  }
}

// A whole-tensor reduction gives the same bits whatever the threads (a
// step whose stages run on several processes lends its update fewer
// threads than one process: global-norm clipping must not notice).
TEST(CpuKernelReduce, WholeTensorSumIsTheSameForAnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (int64_t n : {int64_t{70000}, int64_t{1} << 20, int64_t{1000003}}) {
    std::vector<float> x = RandF(n, -3, 3);
    Graph g;
    Value* y = g.Add1("reduce_sum", {g.AddInput("x", {DType::kF32, {n}})},
                      {{"axes", V{}}, {"keepdim", false}});
    float first = 0;
    for (int threads : {1, 2, 3, 7}) {
      omp_set_num_threads(threads);
      const float got = *Ptr<float>(RunOp(*y->producer, {x.data()})[0]);
      if (threads == 1) first = got;
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(first))
          << n << " elements, " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

TEST(CpuKernelReduce, ArgMaxArgMinFirstIndex) {
  Shape s{3, 4, 5};
  std::vector<float> x(60);
  std::vector<int64_t> xi = RandI<int64_t>(60, 0, 3);  // many ties
  for (int i = 0; i < 60; ++i) x[i] = static_cast<float>(xi[i]);
  for (const char* op : {"argmax", "argmin"}) {
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      for (const char* dt : {"int64", "int32"}) {
        Graph g;
        Value* o = g.Add1(op, {g.AddInput("x", {DType::kF32, s})},
                          {{"axis", axis}, {"keepdim", true}, {"dtype", std::string(dt)}});
        auto r = RunOp(*o->producer, {x.data()});
        int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
        int64_t inner = 1, outer = 1;
        for (int d = a + 1; d < 3; ++d) inner *= s[d];
        for (int d = 0; d < a; ++d) outer *= s[d];
        std::vector<int64_t> want;
        for (int64_t o2 = 0; o2 < outer; ++o2) {
          for (int64_t j = 0; j < inner; ++j) {
            int64_t best = 0;
            for (int64_t k = 1; k < s[a]; ++k) {
              float v = x[(o2 * s[a] + k) * inner + j], b = x[(o2 * s[a] + best) * inner + j];
              if (std::string(op) == "argmax" ? v > b : v < b) best = k;
            }
            want.push_back(best);
          }
        }
        std::string what = std::string(op) + " axis " + std::to_string(axis) + dt;
        if (std::string(dt) == "int64")
          ExpectEq(Ptr<int64_t>(r[0]), want, what);
        else
          ExpectEq(Ptr<int32_t>(r[0]), want, what);
      }
    }
  }
}

// logsumexp in double: max + log(sum exp(x - max)) per output.
std::vector<double> RefLogSumExp(const std::vector<double>& x, const Shape& s,
                                 const std::vector<int>& axes) {
  std::vector<double> m = RefReduce(x, s, axes, "reduce_max");
  Shape kept_shape;
  for (int d = 0; d < static_cast<int>(s.size()); ++d)
    kept_shape.push_back(std::count(axes.begin(), axes.end(), d) ? 1 : s[d]);
  std::vector<int64_t> st = Strides(kept_shape);
  std::vector<double> sum(m.size(), 0.0);
  for (int64_t i = 0; i < NumElements(s); ++i) {
    int64_t rem = i, o = 0;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      if (kept_shape[d] != 1) o += (rem % s[d]) * st[d];
      rem /= s[d];
    }
    sum[o] += std::exp(x[i] - m[o]);
  }
  for (size_t o = 0; o < m.size(); ++o) m[o] += std::log(sum[o]);
  return m;
}

// Every layout of the kernel (rows, vector column blocks with a tail,
// strided axes, the whole tensor) in float32 and float64, at magnitudes
// where exp(x) overflows float32 (only the max-shifted sum survives).
TEST(CpuKernelReduce, LogSumExpLayoutsAndMagnitudes) {
  struct Case {
    Shape shape;
    V axes;
  };
  const std::vector<Case> cases = {{{4, 5, 6}, {}},   {{4, 5, 6}, {0}},      {{4, 5, 6}, {1}},
                                   {{4, 5, 6}, {-1}}, {{4, 5, 6}, {0, 2}},   {{2, 3, 4, 5}, {1, 3}},
                                   {{3, 1, 4}, {1}},  {{300, 1000}, {-1}},   {{300, 37}, {0}},
                                   {{70000}, {}},     {{1, 64, 1, 300}, {1}}};
  for (const Case& c : cases) {
    for (float magnitude : {3.0f, 900.0f}) {
      int64_t n = NumElements(c.shape);
      std::vector<int> axes;
      for (int64_t a : c.axes) axes.push_back(static_cast<int>(a < 0 ? a + c.shape.size() : a));
      if (axes.empty())
        for (size_t d = 0; d < c.shape.size(); ++d) axes.push_back(static_cast<int>(d));
      std::sort(axes.begin(), axes.end());
      std::vector<float> xf = RandF(n, -magnitude, magnitude);
      std::vector<double> xd(xf.begin(), xf.end());
      std::string what = ShapeToString(c.shape) + ShapeToString(c.axes) + " magnitude " +
                         std::to_string(magnitude);
      auto want = RefLogSumExp(xd, c.shape, axes);
      Graph g;
      AttrMap attrs{{"axes", c.axes}, {"keepdim", false}};
      Value* of = g.Add1("logsumexp", {g.AddInput("x", {DType::kF32, c.shape})}, attrs);
      auto r = RunOp(*of->producer, {xf.data()});
      ASSERT_EQ(static_cast<size_t>(NumElements(of->shape())), want.size()) << what;
      ExpectClose(Ptr<float>(r[0]), want, 2e-6, 1e-5, what);
      Value* od = g.Add1("logsumexp", {g.AddInput("y", {DType::kF64, c.shape})}, attrs);
      auto rd = RunOp(*od->producer, {xd.data()});
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(Ptr<double>(rd[0])[i], want[i], 1e-12 * std::max(1.0, std::abs(want[i])))
            << what << " float64 [" << i << "]";
    }
  }
}

// Paddle's formula on non-finite values: an inf or NaN in a set gives NaN,
// a set of -inf gives NaN (-inf - -inf), -inf beside finite values drops
// out; in the row and the column layouts. An empty set gives -inf.
TEST(CpuKernelReduce, LogSumExpNonFiniteAndEmpty) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> rows = {1,   inf, 2, 0.5f, -inf, -inf, -inf, -inf,
                                   nan, 1,   2, 0.5f, -inf, 0,    1,    -2};
  const double tail = std::log(std::exp(-1.0) + 1.0 + std::exp(-3.0)) + 1.0;
  for (int64_t axis : {1, 0}) {
    std::vector<float> x = rows;
    if (axis == 0) {  // the same sets as columns
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) x[j * 4 + i] = rows[i * 4 + j];
    }
    Graph g;
    Value* o = g.Add1("logsumexp", {g.AddInput("x", {DType::kF32, {4, 4}})},
                      {{"axes", V{axis}}, {"keepdim", false}});
    auto r = RunOp(*o->producer, {x.data()});
    const float* y = Ptr<float>(r[0]);
    EXPECT_TRUE(std::isnan(y[0])) << axis;
    EXPECT_TRUE(std::isnan(y[1])) << axis;
    EXPECT_TRUE(std::isnan(y[2])) << axis;
    EXPECT_NEAR(y[3], tail, 1e-6) << axis;
  }
  Graph g;
  Value* o = g.Add1("logsumexp", {g.AddInput("x", {DType::kF32, {3, 0}})},
                    {{"axes", V{1}}, {"keepdim", false}});
  auto r = RunOp(*o->producer, {nullptr});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Ptr<float>(r[0])[i], -inf);
}

// scale_tensor computes in x's type as Paddle's scale kernel: integers wrap
// and a bias outside the type wraps too (uint8 -1 is 255); float16 and
// bfloat16 round the product before adding the bias.
TEST(CpuKernelUnary, ScaleTensorWrapsIntegersAndRoundsHalvesPerOperation) {
  auto run = [](DType dt, const void* x, const void* s, int64_t n, double bias, bool after) {
    Graph g;
    Value* o = g.Add1("scale_tensor", {g.AddInput("x", {dt, {n}}), g.AddInput("s", {dt, {}})},
                      {{"bias", bias}, {"bias_after_scale", after}});
    return RunOp(*o->producer, {x, s});
  };
  const std::vector<int64_t> x64 = {std::numeric_limits<int64_t>::max(), -3};
  const int64_t s64 = 2;
  auto r64 = run(DType::kI64, x64.data(), &s64, 2, 1.9, true);
  ExpectEq(Ptr<int64_t>(r64[0]), std::vector<int64_t>{-1, -5}, "int64 wraps, bias truncates");
  const std::vector<uint8_t> x8 = {200, 3};
  const uint8_t s8 = 2;
  auto r8 = run(DType::kU8, x8.data(), &s8, 2, -1.0, true);
  ExpectEq(Ptr<uint8_t>(r8[0]), std::vector<int>{143, 5}, "uint8: 400 - 1 mod 256");
  auto r8b = run(DType::kU8, x8.data(), &s8, 2, -1.0, false);
  ExpectEq(Ptr<uint8_t>(r8b[0]), std::vector<int>{142, 4}, "uint8: (x - 1) * 2");
  // (1 + 2^-10)^2 rounds to 1 + 2^-9; + 2^-11 is then a tie, to even:
  // 1 + 2^-9. One rounding of the exact sum would give 1 + 3 * 2^-10.
  const double v = 1.0 + std::ldexp(1.0, -10), b = std::ldexp(1.0, -11);
  const uint16_t xh = FloatToHalf(static_cast<float>(v));
  auto rh = run(DType::kF16, &xh, &xh, 1, b, true);
  EXPECT_EQ(HalfToFloat(*Ptr<uint16_t>(rh[0])), 1.0f + std::ldexp(1.0f, -9));
  const double vb = 1.0 + std::ldexp(1.0, -7), bb = std::ldexp(1.0, -8);
  const uint16_t xb = FloatToBF16(static_cast<float>(vb));
  auto rb = run(DType::kBF16, &xb, &xb, 1, bb, true);
  EXPECT_EQ(BF16ToFloat(*Ptr<uint16_t>(rb[0])), 1.0f + std::ldexp(1.0f, -6));
}

TEST(CpuKernelSoftmax, AnyAxisAndLogSoftmax) {
  struct Case {
    Shape shape;
    int64_t axis;
  };
  for (const Case& c : std::vector<Case>{{{3, 17, 33}, -1},
                                         {{3, 17, 33}, 1},
                                         {{3, 17, 33}, 0},
                                         {{8, 4096}, -1},
                                         {{64, 130}, 1},
                                         {{2, 5, 40}, -2}}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      Graph g;
      Value* o = g.Add1(op, {g.AddInput("x", {DType::kF32, c.shape})}, {{"axis", c.axis}});
      std::vector<float> x = RandF(NumElements(c.shape), -40, 40);
      auto r = RunOp(*o->producer, {x.data()});
      int a = static_cast<int>(c.axis < 0 ? c.axis + c.shape.size() : c.axis);
      int64_t outer = 1, n = c.shape[a], inner = 1;
      for (int d = 0; d < a; ++d) outer *= c.shape[d];
      for (int d = a + 1; d < static_cast<int>(c.shape.size()); ++d) inner *= c.shape[d];
      std::vector<double> want(x.size());
      for (int64_t o2 = 0; o2 < outer; ++o2) {
        for (int64_t j = 0; j < inner; ++j) {
          auto at = [&](int64_t k) { return (o2 * n + k) * inner + j; };
          double m = -INFINITY, s = 0;
          for (int64_t k = 0; k < n; ++k) m = std::max(m, double(x[at(k)]));
          for (int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
          for (int64_t k = 0; k < n; ++k)
            // log_softmax clips x - max at -64, as Paddle's CPU kernel.
            want[at(k)] = std::string(op) == "softmax"
                              ? std::exp(x[at(k)] - m) / s
                              : std::max(x[at(k)] - m, -64.0) - std::log(s);
        }
      }
      // log_softmax: log of a float sum near 1 carries ~1e-7 absolute error.
      bool log = std::string(op) == "log_softmax";
      ExpectClose(Ptr<float>(r[0]), want, 1e-5, log ? 1e-6 : 1e-7, op + ShapeToString(c.shape));
    }
  }
}

// Attention rows: masked scores 10^4 below the rest. Their exp underflows;
// the kernel writes exact zeros without computing subnormals (see
// ExpOfShifted), the unmasked entries still sum to 1, log_softmax gives
// max(x - max, -64) - log(sum) (Paddle's clip), and a NaN in a row still
// makes that row NaN.
TEST(CpuKernelSoftmax, MaskedRowsGiveZerosAndNaNStillPropagates) {
  for (const Shape& shape : {Shape{6, 40}, Shape{40, 6}}) {
    const int64_t axis = shape[0] == 6 ? 1 : 0;  // rows, then columns
    const int64_t n = shape[axis], rows = shape[1 - axis];
    auto at = [&](int64_t r, int64_t k) { return axis == 1 ? r * n + k : k * rows + r; };
    std::vector<float> x = RandF(NumElements(shape), -3, 3);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = n / 2; k < n; ++k) x[at(r, k)] -= 10000.0f;
      x[at(r, n - 1)] = -90.0f + x[at(r, 0)];  // exp 1e-39 relative: subnormal
    }
    x[at(rows - 1, 3)] = std::numeric_limits<float>::quiet_NaN();
    for (const char* op : {"softmax", "log_softmax"}) {
      Graph g;
      Value* o = g.Add1(op, {g.AddInput("x", {DType::kF32, shape})}, {{"axis", axis}});
      auto r = RunOp(*o->producer, {x.data()});
      const float* y = Ptr<float>(r[0]);
      for (int64_t row = 0; row + 1 < rows; ++row) {
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) {
          const float v = y[at(row, k)];
          if (std::string(op) == "softmax") {
            if (k >= n / 2) {
              EXPECT_EQ(v, 0.0f) << op << " row " << row << " k " << k;
            }
            sum += v;
          } else {
            EXPECT_TRUE(std::isfinite(v) && v < 0) << op << " " << v;
            // Paddle's clip: masked entries (and the one 90 below) sit at
            // -64 - log(sum).
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < n; ++j) m = std::max(m, double(x[at(row, j)]));
            for (int64_t j = 0; j < n; ++j) s += std::exp(x[at(row, j)] - m);
            if (k >= n / 2) {
              EXPECT_NEAR(v, -64.0 - std::log(s), 1e-5) << op << " k " << k;
            }
          }
        }
        if (std::string(op) == "softmax") {
          EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << row;
        }
      }
      for (int64_t k = 0; k < n; ++k)
        EXPECT_TRUE(std::isnan(y[at(rows - 1, k)])) << op << " NaN row, k " << k;
    }
  }
}

// oneDNN 2.6 chooses a blocked weights layout for a float32 GEMM only with
// its AVX-512 kernels (brgemm); with AVX2 it reads B plain, the layout the
// kernel has already, so there is nothing to stage.
#if defined(__AVX512F__)
constexpr bool kDnnlPacksWeights = true;
#else
constexpr bool kDnnlPacksWeights = false;
#endif

// Float32 matmul through oneDNN: A [.., M, K] x B [K, N] folded into one
// GEMM over A's rows, and a variable B whose rows lie a multiple of 4 KiB
// apart reordered into the workspace before the GEMM (the kernel's slow-layout
// case): both against a double-precision reference, broadcasting B's batch.
// Empty operands (K = 0: zeros; no rows) run without oneDNN, whose primitive
// creation divides by such dims (SIGFPE).
TEST(CpuKernelMatmul, FoldedRowsAndReorderedOperandMatchReference) {
  struct Case {
    Shape a, b;
    bool ta, tb;
    bool reordered;  // B is read through the workspace (a batched B stays plain)
  };
  for (const Case& c : std::vector<Case>{{{2, 40, 300}, {300, 3072}, false, false, true},
                                         {{300, 24}, {300, 3072}, true, false, true},
                                         {{2, 3, 40, 32}, {1, 32, 48}, false, false, false},
                                         {{2, 40, 32}, {2, 32, 48}, false, false, false},
                                         {{2, 5, 64}, {48, 64}, false, true, false},
                                         {{3, 260, 20}, {3, 260, 3072}, true, false, false},
                                         // empty: K = 0 (zeros), no rows
                                         {{2, 4, 0}, {0, 8}, false, false, false},
                                         {{2, 0, 16}, {16, 8}, false, false, false}}) {
    Graph g;
    Value* a = g.AddInput("a", {DType::kF32, c.a});
    Value* b = g.AddInput("b", {DType::kF32, c.b});
    Value* o = g.Add1("matmul", {a, b}, {{"transpose_a", c.ta}, {"transpose_b", c.tb}});
    const Shape& os = o->shape();
    const size_t r = os.size();
    const int64_t m = os[r - 2], n = os[r - 1];
    const int64_t k = c.ta ? c.a[c.a.size() - 2] : c.a.back();
    std::vector<float> av = RandF(NumElements(c.a), -1, 1), bv = RandF(NumElements(c.b), -1, 1);
    auto kernel = CreateKernel(*o->producer);
    const size_t b_bytes = static_cast<size_t>(k * n) * sizeof(float);
    if (c.reordered && kDnnlPacksWeights) {
      EXPECT_GE(kernel->workspace_bytes(), b_bytes) << ShapeToString(c.b);
    }
    auto res = RunOp(*o->producer, {av.data(), bv.data()});
    // Reference: batch index of the output mapped onto each operand by
    // numpy broadcasting of the leading dims.
    Shape obatch(os.begin(), os.end() - 2);
    const int64_t batches = NumElements(obatch);
    Shape abatch(c.a.begin(), c.a.end() - 2), bbatch(c.b.begin(), c.b.end() - 2);
    std::vector<double> want(NumElements(os));
    for (int64_t bi = 0; bi < batches; ++bi) {
      const float* ap = av.data() + BIndex(obatch, abatch, bi) * m * k;
      const float* bp = bv.data() + BIndex(obatch, bbatch, bi) * k * n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += static_cast<double>(c.ta ? ap[p * m + i] : ap[i * k + p]) *
                   (c.tb ? bp[j * k + p] : bp[p * n + j]);
          want[(bi * m + i) * n + j] = acc;
        }
    }
    // float32 sums of k products in [-1, 1]: error grows like sqrt(k) ulps.
    ExpectClose(Ptr<float>(res[0]), want, 1e-4, 1e-4,
                "matmul " + ShapeToString(c.a) + " x " + ShapeToString(c.b));
  }
}

// matmul_accumulate (acc + a b) and linear (x w + bias) with a variable w
// of rows 12 KiB apart, read through the workspace as matmul's B is.
TEST(CpuKernelMatmul, AccumulateAndLinearWithAReorderedVariableWeight) {
  const int64_t m = 70, k = 300, n = 3072;
  std::vector<float> x = RandF(m * k, -1, 1), w = RandF(k * n, -1, 1), acc = RandF(m * n),
                     bias = RandF(n);
  std::vector<double> prod(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(x[i * k + p]) * w[p * n + j];
      prod[i * n + j] = s;
    }
  for (const char* type : {"matmul_accumulate", "linear"}) {
    Graph g;
    Value* xv = g.AddInput("x", {DType::kF32, {m, k}});
    Value* wv = g.AddInput("w", {DType::kF32, {k, n}});
    const bool accumulate = std::string(type) == "matmul_accumulate";
    Value* other = g.AddInput("c", {DType::kF32, accumulate ? Shape{m, n} : Shape{n}});
    Value* o = accumulate ? g.Add1(type, {other, xv, wv}) : g.Add1(type, {xv, wv, other});
    if (kDnnlPacksWeights) {
      EXPECT_GE(CreateKernel(*o->producer)->workspace_bytes(), static_cast<size_t>(k * n * 4))
          << type;
    }
    auto res = accumulate ? RunOp(*o->producer, {acc.data(), x.data(), w.data()})
                          : RunOp(*o->producer, {x.data(), w.data(), bias.data()});
    std::vector<double> want(m * n);
    for (int64_t i = 0; i < m * n; ++i) want[i] = prod[i] + (accumulate ? acc[i] : bias[i % n]);
    ExpectClose(Ptr<float>(res[0]), want, 1e-4, 1e-4, type);
  }
}

// linear with a constant weight whose rows lie 12 KiB apart: packed once at
// compile time (blocked with AVX-512, column-major with AVX2, where oneDNN
// keeps the slow plain layout otherwise), against a double reference.
TEST(CpuKernelMatmul, LinearWithAConstantWeightOfRowsAMultipleOf4KiBApart) {
  const int64_t m = 37, k = 300, n = 3072;
  std::vector<float> x = RandF(m * k, -1, 1), bias = RandF(n);
  auto wbuf = std::make_shared<AlignedBuffer>(k * n * sizeof(float));
  std::vector<float> w = RandF(k * n, -1, 1);
  std::memcpy(wbuf->data(), w.data(), wbuf->size());
  Graph g;
  Value* xv = g.AddInput("x", {DType::kF32, {m, k}});
  Value* wv = g.AddData("w", {DType::kF32, {k, n}}, ir::ValueKind::kParam, wbuf);
  Value* o = g.Add1("linear", {xv, wv, g.AddInput("b", {DType::kF32, {n}})});
  auto res = RunOp(*o->producer, {x.data(), w.data(), bias.data()});
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias[j];
      for (int64_t p = 0; p < k; ++p) s += static_cast<double>(x[i * k + p]) * w[p * n + j];
      want[i * n + j] = s;
    }
  ExpectClose(Ptr<float>(res[0]), want, 1e-4, 1e-4, "linear, constant weight");
}

// linear and matmul_accumulate with K = 0: the bias in every row, the
// accumulator unchanged.
TEST(CpuKernelMatmul, EmptyProductsGiveTheBiasOrTheAccumulator) {
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {3, 0}});
  Value* w = g.AddInput("w", {DType::kF32, {0, 5}});
  Value* lin = g.Add1("linear", {x, w, g.AddInput("b", {DType::kF32, {5}})});
  Value* acc = g.Add1("matmul_accumulate", {g.AddInput("acc", {DType::kF32, {3, 5}}), x, w});
  std::vector<float> bias = RandF(5), accv = RandF(15);
  auto r = RunOp(*lin->producer, {nullptr, nullptr, bias.data()});
  std::vector<double> want(15);
  for (int i = 0; i < 15; ++i) want[i] = bias[i % 5];
  ExpectClose(Ptr<float>(r[0]), want, 0, 0, "linear, K = 0");
  r = RunOp(*acc->producer, {accv.data(), nullptr, nullptr});
  ExpectEq(Ptr<float>(r[0]), accv, "matmul_accumulate, K = 0");
}

TEST(CpuKernelNorm, LayerNormWithOptionalScaleBias) {
  for (auto [shape, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{4, 7, 768}, -1}, {{4, 7, 96}, 1}, {{2, 4096}, 1}, {{300, 130}, -1}}) {
    for (int variant = 0; variant < 4; ++variant) {
      bool has_scale = variant & 1, has_bias = variant & 2;
      Graph g;
      int64_t n = NumElements(shape), rows = 1;
      int a = static_cast<int>(axis < 0 ? axis + shape.size() : axis);
      for (int d = 0; d < a; ++d) rows *= shape[d];
      int64_t d = n / rows;
      Value* sv = has_scale ? g.AddInput("s", {DType::kF32, {d}}) : nullptr;
      Value* bv = has_bias ? g.AddInput("b", {DType::kF32, {d}}) : nullptr;
      Value* o = g.Add1("layer_norm", {g.AddInput("x", {DType::kF32, shape}), sv, bv},
                        {{"axis", axis}, {"epsilon", 1e-5}});
      std::vector<float> x = RandF(n, -2, 2), sc = RandF(d, 0.5f, 1.5f), bi = RandF(d);
      for (float& v : x) v += 30;  // an offset stresses the float mean and variance
      auto r = RunOp(*o->producer,
                     {x.data(), has_scale ? sc.data() : nullptr, has_bias ? bi.data() : nullptr});
      std::vector<double> want(n);
      for (int64_t i = 0; i < rows; ++i) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < d; ++j) m += x[i * d + j];
        m /= d;
        for (int64_t j = 0; j < d; ++j) v += (x[i * d + j] - m) * (x[i * d + j] - m);
        v /= d;
        for (int64_t j = 0; j < d; ++j)
          want[i * d + j] = (x[i * d + j] - m) / std::sqrt(v + 1e-5) * (has_scale ? sc[j] : 1) +
                            (has_bias ? bi[j] : 0);
      }
      ExpectClose(Ptr<float>(r[0]), want, 1e-5, 1e-5, "layer_norm" + ShapeToString(shape));
    }
  }
}

TEST(CpuKernelNorm, BatchNormInference) {
  for (Shape shape : {Shape{2, 3, 4, 5}, Shape{5, 3}, Shape{1, 16, 130}}) {
    int64_t c = shape[1], n = NumElements(shape), inner = n / shape[0] / c;
    Graph g;
    std::vector<Value*> ins = {g.AddInput("x", {DType::kF32, shape})};
    for (const char* name : {"scale", "bias", "mean", "var"})
      ins.push_back(g.AddInput(name, {DType::kF32, {c}}));
    Value* o = g.Add1("batch_norm", ins, {{"epsilon", 1e-3}});
    std::vector<float> x = RandF(n), sc = RandF(c), bi = RandF(c), mu = RandF(c),
                       var = RandF(c, 0.1f, 2);
    auto r = RunOp(*o->producer, {x.data(), sc.data(), bi.data(), mu.data(), var.data()});
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t ch = (i / inner) % c;
      want[i] = (x[i] - mu[ch]) / std::sqrt(var[ch] + 1e-3) * sc[ch] + bi[ch];
    }
    ExpectClose(Ptr<float>(r[0]), want, 1e-5, 1e-5, "batch_norm" + ShapeToString(shape));
  }
}

// Paddle's pooling rule, written independently of the kernel.
std::vector<double> RefPool(const std::vector<float>& x, const Shape& is, const Shape& os,
                            const AttrMap& a) {
  bool is_max = a.Str("pooling_type", "max") == "max", adaptive = a.Bool("adaptive", false);
  bool exclusive = a.Bool("exclusive", true);
  V k = a.Ints("ksize"), s = a.Ints("strides", {1, 1}), p = a.Ints("pads", {0, 0, 0, 0});
  std::vector<double> out;
  for (int64_t c = 0; c < is[0] * is[1]; ++c) {
    for (int64_t i = 0; i < os[2]; ++i) {
      for (int64_t j = 0; j < os[3]; ++j) {
        int64_t h0, h1, w0, w1, span = 0;
        if (adaptive) {
          h0 = (int64_t)std::floor(double(i * is[2]) / os[2]);
          h1 = (int64_t)std::ceil(double((i + 1) * is[2]) / os[2]);
          w0 = (int64_t)std::floor(double(j * is[3]) / os[3]);
          w1 = (int64_t)std::ceil(double((j + 1) * is[3]) / os[3]);
        } else {
          h0 = i * s[0] - p[0], w0 = j * s[1] - p[2];
          // Non-exclusive divisor: the window clipped at in + pad_begin
          // (Paddle's pool2d, checked against its executor in both formats).
          span =
              (std::min(h0 + k[0], is[2] + p[0]) - h0) * (std::min(w0 + k[1], is[3] + p[2]) - w0);
          h1 = std::min(h0 + k[0], is[2]), w1 = std::min(w0 + k[1], is[3]);
          h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
        }
        double acc = is_max ? -3.4028234663852886e38 : 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            double v = x[(c * is[2] + h) * is[3] + w];
            acc = is_max ? std::max(acc, v) : acc + v;
          }
        if (!is_max) acc /= (exclusive || adaptive) ? double((h1 - h0) * (w1 - w0)) : double(span);
        out.push_back(acc);
      }
    }
  }
  return out;
}

TEST(CpuKernelPool, MaxAvgPadsCeilExclusiveAdaptive) {
  struct Case {
    Shape in;
    AttrMap attrs;
    Shape out;
  };
  auto attrs = [](const char* type, V k, V s, V p, bool ceil, bool excl) {
    return AttrMap{{"pooling_type", std::string(type)},
                   {"ksize", k},
                   {"strides", s},
                   {"pads", p},
                   {"ceil_mode", ceil},
                   {"exclusive", excl}};
  };
  auto adaptive = [](const char* type, V out) {
    return AttrMap{{"pooling_type", std::string(type)}, {"ksize", out}, {"adaptive", true}};
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 8}, attrs("max", {2, 2}, {2, 2}, {0, 0, 0, 0}, false, true), {2, 3, 4, 4}},
      {{1, 4, 112, 112}, attrs("max", {3, 3}, {2, 2}, {1, 1, 1, 1}, false, true), {1, 4, 56, 56}},
      {{2, 2, 7, 7}, attrs("avg", {3, 3}, {2, 2}, {1, 1, 1, 1}, false, true), {2, 2, 4, 4}},
      {{2, 2, 7, 7}, attrs("avg", {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false), {2, 2, 4, 4}},
      // ceil_mode adds a window hanging past the input: not exclusive, Paddle
      // divides by the part of it inside the input (+ pad_begin), not by 2*2.
      {{1, 2, 5, 5}, attrs("avg", {2, 2}, {2, 2}, {0, 0, 0, 0}, true, false), {1, 2, 3, 3}},
      {{1, 2, 5, 5}, attrs("avg", {2, 2}, {2, 2}, {0, 0, 0, 0}, true, true), {1, 2, 3, 3}},
      {{1, 2, 5, 6}, attrs("max", {3, 2}, {2, 3}, {0, 1, 1, 0}, true, true), {1, 2, 3, 3}},
      {{2, 3, 7, 7}, adaptive("avg", {3, 3}), {2, 3, 3, 3}},
      {{2, 3, 11, 9}, adaptive("max", {5, 4}), {2, 3, 5, 4}},
      {{2, 64, 7, 7}, adaptive("avg", {1, 1}), {2, 64, 1, 1}},
      {{2, 8, 7, 7}, attrs("max", {7, 7}, {1, 1}, {0, 0, 0, 0}, false, true), {2, 8, 1, 1}}};
  for (const Case& c : cases) {
    Graph g;
    Value* o = g.Add1("pool2d", {g.AddInput("x", {DType::kF32, c.in})}, c.attrs);
    ASSERT_EQ(o->shape(), c.out);
    std::vector<float> x = RandF(NumElements(c.in));
    auto r = RunOp(*o->producer, {x.data()});
    ExpectClose(Ptr<float>(r[0]), RefPool(x, c.in, c.out, c.attrs), 1e-6, 1e-6,
                "pool2d " + ShapeToString(c.in) + " " + c.attrs.Str("pooling_type", ""));
  }
  // 5x5 of ones, 2x2 stride 2 ceil_mode, exclusive = false: the corner window
  // covers one element and Paddle 3.3.1's executor (PIR and legacy) gives 1,
  // not 1/4.
  Graph g;
  Value* o = g.Add1("pool2d", {g.AddInput("x", {DType::kF32, {1, 1, 5, 5}})},
                    attrs("avg", {2, 2}, {2, 2}, {0, 0, 0, 0}, true, false));
  std::vector<float> ones(25, 1.0f);
  auto r = RunOp(*o->producer, {ones.data()});
  EXPECT_FLOAT_EQ(Ptr<float>(r[0])[0], 1.0f);
  EXPECT_FLOAT_EQ(Ptr<float>(r[0])[8], 1.0f);
}

// Reference gather of element `i` of a row-major output through per-dim
// input strides (transpose/slice/expand).
std::vector<float> RefStrided(const std::vector<float>& x, const Shape& out, const V& st,
                              int64_t base) {
  std::vector<float> y(NumElements(out));
  for (int64_t i = 0; i < (int64_t)y.size(); ++i) {
    int64_t rem = i, off = base;
    for (int d = (int)out.size() - 1; d >= 0; --d) {
      off += (rem % out[d]) * st[d];
      rem /= out[d];
    }
    y[i] = x[off];
  }
  return y;
}

// Transposes that are a 2-D transpose per batch (NCHW <-> NHWC and the like)
// take a tiled kernel: shapes that are not multiples of its 16 x 256 work
// items, dims of extent 1 among the moved ones, several items per image.
// Three rows (an RGB image to NHWC) take the AVX-512 interleave: runs of
// columns shorter than, a multiple of, and past its 16-column vectors and
// 512-column work items.
TEST(CpuKernelShape, TransposeAsBatched2DMatchesStridedReference) {
  struct Case {
    Shape s;
    V perm;
  };
  for (const Case& c : std::vector<Case>{{{3, 17, 5, 40}, {0, 2, 3, 1}},
                                         {{3, 17, 5, 40}, {0, 3, 1, 2}},
                                         {{3, 17, 5, 40}, {1, 2, 3, 0}},
                                         {{3, 17, 5, 40}, {3, 0, 1, 2}},
                                         {{2, 3, 61, 67}, {0, 2, 3, 1}},
                                         {{1, 33, 1, 300}, {0, 3, 1, 2}},
                                         {{1, 33, 1, 300}, {0, 2, 3, 1}},
                                         {{300, 33}, {1, 0}},
                                         {{1, 3, 2, 5}, {0, 2, 3, 1}},
                                         {{4, 3, 16, 32}, {0, 2, 3, 1}}}) {
    std::vector<float> x = RandF(NumElements(c.s));
    Graph g;
    Value* o = g.Add1("transpose", {g.AddInput("x", {DType::kF32, c.s})}, {{"perm", c.perm}});
    V st = Strides(c.s), pst;
    for (int64_t p : c.perm) pst.push_back(st[p]);
    auto r = RunOp(*o->producer, {x.data()});
    ExpectEq(Ptr<float>(r[0]), RefStrided(x, o->shape(), pst, 0),
             "transpose " + ShapeToString(c.s) + " " + ShapeToString(c.perm));
  }
}

TEST(CpuKernelShape, TransposeSliceExpand) {
  Shape s{2, 3, 4, 5};
  std::vector<float> x = RandF(120);
  V st = Strides(s);
  for (V perm : {V{0, 2, 1, 3}, V{3, 2, 1, 0}, V{0, 1, 3, 2}, V{1, 0, 2, 3}, V{0, -1, 1, 2}}) {
    Graph g;
    Value* o = g.Add1("transpose", {g.AddInput("x", {DType::kF32, s})}, {{"perm", perm}});
    V pst;
    for (int64_t p : perm) pst.push_back(st[p < 0 ? p + 4 : p]);
    auto r = RunOp(*o->producer, {x.data()});
    ExpectEq(Ptr<float>(r[0]), RefStrided(x, o->shape(), pst, 0), "transpose");
  }
  struct SliceCase {
    V axes, starts, ends, steps;
  };
  for (const SliceCase& c : std::vector<SliceCase>{{{1}, {1}, {3}, {1}},
                                                   {{0, 3}, {-1, 100}, {-100, -100}, {-1, -2}},
                                                   {{2}, {-1}, {-1000}, {-1}},
                                                   {{3, 1}, {1, 0}, {100, 3}, {2, 2}},
                                                   {{2}, {3}, {1}, {1}}}) {  // empty
    Graph g;
    Value* o =
        g.Add1("slice", {g.AddInput("x", {DType::kF32, s})},
               {{"axes", c.axes}, {"starts", c.starts}, {"ends", c.ends}, {"steps", c.steps}});
    // Reference: python slicing per axis.
    V start(4, 0), step(4, 1);
    for (size_t i = 0; i < c.axes.size(); ++i) {
      int a = int(c.axes[i] < 0 ? c.axes[i] + 4 : c.axes[i]);
      int64_t b = c.starts[i], dim = s[a];
      if (b < 0) b += dim;
      b = c.steps[i] > 0 ? std::clamp<int64_t>(b, 0, dim) : std::clamp<int64_t>(b, -1, dim - 1);
      start[a] = b;
      step[a] = c.steps[i];
    }
    V sst(4);
    int64_t base = 0;
    for (int d = 0; d < 4; ++d) {
      sst[d] = st[d] * step[d];
      if (o->shape()[d] > 0) base += start[d] * st[d];
    }
    auto r = RunOp(*o->producer, {x.data()});
    if (NumElements(o->shape()) == 0) continue;
    ExpectEq(Ptr<float>(r[0]), RefStrided(x, o->shape(), sst, base), "slice");
  }
  for (auto [from, to] : std::vector<std::pair<Shape, Shape>>{
           {{3, 1}, {2, 3, 4}}, {{1}, {5, 6}}, {{4, 1, 5}, {4, 3, 5}}, {{1, 1}, {300, 200}}}) {
    Graph g;
    Value* o = g.Add1("expand", {g.AddInput("x", {DType::kI64, from})}, {{"shape", to}});
    std::vector<int64_t> xi = RandI<int64_t>(NumElements(from), -100, 100);
    auto r = RunOp(*o->producer, {xi.data()});
    std::vector<int64_t> want(NumElements(to));
    for (size_t i = 0; i < want.size(); ++i) want[i] = xi[BIndex(to, from, i)];
    ExpectEq(Ptr<int64_t>(r[0]), want, "expand");
  }
}

TEST(CpuKernelShape, ConcatSplitGatherIdentity) {
  for (int64_t axis : {0, 1, 2, -1}) {
    Graph g;
    int a = int(axis < 0 ? axis + 3 : axis);
    std::vector<Value*> ins;
    std::vector<std::vector<float>> data;
    V sizes = {2, 3, 1};
    for (int i = 0; i < 3; ++i) {
      Shape sh{4, 5, 6};
      sh[a] = sizes[i];
      ins.push_back(g.AddInput(fmt::format("x{}", i), {DType::kF32, sh}));
      data.push_back(RandF(NumElements(sh)));
    }
    Value* cat = g.Add1("concat", ins, {{"axis", axis}});
    auto r = RunOp(*cat->producer, {data[0].data(), data[1].data(), data[2].data()});
    ir::Op* split = g.AddOp("split", {cat}, {{"axis", axis}, {"sections", sizes}});
    auto parts = RunOp(*split, {r[0].data()});
    for (int i = 0; i < 3; ++i) ExpectEq(Ptr<float>(parts[i]), data[i], "concat/split round trip");
    // Concat reference on one element per input: its coordinates shift along the axis.
    Shape cs = cat->shape();
    std::vector<float> want(NumElements(cs));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      V idx(3);
      int64_t rem = i;
      for (int d = 2; d >= 0; --d) idx[d] = rem % cs[d], rem /= cs[d];
      int part = 0;
      while (idx[a] >= sizes[part]) idx[a] -= sizes[part++];
      Shape ps = ins[part]->shape();
      want[i] = data[part][(idx[0] * ps[1] + idx[1]) * ps[2] + idx[2]];
    }
    ExpectEq(Ptr<float>(r[0]), want, "concat");
  }
  Shape s{4, 6, 3};
  std::vector<float> x = RandF(72);
  for (int64_t axis : {0, 1, -1}) {
    for (DType it : {DType::kI32, DType::kI64}) {
      Graph g;
      int a = int(axis < 0 ? axis + 3 : axis);
      std::vector<int64_t> idx64 = {0, s[a] - 1, -1, 1, 1, 0};
      std::vector<int32_t> idx32(idx64.begin(), idx64.end());
      Value* o =
          g.Add1("gather", {g.AddInput("x", {DType::kF32, s}), g.AddInput("i", {it, {2, 3}})},
                 {{"axis", axis}});
      auto r = RunOp(*o->producer, {x.data(), it == DType::kI64 ? (const void*)idx64.data()
                                                                : (const void*)idx32.data()});
      Shape os = o->shape();
      std::vector<float> want(NumElements(os));
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < a; ++d) outer *= s[d];
      for (int d = a + 1; d < 3; ++d) inner *= s[d];
      for (int64_t p = 0; p < outer; ++p)
        for (int64_t j = 0; j < 6; ++j)
          for (int64_t q = 0; q < inner; ++q) {
            int64_t id = idx64[j] < 0 ? idx64[j] + s[a] : idx64[j];
            want[(p * 6 + j) * inner + q] = x[(p * s[a] + id) * inner + q];
          }
      ExpectEq(Ptr<float>(r[0]), want, fmt::format("gather axis {}", axis));
    }
  }
  Graph g;
  Value* o = g.Add1("identity", {g.AddInput("x", {DType::kI16, {7}})});
  std::vector<int16_t> xi = {1, -2, 3, 4, 5, -6, 7};
  auto r = RunOp(*o->producer, {xi.data()});
  ExpectEq(Ptr<int16_t>(r[0]), xi, "identity");
}

TEST(CpuKernelShape, CastAndWhere) {
  std::vector<float> f = {0.0f, -1.5f, 2.75f, 100.0f, -0.0f, 1e-3f, 65504.0f, 3.14159265f};
  for (const char* to :
       {"float64", "int32", "int64", "int8", "uint8", "bool", "float16", "bfloat16"}) {
    Graph g;
    Value* c = g.Add1("cast", {g.AddInput("x", {DType::kF32, {8}})}, {{"dtype", std::string(to)}});
    Value* back = g.Add1("cast", {c}, {{"dtype", std::string("float32")}});
    auto r = RunOp(*c->producer, {f.data()});
    auto rb = RunOp(*back->producer, {r[0].data()});
    for (int i = 0; i < 8; ++i) {
      double v = f[i], want;
      std::string t = to;
      if (t == "float64")
        want = v;
      else if (t == "bool")
        want = v != 0;
      else if (t == "uint8")
        want = v < 0 || v > 255 ? Ptr<float>(rb[0])[i] : std::trunc(v);
      else if (t == "int8")
        want = v < -128 || v > 127 ? Ptr<float>(rb[0])[i] : std::trunc(v);
      else if (t == "float16")
        want = v == 3.14159265f ? 3.140625 : v == 1e-3f ? 0.0010004043579101562 : v;
      else if (t == "bfloat16")
        want =
            std::abs(v - Ptr<float>(rb[0])[i]) <= std::abs(v) / 256 ? Ptr<float>(rb[0])[i] : 1e30;
      else
        want = std::trunc(v);
      EXPECT_EQ(Ptr<float>(rb[0])[i], static_cast<float>(want)) << to << " " << f[i];
    }
  }
  Graph g;
  Value* w = g.Add1(
      "where", {g.AddInput("c", {DType::kBool, {3, 1}}), g.AddInput("x", {DType::kI64, {3, 4}}),
                g.AddInput("y", {DType::kI64, {4}})});
  std::vector<uint8_t> c = {1, 0, 1};
  std::vector<int64_t> x = RandI<int64_t>(12, 0, 9), y = RandI<int64_t>(4, 10, 19), want(12);
  for (int i = 0; i < 12; ++i) want[i] = c[i / 4] ? x[i] : y[i % 4];
  auto r = RunOp(*w->producer, {c.data(), x.data(), y.data()});
  ExpectEq(Ptr<int64_t>(r[0]), want, "where");
}

// quantize_linear rounds k * x half to even and clips to [-qmax - 1, qmax],
// in float32 (Paddle's) or int8 (out_dtype, for the int8 GEMMs): both equal
// the scalar formula element for element, over a length that leaves a
// vector tail, with ties of both parities and values beyond the range.
TEST(CpuKernelQuantize, RoundsHalfToEvenAndClipsInEveryLane) {
  constexpr int64_t kN = 45;
  const float scale = 2.0f, qmax = 127.0f, k = qmax * (1.0f / scale);
  std::vector<float> x = RandF(kN, -3, 3);
  // Ties: x whose float product k * x is m + 0.5 exactly, m = -3..2 (the
  // nearest float to (m + 0.5) / k, or one of its neighbours).
  for (int i = 0; i < 6; ++i) {
    const float tie = static_cast<float>(i) - 2.5f;
    float t = tie / k;
    for (int step = 0; step < 8 && k * t != tie; ++step)
      t = std::nextafter(t, k * t < tie ? 1e9f : -1e9f);
    ASSERT_EQ(k * t, tie) << "no float x with k * x = " << tie;
    x[3 * i] = t;
  }
  x[20] = 10.0f;
  x[21] = -10.0f;
  x[22] = -0.0f;
  for (const char* out : {"float32", "int8"}) {
    Graph g;
    AttrMap attrs{{"quant_axis", int64_t{-1}}, {"qmax", int64_t{127}}, {"round_type", int64_t{0}}};
    if (std::string(out) == "int8") attrs.Set("out_dtype", std::string("int8"));
    Value* q =
        g.Add1("quantize_linear",
               {g.AddInput("x", {DType::kF32, {kN}}), g.AddInput("s", {DType::kF32, {1}})}, attrs);
    auto r = RunOp(*q->producer, {x.data(), &scale});
    for (int64_t i = 0; i < kN; ++i) {
      const float want = std::min(std::max(std::rint(k * x[i]), -qmax - 1.0f), qmax);
      const float got = std::string(out) == "int8" ? static_cast<float>(Ptr<int8_t>(r[0])[i])
                                                   : Ptr<float>(r[0])[i];
      EXPECT_EQ(got, want) << out << " element " << i << " = " << x[i];
    }
  }
}

TEST(CpuKernelEmbedding, PaddingAndOutOfRangeIdsGiveZeroRows) {
  std::vector<float> table = RandF(10 * 16);
  for (DType it : {DType::kI32, DType::kI64}) {
    Graph g;
    Value* o = g.Add1("embedding",
                      {g.AddInput("t", {DType::kF32, {10, 16}}), g.AddInput("i", {it, {2, 4}})},
                      {{"padding_idx", int64_t{3}}});
    ASSERT_EQ(o->shape(), (Shape{2, 4, 16}));
    std::vector<int64_t> ids64 = {0, 3, 9, 10, -1, 5, 5, 2};
    std::vector<int32_t> ids32(ids64.begin(), ids64.end());
    auto r = RunOp(*o->producer, {table.data(), it == DType::kI64 ? (const void*)ids64.data()
                                                                  : (const void*)ids32.data()});
    std::vector<float> want;
    for (int64_t id : ids64)
      for (int j = 0; j < 16; ++j)
        want.push_back(id < 0 || id >= 10 || id == 3 ? 0 : table[id * 16 + j]);
    ExpectEq(Ptr<float>(r[0]), want, "embedding");
  }
}

TEST(CpuKernelErrors, UnsupportedDtypeIsUnimplemented) {
  Graph g;
  Value* i32 = g.AddInput("a", {DType::kI32, {4}});
  Value* f16 = g.AddInput("h", {DType::kF16, {4}});
  for (Value* v : {g.Add1("gelu", {i32}), g.Add1("softmax", {i32}), g.Add1("add", {f16, f16}),
                   g.Add1("layer_norm", {f16}), g.Add1("reduce_sum", {f16})}) {
    try {
      CreateKernel(*v->producer);
      ADD_FAILURE() << v->producer->type << " accepted "
                    << DTypeName(v->producer->inputs[0]->dtype());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
      EXPECT_NE(std::string(e.what()).find(v->producer->type), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(DTypeName(v->producer->inputs[0]->dtype())),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tiller::cpu
