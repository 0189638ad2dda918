// Kernel dtype declarations (backends/cpu/kernel.h): registration rejects an
// empty list, CreateKernel refuses an undeclared dtype before the factory
// runs, and every dtype the elementwise, reduce, cast, comparison, logic,
// scan, search and data-movement kernels declare really runs: one-op graphs
// per declared dtype, compiled by compile::Executable, against scalar
// references computed here in double. The loops read the declarations, so
// adding a dtype a kernel cannot run makes these tests fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernels/kernel_utils.h"
#include "compile/executable.h"
#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace tiller::cpu {
namespace {

using ir::AttrMap;
using ir::Graph;
using ir::Value;

// A tensor whose elements are held as doubles; every value the tests use is
// exactly representable in the tensor's dtype.
struct Data {
  DType dtype;
  Shape shape;
  std::vector<double> v;
};

void Store(DType t, double x, void* base, int64_t i) {
  switch (t) {
    case DType::kF32:
      static_cast<float*>(base)[i] = static_cast<float>(x);
      return;
    case DType::kF64:
      static_cast<double*>(base)[i] = x;
      return;
    case DType::kF16:
      static_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(x));
      return;
    case DType::kBF16:
      static_cast<uint16_t*>(base)[i] = FloatToBF16(static_cast<float>(x));
      return;
    case DType::kI8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(x);
      return;
    case DType::kU8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(x);
      return;
    case DType::kI16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(x);
      return;
    case DType::kI32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(x);
      return;
    case DType::kI64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(x);
      return;
    case DType::kBool:
      static_cast<uint8_t*>(base)[i] = x != 0;
      return;
  }
}

double Load(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(base)[i];
    case DType::kF64:
      return static_cast<const double*>(base)[i];
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kBF16:
      return BF16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kI8:
      return static_cast<const int8_t*>(base)[i];
    case DType::kU8:
      return static_cast<const uint8_t*>(base)[i];
    case DType::kI16:
      return static_cast<const int16_t*>(base)[i];
    case DType::kI32:
      return static_cast<const int32_t*>(base)[i];
    case DType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::kBool:
      return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

// The value a tensor of dtype `t` really holds for `x` (float rounding).
double Rounded(DType t, double x) {
  double buf[1];
  Store(t, x, buf, 0);
  return Load(t, buf, 0);
}

// Builds a graph with one `type` op over `ins` (graph inputs), compiles it
// with compile::Executable and runs it once.
std::vector<Data> RunOne(const std::string& type, const std::vector<Data>& ins,
                         AttrMap attrs = {}) {
  auto g = std::make_unique<ir::Graph>();
  std::vector<ir::Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i)
    vals.push_back(g->AddInput("in" + std::to_string(i), {ins[i].dtype, ins[i].shape}));
  ir::Op* op = g->AddOp(type, vals, std::move(attrs), "test " + type);
  for (size_t i = 0; i < op->outputs.size(); ++i)
    g->AddOutput("out" + std::to_string(i), op->outputs[i]);
  auto exe = compile::Executable::Build(std::move(g), {});
  for (size_t i = 0; i < ins.size(); ++i) {
    EXPECT_EQ(NumElements(ins[i].shape), static_cast<int64_t>(ins[i].v.size()));
    for (size_t j = 0; j < ins[i].v.size(); ++j)
      Store(ins[i].dtype, ins[i].v[j], exe->inputs()[i].data, static_cast<int64_t>(j));
  }
  exe->Run();
  std::vector<Data> outs;
  for (const auto& slot : exe->outputs()) {
    Data t{slot.type.dtype, slot.type.shape, {}};
    for (int64_t j = 0; j < NumElements(t.shape); ++j) t.v.push_back(Load(t.dtype, slot.data, j));
    outs.push_back(std::move(t));
  }
  return outs;
}

bool IsFloatType(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16;
}

// float32 kernels compute in float (vector math within a few ulp), so 1e-5
// relative plus 1e-6 absolute, the op-coverage bar; float64 ones use the C
// library in double. Integer, bool and data-movement results are exact.
void ExpectMatches(const Data& got, DType want_dtype, const Shape& want_shape,
                   const std::vector<double>& want, const std::string& what) {
  EXPECT_EQ(got.dtype, want_dtype) << what;
  ASSERT_EQ(got.shape, want_shape) << what;
  ASSERT_EQ(got.v.size(), want.size()) << what;
  double rtol = 0, atol = 0;
  if (want_dtype == DType::kF32) {
    rtol = 1e-5;
    atol = 1e-6;
  } else if (want_dtype == DType::kF64) {
    rtol = 1e-12;
    atol = 1e-14;
  }
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    bool ok = std::abs(got.v[i] - want[i]) <= atol + rtol * std::abs(want[i]) ||
              (std::isnan(got.v[i]) && std::isnan(want[i]));
    if (!ok && bad++ < 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << got.v[i] << ", want " << want[i];
  }
}

std::string Label(const std::string& op, DType t) {
  return op + " " + DTypeName(t);
}

