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

#include "backend/kernel.h"
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

// An NCHW float32 conv2d of x (`in` channels) through a k x k filter with
// "same" padding and a bias, its filter drawn from rng scaled by the fan-in
// (activations keep a unit-order magnitude layer to layer).
inline ir::Value* Conv(ir::Graph& g, ir::Value* x, const std::string& name, int64_t in, int64_t out,
                       int64_t k, std::mt19937& rng, int64_t stride = 1, int64_t groups = 1,
                       int64_t dilation = 1) {
  const int64_t p = k / 2 * dilation;
  const int64_t fan_in = in / groups * k * k;
  const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
  return g.Add1("conv2d",
                {x, Param(g, name, {out, in / groups, k, k}, rng, scale),
                 Param(g, name + ".b", {out}, rng, 0.1f)},
                {{"pads", std::vector<int64_t>{p, p, p, p}},
                 {"strides", std::vector<int64_t>{stride, stride}},
                 {"dilations", std::vector<int64_t>{dilation, dilation}},
                 {"groups", groups}});
}

// `op`'s float32 output computed by `kernel` (built for it) from the op's
// inputs: the data of constants, `variable` for those without (if any).
inline std::vector<float> RunKernel(const ir::Op& op, backend::Kernel& kernel,
                                    const AlignedBuffer* variable = nullptr) {
  backend::KernelArgs args;
  for (const ir::Value* v : op.inputs)
    args.inputs.push_back(v->data ? v->data->data() : variable ? variable->data() : nullptr);
  std::vector<float> out(NumElements(op.outputs[0]->shape()), -1.0f);
  args.outputs.push_back(out.data());
  AlignedBuffer ws(kernel.workspace_bytes());
  args.workspace = ws.data();
  kernel.Run(args);
  return out;
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
