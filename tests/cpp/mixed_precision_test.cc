// Mixed precision: the pass's rewrite (casts, weights converted once,
// out_dtype), the bfloat16 GEMM kernels against a double-precision product
// of the bf16-rounded operands, and the vectorized float32 <-> bfloat16 casts
// against core/half.h's scalar conversions, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backend/backend.h"
#include "compile/executable.h"
#include "compile/half_fallback.h"
#include "core/half.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "runtime/precision.h"

namespace tiller {
namespace {

using ir::Graph;
using ir::Value;

std::shared_ptr<AlignedBuffer> Floats(const std::vector<float>& v) {
  auto b = std::make_shared<AlignedBuffer>(v.size() * sizeof(float));
  std::memcpy(b->data(), v.data(), b->size());
  return b;
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

float RoundBF16(float x) {
  return BF16ToFloat(FloatToBF16(x));
}
float RoundF16(float x) {
  return HalfToFloat(FloatToHalf(x));
}

// x[M, K] (input) -> matmul(x, W[K, N] param) -> reshape -> linear(., W2[N, P] param, b[P])
//                 -> matmul(x, x^T) (both operands the same input: one cast)
struct Net {
  static constexpr int64_t M = 5, K = 24, N = 40, P = 7;
  std::vector<float> x = Random(M * K, 1), w = Random(K * N, 2), w2 = Random(N * P, 3),
                     b = Random(P, 4);
  std::unique_ptr<Graph> Build() const {
    auto g = std::make_unique<Graph>();
    Value* xv = g->AddInput("x", {DType::kF32, {M, K}});
    Value* wv = g->AddData("w", {DType::kF32, {K, N}}, ir::ValueKind::kParam, Floats(w));
    Value* w2v = g->AddData("w2", {DType::kF32, {N, P}}, ir::ValueKind::kParam, Floats(w2));
    Value* bv = g->AddData("b", {DType::kF32, {P}}, ir::ValueKind::kParam, Floats(b));
    Value* h = g->Add1("matmul", {xv, wv}, {}, "mm");
    h = g->Add1("reshape", {h}, {{"shape", std::vector<int64_t>{M, N}}}, "view");
    g->AddOutput("y", g->Add1("linear", {h, w2v, bv}, {}, "fc"));
    g->AddOutput("gram", g->Add1("matmul", {xv, xv}, {{"transpose_b", true}}, "gram"));
    return g;
  }
};

const ir::Op* OpNamed(const Graph& g, const std::string& name) {
  for (const auto& op : g.ops()) {
    if (op->name == name) return op.get();
  }
  return nullptr;
}

TEST(MixedPrecision, HalfSafeOpsReadBF16OperandsAndWeightsAreConvertedOnce) {
  Net net;
  auto g = net.Build();
  std::string detail;
  EXPECT_EQ(passes::ConvertToMixedPrecision(*g, {DType::kBF16, true}, &detail), 3);
  int casts = 0;
  for (const auto& op : g->ops()) casts += op->type == "cast";
  // x is cast once, for all three ops; the weights are new bf16 parameters;
  // the cast of the matmul's result for the linear is folded into the
  // matmul, which writes bf16 (through the reshape, which moves bf16).
  EXPECT_EQ(casts, 1) << "x only";
  const ir::Op* mm = OpNamed(*g, "mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->GetStr("out_dtype"), "bfloat16");
  EXPECT_EQ(OpNamed(*g, "view")->outputs[0]->dtype(), DType::kBF16);
  EXPECT_EQ(OpNamed(*g, "fc")->inputs[0], OpNamed(*g, "view")->outputs[0]);
  EXPECT_EQ(OpNamed(*g, "fc")->outputs[0]->dtype(), DType::kF32) << "a graph output stays float32";
  EXPECT_EQ(mm->inputs[0]->dtype(), DType::kBF16);
  const Value* wh = mm->inputs[1];
  ASSERT_EQ(wh->kind, ir::ValueKind::kParam);
  ASSERT_EQ(wh->dtype(), DType::kBF16);
  for (size_t i = 0; i < net.w.size(); ++i)
    ASSERT_EQ(wh->const_data<uint16_t>()[i], FloatToBF16(net.w[i])) << i;
  const ir::Op* fc = OpNamed(*g, "fc");
  EXPECT_EQ(fc->inputs[2]->dtype(), DType::kF32) << "the bias stays float32";
  const ir::Op* gram = OpNamed(*g, "gram");
  EXPECT_EQ(gram->inputs[0], gram->inputs[1]) << "one cast of x serves both operands";
  EXPECT_EQ(gram->inputs[0], mm->inputs[0]);
  EXPECT_NE(detail.find("(linear 1, matmul 2)"), std::string::npos) << detail;
  EXPECT_NE(detail.find("2 weights converted at compile time"), std::string::npos) << detail;
  EXPECT_NE(detail.find("1 casts per run (1 more folded into the op before them"),
            std::string::npos)
      << detail;
  EXPECT_EQ(passes::ConvertToMixedPrecision(*g, {DType::kBF16, true}, nullptr), 0)
      << "converted ops are left alone";
}

// Runs the net after the pass; compares with a double-precision product of
// the operands rounded as the pass rounds them (bf16: every operand; the
// products are then exact in float32, so only float32 accumulation order
// differs).
void CheckNetAgainstRoundedReference(const passes::MixedPrecisionOptions& mp) {
  Net net;
  auto g = net.Build();
  passes::ConvertToMixedPrecision(*g, mp, nullptr);
  auto exe = compile::Executable::Build(std::move(g), compile::CompileOptions::Cpu(1));
  std::memcpy(exe->inputs()[0].data, net.x.data(), net.x.size() * sizeof(float));
  exe->Run();
  auto round = [&](float v) { return mp.half == DType::kBF16 ? RoundBF16(v) : RoundF16(v); };
  const int64_t M = Net::M, K = Net::K, N = Net::N, P = Net::P;
  std::vector<double> h(M * N), y(M * P), gram(M * M);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      for (int64_t k = 0; k < K; ++k)
        h[i * N + j] += double(round(net.x[i * K + k])) * round(net.w[k * N + j]);
    }
    for (int64_t j = 0; j < M; ++j) {
      for (int64_t k = 0; k < K; ++k)
        gram[i * M + j] += double(round(net.x[i * K + k])) * round(net.x[j * K + k]);
    }
  }
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < P; ++j) {
      double s = net.b[j];
      // The linear reads the matmul's result rounded to the half type (the
      // matmul writes bf16; float16: the operand's round trip).
      for (int64_t k = 0; k < N; ++k)
        s += double(round(static_cast<float>(h[i * N + k]))) * round(net.w2[k * P + j]);
      y[i * P + j] = s;
    }
  }
  auto check = [&](size_t out, const std::vector<double>& want, const char* what) {
    const float* got = static_cast<const float*>(exe->outputs()[out].data);
    for (size_t i = 0; i < want.size(); ++i) {
      // float32 accumulation of <= 40 exact products of magnitude <= 4
      // (and the matmul result's own float32 rounding before the second
      // GEMM rounds it to half): 1e-5 relative to the row's scale.
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << what << " " << i;
    }
  };
  check(0, y, "y");
  check(1, gram, "gram");
}

