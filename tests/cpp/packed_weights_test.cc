// Weights held once: a kernel that packs a constant (oneDNN's blocked
// layout) lets the executable drop the graph's reference to the plain bytes
// (compile/executable.cc), and kernels packing the same loaded weight alike
// share one packed copy (backends/cpu/packed_weights.h), across executables.
#include "backends/cpu/packed_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "compile/executable.h"
#include "compile/options.h"
#include "ir/graph.h"

namespace tiller {
namespace {

using ir::Graph;

constexpr int64_t kK = 48, kN = 40;

std::shared_ptr<AlignedBuffer> RandomBuffer(int64_t n, uint32_t seed) {
  auto buf = std::make_shared<AlignedBuffer>(n * sizeof(float));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) buf->as<float>()[i] = d(rng);
  return buf;
}

// y = matmul(x, w) + b: w is packed by the matmul; b is read at run time
// by the add.
std::unique_ptr<Graph> MatmulGraph(int64_t rows, std::shared_ptr<AlignedBuffer> w,
                                   std::shared_ptr<AlignedBuffer> b) {
  auto g = std::make_unique<Graph>();
  ir::Value* x = g->AddInput("x", {DType::kF32, {rows, kK}});
  ir::Value* wv = g->AddData("w", {DType::kF32, {kK, kN}}, ir::ValueKind::kParam, std::move(w));
  ir::Value* bv = g->AddData("b", {DType::kF32, {kN}}, ir::ValueKind::kParam, std::move(b));
  g->AddOutput("y", g->Add1("add", {g->Add1("matmul", {x, wv}), bv}));
  return g;
}

// Runs `exe` on x = rows of (i % 7) / 7 and checks y against a plain loop.
void RunAndCheck(compile::Executable& exe, int64_t rows, const std::vector<float>& w,
                 const std::vector<float>& b) {
  std::vector<float> x(rows * kK);
  for (int64_t i = 0; i < rows * kK; ++i) x[i] = static_cast<float>(i % 7) / 7.f;
  // (The output may reuse the input's storage: x is copied in.)
  std::copy(x.begin(), x.end(), static_cast<float*>(exe.inputs()[0].data));
  exe.Run();
  const float* y = static_cast<const float*>(exe.outputs()[0].data);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t n = 0; n < kN; ++n) {
      double want = b[n];
      for (int64_t k = 0; k < kK; ++k) want += double{x[r * kK + k]} * w[k * kN + n];
      ASSERT_NEAR(y[r * kN + n], want, 1e-4) << r << ", " << n;
    }
  }
}

std::vector<float> Values(const AlignedBuffer& b) {
  return {b.as<float>(), b.as<float>() + b.size() / sizeof(float)};
}

TEST(PackedWeights, ThePlainBytesOfAPackedWeightAreLetGoAndRunTimeReadsKept) {
  auto w = RandomBuffer(kK * kN, 1), b = RandomBuffer(kN, 2);
  const auto wv = Values(*w), bv = Values(*b);
  auto exe = compile::Executable::Build(MatmulGraph(5, w, b), compile::CompileOptions::Cpu(1));
  // Only this test holds w now; the add still reads b where it is.
  EXPECT_EQ(w.use_count(), 1);
  EXPECT_GT(b.use_count(), 1);
  RunAndCheck(*exe, 5, wv, bv);
  // The packed copy of an unnamed buffer (origin 0) is the kernel's own.
  EXPECT_EQ(cpu::PackedWeightCount(), 0u);
}

TEST(PackedWeights, OneCopyServesEveryKernelPackingTheSameLoadedWeight) {
  auto w = RandomBuffer(kK * kN, 3), b = RandomBuffer(kN, 4);
  const auto wv = Values(*w), bv = Values(*b);
  w->set_origin(0x7e57'0001);
  // The same weight read again (paddle::ParamSource re-reads a file): a new
  // buffer with the same origin.
  auto again = std::make_shared<AlignedBuffer>(*w);
  again->set_origin(w->origin());
  const size_t before = cpu::PackedWeightCount();
  auto one = compile::Executable::Build(MatmulGraph(3, w, b), compile::CompileOptions::Cpu(1));
  EXPECT_EQ(cpu::PackedWeightCount(), before + 1);
  auto two = compile::Executable::Build(MatmulGraph(9, again, b), compile::CompileOptions::Cpu(2));
  EXPECT_EQ(cpu::PackedWeightCount(), before + 1);  // shared, not packed again
  RunAndCheck(*one, 3, wv, bv);
  RunAndCheck(*two, 9, wv, bv);
  one.reset();
  RunAndCheck(*two, 9, wv, bv);  // still held by the second executable's kernel
  EXPECT_EQ(cpu::PackedWeightCount(), before + 1);
  two.reset();
  EXPECT_EQ(cpu::PackedWeightCount(), before);
}

// A weight also read at run time (here, by an add as well as the matmul) is
// kept: the executable drops a constant only when every reader copied it.
TEST(PackedWeights, AWeightSomeKernelReadsAtRunTimeIsKept) {
  auto w = RandomBuffer(kK * kK, 5);
  auto g = std::make_unique<Graph>();
  ir::Value* x = g->AddInput("x", {DType::kF32, {kK, kK}});
  ir::Value* wv = g->AddData("w", {DType::kF32, {kK, kK}}, ir::ValueKind::kParam, w);
  g->AddOutput("y", g->Add1("add", {g->Add1("matmul", {x, wv}), wv}));
  auto exe = compile::Executable::Build(std::move(g), compile::CompileOptions::Cpu(1));
  EXPECT_GT(w.use_count(), 1);
  float* in = static_cast<float*>(exe->inputs()[0].data);
  for (int64_t i = 0; i < kK * kK; ++i) in[i] = 0.f;
  exe->Run();  // y = 0 W + W
  const float* y = static_cast<const float*>(exe->outputs()[0].data);
  for (int64_t i = 0; i < kK * kK; ++i) ASSERT_EQ(y[i], w->as<float>()[i]);
}

}  // namespace
}  // namespace tiller
