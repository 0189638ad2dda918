// Pooling windows shared by the pool2d kernels and their gradients, so both
// directions agree on which inputs an output reads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ir/graph.h"

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

// pool2d's attributes and windows, read one way by the forward kernel and
// its gradient. x and y are the NCHW input and output shapes.
struct Pool2dGeometry {
  bool is_max = true, adaptive = false, exclusive = true;
  std::vector<int64_t> k, s, p;  // ksize, strides, pads (top, bottom, left, right)
  int64_t planes = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  Windows wh, ww;
};

// An average pool's divisor per output (row-major): the window clipped to
// the input (exclusive or adaptive) or its Windows::span (non-exclusive,
// Paddle's inclusive average); 0 for an empty window. Shared by the
// forward kernels (NCHW, NHWC) and the gradient.
inline std::vector<float> AvgDivisors(const Pool2dGeometry& g) {
  const bool inclusive = !g.adaptive && !g.exclusive;
  std::vector<float> div;
  for (int64_t i = 0; i < g.oh; ++i) {
    for (int64_t j = 0; j < g.ow; ++j) {
      const float area =
          static_cast<float>((g.wh.end[i] - g.wh.begin[i]) * (g.ww.end[j] - g.ww.begin[j]));
      const float span = static_cast<float>(g.wh.span[i] * g.ww.span[j]);
      div.push_back(area == 0 ? 0.0f : inclusive ? span : area);
    }
  }
  return div;
}

inline Pool2dGeometry ReadPool2d(const ir::Op& op, const Shape& x, const Shape& y) {
  Pool2dGeometry g;
  g.is_max = op.GetStr("pooling_type") == "max";
  g.adaptive = op.GetBool("adaptive");
  g.exclusive = op.GetBool("exclusive");
  g.k = op.GetInts("ksize");
  g.s = op.GetInts("strides");
  g.p = op.GetInts("pads");
  g.planes = x[0] * x[1];
  g.ih = x[2], g.iw = x[3], g.oh = y[2], g.ow = y[3];
  g.wh = MakeWindows(g.ih, g.oh, g.k[0], g.s[0], g.p[0], g.adaptive);
  g.ww = MakeWindows(g.iw, g.ow, g.k[1], g.s[1], g.p[2], g.adaptive);
  return g;
}

}  // namespace tiller::cpu
