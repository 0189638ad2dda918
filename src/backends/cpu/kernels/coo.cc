// Sparse COO kernels (ir/ops/sparse.cc): coo_to_dense, coo_softmax,
// coo_matmul, coo_reshape, and the ops whose entry count depends on the
// data (coo_coalesce, coo_merge, coo_slice, coo_sum, dense_to_coo), which
// write their entries first and padding after them (indices -1, value 0).
// Float32 values (coo_to_dense: or bool), int64 indices [sparse dims, nnz];
// coo_to_dense, coo_coalesce, coo_merge and the convolutions also take a
// hybrid tensor's block of values per entry. Every entry's indices are
// checked against the shape first: an entry with an index outside its
// dimension is reported (backend::IndexFault: the step fails naming the op,
// the indices and the value) and never read or written. A padded operand's
// entries end at its first index -1. Each kernel's scratch is its
// workspace, sized at build for the operands' room.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/sparse_conv.h"

namespace tiller::cpu {
namespace {

// The entries of a COO operand with `room` columns: all of them, or for a
// padded one those before the first padding entry (index -1 in row 0).
int64_t Entries(const int64_t* indices, int64_t room, bool padded) {
  if (!padded) return room;
  return std::find(indices, indices + room, int64_t{-1}) - indices;
}

// Where each entry goes: its row-major position in `shape` (-1: an index
// outside its dimension, reported, or padding). `at` holds room int64.
// Returns the number of entries (room unless padded).
int64_t Positions(const KernelArgs& a, const Shape& shape, int64_t room, int64_t* at,
                  bool padded = false, int operand = 0) {
  const auto* indices = static_cast<const int64_t*>(a.inputs[operand]);
  const int rank = static_cast<int>(shape.size());
  const int64_t n = Entries(indices, room, padded);
  for (int64_t e = 0; e < n; ++e) {
    int64_t pos = 0;
    for (int d = 0; d < rank && pos >= 0; ++d) {
      const int64_t i = indices[d * room + e];
      if (i < 0 || i >= shape[d]) {
        RecordIndexFault(a, i, shape[d], operand);
        pos = -1;
      } else {
        pos = pos * shape[d] + i;
      }
    }
    at[e] = pos;
  }
  std::fill(at + n, at + room, int64_t{-1});
  return n;
}

// Writes the indices of entry k of a COO output with `room` columns:
// position `pos` of `shape` (its sparse dims).
void PutIndices(const Shape& shape, int64_t room, int64_t k, int64_t pos, int64_t* indices) {
  for (auto d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    indices[d * room + k] = pos % shape[static_cast<size_t>(d)];
    pos /= shape[static_cast<size_t>(d)];
  }
}

// Writes entry k: its indices and its (one) value.
void PutEntry(const Shape& shape, int64_t room, int64_t k, int64_t pos, float value,
              int64_t* indices, float* values) {
  PutIndices(shape, room, k, pos, indices);
  values[k] = value;
}

// Fills the columns from k on with padding (`block` values per entry).
void Pad(int64_t rank, int64_t room, int64_t k, int64_t* indices, float* values,
         int64_t block = 1) {
  for (int64_t d = 0; d < rank; ++d)
    std::fill(indices + d * room + k, indices + (d + 1) * room, -1);
  std::fill(values + k * block, values + room * block, 0.f);
}

// Entry ids 0..n-1 ordered by (key, id): the entries of one key together,
// in entry order.
void OrderByKey(const int64_t* key, int64_t n, int64_t* order) {
  for (int64_t e = 0; e < n; ++e) order[e] = e;
  std::sort(order, order + n,
            [key](int64_t l, int64_t r) { return key[l] != key[r] ? key[l] < key[r] : l < r; });
}

std::unique_ptr<Kernel> MakeCooReshape(const ir::Op& op) {
  const Shape shape = op.GetInts("shape"), out_shape = op.GetInts("out_shape");
  const bool padded = op.GetBool("padded");
  const int64_t nnz = op.inputs[0]->shape()[1];
  const int rank = static_cast<int>(out_shape.size());
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        Positions(a, shape, nnz, at, padded);
        auto* out = static_cast<int64_t*>(a.outputs[0]);
        for (int64_t e = 0; e < nnz; ++e) {
          int64_t pos = at[e];
          for (int d = rank - 1; d >= 0; --d) {
            out[d * nnz + e] = pos < 0 ? -1 : pos % out_shape[d];
            if (pos >= 0) pos /= out_shape[d];
          }
        }
      },
      static_cast<size_t>(nnz) * sizeof(int64_t));
}

