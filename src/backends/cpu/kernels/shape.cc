// Data-movement kernels: transpose, slice, expand (all one strided copy),
// concat, split, gather, cast, where and identity. Movement kernels work on
// bytes, so they take every dtype; only cast and where look at values.
#include <algorithm>
#include <cstring>
#include <utility>

#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {

IterPlan MakeIterPlan(const ir::Op& op, const Shape& out,
                      const std::vector<std::vector<int64_t>>& in_strides,
                      const std::vector<int64_t>& base) {
  IterPlan p;
  p.num_in = static_cast<int>(in_strides.size());
  p.total = NumElements(out);
  for (size_t k = 0; k < base.size(); ++k) p.base[k] = base[k];
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> st(in_strides.size());
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;  // size-1 dims never move any pointer
    bool merge = !dims.empty();
    for (size_t k = 0; k < st.size() && merge; ++k)
      merge = st[k].back() == in_strides[k][d] * out[d];
    if (merge) {
      dims.back() *= out[d];
      for (size_t k = 0; k < st.size(); ++k) st[k].back() = in_strides[k][d];
    } else {
      dims.push_back(out[d]);
      for (size_t k = 0; k < st.size(); ++k) st[k].push_back(in_strides[k][d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (auto& s : st) s.push_back(0);
  }
  if (dims.size() > static_cast<size_t>(kMaxDims))
    Unsupported(op, "{} dims remain after merging (max {})", dims.size(), kMaxDims);
  p.rank = static_cast<int>(dims.size());
  for (int d = 0; d < p.rank; ++d) {
    p.dims[d] = dims[d];
    for (int k = 0; k < p.num_in; ++k) p.strides[k][d] = st[k][d];
  }
  return p;
}

IterPlan MakeBroadcastPlan(const ir::Op& op, const Shape& out, const std::vector<Shape>& ins) {
  std::vector<std::vector<int64_t>> strides;
  for (const Shape& s : ins) {
    std::vector<int64_t> st(out.size(), 0);
    int64_t acc = 1;
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      size_t od = out.size() - s.size() + d;
      st[od] = s[d] == 1 ? 0 : acc;
      acc *= s[d];
    }
    strides.push_back(std::move(st));
  }
  return MakeIterPlan(op, out, strides);
}

namespace {

template <typename T>
void CopyRuns(const IterPlan& p, const T* in, T* out) {
  const int64_t s = p.inner_stride(0);
  ParallelRange(p.total, 1, [&](int64_t b, int64_t e) {
    ForEachRun(p, b, e, [&](int64_t o, const int64_t* off, int64_t n) {
      const T* x = in + off[0];
      T* y = out + o;
      if (s == 1) {
        std::memcpy(y, x, n * sizeof(T));
      } else if (s == 0) {
        std::fill(y, y + n, *x);
      } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i * s];
      }
    });
  });
}

}  // namespace

void StridedCopy(const IterPlan& p, size_t elem_size, const void* in, void* out) {
  if (p.total == 0) return;
  switch (elem_size) {
    case 1:
      return CopyRuns(p, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out));
    case 2:
      return CopyRuns(p, static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out));
    case 4:
      return CopyRuns(p, static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out));
    case 8:
      return CopyRuns(p, static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out));
  }
  TILLER_CHECK(false, "element size {} not supported", elem_size);
}

