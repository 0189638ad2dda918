// Host-side entry points of the CUDA kernels (kernels/*.cu): each queues its
// kernel on `stream` and returns at once. Shapes and strides are worked out
// when the Tiller kernel is made (kernels/*.cc) and passed by value, so a
// launch allocates nothing. Plain types only: nvcc compiles the .cu files,
// the host compiler the rest.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tiller::cuda {

// Element types the kernels take.
enum class Elem { kF32, kF16, kBF16, kI64, kI32, kBool };

inline constexpr int kMaxRank = 6;

// An output of up to kMaxRank dims and, per input, the element stride of
// each output dim in that input (0 where the input broadcasts).
struct Indexing {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t in[2][kMaxRank] = {};
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMax, kMin };
enum class UnaryOp { kRelu, kTanh, kExp, kSigmoid, kNeg, kSqrt };

// out[i] = a[..] op b[..] with numpy broadcasting, `n` outputs; float32,
// float16, bfloat16 (computed in float32, rounded once) or int64 (no kDiv).
void LaunchBinary(BinaryOp op, Elem type, const void* a, const void* b, void* out, int64_t n,
                  const Indexing& index, cudaStream_t stream);
// y = f(x) elementwise, float32 / float16 / bfloat16 (computed in float32).
void LaunchUnary(UnaryOp op, Elem type, const void* x, void* y, int64_t n, cudaStream_t stream);
// Conversion with the CPU's rounding: to a half type, to nearest even; to
// int64 / int32, toward zero; to bool, x != 0.
void LaunchCast(Elem from, Elem to, const void* x, void* y, int64_t n, cudaStream_t stream);
// y[i] = x[offset of output i], index.in[0] holding the input strides of the
// output dims (a transpose); elements of `elem_bytes` (1, 2, 4 or 8).
void LaunchGather(size_t elem_bytes, const void* x, void* y, int64_t n, const Indexing& index,
                  cudaStream_t stream);
// Softmax over the last dim of a [rows, cols] float32 tensor (log_softmax
// when `log`), max-subtracted as the CPU kernel does.
void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log,
                   cudaStream_t stream);

}  // namespace tiller::cuda
