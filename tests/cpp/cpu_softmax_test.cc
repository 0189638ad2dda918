// softmax and log_softmax CPU kernels (backends/cpu/kernels/softmax.cc):
// any axis, masked rows, NaN propagation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
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

}  // namespace
}  // namespace tiller::cpu