namespace {

std::unique_ptr<Kernel> CopyKernel(IterPlan plan, size_t elem) {
  return std::make_unique<LambdaKernel>([plan, elem](const KernelArgs& args) {
    StridedCopy(plan, elem, args.inputs[0], args.outputs[0]);
  });
}

// A transpose that is, per batch, a 2-D transpose: in [batch, a, b] -> out
// [batch, b, a] (NCHW <-> NHWC are [N, C, HW] <-> [N, HW, C]). Dims of
// extent 1 are dropped first; they never move data.
struct Batched2D {
  int64_t batch = 1, a = 1, b = 1;
};
bool AsBatched2D(const Shape& in, const std::vector<int64_t>& perm, Batched2D* t) {
  std::vector<int64_t> axes;
  if (!NormalizePermutation(perm, static_cast<int>(in.size()), &axes)) return false;
  std::vector<int64_t> kept;  // the axes of extent > 1, in output order
  for (int64_t ax : axes) {
    if (in[ax] > 1) kept.push_back(ax);
  }
  std::vector<int64_t> sorted = kept;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = kept.size();
  size_t k = 0;  // leading axes in place
  while (k < m && kept[k] == sorted[k]) ++k;
  if (k == m) return false;  // a copy
  // The rest must be sorted[j..m) then sorted[k..j) for some k < j < m.
  size_t j = k;
  while (j < m && kept[k] != sorted[j]) ++j;
  if (j == m) return false;
  for (size_t i = k; i < m; ++i) {
    const size_t want = i - k < m - j ? j + (i - k) : k + (i - k - (m - j));
    if (kept[i] != sorted[want]) return false;
  }
  for (size_t i = 0; i < k; ++i) t->batch *= in[sorted[i]];
  for (size_t i = k; i < j; ++i) t->a *= in[sorted[i]];
  for (size_t i = j; i < m; ++i) t->b *= in[sorted[i]];
  return true;
}

// Tiles of 16 x 16 elements: each tile's rows are read, and its columns
// written, within a few cache lines (the strided copy walks one side with a
// stride of a whole row). Work items of 16 rows x 256 columns, so even one
// image of 3 channels splits across threads.
template <typename T>
void Transpose2D(const T* x, T* y, const Batched2D& t) {
  constexpr int64_t kTile = 16, kBlock = 16 * kTile;  // a work item: 16 rows x 256 columns
  const int64_t a_tiles = (t.a + kTile - 1) / kTile, b_blocks = (t.b + kBlock - 1) / kBlock;
  ParallelRange(
      t.batch * a_tiles * b_blocks, kTile * kBlock,
      [&](int64_t first, int64_t last) {
        for (int64_t w = first; w < last; ++w) {
          const int64_t n = w / (a_tiles * b_blocks), i0 = w / b_blocks % a_tiles * kTile;
          const int64_t i1 = std::min(t.a, i0 + kTile), b0 = w % b_blocks * kBlock;
          const T* xb = x + n * t.a * t.b;
          T* yb = y + n * t.a * t.b;
          for (int64_t j0 = b0; j0 < std::min(t.b, b0 + kBlock); j0 += kTile) {
            const int64_t j1 = std::min(t.b, j0 + kTile);
            for (int64_t i = i0; i < i1; ++i) {
              for (int64_t j = j0; j < j1; ++j) yb[j * t.a + i] = xb[i * t.b + j];
            }
          }
        }
      },
      1);
}

// in [batch, 3, b] -> out [batch, b, 3] (an RGB image's NCHW -> NHWC, what
// the channels_last pass puts before a convolution network's first layer),
// blocks of columns in parallel, each by the vector math's Interleave3.
void Interleave3Batched(const uint32_t* x, uint32_t* y, const Batched2D& t) {
  constexpr int64_t kBlock = 512;  // columns per work item
  const int64_t blocks = (t.b + kBlock - 1) / kBlock;
  ParallelRange(
      t.batch * blocks, kBlock * 3,
      [&](int64_t first_item, int64_t last_item) {
        for (int64_t w = first_item; w < last_item; ++w) {
          const int64_t n = w / blocks, j0 = w % blocks * kBlock;
          const int64_t j1 = std::min(t.b, j0 + kBlock);
          const uint32_t* xb = x + n * 3 * t.b;
          Interleave3(xb + j0, xb + t.b + j0, xb + 2 * t.b + j0, y + n * 3 * t.b + 3 * j0, j1 - j0);
        }
      },
      1);
}

// Eight 4-byte elements that move together: a row of NCHW8c's channel block.
struct Block8 {
  uint32_t v[8];
};

std::unique_ptr<Kernel> MakeTranspose(const ir::Op& op) {
  const Shape& in = op.inputs[0]->shape();
  const std::vector<int64_t>& perm = op.GetInts("perm");
  Batched2D t;
  const int rank = static_cast<int>(in.size());
  // A last axis of 8 that stays last moves as one element: NHWC <-> NCHW8c
  // (the blocked_convs stage's conversions) are batched 2-D transposes of
  // 32-byte rows, which the strided copy moved one float at a time (49 of
  // UNet's 660 ms at batch 8).
  std::vector<int64_t> axes;
  if (DTypeSize(InDType(op)) == 4 && rank >= 3 && in.back() == 8 &&
      NormalizePermutation(perm, rank, &axes) && axes.back() == rank - 1) {
    const Shape outer(in.begin(), in.end() - 1);
    const std::vector<int64_t> outer_perm(axes.begin(), axes.end() - 1);
    if (AsBatched2D(outer, outer_perm, &t)) {
      return std::make_unique<LambdaKernel>([t](const KernelArgs& args) {
        Transpose2D(static_cast<const Block8*>(args.inputs[0]),
                    static_cast<Block8*>(args.outputs[0]), t);
      });
    }
  }
  if (DTypeSize(InDType(op)) == 4 && AsBatched2D(in, perm, &t)) {
    if (t.a == 3 && VectorInterleave3()) {
      return std::make_unique<LambdaKernel>([t](const KernelArgs& args) {
        Interleave3Batched(static_cast<const uint32_t*>(args.inputs[0]),
                           static_cast<uint32_t*>(args.outputs[0]), t);
      });
    }
    return std::make_unique<LambdaKernel>([t](const KernelArgs& args) {
      Transpose2D(static_cast<const uint32_t*>(args.inputs[0]),
                  static_cast<uint32_t*>(args.outputs[0]), t);
    });
  }
  std::vector<int64_t> in_st = Strides(in), st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    st[i] = in_st[NormalizeAxis(perm[i], static_cast<int>(in.size()))];
  return CopyKernel(MakeIterPlan(op, op.outputs[0]->shape(), {st}), DTypeSize(InDType(op)));
}

std::unique_ptr<Kernel> MakeSlice(const ir::Op& op) {
  const Shape& in = op.inputs[0]->shape();
  ir::SliceSpec spec;
  if (!ir::ResolveSlice(in, op, &spec)) Unsupported(op, "bad slice attributes");
  std::vector<int64_t> in_st = Strides(in), st(in.size());
  int64_t base = 0;
  for (size_t d = 0; d < in.size(); ++d) {
    st[d] = in_st[d] * spec.step[d];
    base += spec.start[d] * in_st[d];
  }
  return CopyKernel(MakeIterPlan(op, spec.out, {st}, {base}), DTypeSize(InDType(op)));
}

std::unique_ptr<Kernel> MakeExpand(const ir::Op& op) {
  return CopyKernel(MakeBroadcastPlan(op, op.outputs[0]->shape(), {op.inputs[0]->shape()}),
                    DTypeSize(InDType(op)));
}

std::unique_ptr<Kernel> MakeIdentity(const ir::Op& op) {
  size_t bytes = op.outputs[0]->bytes();
  return std::make_unique<LambdaKernel>([bytes](const KernelArgs& args) {
    const auto* x = static_cast<const std::byte*>(args.inputs[0]);
    auto* y = static_cast<std::byte*>(args.outputs[0]);
    ParallelRange(
        static_cast<int64_t>(bytes), 1,
        [&](int64_t b, int64_t e) { std::memcpy(y + b, x + b, e - b); }, 64);
  });
}

// Outer = product of dims before `axis`; inner = bytes of one slab at a given
// index along `axis`.
void OuterInner(const Shape& s, int axis, size_t elem, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = static_cast<int64_t>(elem);
  for (int d = 0; d < static_cast<int>(s.size()); ++d) {
    if (d < axis) *outer *= s[d];
    if (d > axis) *inner *= s[d];
  }
}

// Rows [b, e) of concat / split: whole row o is parts' rows o side by side.
// kPart > 0: every part's row is kPart bytes (concatenated embeddings: 64
// bytes for 16 floats), so each copy is inline (a call to memcpy per
// 64-byte piece cost as much as the copy). A split prefetches the lines it
// will write kWriteAhead rows on, for writing: its outputs are often rows
// another replica read (exchange_rows reads a replica's row gradients in
// place), and a line another core read must be taken back before it is
// written, one round trip each unless they overlap (2 replicas of the
// DLRM benchmark: split 0.42 -> 0.24 ms per step).
constexpr int64_t kWriteAhead = 8;

template <int64_t kPart>
void MoveRows(bool split, const KernelArgs& args, const std::vector<int64_t>& part_bytes,
              int64_t row, int64_t b, int64_t e) {
  for (int64_t o = b; o < e; ++o) {
    int64_t at = o * row;
    for (size_t i = 0; i < part_bytes.size(); ++i) {
      const int64_t n = kPart ? kPart : part_bytes[i];
      if (split) {
        auto* out = static_cast<std::byte*>(args.outputs[i]);
        if (o + kWriteAhead < e && n <= 256)
          for (int64_t j = 0; j < n; j += 64)
            __builtin_prefetch(out + (o + kWriteAhead) * n + j, 1);
        std::memcpy(out + o * n, static_cast<const std::byte*>(args.inputs[0]) + at, n);
      } else {
        std::memcpy(static_cast<std::byte*>(args.outputs[0]) + at,
                    static_cast<const std::byte*>(args.inputs[i]) + o * n, n);
      }
      at += n;
    }
  }
}

// concat and split move the same [outer, sum of parts] rows, in opposite directions.
std::unique_ptr<Kernel> MakeConcatSplit(const ir::Op& op, bool split) {
  const Shape& whole = split ? op.inputs[0]->shape() : op.outputs[0]->shape();
  int axis = NormalizeAxis(op.GetInt("axis"), static_cast<int>(whole.size()));
  if (axis < 0) Unsupported(op, "axis out of range");
  size_t elem = DTypeSize(InDType(op));
  int64_t outer, inner;
  OuterInner(whole, axis, elem, &outer, &inner);
  const auto& parts_v = split ? op.outputs : op.inputs;
  std::vector<int64_t> part_bytes;
  for (const ir::Value* v : parts_v) part_bytes.push_back(v->shape()[axis] * inner);
  int64_t row = whole[axis] * inner;
  using Move =
      void (*)(bool, const KernelArgs&, const std::vector<int64_t>&, int64_t, int64_t, int64_t);
  Move move = MoveRows<0>;
  const std::pair<int64_t, Move> fixed[] = {{16, MoveRows<16>},
                                            {32, MoveRows<32>},
                                            {64, MoveRows<64>},
                                            {128, MoveRows<128>},
                                            {256, MoveRows<256>}};
  if (std::all_of(part_bytes.begin(), part_bytes.end(),
                  [&](int64_t n) { return n == part_bytes.front(); })) {
    for (const auto& [bytes, f] : fixed)
      if (part_bytes.front() == bytes) move = f;
  }
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    ParallelRange(
        outer, row, [&](int64_t b, int64_t e) { move(split, args, part_bytes, row, b, e); }, 1);
  });
}