const std::vector<DType>& Declared(const std::string& op) {
  const std::vector<DType>* d = KernelDTypes(op);
  EXPECT_NE(d, nullptr) << op << " has no CPU kernel";
  static const std::vector<DType> none;
  return d ? *d : none;
}

// n values drawn from [lo, hi]: whole numbers for integer dtypes, rounded to
// the dtype for float ones.
std::vector<double> Values(DType t, int64_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) {
    if (t == DType::kBool) {
      x = std::uniform_int_distribution<int>(0, 1)(rng);
    } else if (IsFloatType(t)) {
      x = Rounded(t, std::uniform_real_distribution<double>(lo, hi)(rng));
    } else {
      x = std::uniform_int_distribution<int>(static_cast<int>(std::ceil(lo)),
                                             static_cast<int>(std::floor(hi)))(rng);
    }
  }
  return v;
}

// n whole numbers in [lo, hi] (exact in every dtype for small ranges).
std::vector<double> Whole(int64_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = std::uniform_int_distribution<int>(lo, hi)(rng);
  return v;
}

// ---- Declarations ------------------------------------------------------

TEST(KernelDTypes, RegistrationRejectsAnEmptyList) {
  auto factory = [](const ir::Op&) -> std::unique_ptr<Kernel> { return nullptr; };
  EXPECT_THROW(RegisterKernel("kernel_dtypes_test_empty", factory, {}), Error);
  EXPECT_FALSE(HasKernel("kernel_dtypes_test_empty"));
  EXPECT_EQ(KernelDTypes("kernel_dtypes_test_empty"), nullptr);
}

TEST(KernelDTypes, CreateKernelRefusesAnUndeclaredDTypeNamingIt) {
  ir::Graph g;
  ir::Value* x = g.AddInput("x", {DType::kF64, {2, 3}});
  ir::Op* op = g.AddOp("softmax", {x}, {{"axis", int64_t{-1}}}, "paddle softmax #7");
  try {
    CreateKernel(*op);
    FAIL() << "softmax accepted float64";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
    std::string m = e.what();
    for (const char* part : {"softmax", "paddle softmax #7", "float64", "supported: float32"})
      EXPECT_NE(m.find(part), std::string::npos) << "missing '" << part << "' in: " << m;
  }
}

// The check runs before the factory, and reads input dtype_input.
int pick_calls = 0;
const bool kPickRegistered = [] {
  ir::RegisterOpSchema(ir::OpSchema{
      "kernel_dtypes_test_pick", 2, 2, [](ir::InferContext& c) {
        c.AddOutput(c.input(1));
      }}.NoAttrs());
  return RegisterKernel(
      "kernel_dtypes_test_pick",
      [](const ir::Op&) -> std::unique_ptr<Kernel> {
        ++pick_calls;
        return std::make_unique<LambdaKernel>([](const KernelArgs&) {});
      },
      {DType::kI64}, /*dtype_input=*/1);
}();

