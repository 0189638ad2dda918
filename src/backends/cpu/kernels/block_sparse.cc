// linear_block_sparse: y = act(x A + b + r) with A = W, or W^T where
// transpose_w (a linear's input gradient g W^T), multiplying only A's
// nonzero blocks, kept block-compressed by output column block (for
// column block j, the row blocks holding a nonzero and their values). A
// constant W (an inference model's pruned weight) is packed once, when the
// kernel is made; a W that changes (a trained weight whose pruned blocks
// the program keeps at zero) is packed into the workspace at every run,
// from its zeros then: a scan of W costs a fraction of the dense GEMM's
// time, and the result is x W whatever W holds.
//
// For 16x16 blocks a tile of 6 rows of x is read where it lies: each
// nonzero block reads 16 adjacent floats (one cache line) of each row. For
// 1x8 blocks, whose one row of k would touch 12 lines for 12 floats, each
// thread copies the rows of its tasks into its slice of the workspace
// transposed in tiles of 12 rows, and the x of the block 8 ahead is
// prefetched (the blocks' k are irregular, so the hardware's prefetchers
// miss them). A tile times a column block of bn outputs keeps its
// accumulators in registers (GCC vector types of 8 floats), each nonzero
// block's k rows broadcast-multiplied in. 8x1 blocks (the transpose of a
// 1x8 pattern: the input gradient of a weight pruned in 1x8 blocks) have
// one output per column block: each block's 8 values multiply 8 adjacent
// floats of each row of x, summed across at the end. Tasks pair a group of
// tiles with a group of column blocks small enough to stay in L2; they
// split over threads.
// With 512-bit vectors (an AVX-512 build, or this file's x86-64-v4 copy,
// block_sparse_avx512.cc) 1x8 blocks accumulate by output column instead:
// each of the column block's 8 outputs is a vector of 16 rows of the tile,
// so a block's 8 values, broadcast from memory, multiply 32 rows in 16
// multiply-adds (ColumnTile), where vectors of 8 by row took 12 broadcasts
// of x and 12 multiply-adds for 12 rows, and the 1x8 kernel fell under 4x
// the dense GEMM on AVX-512 (3.8x on a Xeon with AMX) while the dense GEMM
// used the full width; now 6.6-6.9x. 16x16 blocks keep Tile's scheme with
// one 512-bit vector per row and 12 rows.
// Precision: float32, each output a sum over the nonzero blocks in row
// order (the dense GEMM sums in another order: results agree to rounding).
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

// A [k, n] packed: column block j holds blocks [begin[j], end[j]), block b
// at row block row_block[b] with values values[b * bk * bn ...] (row-major
// bk x bn).
struct Packed {
  int64_t bk, bn, k, n;
  const int64_t* begin;
  const int64_t* end;
  const int64_t* row_block;
  const float* values;
};

// GCC vector types of 8 floats (one AVX2 register), aligned or not.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4)));
constexpr int64_t kLane = 8;  // floats per V8

// A's element (i, c) is w[i * rs + c * cs]: W (rs = n, cs = 1) or W^T.
struct Source {
  const float* w;
  int64_t rs, cs;
};

// Column block j's nonzero blocks into row_block / values from slot
// `first` on; returns how many. A block of 8 adjacent floats in W (1x8
// blocks of W, 8x1 of W^T) is read, tested and stored as one vector.
int64_t PackColumn(Source a, int64_t k, int64_t bk, int64_t bn, int64_t j, int64_t first,
                   int64_t* row_block, float* values) {
  int64_t count = 0;
  const bool lane = (bk == 1 && bn == kLane && a.cs == 1) || (bk == kLane && bn == 1 && a.rs == 1);
  for (int64_t kb = 0; kb < k / bk; ++kb) {
    if (lane) {
      const V8 v = *reinterpret_cast<const V8u*>(a.w + kb * bk * a.rs + j * bn * a.cs);
      const auto zero = v == V8{};
      bool all = true;
      for (int i = 0; i < kLane; ++i) all = all && zero[i];
      if (all) continue;
      const int64_t b = first + count++;
      row_block[b] = kb;
      *reinterpret_cast<V8u*>(values + b * kLane) = v;
      continue;
    }
    bool nonzero = false;
    for (int64_t r = 0; r < bk && !nonzero; ++r)
      for (int64_t c = 0; c < bn; ++c)
        nonzero |= a.w[(kb * bk + r) * a.rs + (j * bn + c) * a.cs] != 0.0f;
    if (!nonzero) continue;
    const int64_t b = first + count++;
    row_block[b] = kb;
    float* dst = values + b * bk * bn;
    for (int64_t r = 0; r < bk; ++r)
      for (int64_t c = 0; c < bn; ++c)
        dst[r * bn + c] = a.w[(kb * bk + r) * a.rs + (j * bn + c) * a.cs];
  }
  return count;
}

