// The fused attention op's operand layout, as its schema defines it
// (ir/ops/matmul.cc): read once here for every backend's kernel. Plain
// data, with ir::Op only declared, so that CUDA kernels (nvcc, C++17) take
// the struct as it is.
#pragma once

#include <cstdint>

namespace tiller::ir {

struct Op;

// q, k, v are [batch, seq, columns]; head h's d (dv) columns start at
// offset + h * d; the optional mask broadcasts to [batch, heads, Sq, Sk]
// with element strides mb, mh, mq, mk (0 where it broadcasts).
struct AttentionLayout {
  int64_t batch = 0, sq = 0, sk = 0, heads = 0, d = 0, dv = 0;
  int64_t q_ld = 0, k_ld = 0, v_ld = 0, q_off = 0, k_off = 0, v_off = 0;
  float alpha = 1.0f;
  bool has_mask = false;
  int64_t mb = 0, mh = 0, mq = 0, mk = 0;
};

AttentionLayout AttentionLayoutOf(const Op& op);

}  // namespace tiller::ir