// Where oneDNN has no bfloat16 GEMM (AVX2 CPUs) the compiler rounds the
// operands to bfloat16 and multiplies in float32; the products are the same.
TEST(MixedPrecision, BF16GemmsMatchTheProductOfRoundedOperands) {
  const bool gemm = compile::BackendMultipliesIn(*backend::FindBackend("cpu"), DType::kBF16);
  CheckNetAgainstRoundedReference({DType::kBF16, gemm});
}

TEST(MixedPrecision, Float16WithoutHalfArithmeticRoundsOperandsAndComputesInFloat32) {
  Net net;
  auto g = net.Build();
  std::string detail;
  passes::ConvertToMixedPrecision(*g, {DType::kF16, false}, &detail);
  EXPECT_EQ(OpNamed(*g, "mm")->GetStr("out_dtype"), "") << "the op itself stays float32";
  EXPECT_EQ(OpNamed(*g, "mm")->inputs[0]->dtype(), DType::kF32);
  EXPECT_NE(detail.find("float32 arithmetic on float16-rounded operands"), std::string::npos)
      << detail;
  CheckNetAgainstRoundedReference({DType::kF16, false});
}

TEST(MixedPrecision, VectorizedBF16CastsHaveTheScalarConversionsBits) {
  // Ties (to even, both ways), the largest finite floats, infinities, NaNs
  // (signalling ones come back quiet), subnormals (rounded, not flushed),
  // and enough values for the 16-wide loop plus a tail.
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.5f,
                          3.14159f,
                          65504.0f,
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::signaling_NaN(),
                          std::numeric_limits<float>::denorm_min(),
                          1e-39f,
                          -3e-39f,
                          std::bit_cast<float>(0x3f808000u),
                          std::bit_cast<float>(0x3f818000u),
                          std::bit_cast<float>(0x3f80ffffu)};
  for (float r : Random(45, 7)) v.push_back(r * 1e3f);
  const int64_t n = static_cast<int64_t>(v.size());
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kF32, {n}});
  Value* h = g->Add1("cast", {x}, {{"dtype", std::string("bfloat16")}});
  g->AddOutput("h", h);
  g->AddOutput("back", g->Add1("cast", {h}, {{"dtype", std::string("float32")}}));
  auto exe = compile::Executable::Build(std::move(g), compile::CompileOptions::Cpu(2));
  std::memcpy(exe->inputs()[0].data, v.data(), v.size() * sizeof(float));
  exe->Run();
  const auto* half = static_cast<const uint16_t*>(exe->outputs()[0].data);
  const auto* back = static_cast<const float*>(exe->outputs()[1].data);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(half[i], FloatToBF16(v[i])) << "element " << i << " = " << v[i];
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(BF16ToFloat(half[i])))
        << "element " << i;
  }
  EXPECT_EQ(half[15], 0x3f80) << "a tie rounds to the even neighbour (down)";
  EXPECT_EQ(half[16], 0x3f82) << "a tie rounds to the even neighbour (up)";
  EXPECT_TRUE(std::isnan(back[11])) << "a signalling NaN stays NaN";
  EXPECT_NE(half[13], 0) << "subnormals are rounded, not flushed";
}