TEST(KernelDTypes, CheckRunsBeforeTheFactoryOnTheDeclaredInput) {
  ASSERT_TRUE(kPickRegistered);
  int calls0 = pick_calls;
  ir::Graph g;
  ir::Value* f = g.AddInput("f", {DType::kF32, {2}});
  ir::Value* i = g.AddInput("i", {DType::kI64, {2}});
  EXPECT_NO_THROW(CreateKernel(*g.AddOp("kernel_dtypes_test_pick", {f, i})));
  EXPECT_EQ(pick_calls, calls0 + 1);
  try {
    CreateKernel(*g.AddOp("kernel_dtypes_test_pick", {i, f}, {}, "pick #2"));
    FAIL() << "float32 input 1 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnimplemented);
    EXPECT_NE(std::string(e.what()).find("float32 of input 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("supported: int64"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pick_calls, calls0 + 1);  // the factory never saw the float32 op
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

TEST(KernelDTypes, EveryKernelOfAnIrOpDeclaresDTypes) {
  for (const std::string& op : ir::AllOpSchemaNames()) {
    if (!HasKernel(op)) continue;
    ASSERT_NE(KernelDTypes(op), nullptr) << op;
    EXPECT_FALSE(KernelDTypes(op)->empty()) << op;
  }
}

// ---- Unary elementwise ---------------------------------------------------

struct UnaryCase {
  std::string op;
  AttrMap attrs;
  std::function<double(double)> ref;
  double lo = -2.5, hi = 2.5;  // float inputs; integer ones are whole numbers in [-5, 5]
};

double Sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double Softplus(double x, double beta, double th) {
  return x * beta > th ? x : std::log1p(std::exp(beta * x)) / beta;
}

std::vector<UnaryCase> UnaryCases() {
  using std::abs;
  return {
      {"relu", {}, [](double x) { return x > 0 ? x : 0; }},
      {"abs", {}, [](double x) { return abs(x); }},
      {"neg", {}, [](double x) { return -x; }},
      {"square", {}, [](double x) { return x * x; }},
      {"sign", {}, [](double x) { return double((x > 0) - (x < 0)); }},
      {"floor", {}, [](double x) { return std::floor(x); }},
      {"ceil", {}, [](double x) { return std::ceil(x); }},
      {"round", {{"decimals", int64_t{0}}}, [](double x) { return std::nearbyint(x); }},
      {"pow_scalar", {{"factor", 3.0}}, [](double x) { return x * x * x; }},
      {"clip", {{"min", -2.0}, {"max", 3.0}}, [](double x) { return std::clamp(x, -2.0, 3.0); }},
      {"reciprocal", {}, [](double x) { return 1 / x; }, 0.2, 3},
      {"sqrt", {}, [](double x) { return std::sqrt(x); }, 0.1, 4},
      {"rsqrt", {}, [](double x) { return 1 / std::sqrt(x); }, 0.1, 4},
      {"log", {}, [](double x) { return std::log(x); }, 0.1, 4},
      {"log1p", {}, [](double x) { return std::log1p(x); }, -0.9, 3},
      {"sin", {}, [](double x) { return std::sin(x); }},
      {"cos", {}, [](double x) { return std::cos(x); }},
      {"exp", {}, [](double x) { return std::exp(x); }},
      {"tanh", {}, [](double x) { return std::tanh(x); }},
      {"erf", {}, [](double x) { return std::erf(x); }},
      {"sigmoid", {}, Sigmoid},
      {"silu", {}, [](double x) { return x * Sigmoid(x); }},
      {"swish", {{"beta", 1.5}}, [](double x) { return x * Sigmoid(1.5 * x); }},
      {"gelu",
       {{"approximate", false}},
       [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }},
      {"leaky_relu", {{"alpha", 0.1}}, [](double x) { return x > 0 ? x : 0.1 * x; }},
      {"elu", {{"alpha", 0.5}}, [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }},
      {"hard_swish",
       {{"offset", 3.0}, {"threshold", 6.0}, {"scale", 6.0}},
       [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; },
       -5,
       5},
      {"hard_sigmoid",
       {{"slope", 0.2}, {"offset", 0.5}},
       [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); },
       -4,
       4},
      {"relu6", {{"threshold", 6.0}}, [](double x) { return std::clamp(x, 0.0, 6.0); }, -3, 8},
      {"softplus",
       {{"beta", 2.0}, {"threshold", 20.0}},
       [](double x) { return Softplus(x, 2, 20); }},
      {"scale",
       {{"scale", 2.5}, {"bias", 0.5}, {"bias_after_scale", true}},
       [](double x) { return x * 2.5 + 0.5; }},
      {"acos", {}, [](double x) { return std::acos(x); }, -0.9, 0.9},
      {"asin", {}, [](double x) { return std::asin(x); }, -0.9, 0.9},
      {"atan", {}, [](double x) { return std::atan(x); }},
      {"cosh", {}, [](double x) { return std::cosh(x); }},
      {"sinh", {}, [](double x) { return std::sinh(x); }},
      {"tan", {}, [](double x) { return std::tan(x); }, -1.2, 1.2},
      {"asinh", {}, [](double x) { return std::asinh(x); }, -4, 4},
      {"acosh", {}, [](double x) { return std::acosh(x); }, 1.05, 4},
      {"atanh", {}, [](double x) { return std::atanh(x); }, -0.9, 0.9},
      {"expm1", {}, [](double x) { return std::expm1(x); }, -2, 2},
      {"log2", {}, [](double x) { return std::log2(x); }, 0.1, 4},
      {"log10", {}, [](double x) { return std::log10(x); }, 0.1, 4},
      {"softsign", {}, [](double x) { return x / (1 + abs(x)); }},
      {"logsigmoid", {}, [](double x) { return std::log(Sigmoid(x)); }},
      {"tanh_shrink", {}, [](double x) { return x - std::tanh(x); }},
      {"mish", {{"threshold", 20.0}}, [](double x) { return x * std::tanh(Softplus(x, 1, 20)); }},
      {"selu",
       {{"scale", 1.05}, {"alpha", 1.67}},
       [](double x) { return x > 0 ? 1.05 * x : 1.05 * 1.67 * std::expm1(x); }},
      {"hard_shrink", {{"threshold", 0.5}}, [](double x) { return x < -0.5 || x > 0.5 ? x : 0.0; }},
      {"softshrink",
       {{"lambda", 0.5}},
       [](double x) { return x > 0.5 ? x - 0.5 : (x < -0.5 ? x + 0.5 : 0.0); }},
      {"thresholded_relu",
       {{"threshold", 1.0}, {"value", 0.0}},
       [](double x) { return x > 1 ? x : 0.0; }},
      {"brelu", {{"t_min", 0.5}, {"t_max", 2.0}}, [](double x) { return std::clamp(x, 0.5, 2.0); }},
  };
}

TEST(KernelDTypes, UnaryElementwiseRunsEveryDeclaredDType) {
  int runs = 0;
  for (const UnaryCase& c : UnaryCases()) {
    for (DType t : Declared(c.op)) {
      Data x{t, {3, 7}, Values(t, 21, IsFloatType(t) ? c.lo : -5, IsFloatType(t) ? c.hi : 5, 7)};
      std::vector<double> want;
      for (double v : x.v) want.push_back(c.ref(v));
      auto out = RunOne(c.op, {x}, c.attrs);
      ExpectMatches(out[0], t, x.shape, want, Label(c.op, t));
      ++runs;
    }
  }
  EXPECT_GE(runs, 100);
}

TEST(KernelDTypes, LogicalNotRunsEveryDeclaredDType) {
  for (DType t : Declared("logical_not")) {
    Data x{t, {9}, {0, 1, 2, 0, 3, 0, 1, 4, 0}};
    if (t == DType::kBool) x.v = {0, 1, 1, 0, 1, 0, 1, 1, 0};
    std::vector<double> want;
    for (double v : x.v) want.push_back(v == 0);
    ExpectMatches(RunOne("logical_not", {x})[0], DType::kBool, x.shape, want,
                  Label("logical_not", t));
  }
}

// ---- Binary elementwise, comparisons, logic ------------------------------

// Python's floor-division remainder, which Paddle's remainder follows.
double PyMod(double a, double b) {
  double r = std::fmod(a, b);
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

TEST(KernelDTypes, BinaryArithmeticRunsEveryDeclaredDType) {
  struct Case {
    std::string op;
    std::function<double(double, double, bool)> ref;  // bool: integer dtype
  };
  std::vector<Case> cases = {
      {"add", [](double a, double b, bool) { return a + b; }},
      {"sub", [](double a, double b, bool) { return a - b; }},
      {"mul", [](double a, double b, bool) { return a * b; }},
      {"max", [](double a, double b, bool) { return std::max(a, b); }},
      {"min", [](double a, double b, bool) { return std::min(a, b); }},
      // Integer division truncates toward zero (C++), float divides.
      {"div", [](double a, double b, bool i) { return i ? std::trunc(a / b) : a / b; }},
      {"mod", [](double a, double b, bool) { return PyMod(a, b); }},
      {"floor_div", [](double a, double b, bool) { return std::floor(a / b); }},
      {"pow", [](double a, double b, bool) { return std::pow(a, b); }},
  };
  for (const Case& c : cases) {
    for (DType t : Declared(c.op)) {
      bool integer = !IsFloatType(t);
      // x [2, 3] against a broadcast row y [3]; y avoids 0 (integer x / 0
      // is defined as 0 by the kernel, not by Paddle) and pow keeps a
      // positive float base and small whole exponents.
      Data x{t, {2, 3}, Values(t, 6, -9, 9, 11)};
      Data y{t, {3}, integer ? std::vector<double>{-4, 3, 2} : Values(t, 3, 0.5, 4, 12)};
      if (c.op == "pow") {
        x.v = integer ? Values(t, 6, -5, 5, 13) : Values(t, 6, 0.2, 3, 13);
        y.v = integer ? std::vector<double>{0, 3, 2} : Values(t, 3, -2, 2, 14);
      } else if (!integer) {
        y.v[0] = -y.v[0];
      }
      std::vector<double> want;
      for (int i = 0; i < 6; ++i) want.push_back(c.ref(x.v[i], y.v[i % 3], integer));
      ExpectMatches(RunOne(c.op, {x, y})[0], t, {2, 3}, want, Label(c.op, t));
    }
  }
}

TEST(KernelDTypes, ComparisonsRunEveryDeclaredDType) {
  std::vector<std::pair<std::string, std::function<bool(double, double)>>> cases = {
      {"equal", [](double a, double b) { return a == b; }},
      {"not_equal", [](double a, double b) { return a != b; }},
      {"less", [](double a, double b) { return a < b; }},
      {"less_equal", [](double a, double b) { return a <= b; }},
      {"greater", [](double a, double b) { return a > b; }},
      {"greater_equal", [](double a, double b) { return a >= b; }},
  };
  for (const auto& [op, ref] : cases) {
    for (DType t : Declared(op)) {
      // Small whole values, so equal pairs occur in every dtype.
      int hi = t == DType::kBool ? 1 : 3;
      Data x{t, {4, 3}, Whole(12, 0, hi, 21)};
      Data y{t, {3}, Whole(3, 0, hi, 22)};
      std::vector<double> want;
      for (int i = 0; i < 12; ++i) want.push_back(ref(x.v[i], y.v[i % 3]));
      ExpectMatches(RunOne(op, {x, y})[0], DType::kBool, {4, 3}, want, Label(op, t));
    }
  }
}

TEST(KernelDTypes, LogicalBinaryRunsEveryDeclaredDType) {
  std::vector<std::pair<std::string, std::function<bool(bool, bool)>>> cases = {
      {"logical_and", [](bool a, bool b) { return a && b; }},
      {"logical_or", [](bool a, bool b) { return a || b; }},
      {"logical_xor", [](bool a, bool b) { return a != b; }},
  };
  for (const auto& [op, ref] : cases) {
    for (DType t : Declared(op)) {
      Data x{t, {2, 4}, {0, 1, 2, 0, 0, 3, 1, 0}};
      Data y{t, {2, 4}, {0, 0, 5, 1, 2, 1, 0, 0}};
      if (t == DType::kBool) {
        for (auto* v : {&x.v, &y.v})
          for (double& e : *v) e = e != 0;
      }
      std::vector<double> want;
      for (int i = 0; i < 8; ++i) want.push_back(ref(x.v[i] != 0, y.v[i] != 0));
      ExpectMatches(RunOne(op, {x, y})[0], DType::kBool, {2, 4}, want, Label(op, t));
    }
  }
}

TEST(KernelDTypes, Atan2RunsEveryDeclaredDType) {
  for (DType t : Declared("atan2")) {
    Data a{t, {2, 3}, {0.5, -1.5, 2, 0, -0.25, 3}};
    Data b{t, {3}, {-2, 0.75, 0}};
    std::vector<double> want;
    for (int i = 0; i < 6; ++i) want.push_back(std::atan2(a.v[i], b.v[i % 3]));
    ExpectMatches(RunOne("atan2", {a, b})[0], t, {2, 3}, want, Label("atan2", t));
  }
}

// Two's complement bitwise results of whole values (unsigned: 0 .. 255).
TEST(KernelDTypes, BitwiseRunsEveryDeclaredDType) {
  std::vector<std::pair<std::string, std::function<int64_t(int64_t, int64_t)>>> cases = {
      {"bitwise_and", [](int64_t a, int64_t b) { return a & b; }},
      {"bitwise_or", [](int64_t a, int64_t b) { return a | b; }},
      {"bitwise_xor", [](int64_t a, int64_t b) { return a ^ b; }},
  };
  for (const auto& [op, ref] : cases) {
    for (DType t : Declared(op)) {
      const bool u = t == DType::kU8;
      Data x{t,
             {2, 3},
             u ? std::vector<double>{0, 255, 170, 15, 96, 1}
               : std::vector<double>{0, -1, -86, 15, 96, -128}};
      Data y{t, {3}, u ? std::vector<double>{204, 51, 255} : std::vector<double>{-52, 51, 127}};
      std::vector<double> want;
      for (int i = 0; i < 6; ++i) {
        int64_t r = ref(static_cast<int64_t>(x.v[i]), static_cast<int64_t>(y.v[i % 3]));
        want.push_back(static_cast<double>(u ? r & 255 : r));
      }
      ExpectMatches(RunOne(op, {x, y})[0], t, {2, 3}, want, Label(op, t));
    }
  }
  for (DType t : Declared("bitwise_not")) {
    const bool u = t == DType::kU8;
    Data x{t, {4}, u ? std::vector<double>{0, 255, 170, 1} : std::vector<double>{0, -1, 86, -128}};
    std::vector<double> want;
    for (double v : x.v) want.push_back(u ? 255 - v : -v - 1);
    ExpectMatches(RunOne("bitwise_not", {x})[0], t, {4}, want, Label("bitwise_not", t));
  }
}

// ---- Reductions, arg ops, scans, search ----------------------------------

TEST(KernelDTypes, ReductionsRunEveryDeclaredDType) {
  for (const std::string op :
       {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
    for (DType t : Declared(op)) {
      // Whole numbers: float sums and products are exact, so every dtype
      // compares exactly.
      Data x{t, {3, 4}, Whole(12, -3, 3, 31)};
      std::vector<double> want;
      for (int r = 0; r < 3; ++r) {
        double s = 0, p = 1, mx = -INFINITY, mn = INFINITY;
        for (int c = 0; c < 4; ++c) {
          double v = x.v[r * 4 + c];
          s += v;
          p *= v;
          mx = std::max(mx, v);
          mn = std::min(mn, v);
        }
        // Integer means truncate (sum / count in integer arithmetic).
        double mean = IsFloatType(t) ? s / 4 : std::trunc(s / 4);
        want.push_back(op == "reduce_sum"    ? s
                       : op == "reduce_mean" ? mean
                       : op == "reduce_max"  ? mx
                       : op == "reduce_min"  ? mn
                                             : p);
      }
      AttrMap a{{"axes", std::vector<int64_t>{1}}, {"keepdim", false}};
      ExpectMatches(RunOne(op, {x}, a)[0], t, {3}, want, Label(op, t));
    }
  }
}

TEST(KernelDTypes, ArgMinMaxRunEveryDeclaredDType) {
  for (const std::string op : {"argmax", "argmin"}) {
    for (DType t : Declared(op)) {
      for (const char* idx : {"int64", "int32"}) {
        Data x{t, {2, 5}, {3, -1, 7, 7, 0, -2, 4, -2, 1, 4}};  // ties: the first index wins
        std::vector<double> want =
            op == "argmax" ? std::vector<double>{2, 1} : std::vector<double>{1, 0};
        DType it = std::string(idx) == "int64" ? DType::kI64 : DType::kI32;
        AttrMap a{{"axis", int64_t{1}}, {"keepdim", false}, {"dtype", std::string(idx)}};
        ExpectMatches(RunOne(op, {x}, a)[0], it, {2}, want, Label(op, t) + " -> " + idx);
      }
    }
  }
}

TEST(KernelDTypes, CumsumRunsEveryDeclaredDType) {
  for (DType t : Declared("cumsum")) {
    Data x{t, {2, 4}, Whole(8, -5, 5, 41)};
    std::vector<double> want;
    for (int r = 0; r < 2; ++r) {
      double s = 0;
      for (int c = 0; c < 4; ++c) want.push_back(s += x.v[r * 4 + c]);
    }
    AttrMap a{{"axis", int64_t{1}}, {"exclusive", false}, {"reverse", false}};
    ExpectMatches(RunOne("cumsum", {x}, a)[0], t, {2, 4}, want, Label("cumsum", t));
  }
}

TEST(KernelDTypes, CumprodRunsEveryDeclaredDType) {
  for (DType t : Declared("cumprod")) {
    Data x{t, {2, 4}, {2, -1, 3, 0, -2, 2, 1, 3}};
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        std::vector<double> want(8);
        for (int r = 0; r < 2; ++r) {
          double p = 1;
          for (int k = 0; k < 4; ++k) {
            const int c = reverse ? 3 - k : k;
            if (exclusive) want[r * 4 + c] = p;
            p *= x.v[r * 4 + c];
            if (!exclusive) want[r * 4 + c] = p;
          }
        }
        AttrMap a{{"axis", int64_t{1}}, {"exclusive", exclusive}, {"reverse", reverse}};
        ExpectMatches(
            RunOne("cumprod", {x}, a)[0], t, {2, 4}, want,
            Label("cumprod", t) + (exclusive ? " exclusive" : "") + (reverse ? " reverse" : ""));
      }
    }
  }
}

TEST(KernelDTypes, TopKAndArgsortRunEveryDeclaredDType) {
  // Distinct whole values in [0, 10): representable in every declared dtype.
  const std::vector<double> row0 = {4, 9, 0, 7, 2}, row1 = {1, 8, 5, 3, 6};
  for (DType t : Declared("top_k")) {
    Data x{t, {2, 5}, row0};
    x.v.insert(x.v.end(), row1.begin(), row1.end());
    AttrMap a{{"k", int64_t{2}}, {"axis", int64_t{-1}}, {"largest", true},
              {"sorted", true},  {"values", true},      {"indices", true}};
    auto out = RunOne("top_k", {x}, a);
    ExpectMatches(out[0], t, {2, 2}, {9, 7, 8, 6}, Label("top_k values", t));
    ExpectMatches(out[1], DType::kI64, {2, 2}, {1, 3, 1, 4}, Label("top_k indices", t));
  }
  for (DType t : Declared("argsort")) {
    Data x{t, {2, 5}, row0};
    x.v.insert(x.v.end(), row1.begin(), row1.end());
    AttrMap a{{"axis", int64_t{-1}}, {"descending", false}, {"values", true}, {"indices", true}};
    auto out = RunOne("argsort", {x}, a);
    ExpectMatches(out[0], t, {2, 5}, {0, 2, 4, 7, 9, 1, 3, 5, 6, 8}, Label("argsort values", t));
    ExpectMatches(out[1], DType::kI64, {2, 5}, {2, 4, 0, 3, 1, 0, 3, 2, 4, 1},
                  Label("argsort indices", t));
  }
}

// ---- Cast ------------------------------------------------------------------

TEST(KernelDTypes, CastRunsEveryDeclaredSourceToEveryDType) {
  int pairs = 0;
  for (DType src : Declared("cast")) {
    for (DType dst : AllDTypes()) {
      // Non-negative values exact in every dtype (bfloat16 keeps 8 bits);
      // float sources add fractions: integer targets truncate, bool is != 0.
      std::vector<double> v = {0, 1, 3, 7, 100, 2};
      if (IsFloatType(src)) v = {0, 1, 2.5, 7, 100, 0.25};
      if (src == DType::kBool) v = {0, 1, 1, 0, 1, 0};
      std::vector<double> want;
      for (double e : v) {
        if (dst == DType::kBool)
          want.push_back(e != 0);
        else if (!IsFloatType(dst))
          want.push_back(std::trunc(e));
        else
          want.push_back(e);
      }
      AttrMap a{{"dtype", std::string(DTypeName(dst))}};
      ExpectMatches(RunOne("cast", {Data{src, {2, 3}, v}}, a)[0], dst, {2, 3}, want,
                    std::string("cast ") + DTypeName(src) + " -> " + DTypeName(dst));
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 100);
}

// ---- Data movement ---------------------------------------------------------

// Distinct values per element (bool: a 0/1 pattern), exact in every dtype.
std::vector<double> Distinct(DType t, int64_t n, int offset = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = t == DType::kBool ? double(((i + offset) * 7 / 3) % 2) : double((i + offset) % 97);
  return v;
}

TEST(KernelDTypes, DataMovementRunsEveryDeclaredDType) {
  int runs = 0;
  for (DType t : Declared("transpose")) {
    Data x{t, {2, 3, 4}, Distinct(t, 24)};
    std::vector<double> want;  // out[k, i, j] = x[i, j, k]
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) want.push_back(x.v[(i * 3 + j) * 4 + k]);
    AttrMap a{{"perm", std::vector<int64_t>{2, 0, 1}}};
    ExpectMatches(RunOne("transpose", {x}, a)[0], t, {4, 2, 3}, want, Label("transpose", t));
    ++runs;
  }
  for (DType t : Declared("slice")) {
    Data x{t, {4, 5}, Distinct(t, 20)};
    std::vector<double> want;  // rows 1..2, columns 4, 2 (step -2)
    for (int r : {1, 2})
      for (int c : {4, 2}) want.push_back(x.v[r * 5 + c]);
    AttrMap a{{"axes", std::vector<int64_t>{0, 1}},
              {"starts", std::vector<int64_t>{1, 4}},
              {"ends", std::vector<int64_t>{3, 0}},
              {"steps", std::vector<int64_t>{1, -2}}};
    ExpectMatches(RunOne("slice", {x}, a)[0], t, {2, 2}, want, Label("slice", t));
    ++runs;
  }
  for (DType t : Declared("expand")) {
    Data x{t, {3, 1}, Distinct(t, 3)};
    std::vector<double> want;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        for (int c = 0; c < 4; ++c) want.push_back(x.v[b]);
    AttrMap a{{"shape", std::vector<int64_t>{2, 3, 4}}};
    ExpectMatches(RunOne("expand", {x}, a)[0], t, {2, 3, 4}, want, Label("expand", t));
    ++runs;
  }
  for (DType t : Declared("identity")) {
    Data x{t, {5}, Distinct(t, 5)};
    ExpectMatches(RunOne("identity", {x})[0], t, {5}, x.v, Label("identity", t));
    ++runs;
  }
  for (DType t : Declared("concat")) {
    Data x{t, {2, 3}, Distinct(t, 6)}, y{t, {2, 2}, Distinct(t, 4, 50)};
    std::vector<double> want;
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 3; ++c) want.push_back(x.v[r * 3 + c]);
      for (int c = 0; c < 2; ++c) want.push_back(y.v[r * 2 + c]);
    }
    ExpectMatches(RunOne("concat", {x, y}, {{"axis", int64_t{1}}})[0], t, {2, 5}, want,
                  Label("concat", t));
    ++runs;
  }
  for (DType t : Declared("split")) {
    Data x{t, {2, 5}, Distinct(t, 10)};
    AttrMap a{{"axis", int64_t{-1}}, {"sections", std::vector<int64_t>{2, 3}}};
    auto out = RunOne("split", {x}, a);
    ASSERT_EQ(out.size(), 2u);
    std::vector<double> w0, w1;
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 5; ++c) (c < 2 ? w0 : w1).push_back(x.v[r * 5 + c]);
    ExpectMatches(out[0], t, {2, 2}, w0, Label("split 0", t));
    ExpectMatches(out[1], t, {2, 3}, w1, Label("split 1", t));
    ++runs;
  }
  for (DType t : Declared("gather")) {
    for (DType it : {DType::kI64, DType::kI32}) {
      Data x{t, {4, 3}, Distinct(t, 12)};
      Data idx{it, {3}, {2, 0, -1}};  // -1: the last row
      std::vector<double> want;
      for (int r : {2, 0, 3})
        for (int c = 0; c < 3; ++c) want.push_back(x.v[r * 3 + c]);
      ExpectMatches(RunOne("gather", {x, idx}, {{"axis", int64_t{0}}})[0], t, {3, 3}, want,
                    Label("gather", t));
    }
    ++runs;
  }
  for (DType t : Declared("where")) {
    Data cond{DType::kBool, {2, 3}, {1, 0, 0, 1, 1, 0}};
    Data x{t, {2, 3}, Distinct(t, 6)}, y{t, {3}, Distinct(t, 3, 60)};
    std::vector<double> want;
    for (int i = 0; i < 6; ++i) want.push_back(cond.v[i] ? x.v[i] : y.v[i % 3]);
    ExpectMatches(RunOne("where", {cond, x, y})[0], t, {2, 3}, want, Label("where", t));
    ++runs;
  }
  for (DType t : Declared("embedding")) {
    Data table{t, {5, 3}, Distinct(t, 15)};
    Data ids{DType::kI64, {4}, {4, 0, 2, 2}};
    std::vector<double> want;
    for (int r : {4, 0, 2, 2})
      for (int c = 0; c < 3; ++c) want.push_back(table.v[r * 3 + c]);
    ExpectMatches(RunOne("embedding", {table, ids}, {{"padding_idx", int64_t{-1}}})[0], t, {4, 3},
                  want, Label("embedding", t));
    ++runs;
  }
  EXPECT_EQ(runs, 9 * 10);  // every movement kernel declares all 10 dtypes
}