// A constant W's blocks, packed compactly once.
struct PackedStore {
  std::vector<int64_t> begin, end, row_block;
  std::vector<float> values;

  PackedStore(Source a, int64_t k, int64_t n, int64_t bk, int64_t bn) {
    const int64_t kbs = k / bk;
    std::vector<int64_t> rows(static_cast<size_t>(kbs));
    std::vector<float> vals(static_cast<size_t>(k * bn));
    for (int64_t j = 0; j < n / bn; ++j) {
      const int64_t count = PackColumn(a, k, bk, bn, j, 0, rows.data(), vals.data());
      begin.push_back(static_cast<int64_t>(row_block.size()));
      row_block.insert(row_block.end(), rows.begin(), rows.begin() + count);
      values.insert(values.end(), vals.begin(), vals.begin() + count * bk * bn);
      end.push_back(static_cast<int64_t>(row_block.size()));
    }
  }
  Packed View(int64_t bk, int64_t bn, int64_t k, int64_t n) const {
    return {bk, bn, k, n, begin.data(), end.data(), row_block.data(), values.data()};
  }
};

// One tile: kR rows of y from m0 (`rows` of them real), column block j.
// x is either the rows themselves (kTransposed false: row r at
// x + (m0 + r) * k; rows past the real ones re-read row m0 and are not
// stored) or the tile of x transposed, [K][kR] (each k's kR values
// adjacent; the packed rows past the real ones are zeros). Vectors hold
// kLanes floats (8, or 16 with 512-bit vectors). Every loop bound is a
// compile-time constant, so the accumulators (kR x kCols / lanes vectors:
// 12 AVX2 registers for 6 x 16 and for 12 x 8, 12 AVX-512 ones for 12 x
// 16) stay in registers. The tile prefetches the transposed x of the block
// kPrefetchBlocks ahead (measured at 4 and 8 on AMD Zen 3: 10-20% faster
// than none, the same as each other).
constexpr int64_t kPrefetchBlocks = 8;

template <int kLanes, int kCols, int kBk, int kR, bool kTransposed>
void Tile(const Packed& p, const float* x, const float* bias, const float* res, float* y,
          int64_t m0, int rows, int64_t j) {
  // The vector types here, not template arguments: an argument's aligned(4)
  // would be dropped, and the unaligned loads made aligned ones.
  typedef float V __attribute__((vector_size(kLanes * sizeof(float))));
  typedef float Vu __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));
  constexpr int kV = kCols / kLanes;
  V acc[kR][kV];
#pragma GCC unroll 16
  for (int v = 0; v < kV; ++v) {
    const V start =
        bias ? V(*reinterpret_cast<const Vu*>(bias + j * kCols + v * int64_t{kLanes})) : V{};
#pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) acc[r][v] = start;
  }
  const float* xr[kR];
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) xr[r] = kTransposed ? x : x + (m0 + (r < rows ? r : 0)) * p.k;
  const int64_t end = p.end[j];
  for (int64_t b = p.begin[j]; b < end; ++b) {
    if (kTransposed && b + kPrefetchBlocks < end)
      __builtin_prefetch(x + p.row_block[b + kPrefetchBlocks] * kBk * kR);
    const float* w = p.values + b * kBk * kCols;
    const int64_t k0 = p.row_block[b] * kBk;
#pragma GCC unroll 4
    for (int kk = 0; kk < kBk; ++kk) {
      V wv[kV];
#pragma GCC unroll 16
      for (int v = 0; v < kV; ++v)
        wv[v] = *reinterpret_cast<const Vu*>(w + kk * int64_t{kCols} + v * int64_t{kLanes});
#pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) {
        const float xv = kTransposed ? x[(k0 + kk) * kR + r] : xr[r][k0 + kk];
#pragma GCC unroll 16
        for (int v = 0; v < kV; ++v) acc[r][v] += xv * wv[v];
      }
    }
  }
  const int64_t n = p.n;
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    if (r >= rows) break;
    float* out = y + (m0 + r) * n + j * kCols;