// numpy take. Negative indices count from the end; an index still out of
// range yields a zero slab instead of reading out of bounds, and is reported
// (backend::IndexFault).
std::unique_ptr<Kernel> MakeGather(const ir::Op& op) {
  const Shape& xs = op.inputs[0]->shape();
  int axis = NormalizeAxis(op.GetInt("axis"), static_cast<int>(xs.size()));
  if (axis < 0) Unsupported(op, "axis out of range");
  int64_t outer, inner;
  OuterInner(xs, axis, DTypeSize(InDType(op)), &outer, &inner);
  int64_t dim = xs[axis], count = NumElements(op.inputs[1]->shape());
  bool i64 = InDType(op, 1) == DType::kI64;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const auto* x = static_cast<const std::byte*>(args.inputs[0]);
    auto* y = static_cast<std::byte*>(args.outputs[0]);
    ParallelRange(
        outer * count, inner,
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            int64_t o = t / count, j = t % count;
            const int64_t given = i64 ? static_cast<const int64_t*>(args.inputs[1])[j]
                                      : static_cast<const int32_t*>(args.inputs[1])[j];
            const int64_t id = given < 0 ? given + dim : given;
            if (id < 0 || id >= dim) {
              RecordIndexFault(args, given, dim, 1);
              std::memset(y + t * inner, 0, inner);
            } else {
              std::memcpy(y + t * inner, x + (o * dim + id) * inner, inner);
            }
          }
        },
        1);
  });
}

