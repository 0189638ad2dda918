// Data-movement CPU kernels (backends/cpu/kernels/shape.cc): transpose,
// slice, expand, concat, split, gather, identity, cast and where.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/kernel.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::Graph;
using ir::Value;
using V = std::vector<int64_t>;
using kernel_test::BIndex;
using kernel_test::ExpectEq;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RandI;
using kernel_test::RunOp;

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

}  // namespace
}  // namespace tiller::cpu