#pragma GCC unroll 16
    for (int v = 0; v < kV; ++v) {
      V o = acc[r][v];
      if (res)
        o += *reinterpret_cast<const Vu*>(res + (m0 + r) * n + j * kCols + v * int64_t{kLanes});
      *reinterpret_cast<Vu*>(out + v * int64_t{kLanes}) = o;
    }
  }
}

// One tile of an 8 x 1 block pattern (a 1 x 8 pattern's transpose: the
// input gradient g W^T of a weight pruned in 1 x 8 blocks): 8 rows of y
// from m0, its one column j. Each block's 8 values multiply 8 adjacent
// floats of each row of x, where they lie, into a vector per row; the 8
// vectors are summed across together at the end (pairwise adds of
// shuffles, as a horizontal add tree: 9 vector ops for the 8 sums, where
// one row at a time took 8 x 5).
void DotTile(const Packed& p, const float* x, const float* bias, const float* res, float* y,
             int64_t m0, int rows, int64_t j) {
  constexpr int kR = 8;
  V8 acc[kR];
  const float* xr[kR];
#pragma GCC unroll 8
  for (int r = 0; r < kR; ++r) {
    acc[r] = V8{};
    xr[r] = x + (m0 + (r < rows ? r : 0)) * p.k;
  }
  const int64_t end = p.end[j];
  for (int64_t b = p.begin[j]; b < end; ++b) {
    const V8 w = *reinterpret_cast<const V8u*>(p.values + b * kLane);
    const int64_t k0 = p.row_block[b] * kLane;
#pragma GCC unroll 8
    for (int r = 0; r < kR; ++r) acc[r] += *reinterpret_cast<const V8u*>(xr[r] + k0) * w;
  }
  // hadd(a, b) within each 128-bit half: [a0+a1, a2+a3, b0+b1, b2+b3 | ...].
  auto hadd = [](V8 a, V8 b) {
    return __builtin_shufflevector(a, b, 0, 2, 8, 10, 4, 6, 12, 14) +
           __builtin_shufflevector(a, b, 1, 3, 9, 11, 5, 7, 13, 15);
  };
  const V8 q0 = hadd(hadd(acc[0], acc[1]), hadd(acc[2], acc[3]));
  const V8 q1 = hadd(hadd(acc[4], acc[5]), hadd(acc[6], acc[7]));
  // q0 = [s0 s1 s2 s3 | s0' s1' s2' s3'] (the halves' partial sums of rows
  // 0-3), q1 likewise for rows 4-7.
  const V8 sums = __builtin_shufflevector(q0, q1, 0, 1, 2, 3, 8, 9, 10, 11) +
                  __builtin_shufflevector(q0, q1, 4, 5, 6, 7, 12, 13, 14, 15);
  const int64_t n = p.n;
  for (int r = 0; r < rows; ++r) {
    float sum = sums[r];
    if (bias) sum += bias[j];
    if (res) sum += res[(m0 + r) * n + j];
    y[(m0 + r) * n + j] = sum;
  }
}