// The sparse dims of a (hybrid) COO operand's shape: as many as its
// indices (input 0) have rows.
Shape SparseDims(const ir::Op& op, const Shape& shape) {
  const int64_t sparse_dim = op.inputs[0]->shape()[0];
  return Shape(shape.begin(), shape.begin() + sparse_dim);
}

// Values per entry of a (hybrid) COO values operand [nnz, ...].
int64_t ValueBlock(const ir::Value* values) {
  const Shape& s = values->shape();
  return NumElements(Shape(s.begin() + 1, s.end()));
}

// A hybrid COO tensor (indices over the first sparse_dim dims) writes a
// block of the remaining dims per entry.
std::unique_ptr<Kernel> MakeCooToDense(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const bool padded = op.GetBool("padded");
  const int64_t nnz = op.inputs[1]->shape()[0];
  const Shape sparse = SparseDims(op, shape);
  const int64_t block = ValueBlock(op.inputs[1]);
  // Values are copied as bytes: float32, or bool (sparse isnan).
  const size_t item = DTypeSize(op.inputs[1]->dtype());
  const size_t row = static_cast<size_t>(block) * item;
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * item;
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        Positions(a, sparse, nnz, at, padded);
        const auto* values = static_cast<const char*>(a.inputs[1]);
        auto* out = static_cast<char*>(a.outputs[0]);
        std::memset(out, 0, bytes);
        // In entry order: an entry stored twice keeps the later value.
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] >= 0) std::memcpy(out + at[e] * row, values + e * row, row);
        }
      },
      static_cast<size_t>(nnz) * sizeof(int64_t));
}

// Softmax over each row's stored entries: the row is the position divided
// by the last dim; the row maxima and sums live in the workspace.
std::unique_ptr<Kernel> MakeCooSoftmax(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const bool padded = op.GetBool("padded");
  const int64_t nnz = op.inputs[1]->shape()[0];
  const int64_t last = shape.back(), rows = NumElements(shape) / last;
  const size_t workspace =
      static_cast<size_t>(nnz) * sizeof(int64_t) + static_cast<size_t>(rows) * 2 * sizeof(float);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        auto* max = reinterpret_cast<float*>(at + nnz);
        float* sum = max + rows;
        Positions(a, shape, nnz, at, padded);
        const auto* x = static_cast<const float*>(a.inputs[1]);
        auto* y = static_cast<float*>(a.outputs[0]);
        std::fill(max, max + rows, -std::numeric_limits<float>::infinity());
        std::fill(sum, sum + rows, 0.f);
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] >= 0) max[at[e] / last] = std::max(max[at[e] / last], x[e]);
        }
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] < 0) {
            y[e] = 0.f;
            continue;
          }
          y[e] = std::exp(x[e] - max[at[e] / last]);
          sum[at[e] / last] += y[e];
        }
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] >= 0) y[e] /= sum[at[e] / last];
        }
      },
      workspace);
}

// out[b, i, :] += v * y[b, k, :] per entry (b absent for a matrix). Threads
// take column ranges: each adds every entry into its own columns, so no two
// write the same element and the sums keep entry order.
std::unique_ptr<Kernel> MakeCooMatmul(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const bool padded = op.GetBool("padded");
  const int64_t nnz = op.inputs[1]->shape()[0];
  const bool batched = shape.size() == 3;
  const int64_t m = shape[shape.size() - 2], k = shape.back();
  const int64_t n = op.inputs[2]->shape().back();
  const int64_t batch = batched ? shape[0] : 1;
  const size_t out_bytes = static_cast<size_t>(batch * m * n) * sizeof(float);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        Positions(a, shape, nnz, at, padded);
        const auto* v = static_cast<const float*>(a.inputs[1]);
        const auto* y = static_cast<const float*>(a.inputs[2]);
        auto* out = static_cast<float*>(a.outputs[0]);
        std::memset(out, 0, out_bytes);
        ParallelRange(
            n, nnz + 1,
            [&](int64_t c0, int64_t c1) {
              for (int64_t e = 0; e < nnz; ++e) {
                if (at[e] < 0) continue;
                // at = (b m + i) k + kk: the row of out is (b m + i), of y (b k + kk).
                const int64_t row = at[e] / k, kk = at[e] % k, b = row / m;
                const float* src = y + (b * k + kk) * n;
                float* dst = out + row * n;
                const float ve = v[e];
                for (int64_t c = c0; c < c1; ++c) dst[c] += ve * src[c];
              }
            },
            16);
      },
      static_cast<size_t>(nnz) * sizeof(int64_t));
}