// ---- Other kernels with more than one dtype --------------------------------

TEST(KernelDTypes, PadOneHotPreluInterpRandomPrintRunEveryDeclaredDType) {
  for (DType t : Declared("pad_nd")) {
    Data x{t, {2, 2}, Values(t, 4, -5, 5, 51)};
    AttrMap a{{"pads", std::vector<int64_t>{1, 0, 0, 1}},
              {"mode", std::string("constant")},
              {"value", 2.0}};
    std::vector<double> want = {2, 2, 2, x.v[0], x.v[1], 2, x.v[2], x.v[3], 2};
    ExpectMatches(RunOne("pad_nd", {x}, a)[0], t, {3, 3}, want, Label("pad_nd", t));
  }
  for (DType t : Declared("one_hot")) {
    Data ids{t, {3}, {2, 0, 3}};
    AttrMap a{{"depth", int64_t{4}}, {"dtype", std::string("float32")}};
    std::vector<double> want(12, 0);
    want[0 * 4 + 2] = want[1 * 4 + 0] = want[2 * 4 + 3] = 1;
    ExpectMatches(RunOne("one_hot", {ids}, a)[0], DType::kF32, {3, 4}, want, Label("one_hot", t));
  }
  for (DType t : Declared("prelu")) {
    Data x{t, {2, 3}, Values(t, 6, -2, 2, 52)}, alpha{t, {3}, Values(t, 3, 0.1, 0.5, 53)};
    std::vector<double> want;
    for (int i = 0; i < 6; ++i) want.push_back(x.v[i] > 0 ? x.v[i] : alpha.v[i % 3] * x.v[i]);
    ExpectMatches(RunOne("prelu", {x, alpha})[0], t, {2, 3}, want, Label("prelu", t));
  }
  // Nearest (the method integer inputs allow): output i reads input
  // floor(0.5 * i) when upsampling 2 -> 4 without align_corners.
  for (DType t : Declared("interp")) {
    Data x{t, {1, 1, 2, 2}, {1, 2, 3, 4}};
    AttrMap a{{"method", std::string("nearest")},
              {"out_size", std::vector<int64_t>{4, 4}},
              {"ratios", std::vector<double>{0.5, 0.5}},
              {"align_corners", false},
              {"align_mode", int64_t{1}}};
    std::vector<double> want;
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) want.push_back(x.v[(h / 2) * 2 + w / 2]);
    ExpectMatches(RunOne("interp", {x}, a)[0], t, {1, 1, 4, 4}, want, Label("interp nearest", t));
    // The same 2 x 2 image channel-last with 2 channels (the second is the
    // first plus 10): whole pixels copied.
    Data xc{t, {1, 2, 2, 2}, {1, 11, 2, 12, 3, 13, 4, 14}};
    AttrMap ac = a;
    ac.Set("data_format", std::string("NHWC"));
    std::vector<double> want_c;
    for (double v : want) want_c.insert(want_c.end(), {v, v + 10});
    ExpectMatches(RunOne("interp", {xc}, ac)[0], t, {1, 4, 4, 2}, want_c,
                  Label("interp nearest NHWC", t));
  }
  for (const std::string op : {"random_uniform", "random_normal"}) {
    for (DType t : Declared(op)) {
      AttrMap a{{"shape", std::vector<int64_t>{1000}},
                {"dtype", std::string(DTypeName(t))},
                {"seed", int64_t{5}}};
      // Each op takes only its own distribution's attributes.
      if (op == "random_uniform") {
        a.Set("min", -2.0);
        a.Set("max", 3.0);
      } else {
        a.Set("mean", 1.0);
        a.Set("std", 0.5);
      }
      Data out = RunOne(op, {}, a)[0];
      EXPECT_EQ(out.dtype, t) << op;
      double sum = 0;
      for (double v : out.v) {
        ASSERT_TRUE(std::isfinite(v)) << Label(op, t);
        if (op == "random_uniform") {
          EXPECT_GE(v, -2.0);
          EXPECT_LT(v, 3.0);
        }
        sum += v;
      }
      // Means of 1000 draws: uniform [-2, 3) has sd 1.44 (se 0.046), the
      // normal sd 0.5 (se 0.016); 0.25 is over 5 standard errors.
      EXPECT_NEAR(sum / 1000, op == "random_uniform" ? 0.5 : 1.0, 0.25) << Label(op, t);
    }
  }
  for (DType t : Declared("print")) {
    Data x{t, {4}, t == DType::kBool ? std::vector<double>{1, 0, 0, 1} : Values(t, 4, -3, 3, 54)};
    AttrMap a{{"first_n", int64_t{0}}};  // copy through without logging
    ExpectMatches(RunOne("print", {x}, a)[0], t, {4}, x.v, Label("print", t));
  }
}

}  // namespace
}  // namespace tiller::cpu
