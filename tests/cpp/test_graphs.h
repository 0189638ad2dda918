// For tests that build graphs by hand: normally distributed float32
// tensors and parameters (the convolution tests scale filters by their
// fan-in), and a graph of one input compiled and run on the CPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compile/executable.h"
#include "core/aligned_buffer.h"
#include "ir/graph.h"

namespace tiller::test_util {

// N(0, scale^2) floats of `shape`, drawn from rng.
inline std::shared_ptr<AlignedBuffer> Random(const Shape& shape, std::mt19937& rng, float scale) {
  auto buf = std::make_shared<AlignedBuffer>(NumElements(shape) * sizeof(float));
  std::normal_distribution<float> d(0.0f, scale);
  for (int64_t i = 0; i < NumElements(shape); ++i) buf->as<float>()[i] = d(rng);
  return buf;
}

// A float32 parameter of g holding Random(shape, rng, scale).
inline ir::Value* Param(ir::Graph& g, const std::string& name, const Shape& s, std::mt19937& rng,
                        float scale) {
  return g.AddData(name, {DType::kF32, s}, ir::ValueKind::kParam, Random(s, rng, scale));
}

// g (one float32 input, one float32 output) compiled for the CPU and run on
// `input`: the output's floats.
inline std::vector<float> RunGraph(std::unique_ptr<ir::Graph> g, const AlignedBuffer& input) {
  auto exe = compile::Executable::Build(std::move(g), {});
  std::memcpy(exe->inputs()[0].data, input.data(), input.size());
  exe->Run();
  const float* p = static_cast<const float*>(exe->outputs()[0].data);
  return {p, p + NumElements(exe->outputs()[0].type.shape)};
}

// The largest |a - b| over the largest |a|; *scale (when given) gets the latter.
inline double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b,
                                 double* scale = nullptr) {
  double diff = 0, largest = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    largest = std::max(largest, static_cast<double>(std::abs(a[i])));
  }
  if (scale) *scale = largest;
  return largest > 0 ? diff / largest : diff;
}

}  // namespace tiller::test_util