// Writes one entry per distinct key of the entries ordered by (key, entry)
// (OrderByKey), in key order: the sum of its entries' values (`block` per
// entry) in entry order, from the first value (Paddle's coalesce, which
// keeps a lone -0.0) or from 0 (its sum). Entries left out (key -1) are
// skipped. Returns the count.
int64_t PutGroupSums(const Shape& shape, int64_t room, const int64_t* key, const int64_t* order,
                     int64_t n, const float* v, bool from_zero, int64_t* indices, float* values,
                     int64_t block = 1) {
  int64_t k = 0;
  for (int64_t i = 0; i < n;) {
    const int64_t pos = key[order[i]];
    int64_t end = i + 1;
    while (end < n && key[order[end]] == pos) ++end;
    if (pos >= 0) {
      float* out = values + k * block;
      for (int64_t j = 0; j < block; ++j) {
        float sum = from_zero ? 0.f : v[order[i] * block + j];
        for (int64_t t = from_zero ? i : i + 1; t < end; ++t) sum += v[order[t] * block + j];
        out[j] = sum;
      }
      PutIndices(shape, room, k++, pos, indices);
    }
    i = end;
  }
  return k;
}

// Distinct positions in row-major order, each the sum of its entries in
// entry order (a block per entry for a hybrid COO). Workspace: positions,
// then the entries ordered by position.
std::unique_ptr<Kernel> MakeCooCoalesce(const ir::Op& op) {
  const Shape shape = SparseDims(op, op.GetInts("shape"));
  const bool padded = op.GetBool("padded");
  const int64_t room = op.inputs[1]->shape()[0], block = ValueBlock(op.inputs[1]);
  const auto rank = static_cast<int64_t>(shape.size());
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        int64_t* order = at + room;
        const int64_t n = Positions(a, shape, room, at, padded);
        OrderByKey(at, n, order);
        const auto* v = static_cast<const float*>(a.inputs[1]);
        auto* indices = static_cast<int64_t*>(a.outputs[0]);
        auto* values = static_cast<float*>(a.outputs[1]);
        const int64_t k = PutGroupSums(shape, room, at, order, n, v, false, indices, values, block);
        Pad(rank, room, k, indices, values, block);
      },
      static_cast<size_t>(room) * 2 * sizeof(int64_t));
}

float Combine(char kind, float x, float y) {
  switch (kind) {
    case 'a':
      return x + y;
    case 's':
      return x - y;
    case 'm':
      return x * y;
    default:
      return x / y;
  }
}