// Paddle's gather_nd: each row of k indices picks the slab x[i_0, ...,
// i_(k-1)] (negative indices count from the end). A row with an index
// still out of range yields a zero slab instead of reading out of bounds,
// and is reported (backend::IndexFault).
std::unique_ptr<Kernel> MakeGatherNd(const ir::Op& op) {
  const Shape xs = op.inputs[0]->shape();
  const Shape& is = op.inputs[1]->shape();
  const int64_t k = is.back(), rows = NumElements(Shape(is.begin(), is.end() - 1));
  const size_t slab =
      static_cast<size_t>(NumElements(Shape(xs.begin() + k, xs.end()))) * DTypeSize(InDType(op));
  const bool i64 = InDType(op, 1) == DType::kI64;
  return std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
    const auto* x = static_cast<const std::byte*>(args.inputs[0]);
    auto* y = static_cast<std::byte*>(args.outputs[0]);
    ParallelRange(
        rows, static_cast<int64_t>(slab),
        [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            int64_t at = 0;
            bool inside = true;
            for (int64_t j = 0; j < k && inside; ++j) {
              const int64_t given = i64 ? static_cast<const int64_t*>(args.inputs[1])[r * k + j]
                                        : static_cast<const int32_t*>(args.inputs[1])[r * k + j];
              const int64_t dim = xs[static_cast<size_t>(j)];
              const int64_t id = given < 0 ? given + dim : given;
              if (id < 0 || id >= dim) {
                RecordIndexFault(args, given, dim, 1);
                inside = false;
              }
              at = at * dim + id;
            }
            std::byte* dst = y + static_cast<size_t>(r) * slab;
            if (inside)
              std::memcpy(dst, x + static_cast<size_t>(at) * slab, slab);
            else
              std::memset(dst, 0, slab);
          }
        },
        1);
  });
}

