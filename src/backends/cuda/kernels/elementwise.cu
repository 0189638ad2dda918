// Elementwise, cast, gather (transpose) and softmax kernels (launch.h).
// Half types are computed in float32 and rounded once, as the CPU kernels
// do, so results match them bit for bit where the float32 math is the same.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/kernels/block_reduce.cuh"
#include "backends/cuda/kernels/launch.h"

namespace tiller::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

template <typename T>
struct Io {
  static __device__ float Load(const T* p, int64_t i) { return static_cast<float>(p[i]); }
  static __device__ void Store(T* p, int64_t i, float v) { p[i] = static_cast<T>(v); }
};
template <>
struct Io<__half> {
  static __device__ float Load(const __half* p, int64_t i) { return __half2float(p[i]); }
  static __device__ void Store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
};
template <>
struct Io<__nv_bfloat16> {
  static __device__ float Load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
  static __device__ void Store(__nv_bfloat16* p, int64_t i, float v) {
    p[i] = __float2bfloat16_rn(v);
  }
};

// The offsets in the inputs of output element i.
__device__ void Offsets(const Indexing& ix, int64_t i, int64_t* a, int64_t* b) {
  int64_t oa = 0, ob = 0;
  for (int d = ix.rank - 1; d >= 0; --d) {
    const int64_t c = i % ix.dims[d];
    i /= ix.dims[d];
    oa += c * ix.in[0][d];
    ob += c * ix.in[1][d];
  }
  *a = oa;
  *b = ob;
}

template <typename C>
__device__ C Apply(BinaryOp op, C x, C y) {
  switch (op) {
    case BinaryOp::kAdd:
      return x + y;
    case BinaryOp::kSub:
      return x - y;
    case BinaryOp::kMul:
      return x * y;
    case BinaryOp::kDiv:
      return x / y;
    case BinaryOp::kMax:
      return x > y ? x : y;
    case BinaryOp::kMin:
      return x < y ? x : y;
  }
  return x;
}

template <typename T>
__global__ void BinaryFloat(BinaryOp op, const T* a, const T* b, T* out, int64_t n, Indexing ix) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t oa, ob;
    Offsets(ix, i, &oa, &ob);
    Io<T>::Store(out, i, Apply<float>(op, Io<T>::Load(a, oa), Io<T>::Load(b, ob)));
  }
}

__global__ void BinaryInt64(BinaryOp op, const int64_t* a, const int64_t* b, int64_t* out,
                            int64_t n, Indexing ix) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t oa, ob;
    Offsets(ix, i, &oa, &ob);
    out[i] = Apply<int64_t>(op, a[oa], b[ob]);
  }
}

__device__ float ApplyUnary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kRelu:
      return x > 0.f ? x : 0.f;
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kSigmoid:
      return 1.f / (1.f + expf(-x));
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kGelu:
      return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case UnaryOp::kGeluTanh:
      return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  }
  return x;
}

__device__ float ApplyActivation(Activation act, float x) {
  switch (act) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > 0.f ? x : 0.f;
    case Activation::kTanh:
      return tanhf(x);
    case Activation::kGelu:
      return ApplyUnary(UnaryOp::kGelu, x);
    case Activation::kGeluTanh:
      return ApplyUnary(UnaryOp::kGeluTanh, x);
    case Activation::kHardSwish:
      return x * fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f;
    case Activation::kHardSigmoid:
      return fmaxf(0.f, fminf(1.f, x * 0.1666667f + 0.5f));
    case Activation::kRelu6:
      return fminf(fmaxf(x, 0.f), 6.f);
  }
  return x;
}

template <typename T, typename B>
__global__ void BiasActivation(T* out, const B* bias, int64_t n, int64_t cols, Activation act) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float v = Io<T>::Load(out, i);
    if (bias) v += Io<B>::Load(bias, i % cols);
    Io<T>::Store(out, i, ApplyActivation(act, v));
  }
}

