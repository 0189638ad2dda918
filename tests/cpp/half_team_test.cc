// Kernels under a halved OpenMP team (cpu_backend.h's response to
// contention): linear and matmul kernels built for two threads carry a twin
// built for one, which a one-thread team runs, with the same results.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/dnnl_context.h"
#include "backends/cpu/kernel.h"
#include "core/aligned_buffer.h"
#include "ir/graph.h"
#include "test_graphs.h"

namespace tiller {
namespace {

using ir::Graph;
using ir::Value;

// x [m, k] times w [k, n] (+ b) in double.
std::vector<double> Reference(const float* x, const float* w, const float* b, int64_t m, int64_t k,
                              int64_t n) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b ? b[j] : 0.0;
      for (int64_t l = 0; l < k; ++l) s += static_cast<double>(x[i * k + l]) * w[l * n + j];
      y[static_cast<size_t>(i * n + j)] = s;
    }
  }
  return y;
}

double Largest(const std::vector<float>& got, const std::vector<double>& want, double* scale) {
  double diff = 0;
  *scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - want[i]));
    *scale = std::max(*scale, std::abs(want[i]));
  }
  return diff;
}

TEST(HalfTeam, LinearAndMatmulKernelsBuiltForTwoThreadsRunATwinOnOne) {
  const int saved = omp_get_max_threads();
  constexpr int64_t m = 96, k = 256, n = 320;
  std::mt19937 rng(8);
  Graph g;
  Value* x = g.AddInput("x", {DType::kF32, {m, k}});
  Value* w = test_util::Param(g, "w", {k, n}, rng, 0.1f);
  Value* b = test_util::Param(g, "b", {n}, rng, 0.1f);
  const ir::Op* linear = g.Add1("linear", {x, w, b})->producer;
  const ir::Op* matmul = g.Add1("matmul", {x, w})->producer;
  auto input = test_util::Random({m, k}, rng, 1.0f);
  const float* wv = w->data->as<float>();
  const std::vector<double> want_linear =
      Reference(input->as<float>(), wv, b->data->as<float>(), m, k, n);
  const std::vector<double> want_matmul = Reference(input->as<float>(), wv, nullptr, m, k, n);
  for (const auto& [op, want] :
       {std::pair{linear, &want_linear}, std::pair{matmul, &want_matmul}}) {
    omp_set_num_threads(2);
    const size_t before = cpu::HalfTeamMatmulsCreated();
    auto kernel = cpu::CreateKernel(*op);
    EXPECT_EQ(cpu::HalfTeamMatmulsCreated(), before + 1) << op->type;
    for (int team : {2, 1, 2}) {
      omp_set_num_threads(team);
      double scale = 0;
      // float32 products summed over k = 256 terms of unit order: a few
      // 1e-6 of the largest output, by either team.
      const double diff = Largest(test_util::RunKernel(*op, *kernel, input.get()), *want, &scale);
      EXPECT_GT(scale, 1.0);
      EXPECT_LE(diff, 1e-5 * scale) << op->type << " with " << team << " threads";
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace tiller
