// Binary elementwise CPU kernels (backends/cpu/kernels/elementwise.cc):
// arithmetic with numpy broadcasting, integer division by zero, comparisons
// and logic.
#include <gtest/gtest.h>

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

using ir::Graph;
using ir::Value;
using kernel_test::BIndex;
using kernel_test::ExpectClose;
using kernel_test::ExpectEq;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RandI;
using kernel_test::RunOp;

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

}  // namespace
}  // namespace tiller::cpu
