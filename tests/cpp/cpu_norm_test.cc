// layer_norm and batch_norm (inference) CPU kernels
// (backends/cpu/kernels/norm.cc) against double references.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "backends/cpu/kernel.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::Graph;
using ir::Value;
using kernel_test::ExpectClose;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RunOp;

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

}  // namespace
}  // namespace tiller::cpu