// Paddle's merge of two entry lists by position (ir/ops/sparse.cc), a
// block of values per entry for hybrid COO tensors. y's values at a
// position are its last entry's there, found by binary search in y's
// entries ordered by (position, entry). Workspace: x's positions, y's
// positions, y's order.
std::unique_ptr<Kernel> MakeCooMerge(const ir::Op& op) {
  const Shape shape = SparseDims(op, op.GetInts("shape"));
  const std::string& kind_name = op.GetStr("kind");
  const char kind = kind_name == "subtract" ? 's' : kind_name[0];
  const bool x_padded = op.GetBool("x_padded"), y_padded = op.GetBool("y_padded");
  const int64_t nx = op.inputs[1]->shape()[0], ny = op.inputs[3]->shape()[0];
  const int64_t room = op.outputs[1]->shape()[0], numel = NumElements(shape);
  const int64_t block = ValueBlock(op.inputs[1]);
  const auto rank = static_cast<int64_t>(shape.size());
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* xat = static_cast<int64_t*>(a.workspace);
        int64_t* yat = xat + nx;
        int64_t* yorder = yat + ny;
        const int64_t n = Positions(a, shape, nx, xat, x_padded, 0);
        const int64_t m = Positions(a, shape, ny, yat, y_padded, 2);
        const auto* xi = static_cast<const int64_t*>(a.inputs[0]);
        const auto* yi = static_cast<const int64_t*>(a.inputs[2]);
        const auto* xv = static_cast<const float*>(a.inputs[1]);
        const auto* yv = static_cast<const float*>(a.inputs[3]);
        auto* indices = static_cast<int64_t*>(a.outputs[0]);
        auto* values = static_cast<float*>(a.outputs[1]);
        int64_t k = 0;
        // Entry k at `pos`: x's and y's blocks combined (nullptr: zeros).
        auto put = [&](int64_t pos, const float* xr, const float* yr) {
          PutIndices(shape, room, k, pos, indices);
          float* out = values + k++ * block;
          for (int64_t j = 0; j < block; ++j)
            out[j] = Combine(kind, xr ? xr[j] : 0.f, yr ? yr[j] : 0.f);
        };
        bool same = kind == 'a' && n == m;
        for (int64_t d = 0; d < rank && same; ++d)
          same = std::equal(xi + d * nx, xi + d * nx + n, yi + d * ny);
        if (same) {  // equal indices: the values added entry by entry
          for (int64_t e = 0; e < n; ++e)
            if (xat[e] >= 0) put(xat[e], xv + e * block, yv + e * block);
          Pad(rank, room, k, indices, values, block);
          return;
        }
        OrderByKey(yat, m, yorder);
        auto y_at = [&](int64_t pos) -> const float* {  // y's last entry at pos, or none
          const int64_t* begin = yorder;
          const int64_t* it = std::upper_bound(begin, begin + m, pos,
                                               [yat](int64_t p, int64_t e) { return p < yat[e]; });
          return it != begin && yat[*(it - 1)] == pos ? yv + *(it - 1) * block : nullptr;
        };
        const bool divide = kind == 'd';
        const int64_t nb = divide ? numel : m;
        auto b_pos = [&](int64_t b) { return divide ? b : yat[b]; };
        int64_t i = 0, b = 0;
        auto skip = [&] {  // entries left out (reported) take no part
          while (i < n && xat[i] < 0) ++i;
          while (b < nb && b_pos(b) < 0) ++b;
        };
        for (skip(); i < n && b < nb; skip()) {
          const int64_t p = xat[i], q = b_pos(b);
          if (p == q) {
            put(p, xv + i++ * block, y_at(q));
            ++b;
          } else if (p < q) {
            put(p, xv + i++ * block, nullptr);
          } else {
            put(q, nullptr, y_at(q));
            ++b;
          }
        }
        for (; i < n; skip()) {
          put(xat[i], xv + i * block, nullptr);
          ++i;
        }
        for (; b < nb; skip()) {
          const int64_t q = b_pos(b++);
          put(q, nullptr, y_at(q));
        }
        Pad(rank, room, k, indices, values, block);
      },
      static_cast<size_t>(nx + 2 * ny) * sizeof(int64_t));
}

// The entries inside the slice, in entry order, moved to its origin.
std::unique_ptr<Kernel> MakeCooSlice(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const bool padded = op.GetBool("padded");
  const std::vector<int64_t> axes = op.GetInts("axes"), starts = op.GetInts("starts"),
                             ends = op.GetInts("ends");
  const int64_t room = op.inputs[1]->shape()[0];
  const auto rank = static_cast<int64_t>(shape.size());
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        const int64_t n = Positions(a, shape, room, at, padded);
        const auto* xi = static_cast<const int64_t*>(a.inputs[0]);
        const auto* v = static_cast<const float*>(a.inputs[1]);
        auto* indices = static_cast<int64_t*>(a.outputs[0]);
        auto* values = static_cast<float*>(a.outputs[1]);
        int64_t k = 0;
        for (int64_t e = 0; e < n; ++e) {
          bool inside = at[e] >= 0;
          for (size_t j = 0; j < axes.size() && inside; ++j) {
            const int64_t i = xi[axes[j] * room + e];
            inside = starts[j] <= i && i < ends[j];
          }
          if (!inside) continue;
          for (int64_t d = 0; d < rank; ++d) indices[d * room + k] = xi[d * room + e];
          for (size_t j = 0; j < axes.size(); ++j) indices[axes[j] * room + k] -= starts[j];
          values[k++] = v[e];
        }
        Pad(rank, room, k, indices, values);
      },
      static_cast<size_t>(room) * sizeof(int64_t));
}