template <typename T>
void BiasActivationAs(T* out, Elem bias_type, const void* bias, int64_t n, int64_t cols,
                      Activation act, cudaStream_t s) {
  if (bias_type == Elem::kF32 || !bias)
    BiasActivation<<<Blocks(n), kThreads, 0, s>>>(out, static_cast<const float*>(bias), n, cols,
                                                  act);
  else
    BiasActivation<<<Blocks(n), kThreads, 0, s>>>(out, static_cast<const T*>(bias), n, cols, act);
}

// One block per row: the mean, then the variance about it (two passes, as
// the CPU kernel), then the normalized row.
__global__ void LayerNorm(const float* x, const float* scale, const float* bias, float* y,
                          int64_t cols, float eps) {
  __shared__ float partial[kThreads];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
  const float mean = BlockSum(sum, partial) / static_cast<float>(cols);
  float sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = row[c] - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(BlockSum(sq, partial) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = (row[c] - mean) * rstd;
    if (scale) v *= scale[c];
    if (bias) v += bias[c];
    out[c] = v;
  }
}

// One block per looked-up row, its words copied by the block's threads.
template <typename I, typename W>
__global__ void Embedding(const W* table, int64_t row_words, const I* ids, W* out, int64_t vocab,
                          int64_t row_begin, int64_t part_rows, int64_t padding_idx,
                          int64_t* fault) {
  const int64_t r = blockIdx.x;
  const int64_t id = static_cast<int64_t>(ids[r]);
  W* dst = out + r * row_words;
  const bool bad = id < 0 || id >= vocab;
  if (bad && threadIdx.x == 0 &&
      atomicCAS(reinterpret_cast<unsigned long long*>(fault), 0ull, 1ull) == 0ull)
    fault[1] = id;
  // A part of a table (rows [row_begin, row_begin + part_rows)): other
  // parts' ids get a zero row.
  const bool elsewhere = id < row_begin || id >= row_begin + part_rows;
  if (bad || elsewhere || id == padding_idx) {
    for (int64_t c = threadIdx.x; c < row_words; c += blockDim.x) dst[c] = W{};
    return;
  }
  const W* src = table + (id - row_begin) * row_words;
  for (int64_t c = threadIdx.x; c < row_words; c += blockDim.x) dst[c] = src[c];
}

template <typename I>
void EmbeddingAs(const void* table, int64_t row_bytes, const I* ids, void* out, int64_t count,
                 int64_t vocab, int64_t row_begin, int64_t part_rows, int64_t padding_idx,
                 int64_t* fault, cudaStream_t s) {
  const auto blocks = static_cast<unsigned>(count);
  if (row_bytes % 4 == 0)
    Embedding<<<blocks, 128, 0, s>>>(static_cast<const uint32_t*>(table), row_bytes / 4, ids,
                                     static_cast<uint32_t*>(out), vocab, row_begin, part_rows,
                                     padding_idx, fault);
  else
    Embedding<<<blocks, 128, 0, s>>>(static_cast<const uint8_t*>(table), row_bytes, ids,
                                     static_cast<uint8_t*>(out), vocab, row_begin, part_rows,
                                     padding_idx, fault);
}

template <typename T>
__global__ void Unary(UnaryOp op, const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    Io<T>::Store(y, i, ApplyUnary(op, Io<T>::Load(x, i)));
}

template <typename T>
__global__ void Scale(const T* x, T* y, int64_t n, float scale, float bias, bool after) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = Io<T>::Load(x, i);
    Io<T>::Store(y, i, after ? v * scale + bias : (v + bias) * scale);
  }
}

template <typename T>
__global__ void Equal(const T* a, const T* b, bool* out, int64_t n, Indexing ix) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t oa, ob;
    Offsets(ix, i, &oa, &ob);
    out[i] = a[oa] == b[ob];
  }
}

template <typename From, typename To>
__global__ void Cast(const From* x, To* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    Io<To>::Store(y, i, Io<From>::Load(x, i));
}

template <typename From>
__global__ void CastToInt64(const From* x, int64_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = static_cast<int64_t>(Io<From>::Load(x, i));
}

template <typename From>
__global__ void CastToBool(const From* x, bool* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = Io<From>::Load(x, i) != 0.f;
}

