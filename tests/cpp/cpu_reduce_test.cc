// Reduction CPU kernels (backends/cpu/kernels/reduce.cc): axes, keepdim and
// dtypes, thread-count independence, argmax/argmin, logsumexp.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::AttrMap;
using ir::Graph;
using ir::Value;
using V = std::vector<int64_t>;
using kernel_test::ExpectClose;
using kernel_test::ExpectEq;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RandI;
using kernel_test::RunOp;

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

}  // namespace
}  // namespace tiller::cpu
