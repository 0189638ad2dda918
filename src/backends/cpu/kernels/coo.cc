// Sparse COO kernels (ir/ops/sparse.cc): coo_to_dense, coo_softmax,
// coo_matmul and coo_reshape, float32 values, int64 indices [rank, nnz]. Every entry's
// indices are checked against the shape first: an entry with an index
// outside its dimension is reported (backend::IndexFault: the step fails
// naming the op, the indices and the value) and never read or written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

// Where each entry goes: its row-major position in `shape` (-1: an index
// outside its dimension, reported). `at` holds nnz int64.
void Positions(const KernelArgs& a, const Shape& shape, int64_t nnz, int64_t* at) {
  const auto* indices = static_cast<const int64_t*>(a.inputs[0]);
  const int rank = static_cast<int>(shape.size());
  for (int64_t e = 0; e < nnz; ++e) {
    int64_t pos = 0;
    for (int d = 0; d < rank && pos >= 0; ++d) {
      const int64_t i = indices[d * nnz + e];
      if (i < 0 || i >= shape[d]) {
        RecordIndexFault(a, i, shape[d], 0);
        pos = -1;
      } else {
        pos = pos * shape[d] + i;
      }
    }
    at[e] = pos;
  }
}

std::unique_ptr<Kernel> MakeCooReshape(const ir::Op& op) {
  const Shape shape = op.GetInts("shape"), out_shape = op.GetInts("out_shape");
  const int64_t nnz = op.inputs[0]->shape()[1];
  const int rank = static_cast<int>(out_shape.size());
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        Positions(a, shape, nnz, at);
        auto* out = static_cast<int64_t*>(a.outputs[0]);
        for (int64_t e = 0; e < nnz; ++e) {
          int64_t pos = at[e];
          for (int d = rank - 1; d >= 0; --d) {
            out[d * nnz + e] = pos < 0 ? -1 : pos % out_shape[d];
            if (pos >= 0) pos /= out_shape[d];
          }
        }
      },
      static_cast<size_t>(nnz) * sizeof(int64_t));
}

std::unique_ptr<Kernel> MakeCooToDense(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const int64_t nnz = op.inputs[1]->shape()[0];
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        Positions(a, shape, nnz, at);
        const auto* values = static_cast<const float*>(a.inputs[1]);
        auto* out = static_cast<float*>(a.outputs[0]);
        std::memset(out, 0, bytes);
        // In entry order: an entry stored twice keeps the later value.
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] >= 0) out[at[e]] = values[e];
        }
      },
      static_cast<size_t>(nnz) * sizeof(int64_t));
}

// Softmax over each row's stored entries: the row is the position divided
// by the last dim; the row maxima and sums live in the workspace.
std::unique_ptr<Kernel> MakeCooSoftmax(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const int64_t nnz = op.inputs[1]->shape()[0];
  const int64_t last = shape.back(), rows = NumElements(shape) / last;
  const size_t workspace =
      static_cast<size_t>(nnz) * sizeof(int64_t) + static_cast<size_t>(rows) * 2 * sizeof(float);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        auto* max = reinterpret_cast<float*>(at + nnz);
        float* sum = max + rows;
        Positions(a, shape, nnz, at);
        const auto* x = static_cast<const float*>(a.inputs[1]);
        auto* y = static_cast<float*>(a.outputs[0]);
        std::fill(max, max + rows, -std::numeric_limits<float>::infinity());
        std::fill(sum, sum + rows, 0.f);
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] >= 0) max[at[e] / last] = std::max(max[at[e] / last], x[e]);
        }
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] < 0) {
            y[e] = 0.f;
            continue;
          }
          y[e] = std::exp(x[e] - max[at[e] / last]);
          sum[at[e] / last] += y[e];
        }
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] >= 0) y[e] /= sum[at[e] / last];
        }
      },
      workspace);
}

// out[b, i, :] += v * y[b, k, :] per entry (b absent for a matrix). Threads
// take column ranges: each adds every entry into its own columns, so no two
// write the same element and the sums keep entry order.
std::unique_ptr<Kernel> MakeCooMatmul(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const int64_t nnz = op.inputs[1]->shape()[0];
  const bool batched = shape.size() == 3;
  const int64_t m = shape[shape.size() - 2], k = shape.back();
  const int64_t n = op.inputs[2]->shape().back();
  const int64_t batch = batched ? shape[0] : 1;
  const size_t out_bytes = static_cast<size_t>(batch * m * n) * sizeof(float);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        Positions(a, shape, nnz, at);
        const auto* v = static_cast<const float*>(a.inputs[1]);
        const auto* y = static_cast<const float*>(a.inputs[2]);
        auto* out = static_cast<float*>(a.outputs[0]);
        std::memset(out, 0, out_bytes);
        ParallelRange(
            n, nnz + 1,
            [&](int64_t c0, int64_t c1) {
              for (int64_t e = 0; e < nnz; ++e) {
                if (at[e] < 0) continue;
                // at = (b m + i) k + kk: the row of out is (b m + i), of y (b k + kk).
                const int64_t row = at[e] / k, kk = at[e] % k, b = row / m;
                const float* src = y + (b * k + kk) * n;
                float* dst = out + row * n;
                const float ve = v[e];
                for (int64_t c = c0; c < c1; ++c) dst[c] += ve * src[c];
              }
            },
            16);
      },
      static_cast<size_t>(nnz) * sizeof(int64_t));
}

const bool kRegistered = [] {
  auto sig = [](const char* spec) {
    return Signature(spec).Where("I", {DType::kI64}).Where("T", {DType::kF32});
  };
  RegisterKernel("coo_reshape", MakeCooReshape, Signature("I -> I").Where("I", {DType::kI64}));
  RegisterKernel("coo_to_dense", MakeCooToDense, sig("I, T -> T"));
  RegisterKernel("coo_softmax", MakeCooSoftmax, sig("I, T -> T"));
  RegisterKernel("coo_matmul", MakeCooMatmul, sig("I, T, T -> T"));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
