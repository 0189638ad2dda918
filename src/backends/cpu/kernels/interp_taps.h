// The separable taps of interp (see interp.cc): along each spatial dim an
// output position reads `n` input positions with fixed weights. Shared by
// the forward kernel and interp_grad, whose scatter is its transpose.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"
#include "ir/graph.h"

namespace tiller::cpu {

struct Taps {
  int n = 1;  // taps per output position
  std::vector<int64_t> idx;
  std::vector<float> w;
};

inline float Cubic1(float x, float a) {
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
inline float Cubic2(float x, float a) {
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

inline Taps MakeTaps(const std::string& method, int64_t in, int64_t out, float ratio,
                     bool align_corners, int64_t align_mode) {
  Taps t;
  auto clamp = [&](int64_t i) { return std::max<int64_t>(0, std::min(i, in - 1)); };
  if (method == "nearest") {
    for (int64_t o = 0; o < out; ++o) {
      float f =
          align_corners ? ratio * static_cast<float>(o) + 0.5f : ratio * static_cast<float>(o);
      t.idx.push_back(clamp(static_cast<int64_t>(f)));
      t.w.push_back(1.0f);
    }
    return t;
  }
  if (method == "linear") {
    t.n = 2;
    bool half = align_mode == 0 && !align_corners;
    for (int64_t o = 0; o < out; ++o) {
      float src = static_cast<float>(ratio * (o + 0.5) - 0.5);
      int64_t lo =
          half ? static_cast<int64_t>(src) : static_cast<int64_t>(ratio * static_cast<float>(o));
      lo = std::max<int64_t>(lo, 0);
      int64_t hi = std::min(lo + 1, in - 1);
      src = std::max(src, 0.0f);
      float d = half ? src - static_cast<float>(lo)
                     : ratio * static_cast<float>(o) - static_cast<float>(lo);
      t.idx.insert(t.idx.end(), {clamp(lo), clamp(hi)});
      t.w.insert(t.w.end(), {1.0f - d, d});
    }
    return t;
  }
  t.n = 4;  // cubic
  const float a = -0.75f;
  for (int64_t o = 0; o < out; ++o) {
    float src =
        align_corners ? ratio * static_cast<float>(o) : static_cast<float>(ratio * (o + 0.5) - 0.5);
    float fl = std::floor(src);
    float x = src - fl;
    int64_t i0 = static_cast<int64_t>(fl);
    for (int j = 0; j < 4; ++j) t.idx.push_back(clamp(i0 - 1 + j));
    t.w.insert(t.w.end(),
               {Cubic2(x + 1.0f, a), Cubic1(x, a), Cubic1(1.0f - x, a), Cubic2(2.0f - x, a)});
  }
  return t;
}

// The taps of every spatial dim of an interp from `is` to `os`, padded to 3
// spatial dims (a missing dim is one position with one tap of weight 1).
struct InterpGeometry {
  std::array<Taps, 3> taps;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1};
  int64_t planes = 1;  // N * C
};

// `op` is an interp or interp_grad (same attributes).
inline InterpGeometry MakeInterpGeometry(const ir::Op& op, const Shape& is, const Shape& os) {
  InterpGeometry g;
  const std::string& method = op.GetStr("method");
  bool align_corners = op.GetBool("align_corners");
  int64_t align_mode = op.GetInt("align_mode");
  const std::vector<double>& ratios = op.GetFloats("ratios");
  int nd = static_cast<int>(is.size()) - 2;
  for (int d = 0; d < 3; ++d) {
    int sd = d - (3 - nd);
    if (sd < 0) {
      g.taps[d].idx = {0};
      g.taps[d].w = {1.0f};
      continue;
    }
    g.in[d] = is[2 + sd];
    g.out[d] = os[2 + sd];
    g.taps[d] = MakeTaps(method, g.in[d], g.out[d], static_cast<float>(ratios[sd]), align_corners,
                         align_mode);
  }
  g.planes = is[0] * is[1];
  return g;
}

}  // namespace tiller::cpu