template <typename T>
__global__ void Gather(const T* x, T* y, int64_t n, Indexing ix) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t o, unused;
    Offsets(ix, i, &o, &unused);
    y[i] = x[o];
  }
}

// One block per row: the row's max, then the sum of exp(x - max), then the
// outputs; both reductions in shared memory.
__global__ void Softmax(const float* x, float* y, int64_t cols, bool log) {
  __shared__ float partial[kThreads];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = BlockMax(m, partial);
  float sum = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(row[c] - m);
  sum = BlockSum(sum, partial);
  if (log) {
    const float log_sum = logf(sum);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = row[c] - m - log_sum;
  } else {
    const float inv = 1.f / sum;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = expf(row[c] - m) * inv;
  }
}

template <typename To>
void CastFrom(Elem from, const void* x, To* y, int64_t n, cudaStream_t s) {
  switch (from) {
    case Elem::kF32:
      Cast<<<Blocks(n), kThreads, 0, s>>>(static_cast<const float*>(x), y, n);
      break;
    case Elem::kF16:
      Cast<<<Blocks(n), kThreads, 0, s>>>(static_cast<const __half*>(x), y, n);
      break;
    case Elem::kBF16:
      Cast<<<Blocks(n), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x), y, n);
      break;
    default:
      break;
  }
}

}  // namespace

void LaunchBinary(BinaryOp op, Elem type, const void* a, const void* b, void* out, int64_t n,
                  const Indexing& ix, cudaStream_t s) {
  switch (type) {
    case Elem::kF32:
      BinaryFloat<<<Blocks(n), kThreads, 0, s>>>(op, static_cast<const float*>(a),
                                                 static_cast<const float*>(b),
                                                 static_cast<float*>(out), n, ix);
      break;
    case Elem::kF16:
      BinaryFloat<<<Blocks(n), kThreads, 0, s>>>(op, static_cast<const __half*>(a),
                                                 static_cast<const __half*>(b),
                                                 static_cast<__half*>(out), n, ix);
      break;
    case Elem::kBF16:
      BinaryFloat<<<Blocks(n), kThreads, 0, s>>>(op, static_cast<const __nv_bfloat16*>(a),
                                                 static_cast<const __nv_bfloat16*>(b),
                                                 static_cast<__nv_bfloat16*>(out), n, ix);
      break;
    case Elem::kI64:
      BinaryInt64<<<Blocks(n), kThreads, 0, s>>>(op, static_cast<const int64_t*>(a),
                                                 static_cast<const int64_t*>(b),
                                                 static_cast<int64_t*>(out), n, ix);
      break;
    default:
      break;
  }
}

void LaunchUnary(UnaryOp op, Elem type, const void* x, void* y, int64_t n, cudaStream_t s) {
  switch (type) {
    case Elem::kF32:
      Unary<<<Blocks(n), kThreads, 0, s>>>(op, static_cast<const float*>(x), static_cast<float*>(y),
                                           n);
      break;
    case Elem::kF16:
      Unary<<<Blocks(n), kThreads, 0, s>>>(op, static_cast<const __half*>(x),
                                           static_cast<__half*>(y), n);
      break;
    case Elem::kBF16:
      Unary<<<Blocks(n), kThreads, 0, s>>>(op, static_cast<const __nv_bfloat16*>(x),
                                           static_cast<__nv_bfloat16*>(y), n);
      break;
    default:
      break;
  }
}

void LaunchCast(Elem from, Elem to, const void* x, void* y, int64_t n, cudaStream_t s) {
  switch (to) {
    case Elem::kF32:
      if (from == Elem::kI64)
        Cast<<<Blocks(n), kThreads, 0, s>>>(static_cast<const int64_t*>(x), static_cast<float*>(y),
                                            n);
      else
        CastFrom(from, x, static_cast<float*>(y), n, s);
      break;
    case Elem::kF16:
      CastFrom(from, x, static_cast<__half*>(y), n, s);
      break;
    case Elem::kBF16:
      CastFrom(from, x, static_cast<__nv_bfloat16*>(y), n, s);
      break;
    case Elem::kI64:
      if (from == Elem::kF32)
        CastToInt64<<<Blocks(n), kThreads, 0, s>>>(static_cast<const float*>(x),
                                                   static_cast<int64_t*>(y), n);
      break;
    case Elem::kBool:
      if (from == Elem::kF32)
        CastToBool<<<Blocks(n), kThreads, 0, s>>>(static_cast<const float*>(x),
                                                  static_cast<bool*>(y), n);
      break;
    default:
      break;
  }
}