// The sum over dim `axis`: each entry's position in the output shape, the
// entries ordered by it, each distinct position summed from 0 in entry
// order. Workspace: output positions, then the order.
std::unique_ptr<Kernel> MakeCooSum(const ir::Op& op) {
  const Shape shape = op.GetInts("shape");
  const bool padded = op.GetBool("padded");
  const auto axis = static_cast<size_t>(op.GetInt("axis"));
  const bool keep = op.GetBool("keepdim") || shape.size() == 1;
  Shape out_shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d != axis)
      out_shape.push_back(shape[d]);
    else if (keep)
      out_shape.push_back(1);
  }
  const int64_t room = op.inputs[1]->shape()[0];
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        auto* at = static_cast<int64_t*>(a.workspace);
        int64_t* order = at + room;
        const int64_t n = Positions(a, shape, room, at, padded);
        const auto* xi = static_cast<const int64_t*>(a.inputs[0]);
        for (int64_t e = 0; e < n; ++e) {
          if (at[e] < 0) continue;
          int64_t pos = 0;
          for (size_t d = 0; d < shape.size(); ++d) {
            if (d != axis) pos = pos * shape[d] + xi[static_cast<int64_t>(d) * room + e];
          }
          at[e] = pos;  // with a kept dim of 1, the same number
        }
        OrderByKey(at, n, order);
        const auto* v = static_cast<const float*>(a.inputs[1]);
        auto* indices = static_cast<int64_t*>(a.outputs[0]);
        auto* values = static_cast<float*>(a.outputs[1]);
        const int64_t k = PutGroupSums(out_shape, room, at, order, n, v, true, indices, values);
        Pad(static_cast<int64_t>(out_shape.size()), room, k, indices, values);
      },
      static_cast<size_t>(room) * 2 * sizeof(int64_t));
}

// The elements that are not 0, in row-major order.
std::unique_ptr<Kernel> MakeDenseToCoo(const ir::Op& op) {
  const Shape shape = op.inputs[0]->shape();
  const int64_t room = NumElements(shape);
  const auto rank = static_cast<int64_t>(shape.size());
  return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const auto* x = static_cast<const float*>(a.inputs[0]);
    auto* indices = static_cast<int64_t*>(a.outputs[0]);
    auto* values = static_cast<float*>(a.outputs[1]);
    int64_t k = 0;
    for (int64_t p = 0; p < room; ++p)
      if (x[p] != 0.f) PutEntry(shape, room, k++, p, x[p], indices, values);
    Pad(rank, room, k, indices, values);
  });
}

// The sparse convolutions' common part: the input entries' positions in an
// open-addressing table (keys the row-major positions over N, D, H, W),
// and one output row computed from an output position: the kernel offsets
// in order, each input entry found at o * stride - padding + k * dilation
// adding its row times weight[k].
struct ConvWindow {
  Shape shape;  // x: [N, D, H, W, C]
  Shape w;      // [kD, kH, kW, C, C_out]
  std::vector<int64_t> pad, dil, stride;
  int64_t nnz = 0, slots = 1;

  ConvWindow(const ir::Op& op, std::vector<int64_t> strides)
      : shape(op.GetInts("shape")),
        w(op.inputs[2]->shape()),
        pad(op.GetInts("paddings")),
        dil(op.GetInts("dilations")),
        stride(std::move(strides)),
        nnz(op.inputs[1]->shape()[0]) {
    while (slots < 2 * nnz) slots *= 2;
  }
  // Workspace: the positions (nnz), the table's keys and entries (slots each).
  size_t TableBytes() const { return static_cast<size_t>(nnz + 2 * slots) * sizeof(int64_t); }
  int64_t* keys(void* ws) const { return static_cast<int64_t*>(ws) + nnz; }