#if defined(__AVX512F__)
// Rows of a 16x16 tile with 512-bit vectors: 12 and 24 were measured
// (BERT-Base's projections at M = 1024, 90% sparse, Xeon with AMX): 12 gave
// 5.4-5.9x the dense GEMM where 6 rows of two 256-bit vectors gave
// 4.9-5.3x; 24 was faster on two shapes and slower on the third. Each
// multiply-add needs a broadcast of x, so loads bound it either way.
constexpr int kWideRows = 12;
typedef float V16 __attribute__((vector_size(64)));
typedef float V16u __attribute__((vector_size(64), aligned(4)));

// One tile of a 1x8 pattern by column (the file comment): kR rows of y
// from m0 (`rows` real), column block j, x the tile transposed ([K][kR],
// zero rows past the real ones). acc[c][v] holds column c's rows
// 16v..16v+15: 16 accumulators and 2 vectors of x for 32 rows, of 32
// registers. They leave through the stack, transposed back to rows.
template <int kR>
void ColumnTile(const Packed& p, const float* x, const float* bias, const float* res, float* y,
                int64_t m0, int rows, int64_t j) {
  constexpr int kV = kR / 16;
  V16 acc[kLane][kV];
#pragma GCC unroll 8
  for (int c = 0; c < kLane; ++c) {
    const V16 start = V16{} + (bias ? bias[j * kLane + c] : 0.0f);
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) acc[c][v] = start;
  }
  const int64_t end = p.end[j];
  for (int64_t b = p.begin[j]; b < end; ++b) {
    if (b + kPrefetchBlocks < end) {
      const float* ahead = x + p.row_block[b + kPrefetchBlocks] * kR;
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) __builtin_prefetch(ahead + v * int64_t{16});
    }
    const float* w = p.values + b * kLane;
    const float* xk = x + p.row_block[b] * kR;
    V16 xv[kV];
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) xv[v] = *reinterpret_cast<const V16u*>(xk + v * int64_t{16});
#pragma GCC unroll 8
    for (int c = 0; c < kLane; ++c) {
      const float wc = w[c];
#pragma GCC unroll 4
      for (int v = 0; v < kV; ++v) acc[c][v] += wc * xv[v];
    }
  }
  alignas(64) float t[kLane][kR];
#pragma GCC unroll 8
  for (int c = 0; c < kLane; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < kV; ++v) *reinterpret_cast<V16*>(&t[c][v * 16]) = acc[c][v];
  }
  const int64_t n = p.n;
  for (int r = 0; r < rows; ++r) {
    V8 o = {t[0][r], t[1][r], t[2][r], t[3][r], t[4][r], t[5][r], t[6][r], t[7][r]};
    if (res) o += *reinterpret_cast<const V8u*>(res + (m0 + r) * n + j * kLane);
    *reinterpret_cast<V8u*>(y + (m0 + r) * n + j * kLane) = o;
  }
}

#endif

using TileFn = void (*)(const Packed&, const float*, const float*, const float*, float*, int64_t,
                        int, int64_t);

// A block shape's tile function and its rows: 16x16 blocks take two
// vectors per row (6 rows), 1x8 blocks one (12 rows) from x transposed, or
// with 512-bit vectors one per column of 32 rows (16 where m is at most
// 16: a tile past the real rows multiplies zeros), 8x1 blocks one per row
// of the tile (8 rows), summed across.
struct Tiling {
  TileFn tile = nullptr;
  int rows = 0;
  bool transposed = false;  // x copied into the workspace as [tile][K][rows]
};
Tiling TilingFor(int64_t bk, int64_t bn, int64_t m) {
#if defined(__AVX512F__)
  if (bk == 16 && bn == 16) return {Tile<16, 16, 16, kWideRows, false>, kWideRows, false};
  if (bk == 1 && bn == 8) {
    return m <= 16 ? Tiling{ColumnTile<16>, 16, true} : Tiling{ColumnTile<32>, 32, true};
  }
#else
  (void)m;
  if (bk == 16 && bn == 16) return {Tile<8, 16, 16, 6, false>, 6, false};
  if (bk == 1 && bn == 8) return {Tile<8, 8, 1, 12, true>, 12, true};
#endif
  if (bk == 8 && bn == 1) return {DotTile, 8, false};
  return {};
}

