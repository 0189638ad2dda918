// pool2d's CPU kernel (backends/cpu/kernels/pool.cc) against Paddle's
// pooling rule: max and avg, pads, ceil_mode, exclusive, adaptive.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RunOp;

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

}  // namespace
}  // namespace tiller::cpu