void LaunchGather(size_t elem_bytes, const void* x, void* y, int64_t n, const Indexing& ix,
                  cudaStream_t s) {
  switch (elem_bytes) {
    case 1:
      Gather<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(x),
                                            static_cast<uint8_t*>(y), n, ix);
      break;
    case 2:
      Gather<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint16_t*>(x),
                                            static_cast<uint16_t*>(y), n, ix);
      break;
    case 4:
      Gather<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint32_t*>(x),
                                            static_cast<uint32_t*>(y), n, ix);
      break;
    case 8:
      Gather<<<Blocks(n), kThreads, 0, s>>>(static_cast<const uint64_t*>(x),
                                            static_cast<uint64_t*>(y), n, ix);
      break;
    default:
      break;
  }
}

void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t cols, bool log, cudaStream_t s) {
  if (rows > 0) Softmax<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, y, cols, log);
}

void LaunchBiasActivation(Elem out_type, void* out, Elem bias_type, const void* bias, int64_t rows,
                          int64_t cols, Activation act, cudaStream_t s) {
  const int64_t n = rows * cols;
  if (n == 0 || (!bias && act == Activation::kNone)) return;
  switch (out_type) {
    case Elem::kF32:
      BiasActivationAs(static_cast<float*>(out), bias_type, bias, n, cols, act, s);
      break;
    case Elem::kF16:
      BiasActivationAs(static_cast<__half*>(out), bias_type, bias, n, cols, act, s);
      break;
    case Elem::kBF16:
      BiasActivationAs(static_cast<__nv_bfloat16*>(out), bias_type, bias, n, cols, act, s);
      break;
    default:
      break;
  }
}

void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows,
                     int64_t cols, float eps, cudaStream_t s) {
  if (rows > 0)
    LayerNorm<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, scale, bias, y, cols, eps);
}

void LaunchEmbedding(const void* table, int64_t row_bytes, bool ids64, const void* ids, void* out,
                     int64_t count, int64_t vocab, int64_t row_begin, int64_t part_rows,
                     int64_t padding_idx, int64_t* fault, cudaStream_t s) {
  if (count == 0) return;
  if (ids64)
    EmbeddingAs(table, row_bytes, static_cast<const int64_t*>(ids), out, count, vocab, row_begin,
                part_rows, padding_idx, fault, s);
  else
    EmbeddingAs(table, row_bytes, static_cast<const int32_t*>(ids), out, count, vocab, row_begin,
                part_rows, padding_idx, fault, s);
}

void LaunchScale(Elem type, const void* x, void* y, int64_t n, float scale, float bias, bool after,
                 cudaStream_t s) {
  switch (type) {
    case Elem::kF32:
      Scale<<<Blocks(n), kThreads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), n,
                                           scale, bias, after);
      break;
    case Elem::kF16:
      Scale<<<Blocks(n), kThreads, 0, s>>>(static_cast<const __half*>(x), static_cast<__half*>(y),
                                           n, scale, bias, after);
      break;
    case Elem::kBF16:
      Scale<<<Blocks(n), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x),
                                           static_cast<__nv_bfloat16*>(y), n, scale, bias, after);
      break;
    default:
      break;
  }
}

void LaunchEqual(Elem type, const void* a, const void* b, bool* out, int64_t n, const Indexing& ix,
                 cudaStream_t s) {
  if (type == Elem::kF32)
    Equal<<<Blocks(n), kThreads, 0, s>>>(static_cast<const float*>(a), static_cast<const float*>(b),
                                         out, n, ix);
  else if (type == Elem::kI64)
    Equal<<<Blocks(n), kThreads, 0, s>>>(static_cast<const int64_t*>(a),
                                         static_cast<const int64_t*>(b), out, n, ix);
}

}  // namespace tiller::cuda
