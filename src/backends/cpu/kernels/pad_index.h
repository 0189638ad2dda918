// Where pad_nd reads: shared by the pad_nd kernel and its gradient.
#pragma once

#include <cstdint>
#include <string>

namespace tiller::cpu {

// The input coordinate that padded coordinate i (relative to the input's
// start, so negative inside the leading pad) copies along a dim of size n,
// or -1 for the constant.
inline int64_t SourceIndex(int64_t i, int64_t n, const std::string& mode) {
  if (i >= 0 && i < n) return i;
  if (mode == "constant") return -1;
  if (mode == "replicate") return i < 0 ? 0 : n - 1;
  if (mode == "circular") return ((i % n) + n) % n;
  return i < 0 ? -i : 2 * (n - 1) - i;  // reflect (pads < n)
}

}  // namespace tiller::cpu
