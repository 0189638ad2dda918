#include "core/shape.h"

#include <algorithm>
#include <cstdint>

namespace tiller {

int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool BytesFit(const Shape& s, size_t element_bytes) {
  constexpr uint64_t kMax = uint64_t{1} << 62;
  if (std::find(s.begin(), s.end(), 0) != s.end()) return true;  // no elements at all
  uint64_t n = std::max<uint64_t>(element_bytes, 1);
  for (int64_t d : s) {
    if (d <= 1) continue;
    if (n > kMax / static_cast<uint64_t>(d)) return false;
    n *= static_cast<uint64_t>(d);
  }
  return true;
}

std::string ShapeToString(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

int NormalizeAxis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return -1;
  return static_cast<int>(axis);
}

bool NormalizePermutation(const std::vector<int64_t>& perm, int rank, std::vector<int64_t>* out) {
  if (static_cast<int>(perm.size()) != rank) return false;
  std::vector<bool> seen(perm.size(), false);
  out->clear();
  for (int64_t p : perm) {
    const int a = NormalizeAxis(p, rank);
    if (a < 0 || seen[static_cast<size_t>(a)]) return false;
    seen[static_cast<size_t>(a)] = true;
    out->push_back(a);
  }
  return true;
}

bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    r[i] = da == 1 ? db : da;
  }
  *out = std::move(r);
  return true;
}

std::vector<int64_t> Strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

}  // namespace tiller