template <typename D, typename S>
inline D Convert(S s) {
  if constexpr (std::is_same_v<S, Half>) {
    return Convert<D>(HalfToFloat(s.bits));
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return Convert<D>(BF16ToFloat(s.bits));
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{FloatToHalf(static_cast<float>(s))};
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return BFloat16{FloatToBF16(static_cast<float>(s))};
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else {
    return static_cast<D>(s);
  }
}

#define TILLER_CAST_TYPES \
  float, double, int8_t, uint8_t, int16_t, int32_t, int64_t, bool, Half, BFloat16

std::unique_ptr<Kernel> MakeCast(const ir::Op& op) {
  int64_t n = NumElements(op.outputs[0]->shape());
  if (InDType(op) == OutDType(op)) return MakeIdentity(op);
  // The mixed-precision pass's casts: vectorized.
  if (InDType(op) == DType::kF32 && OutDType(op) == DType::kBF16)
    return std::make_unique<LambdaKernel>([n](const KernelArgs& args) {
      ParallelRange(n, 1, [&](int64_t b, int64_t e) {
        FloatsToBF16(static_cast<const float*>(args.inputs[0]) + b,
                     static_cast<uint16_t*>(args.outputs[0]) + b, e - b);
      });
    });
  if (InDType(op) == DType::kBF16 && OutDType(op) == DType::kF32)
    return std::make_unique<LambdaKernel>([n](const KernelArgs& args) {
      ParallelRange(n, 1, [&](int64_t b, int64_t e) {
        BF16ToFloats(static_cast<const uint16_t*>(args.inputs[0]) + b,
                     static_cast<float*>(args.outputs[0]) + b, e - b);
      });
    });
  std::unique_ptr<Kernel> k;
  DispatchDType<TILLER_CAST_TYPES>(InDType(op), [&](auto src) {
    DispatchDType<TILLER_CAST_TYPES>(OutDType(op), [&](auto dst) {
      using S = decltype(src);
      using D = decltype(dst);
      k = std::make_unique<LambdaKernel>([n](const KernelArgs& args) {
        const S* x = static_cast<const S*>(args.inputs[0]);
        D* y = static_cast<D*>(args.outputs[0]);
        ParallelRange(n, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) y[i] = Convert<D>(x[i]);
        });
      });
    });
  });
  return k;
}

