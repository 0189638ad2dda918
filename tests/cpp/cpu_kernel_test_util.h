// For the CPU kernel tests (tests/cpp/cpu_<family>_test.cc): random inputs
// from one seeded generator, a kernel run on one op, and element-wise
// comparisons that report the first few mismatches.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/aligned_buffer.h"
#include "ir/graph.h"

namespace tiller::cpu::kernel_test {

using ir::Value;

// The generator every kernel test draws from (seeded once).
inline std::mt19937& Rng() {
  static std::mt19937 rng(1234);
  return rng;
}

inline std::vector<float> RandF(int64_t n, float lo = -3, float hi = 3) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(Rng());
  return v;
}

template <typename T>
std::vector<T> RandI(int64_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(Rng()));
  return v;
}

// Runs the op's kernel; outputs start filled with 0xCD so unwritten bytes show.
inline std::vector<AlignedBuffer> RunOp(const ir::Op& op, std::vector<const void*> ins) {
  auto k = CreateKernel(op);
  KernelArgs args;
  args.inputs = std::move(ins);
  std::vector<AlignedBuffer> outs;
  for (const Value* v : op.outputs) {
    outs.emplace_back(v->bytes());
    if (v->bytes()) std::memset(outs.back().data(), 0xCD, v->bytes());  // empty: data() is null
  }
  for (auto& b : outs) args.outputs.push_back(b.data());
  AlignedBuffer ws(k->workspace_bytes());
  args.workspace = ws.data();
  k->Run(args);
  return outs;
}

template <typename T>
const T* Ptr(const AlignedBuffer& b) {
  return b.as<T>();
}

inline void ExpectClose(const float* got, const std::vector<double>& want, double rtol, double atol,
                        const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double tol = atol + rtol * std::abs(want[i]);
    bool ok = std::abs(got[i] - want[i]) <= tol || (std::isnan(want[i]) && std::isnan(got[i])) ||
              (std::isinf(want[i]) && got[i] == want[i]);
    if (!ok && bad++ < 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << " want " << want[i];
  }
}

template <typename T, typename U>
void ExpectEq(const T* got, const std::vector<U>& want, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (static_cast<double>(got[i]) != static_cast<double>(want[i]) && bad++ < 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << +got[i] << " want " << +want[i];
  }
}

// Flat index into `in` of output element `flat`, numpy broadcasting.
inline int64_t BIndex(const Shape& out, const Shape& in, int64_t flat) {
  int64_t idx = 0, stride = 1;
  for (int d = static_cast<int>(out.size()) - 1, e = static_cast<int>(in.size()) - 1; d >= 0;
       --d, --e) {
    int64_t c = flat % out[d];
    flat /= out[d];
    if (e >= 0) {
      if (in[e] != 1) idx += c * stride;
      stride *= in[e];
    }
  }
  return idx;
}

}  // namespace tiller::cpu::kernel_test
