// Pooling windows shared by the pool2d kernels and their gradients, so both
// directions agree on which inputs an output reads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tiller::cpu {

struct Windows {
  std::vector<int64_t> begin, end;  // clipped input range per output index
  // Extent a non-exclusive average divides by: Paddle's CPU kernel clips the
  // unclipped window [o*stride - pad, + k) at in + pad (pad_begin, even when
  // the end pad differs), so it is k except where ceil_mode pushes the window
  // past that point. Adaptive bins use their own size.
  std::vector<int64_t> span;
};

// Paddle's CPU windows: [o*stride - pad, + k) clipped to the input (not to
// the padded input); adaptive bins are [floor(o*in/out), ceil((o+1)*in/out)).
inline Windows MakeWindows(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad,
                           bool adaptive) {
  Windows w;
  for (int64_t o = 0; o < out; ++o) {
    int64_t b, e, span;
    if (adaptive) {
      b = o * in / out;
      e = ((o + 1) * in + out - 1) / out;
      span = e - b;
    } else {
      b = o * stride - pad;
      span = std::min(b + k, in + pad) - b;
      e = std::min(b + k, in);
      b = std::max<int64_t>(b, 0);
    }
    w.begin.push_back(b);
    w.end.push_back(std::max(b, e));
    w.span.push_back(span);
  }
  return w;
}

}  // namespace tiller::cpu