// The AVX2 8 x 8 transpose's steps on pairs of rows: interleave the pairs
// (Lo, Hi), then pairs of pairs (Even, Odd); a 128-bit half of each result
// holds four rows of one column.
inline V8 Lo(V8 a, V8 b) {
  return __builtin_shufflevector(a, b, 0, 8, 1, 9, 4, 12, 5, 13);
}
inline V8 Hi(V8 a, V8 b) {
  return __builtin_shufflevector(a, b, 2, 10, 3, 11, 6, 14, 7, 15);
}
inline V8 Even(V8 a, V8 b) {
  return __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13);
}
inline V8 Odd(V8 a, V8 b) {
  return __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
}

// Four rows of 8 floats from src (rows k apart): u[c] holds column c's four
// values in its low half and column c + 4's in its high half.
inline void FourRows(const float* src, int64_t k, V8 u[4]) {
  const V8 r0 = *reinterpret_cast<const V8u*>(src), r1 = *reinterpret_cast<const V8u*>(src + k),
           r2 = *reinterpret_cast<const V8u*>(src + 2 * k),
           r3 = *reinterpret_cast<const V8u*>(src + 3 * k);
  const V8 t0 = Lo(r0, r1), t1 = Hi(r0, r1), t2 = Lo(r2, r3), t3 = Hi(r2, r3);
  u[0] = Even(t0, t2);
  u[1] = Odd(t0, t2);
  u[2] = Even(t1, t3);
  u[3] = Odd(t1, t3);
}

