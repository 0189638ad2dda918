// Static shapes. Dynamic model dims (-1) are fixed from the feed shapes before
// a graph is built, so every IR shape here is concrete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tiller {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& s);
std::string ShapeToString(const Shape& s);  // "[1, 128, 768]"
// Normalizes a possibly negative axis against rank; returns -1 when out of range.
int NormalizeAxis(int64_t axis, int rank);
// Numpy broadcasting of two shapes; returns false when they are incompatible.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out);
// Row-major strides in elements.
std::vector<int64_t> Strides(const Shape& s);

}  // namespace tiller
