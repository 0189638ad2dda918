// Host-side entry points of the CUDA kernels (kernels/*.cu): each queues its
// kernel on `stream` and returns at once. Shapes and strides are worked out
// when the Tiller kernel is made (kernels/*.cc) and passed by value, so a
// launch allocates nothing. Plain types only: nvcc compiles the .cu files,
// the host compiler the rest.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ir/ops/attention_layout.h"

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
enum class UnaryOp { kRelu, kTanh, kExp, kSigmoid, kNeg, kSqrt, kGelu, kGeluTanh };
// A GEMM's epilogue activation (linear's `activation`; hard_swish,
// hard_sigmoid and relu6 with Paddle's defaults, as the fusion pass admits).
enum class Activation { kNone, kRelu, kTanh, kGelu, kGeluTanh, kHardSwish, kHardSigmoid, kRelu6 };

// out[i] = a[..] op b[..] with numpy broadcasting, `n` outputs; float32,
// float16, bfloat16 (computed in float32, rounded once) or int64 (no kDiv).
void LaunchBinary(BinaryOp op, Elem type, const void* a, const void* b, void* out, int64_t n,
                  const Indexing& index, cudaStream_t stream);
// y = f(x) elementwise, float32 / float16 / bfloat16 (computed in float32).
void LaunchUnary(UnaryOp op, Elem type, const void* x, void* y, int64_t n, cudaStream_t stream);
// y = x * scale + bias, or (x + bias) * scale when !bias_after_scale
// (Paddle's scale op), float32 / float16 / bfloat16 computed in float32.
void LaunchScale(Elem type, const void* x, void* y, int64_t n, float scale, float bias,
                 bool bias_after_scale, cudaStream_t stream);
// out[i] = a[..] == b[..] (bool) with numpy broadcasting; float32 or int64.
void LaunchEqual(Elem type, const void* a, const void* b, bool* out, int64_t n,
                 const Indexing& index, cudaStream_t stream);
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

// out[r, c] = act(out[r, c] + bias[c]) over a [rows, cols] result of type
// `out_type` (float32 or a half type, computed in float32); `bias` may be
// null, its type float32 or out_type.
void LaunchBiasActivation(Elem out_type, void* out, Elem bias_type, const void* bias, int64_t rows,
                          int64_t cols, Activation act, cudaStream_t stream);
// Layer normalization of each row of a [rows, cols] float32 tensor:
// (x - mean) / sqrt(var + eps) * scale + bias (scale, bias optional).
void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                     int64_t cols, float eps, cudaStream_t stream);
// out[i] = table[ids[i]] (rows of `row_bytes`), zeros for padding_idx (-1:
// none) and for an id outside [0, vocab), whose value goes to fault[1]
// (fault[0] set to 1; the first one kept). ids int64 or int32. `table`
// holds rows [row_begin, row_begin + part_rows) of the vocab rows (the
// whole table: 0, vocab); other ids get zero rows.
void LaunchEmbedding(const void* table, int64_t row_bytes, bool ids64, const void* ids, void* out,
                     int64_t count, int64_t vocab, int64_t row_begin, int64_t part_rows,
                     int64_t padding_idx, int64_t* fault, cudaStream_t stream);

// Shared memory a block needs: its query row and its scores.
size_t AttentionSharedBytes(const ir::AttentionLayout& g);
// out [batch, sq, heads * dv] = softmax(alpha q k^T + mask) v per head;
// mask may be null.
void LaunchAttention(const ir::AttentionLayout& g, const float* q, const float* k, const float* v,
                     const float* mask, float* out, cudaStream_t stream);

}  // namespace tiller::cuda