template <typename T>
void WhereRuns(const IterPlan& p, const uint8_t* c, const T* x, const T* y, T* out) {
  const int64_t sc = p.inner_stride(0), sx = p.inner_stride(1), sy = p.inner_stride(2);
  ParallelRange(p.total, 1, [&](int64_t b, int64_t e) {
    ForEachRun(p, b, e, [&](int64_t o, const int64_t* off, int64_t n) {
      const uint8_t* cc = c + off[0];
      const T* xx = x + off[1];
      const T* yy = y + off[2];
      T* z = out + o;
      if (sc == 1 && sx == 1 && sy == 1) {
        for (int64_t i = 0; i < n; ++i) z[i] = cc[i] ? xx[i] : yy[i];
      } else {
        for (int64_t i = 0; i < n; ++i) z[i] = cc[i * sc] ? xx[i * sx] : yy[i * sy];
      }
    });
  });
}

std::unique_ptr<Kernel> MakeWhere(const ir::Op& op) {
  IterPlan p =
      MakeBroadcastPlan(op, op.outputs[0]->shape(),
                        {op.inputs[0]->shape(), op.inputs[1]->shape(), op.inputs[2]->shape()});
  size_t elem = DTypeSize(InDType(op, 1));
  return std::make_unique<LambdaKernel>([p, elem](const KernelArgs& args) {
    if (p.total == 0) return;
    const auto* c = static_cast<const uint8_t*>(args.inputs[0]);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      WhereRuns(p, c, static_cast<const T*>(args.inputs[1]), static_cast<const T*>(args.inputs[2]),
                static_cast<T*>(args.outputs[0]));
    };
    switch (elem) {
      case 1:
        return run(uint8_t{});
      case 2:
        return run(uint16_t{});
      case 4:
        return run(uint32_t{});
      default:
        return run(uint64_t{});
    }
  });
}

const bool kRegistered = [] {
  // Byte movers take every dtype; cast converts between all of them (its
  // source is T) and where selects x/y elements of any size by a bool.
  RegisterKernel("transpose", MakeTranspose, Signature("T -> T").Where("T", AllDTypes()));
  RegisterKernel("slice", MakeSlice, Signature("T -> T").Where("T", AllDTypes()));
  RegisterKernel("expand", MakeExpand, Signature("T -> T").Where("T", AllDTypes()));
  RegisterKernel("identity", MakeIdentity, Signature("T -> T").Where("T", AllDTypes()));
  RegisterKernel(
      "concat", [](const ir::Op& op) { return MakeConcatSplit(op, false); },
      Signature("T... -> T").Where("T", AllDTypes()));
  RegisterKernel(
      "split", [](const ir::Op& op) { return MakeConcatSplit(op, true); },
      Signature("T -> T...").Where("T", AllDTypes()));
  RegisterKernel(
      "gather", MakeGather,
      Signature("T, I -> T").Where("T", AllDTypes()).Where("I", {DType::kI32, DType::kI64}));
  RegisterKernel(
      "gather_nd", MakeGatherNd,
      Signature("T, I -> T").Where("T", AllDTypes()).Where("I", {DType::kI32, DType::kI64}));
  RegisterKernel("cast", MakeCast,
                 Signature("T -> U").Where("T", AllDTypes()).Where("U", AllDTypes()));
  RegisterKernel("where", MakeWhere, Signature("bool, T, T -> T").Where("T", AllDTypes()));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