  uint64_t SlotOf(const int64_t* keys, int64_t key) const {
    const uint64_t mask = static_cast<uint64_t>(slots) - 1;
    for (uint64_t h = (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> 20;; ++h)
      if (keys[h & mask] == key || keys[h & mask] < 0) return h & mask;
  }

  // Fills the table; returns the positions (-1: left out, reported).
  const int64_t* Build(const KernelArgs& a, bool padded) const {
    auto* at = static_cast<int64_t*>(a.workspace);
    int64_t* k = keys(a.workspace);
    int64_t* entry = k + slots;
    Positions(a, Shape(shape.begin(), shape.begin() + 4), nnz, at, padded);
    std::fill(k, k + slots, int64_t{-1});
    for (int64_t e = 0; e < nnz; ++e) {  // an entry stored twice: the later one is found
      if (at[e] < 0) continue;
      const uint64_t slot = SlotOf(k, at[e]);
      k[slot] = at[e];
      entry[slot] = e;
    }
    return at;
  }

  // Output row y (C_out floats) at output position (n, d, h, v).
  void Row(const KernelArgs& a, int64_t n, int64_t d, int64_t h, int64_t v, float* y) const {
    const int64_t cin = shape[4], cout = w[4];
    const int64_t* k = keys(a.workspace);
    const int64_t* entry = k + slots;
    const auto* x = static_cast<const float*>(a.inputs[1]);
    const float* wk = static_cast<const float*>(a.inputs[2]);
    std::fill(y, y + cout, 0.f);
    for (int64_t kd = 0; kd < w[0]; ++kd) {
      for (int64_t kh = 0; kh < w[1]; ++kh) {
        for (int64_t kw = 0; kw < w[2]; ++kw, wk += cin * cout) {
          const int64_t qd = d * stride[0] - pad[0] + kd * dil[0],
                        qh = h * stride[1] - pad[1] + kh * dil[1],
                        qw = v * stride[2] - pad[2] + kw * dil[2];
          if (qd < 0 || qd >= shape[1] || qh < 0 || qh >= shape[2] || qw < 0 || qw >= shape[3])
            continue;
          const int64_t key = ((n * shape[1] + qd) * shape[2] + qh) * shape[3] + qw;
          const uint64_t slot = SlotOf(k, key);
          if (k[slot] != key) continue;
          const float* xr = x + entry[slot] * cin;
          for (int64_t c = 0; c < cin; ++c) {
            const float xc = xr[c];
            const float* wr = wk + c * cout;
            for (int64_t j = 0; j < cout; ++j) y[j] += xc * wr[j];
          }
        }
      }
    }
  }
};

// Submanifold: an output row per input entry, at its position; threads
// take ranges of entries.
std::unique_ptr<Kernel> MakeCooSubmConv3d(const ir::Op& op) {
  const ConvWindow cw(op, {1, 1, 1});
  const bool padded = op.GetBool("padded");
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        const int64_t* at = cw.Build(a, padded);
        const auto* xi = static_cast<const int64_t*>(a.inputs[0]);
        auto* out = static_cast<float*>(a.outputs[0]);
        const int64_t nnz = cw.nnz, cout = cw.w[4];
        ParallelRange(nnz, cw.w[0] * cw.w[1] * cw.w[2] * cw.shape[4] * cout,
                      [&](int64_t e0, int64_t e1) {
                        for (int64_t o = e0; o < e1; ++o) {
                          float* y = out + o * cout;
                          if (at[o] < 0) {
                            std::fill(y, y + cout, 0.f);
                            continue;
                          }
                          cw.Row(a, xi[o], xi[nnz + o], xi[2 * nnz + o], xi[3 * nnz + o], y);
                        }
                      });
      },
      cw.TableBytes());
}

