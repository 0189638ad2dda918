// Reductions over a thread block, for the kernels that give one block a
// row (softmax, layer_norm, attention). `partial` is the block's shared
// scratch of blockDim.x floats (a power of two); every thread gets the
// result, and partial may be reused after the call.
#pragma once

namespace tiller::cuda {

template <typename Op>
__device__ float BlockReduce(float v, float* partial, Op op) {
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] = op(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  const float result = partial[0];
  __syncthreads();
  return result;
}

__device__ inline float BlockMax(float v, float* partial) {
  return BlockReduce(v, partial, [](float a, float b) { return fmaxf(a, b); });
}

__device__ inline float BlockSum(float v, float* partial) {
  return BlockReduce(v, partial, [](float a, float b) { return a + b; });
}

}  // namespace tiller::cuda