// gradient_histogram against counts taken here, for float32 and bfloat16
// inputs: zeros (below), values at and around the underflow bound, the edge
// itself (above), NaN and Inf (above), and enough values for every thread.
TEST(MixedPrecision, GradientHistogramCountsFlushedBelowAndAboveTheEdge) {
  const passes::GradientStatisticsBounds b = passes::BoundsOf(DType::kF16, 0.0625);
  EXPECT_EQ(b.edge, 4094.0);
  EXPECT_EQ(b.underflow, std::ldexp(1.0, -25));
  std::vector<float> v = {0.0f,
                          -0.0f,
                          std::ldexp(1.0f, -25),
                          -std::ldexp(1.0f, -26),
                          std::ldexp(1.0f, -24),
                          4093.9f,
                          4094.0f,
                          -5000.0f,
                          std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  for (float r : Random(9999, 11)) v.push_back(r * 3000);
  const auto e = static_cast<float>(b.edge), u = static_cast<float>(b.underflow);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::vector<float> seen = v;  // the values as the input dtype holds them
    if (dtype == DType::kBF16)
      for (float& x : seen) x = RoundBF16(x);
    double want[3] = {0, 0, 0};
    for (float x : seen) {
      const float a = std::fabs(x);
      if (!(a < e))
        ++want[2];
      else if (a > 0 && a <= u)
        ++want[0];
      else
        ++want[1];
    }
    const auto n = static_cast<int64_t>(v.size());
    auto g = std::make_unique<Graph>();
    Value* x = g->AddInput("x", {DType::kF32, {n}});
    if (dtype == DType::kBF16) x = g->Add1("cast", {x}, {{"dtype", std::string("bfloat16")}});
    g->AddOutput(
        "h", g->Add1("gradient_histogram", {x}, {{"edge", b.edge}, {"underflow", b.underflow}}));
    auto exe = compile::Executable::Build(std::move(g), compile::CompileOptions::Cpu(2));
    std::memcpy(exe->inputs()[0].data, v.data(), v.size() * sizeof(float));
    exe->Run();
    const auto* h = static_cast<const double*>(exe->outputs()[0].data);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(h[i], want[i]) << DTypeName(dtype) << " bin " << i;
    EXPECT_GE(want[0], dtype == DType::kF32 ? 2 : 0);
    EXPECT_GE(want[2], 4);
  }
}

