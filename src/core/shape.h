// Static shapes. Dynamic model dims (-1) are fixed from the feed shapes before
// a graph is built, so every IR shape here is concrete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tiller {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& s);
// False when the bytes of a tensor of shape `s` with elements of
// `element_bytes` exceed 2^62 (so NumElements and byte counts cannot
// overflow); negative dims (unknown sizes) count as 1.
bool BytesFit(const Shape& s, size_t element_bytes);
std::string ShapeToString(const Shape& s);  // "[1, 128, 768]"
// Normalizes a possibly negative axis against rank; returns -1 when out of range.
int NormalizeAxis(int64_t axis, int rank);
// `perm` with its negative axes counted from the end, into `out`; false
// unless it is a permutation of the `rank` axes.
bool NormalizePermutation(const std::vector<int64_t>& perm, int rank, std::vector<int64_t>* out);
// Numpy broadcasting of two shapes; returns false when they are incompatible.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out);
// Row-major strides in elements.
std::vector<int64_t> Strides(const Shape& s);

// Part `part` of `n` items split into `parts` contiguous parts of balanced
// sizes (they differ by at most one): [n * part / parts, n * (part + 1) /
// parts). Replicated tensor sharding and the collectives agree on it.
struct PartRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
inline PartRange PartOf(int64_t n, int parts, int part) {
  return {n * part / parts, n * (part + 1) / parts};
}

}  // namespace tiller
