// attention(q, k, v, mask?) on the GPU: one block per (query row, head,
// batch). The row's scores over the keys stay in shared memory, so the
// [batch, heads, Sq, Sk] score tensor of the unfused graph never exists:
//   s[j]   = alpha * q[b, i, h] . k[b, j, h] + mask[b, h, i, j]
//   p[j]   = exp(s[j] - max s)
//   out[b, i, h] = (sum_j p[j] v[b, j, h]) / sum_j p[j]
// (the CPU kernel's order: the softmax's division after the second
// product). Correct first; a tiled kernel for long sequences comes later.
#include "backends/cuda/kernels/block_reduce.cuh"
#include "backends/cuda/kernels/launch.h"

namespace tiller::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void Attend(ir::AttentionLayout g, const float* q, const float* k, const float* v,
                       const float* mask, float* out) {
  extern __shared__ float shared[];
  float* qs = shared;            // [d]
  float* scores = shared + g.d;  // [sk]
  __shared__ float partial[kThreads];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const float* qrow = q + (b * g.sq + i) * g.q_ld + g.q_off + h * g.d;
  for (int64_t c = threadIdx.x; c < g.d; c += blockDim.x) qs[c] = qrow[c];
  __syncthreads();
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < g.sk; j += blockDim.x) {
    const float* krow = k + (b * g.sk + j) * g.k_ld + g.k_off + h * g.d;
    float s = 0.f;
    for (int64_t c = 0; c < g.d; ++c) s += qs[c] * krow[c];
    s *= g.alpha;
    if (mask) s += mask[b * g.mb + h * g.mh + i * g.mq + j * g.mk];
    scores[j] = s;
    m = fmaxf(m, s);
  }
  m = BlockMax(m, partial);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < g.sk; j += blockDim.x) {
    const float p = expf(scores[j] - m);
    scores[j] = p;
    sum += p;
  }
  const float inv = 1.f / BlockSum(sum, partial);
  float* orow = out + (b * g.sq + i) * g.heads * g.dv + h * g.dv;
  for (int64_t c = threadIdx.x; c < g.dv; c += blockDim.x) {
    const float* vcol = v + b * g.sk * g.v_ld + g.v_off + h * g.dv + c;
    float acc = 0.f;
    for (int64_t j = 0; j < g.sk; ++j) acc += scores[j] * vcol[j * g.v_ld];
    orow[c] = acc * inv;
  }
}

}  // namespace

size_t AttentionSharedBytes(const ir::AttentionLayout& g) {
  return static_cast<size_t>(g.d + g.sk) * sizeof(float);
}

void LaunchAttention(const ir::AttentionLayout& g, const float* q, const float* k, const float* v,
                     const float* mask, float* out, cudaStream_t s) {
  if (g.batch == 0 || g.sq == 0 || g.heads == 0) return;
  const dim3 grid(static_cast<unsigned>(g.sq), static_cast<unsigned>(g.heads),
                  static_cast<unsigned>(g.batch));
  Attend<<<grid, kThreads, AttentionSharedBytes(g), s>>>(g, q, k, v, mask, out);
}

}  // namespace tiller::cuda