// x's rows r0[0..8) .. r7[0..8) (8 columns from k0) transposed into
// dst[kk * stride + r], kk < 8: two FourRows, each column's halves joined.
inline void Transpose8x8(const float* src, int64_t k, float* dst, int64_t stride) {
  V8 a[4], b[4];
  FourRows(src, k, a);
  FourRows(src + 4 * k, k, b);
  for (int64_t c = 0; c < 4; ++c) {
    *reinterpret_cast<V8u*>(dst + c * stride) =
        __builtin_shufflevector(a[c], b[c], 0, 1, 2, 3, 8, 9, 10, 11);
    *reinterpret_cast<V8u*>(dst + (c + 4) * stride) =
        __builtin_shufflevector(a[c], b[c], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

// x's rows r0[0..8) .. r11[0..8) (a 12-row tile, 8 columns from k0)
// transposed into dst[kk * 12 + r], kk < 8: the first eight rows as
// Transpose8x8, the last four's halves stored as they are.
inline void Transpose12x8(const float* src, int64_t k, float* dst) {
  typedef float V4u __attribute__((vector_size(16), aligned(4)));
  typedef float V4 __attribute__((vector_size(16)));
  Transpose8x8(src, k, dst, 12);
  V8 u[4];
  FourRows(src + 8 * k, k, u);
  for (int64_t c = 0; c < 4; ++c) {
    *reinterpret_cast<V4u*>(dst + c * 12 + 8) = V4{u[c][0], u[c][1], u[c][2], u[c][3]};
    *reinterpret_cast<V4u*>(dst + (c + 4) * 12 + 8) = V4{u[c][4], u[c][5], u[c][6], u[c][7]};
  }
}

// Row tiles [t0, t1) of x [m, k] transposed into dst, [tile][k][mr] with
// zeros past row m: whole 12-row tiles 8 columns at a time in registers
// (whole tiles of 16 or 32 rows as 8 x 8 squares),
// the rest element by element, row by row of the transposed tile (the
// writes sequential, the rows read staying in L1 across a cache line).
void TransposeTiles(const float* x, int64_t m, int64_t k, int mr, int64_t t0, int64_t t1,
                    float* dst) {
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t m0 = t * mr;
    const int rows = static_cast<int>(std::min<int64_t>(mr, m - m0));
    const float* src = x + m0 * k;
    int64_t kk = 0;
    if (mr == 12 && rows == 12) {
      for (; kk + 8 <= k; kk += 8, dst += 8 * int64_t{12}) Transpose12x8(src + kk, k, dst);
    } else if (mr % 8 == 0 && rows == mr) {
      for (; kk + 8 <= k; kk += 8, dst += 8 * int64_t{mr}) {
        for (int r0 = 0; r0 < mr; r0 += 8) Transpose8x8(src + r0 * k + kk, k, dst + r0, mr);
      }
    }
    for (; kk < k; ++kk, dst += mr) {
      int r = 0;
      for (; r < rows; ++r) dst[r] = src[r * k + kk];
      for (; r < mr; ++r) dst[r] = 0.0f;
    }
  }
}

using ActFn = void (*)(const float*, float*, int64_t);

ActFn Activation(const ir::Op& op) {
  const std::string& act = op.GetStr("activation");
  if (act.empty()) return nullptr;
  if (act == "relu")
    return [](const float* a, float* b, int64_t len) {
      for (int64_t i = 0; i < len; ++i) b[i] = a[i] > 0.0f ? a[i] : 0.0f;
    };
  if (act == "gelu") return VGelu;
  if (act == "gelu_tanh") return VGeluTanh;
  if (act == "tanh") return VTanh;
  Unsupported(op, "activation '{}'", act);
}

std::unique_ptr<Kernel> MakeLinearBlockSparse(const ir::Op& op) {
  const ir::Value* w = op.input(1);
  const bool transpose = op.GetBool("transpose_w");
  const int64_t bk = op.GetInt("block_rows"), bn = op.GetInt("block_cols");
  // A = W [k, n] or W^T.
  const int64_t wk = w->shape()[0], wn = w->shape()[1];
  const int64_t k = transpose ? wn : wk, n = transpose ? wk : wn;
  const int64_t m = NumElements(op.output(0)->shape()) / n;
  const Tiling tiling = TilingFor(bk, bn, m);
  if (!tiling.tile)
    Unsupported(op, "block shape {}x{} (the kernel has 16x16, 1x8 and 8x1)", bk, bn);
  if (k % bk || n % bn)
    Unsupported(op, "{} {}x{} is not tiled by {}x{} blocks", transpose ? "W^T" : "W", k, n, bk, bn);
  const int64_t cols = n / bn, kbs = k / bk;
  // A constant W is packed now; another at every run, into the workspace
  // after x's tiles: column block j's blocks at slots j x kbs on.
  std::shared_ptr<const PackedStore> store;
  if (w->data) {
    const auto* wd = w->data->as<float>();
    store = std::make_shared<PackedStore>(transpose ? Source{wd, 1, wn} : Source{wd, wn, 1}, k, n,
                                          bk, bn);
  }
  const ActFn act_fn = Activation(op);
  const bool has_bias = op.input(2) != nullptr, has_res = op.input(3) != nullptr;
  const int mr = tiling.rows;
  const TileFn tile = tiling.tile;
  const int64_t tiles_m = (m + mr - 1) / mr;
  // Tasks: a group of row tiles x a group of column blocks, sized so the
  // group's x tiles (<= 256 KB) and A's blocks (<= 128 KB) stay in L2 while
  // the tiles sweep the blocks: A is read from memory once per row group,
  // not once per row tile.
  const int64_t tile_bytes = k * mr * 4;
  const int64_t row_group = std::max<int64_t>(1, (256 << 10) / tile_bytes);
  const int64_t row_groups = (tiles_m + row_group - 1) / row_group;
  // 1x8 blocks: each thread transposes the row group of its tasks into its
  // own slice of the workspace ([tile][K][mr], zero rows past m; each k's
  // mr values adjacent for the broadcasts) when the row group changes. A
  // thread's tasks are contiguous and run through a row group's column
  // groups in turn, so each row group is transposed about once, and read
  // back from L2 rather than from memory. (Slices rounded to a cache line:
  // the packed blocks' indices follow.)
  const int threads = std::max(1, omp_get_max_threads());
  const size_t xt_floats =
      tiling.transposed ? static_cast<size_t>((row_group * k * mr + 15) / 16 * 16) : 0;
  const size_t pack_bytes = store ? 0
                                  : static_cast<size_t>(2 * cols + cols * kbs) * sizeof(int64_t) +
                                        static_cast<size_t>(k * n) * sizeof(float);
  auto kernel = std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        const auto* x = static_cast<const float*>(a.inputs[0]);
        const auto* bias = has_bias ? static_cast<const float*>(a.inputs[2]) : nullptr;
        const auto* res = has_res ? static_cast<const float*>(a.inputs[3]) : nullptr;
        auto* y = static_cast<float*>(a.outputs[0]);
        auto* xt = static_cast<float*>(a.workspace);
        Packed p{};
        int64_t blocks = 0;
        if (store) {
          p = store->View(bk, bn, k, n);
          blocks = static_cast<int64_t>(store->row_block.size());
        } else {
          auto* begin = reinterpret_cast<int64_t*>(xt + threads * xt_floats);
          int64_t* end = begin + cols;
          int64_t* row_block = end + cols;
          auto* values = reinterpret_cast<float*>(row_block + cols * kbs);
          const auto* wd = static_cast<const float*>(a.inputs[1]);
          const Source src = transpose ? Source{wd, 1, wn} : Source{wd, wn, 1};
          ParallelRange(
              cols, k * bn,
              [&](int64_t b, int64_t e) {
                for (int64_t j = b; j < e; ++j) {
                  begin[j] = j * kbs;
                  end[j] = begin[j] + PackColumn(src, k, bk, bn, j, begin[j], row_block, values);
                }
              },
              1);
          for (int64_t j = 0; j < cols; ++j) blocks += end[j] - begin[j];
          p = {bk, bn, k, n, begin, end, row_block, values};
        }
        const int64_t block_bytes_per_col =
            std::max<int64_t>(1, blocks * bk * bn * 4 / std::max<int64_t>(1, cols));
        const int64_t col_group = std::max<int64_t>(1, (128 << 10) / block_bytes_per_col);
        const int64_t col_groups = (cols + col_group - 1) / col_group;
        const int64_t task_work =
            std::max<int64_t>(1, blocks * bk * bn * mr / std::max<int64_t>(1, col_groups));
        const int64_t tasks = row_groups * col_groups;
        // At most the team the workspace was sized for (fewer when the
        // device halved its team under contention).
        const int team = std::min(threads, omp_get_max_threads());
#pragma omp parallel num_threads(team) if (tasks * task_work >= kParallelThreshold && tasks > 1)
        {
          const int nt = omp_get_num_threads(), me = omp_get_thread_num();
          const int64_t per = (tasks + nt - 1) / nt;
          const int64_t first = std::min(tasks, per * me), last = std::min(tasks, first + per);
          float* mine = xt + static_cast<size_t>(me) * xt_floats;
          int64_t have = -1;  // the row group in `mine`
          for (int64_t task = first; task < last; ++task) {
            const int64_t rg = task / col_groups, cg = task % col_groups;
            const int64_t t_end = std::min(tiles_m, (rg + 1) * row_group);
            const int64_t j_end = std::min(cols, (cg + 1) * col_group);
            if (tiling.transposed && rg != have) {
              TransposeTiles(x, m, k, mr, rg * row_group, t_end, mine);
              have = rg;
            }
            for (int64_t t = rg * row_group; t < t_end; ++t) {
              const int64_t m0 = t * mr;
              const int rows = static_cast<int>(std::min<int64_t>(mr, m - m0));
              const float* xs = tiling.transposed ? mine + (t - rg * row_group) * k * mr : x;
              for (int64_t j = cg * col_group; j < j_end; ++j)
                tile(p, xs, bias, res, y, m0, rows, j);
            }
          }
        }
        if (act_fn) {
          ParallelRange(m, n,
                        [&](int64_t b, int64_t e) { act_fn(y + b * n, y + b * n, (e - b) * n); });
        }
      },
      threads * xt_floats * sizeof(float) + pack_bytes);
  if (store) kernel->MarkInputCopied(1);  // packed: the dense W is not read again
  return kernel;
}

TILLER_CPU_KERNEL_COPY("linear_block_sparse", MakeLinearBlockSparse,
                       Signature("T, T, T?, T? -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu::TILLER_ISA_COPY