// Ordinary: the output positions every input entry reaches (for each kernel
// offset, o = (p + padding - k * dilation) / stride where that divides and
// lands in the grid), sorted and made distinct, then a row per output.
// Workspace: the table, then the candidate positions (nnz x kernel volume).
std::unique_ptr<Kernel> MakeCooConv3d(const ir::Op& op) {
  const ConvWindow cw(op, op.GetInts("strides"));
  const bool padded = op.GetBool("padded");
  const Shape grid = ir::SparseConvGrid(cw.shape, cw.w, cw.pad, cw.dil, cw.stride);
  const int64_t room = op.outputs[1]->shape()[0];
  const int64_t volume = cw.w[0] * cw.w[1] * cw.w[2];
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        const int64_t* at = cw.Build(a, padded);
        const auto* xi = static_cast<const int64_t*>(a.inputs[0]);
        int64_t* cand = cw.keys(a.workspace) + 2 * cw.slots;
        const int64_t nnz = cw.nnz, cout = cw.w[4];
        int64_t m = 0;
        for (int64_t e = 0; e < nnz; ++e) {
          if (at[e] < 0) continue;
          const int64_t p[3] = {xi[nnz + e], xi[2 * nnz + e], xi[3 * nnz + e]};
          for (int64_t kd = 0; kd < cw.w[0]; ++kd) {
            for (int64_t kh = 0; kh < cw.w[1]; ++kh) {
              for (int64_t kw = 0; kw < cw.w[2]; ++kw) {
                const int64_t k[3] = {kd, kh, kw};
                int64_t key = xi[e];
                for (int i = 0; i < 3 && key >= 0; ++i) {
                  const int64_t num = p[i] + cw.pad[i] - k[i] * cw.dil[i];
                  const int64_t o = num / cw.stride[i];
                  key = num < 0 || num % cw.stride[i] != 0 || o >= grid[i + 1]
                            ? -1
                            : key * grid[i + 1] + o;
                }
                if (key >= 0) cand[m++] = key;
              }
            }
          }
        }
        std::sort(cand, cand + m);
        m = std::unique(cand, cand + m) - cand;
        auto* indices = static_cast<int64_t*>(a.outputs[0]);
        auto* out = static_cast<float*>(a.outputs[1]);
        ParallelRange(m, volume * cw.shape[4] * cout, [&](int64_t j0, int64_t j1) {
          for (int64_t j = j0; j < j1; ++j) {
            int64_t key = cand[j];
            int64_t c[4];
            for (int i = 3; i >= 1; --i) {
              c[i] = key % grid[static_cast<size_t>(i)];
              key /= grid[static_cast<size_t>(i)];
            }
            c[0] = key;
            for (int i = 0; i < 4; ++i) indices[i * room + j] = c[i];
            cw.Row(a, c[0], c[1], c[2], c[3], out + j * cout);
          }
        });
        for (int i = 0; i < 4; ++i) std::fill(indices + i * room + m, indices + (i + 1) * room, -1);
        std::fill(out + m * cout, out + room * cout, 0.f);
      },
      cw.TableBytes() + static_cast<size_t>(cw.nnz * volume) * sizeof(int64_t));
}

const bool kRegistered = [] {
  auto sig = [](const char* spec) {
    return Signature(spec).Where("I", {DType::kI64}).Where("T", {DType::kF32});
  };
  RegisterKernel("coo_reshape", MakeCooReshape, Signature("I -> I").Where("I", {DType::kI64}));
  RegisterKernel(
      "coo_to_dense", MakeCooToDense,
      Signature("I, T -> T").Where("I", {DType::kI64}).Where("T", {DType::kF32, DType::kBool}));
  RegisterKernel("coo_softmax", MakeCooSoftmax, sig("I, T -> T"));
  RegisterKernel("coo_matmul", MakeCooMatmul, sig("I, T, T -> T"));
  RegisterKernel("coo_coalesce", MakeCooCoalesce, sig("I, T -> I, T"));
  RegisterKernel("coo_merge", MakeCooMerge, sig("I, T, I, T -> I, T"));
  RegisterKernel("coo_slice", MakeCooSlice, sig("I, T -> I, T"));
  RegisterKernel("coo_sum", MakeCooSum, sig("I, T -> I, T"));
  RegisterKernel("coo_subm_conv3d", MakeCooSubmConv3d, sig("I, T, T -> T"));
  RegisterKernel("coo_conv3d", MakeCooConv3d, sig("I, T, T -> I, T"));
  RegisterKernel("dense_to_coo", MakeDenseToCoo,
                 Signature("T -> I, T").Where("T", {DType::kF32}).Where("I", {DType::kI64}));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