// An op on bf16 values without a bf16 CPU kernel (gelu, add) runs in
// float32 between casts: the result is the float32 result rounded to bf16.
// A bf16 matmul (which has a kernel) is left alone.
TEST(MixedPrecision, HalfOpsWithoutAHalfKernelRunInFloat32BetweenCasts) {
  auto dev = backend::FindBackend("cpu")->CreateDevice(0, {.threads = 1});
  std::vector<backend::Device*> devices{dev.get()};
  auto g = std::make_unique<Graph>();
  Value* x = g->AddInput("x", {DType::kBF16, {3, 8}});
  Value* m = g->Add1("matmul", {x, x}, {{"transpose_b", true}}, "mm");
  Value* y = g->Add1("gelu", {m}, {}, "act");
  g->AddOutput("y", g->Add1("add", {y, y}, {}, "twice"));
  std::string detail;
  // Without a oneDNN bfloat16 GEMM (AVX2 CPUs) the matmul is widened too.
  const bool gemm = compile::DevicesMultiplyIn(devices, DType::kBF16);
  EXPECT_EQ(compile::RunHalfOpsInFloat32(*g, devices, &detail), gemm ? 2 : 3);
  EXPECT_EQ(detail, gemm ? "computed in float32 between casts: add 1, gelu 1"
                         : "computed in float32 between casts: add 1, gelu 1, matmul 1");
  EXPECT_EQ(OpNamed(*g, "mm")->inputs[0]->dtype(), gemm ? DType::kBF16 : DType::kF32)
      << "matmul has a bf16 kernel where oneDNN multiplies bfloat16";
  EXPECT_EQ(OpNamed(*g, "act")->inputs[0]->dtype(), DType::kF32);
  EXPECT_EQ(g->outputs()[0].second->dtype(), DType::kBF16) << "the graph's output keeps its type";
  EXPECT_EQ(compile::RunHalfOpsInFloat32(*g, devices, nullptr), 0);

  std::vector<float> xf = Random(24, 5);
  std::vector<uint16_t> xb(24);
  for (size_t i = 0; i < xf.size(); ++i) xb[i] = FloatToBF16(xf[i]);
  auto exe = compile::Executable::Build(std::move(g), compile::CompileOptions::Cpu(1));
  std::memcpy(exe->inputs()[0].data, xb.data(), xb.size() * 2);
  exe->Run();
  const auto* got = static_cast<const uint16_t*>(exe->outputs()[0].data);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      // The matmul writes bf16 (its dot product rounded); gelu and the add
      // run on that in float32 and round once each.
      double dot = 0;
      for (int k = 0; k < 8; ++k)
        dot += double(BF16ToFloat(xb[i * 8 + k])) * BF16ToFloat(xb[j * 8 + k]);
      const float mm = RoundBF16(static_cast<float>(dot));
      const float act = RoundBF16(0.5f * mm * (1.0f + std::erf(mm / std::sqrt(2.0f))));
      // One bf16 step (2^-7 relative): the float32 dot product may round
      // across a bf16 boundary the double one does not.
      const float want = RoundBF16(act + act);
      EXPECT_NEAR(BF16ToFloat(got[i * 3 + j]), want, std::ldexp(std::fabs(want), -7) + 1e-6)
          << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace tiller

namespace tiller {
namespace {

// The half-precision report follows the measured speed, not the CPU flags
// alone: an Intel Xeon with AVX512_BF16 but no AMX multiplied bfloat16 at
// 0.7x float32, and said nothing before.
TEST(MixedPrecision, SlowHalfPrecisionIsReportedFromTheMeasuredSpeed) {
  using compile::Precision;
  const runtime::HalfSpeed slow{70, 110}, fast{400, 200};
  int measured = 0;
  auto speed = [&](const runtime::HalfSpeed& s) {
    return [&measured, &s]() -> const runtime::HalfSpeed& {
      ++measured;
      return s;
    };
  };
  std::string m = runtime::SlowHalfPrecisionMessage(Precision::kBFloat16, true, true, speed(slow));
  EXPECT_NE(m.find("bfloat16 70 GFLOP/s, float32 110"), std::string::npos) << m;
  EXPECT_EQ(runtime::SlowHalfPrecisionMessage(Precision::kBFloat16, true, true, speed(fast)), "");
  EXPECT_NE(runtime::SlowHalfPrecisionMessage(Precision::kBFloat16, false, true, speed(fast))
                .find("emulates"),
            std::string::npos);
  m = runtime::SlowHalfPrecisionMessage(Precision::kBFloat16, false, false, speed(fast));
  EXPECT_NE(m.find("computed in float32"), std::string::npos) << "AVX2: no bfloat16 GEMM: " << m;
  m = runtime::SlowHalfPrecisionMessage(Precision::kFloat16, true, true, speed(fast));
  EXPECT_NE(m.find("bfloat16 is the fast half type here (measured 400 vs 200"), std::string::npos)
      << m;
  m = runtime::SlowHalfPrecisionMessage(Precision::kFloat16, true, true, speed(slow));
  EXPECT_NE(m.find("rounding without its speed"), std::string::npos) << m;
  EXPECT_EQ(m.find("fast half type"), std::string::npos) << "bfloat16 measured slower: " << m;
  const int before = measured;
  EXPECT_EQ(runtime::SlowHalfPrecisionMessage(Precision::kFloat32, true, true, speed(slow)), "");
  EXPECT_EQ(
      runtime::SlowHalfPrecisionMessage(Precision::kFloat16, false, true, speed(slow)).find("fast"),
      std::string::npos);
  EXPECT_EQ(measured, before) << "float32, and a CPU without bfloat16, measure nothing";
}

TEST(MixedPrecision, TheMeasuredBF16SpeedIsAPositiveRateOfBothTypes) {
  if (!runtime::CpuHasBF16Arithmetic()) GTEST_SKIP() << "no bfloat16 instructions";
  const runtime::HalfSpeed& s = runtime::MeasuredBF16Speed();
  EXPECT_GT(s.half_gflops, 0.5);
  EXPECT_GT(s.float32_gflops, 0.5);
  EXPECT_EQ(&s, &runtime::MeasuredBF16Speed()) << "measured once per process";
}

}  // namespace
}  // namespace tiller
