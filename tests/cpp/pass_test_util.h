// For the pass tests (tests/cpp/<pass>_test.cc): uniform float32 tensors,
// a graph run with and without a pass on the same inputs, and tolerances.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "compile/executable.h"
#include "compile/half_fallback.h"
#include "core/aligned_buffer.h"
#include "ir/graph.h"
#include "passes/pass.h"

namespace tiller::passes::pass_test {

using ir::Graph;

// Floats of `shape` drawn uniformly from [lo, hi).
inline std::shared_ptr<AlignedBuffer> Random(const Shape& shape, std::mt19937& rng, float lo = -1.f,
                                             float hi = 1.f) {
  auto buf = std::make_shared<AlignedBuffer>(NumElements(shape) * sizeof(float));
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < NumElements(shape); ++i) buf->as<float>()[i] = d(rng);
  return buf;
}

// Builds the graph twice (so each copy owns its values), runs one copy as is
// and the other after `pass`, and returns both outputs plus the op types left.
struct Compared {
  std::vector<float> plain, rewritten;
  std::vector<std::string> ops_after;
  int rewrites = 0;
};

template <typename Build>
Compared RunBothWays(Build build, int (*pass)(Graph&), const Shape& in_shape) {
  std::mt19937 rng(7);
  auto input = Random(in_shape, rng);
  Compared c;
  for (int rewritten = 0; rewritten < 2; ++rewritten) {
    auto g = std::make_unique<Graph>();
    std::mt19937 wrng(11);  // same weights both times
    build(*g, wrng);
    if (rewritten) {
      c.rewrites = pass(*g);
      ir::Verify(*g);
      for (const auto& op : g->ops()) c.ops_after.push_back(op->type);
    }
    auto exe = compile::Executable::Build(std::move(g), {});
    std::memcpy(exe->inputs()[0].data, input->data(), input->size());
    exe->Run();
    const auto& out = exe->outputs()[0];
    const float* p = static_cast<const float*>(out.data);
    (rewritten ? c.rewritten : c.plain).assign(p, p + NumElements(out.type.shape));
  }
  return c;
}

inline void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * std::max(1.f, std::abs(a[i]))) << i;
}

inline int CountOps(const std::vector<std::string>& ops, const std::string& type) {
  return static_cast<int>(std::count(ops.begin(), ops.end(), type));
}

// oneDNN's int8 GEMMs and convolutions are exact only with VNNI; without it
// the CPU backend has no int8 kernels (the int8 passes then do not run).
inline bool CpuHasInt8Gemms() {
  return compile::BackendMultipliesInt8(*backend::FindBackend("cpu"));
}

}  // namespace tiller::passes::pass_test
