// matmul, matmul_accumulate and linear CPU kernels
// (backends/cpu/kernels/matmul.cc) against double references.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/cpu_isa.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::Graph;
using ir::Value;
using kernel_test::BIndex;
using kernel_test::ExpectClose;
using kernel_test::ExpectEq;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RunOp;

// oneDNN 2.6 chooses a blocked weights layout for a float32 GEMM only with
// its AVX-512 kernels (brgemm); with AVX2 it reads B plain, the layout the
// kernel has already, so there is nothing to stage. oneDNN's level is the
// one chosen at run time (TILLER_MAX_ISA caps it), not the build's.
const bool kDnnlPacksWeights = CpuIsa().chosen >= IsaLevel::kAvx512;

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

}  // namespace
}  // namespace tiller::cpu
