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
// x is first copied into the workspace transposed in tiles of 6 (16x16
// blocks) or 12 (1x8) rows. A tile times a column block of bn outputs keeps
// its accumulators in registers (GCC vector types of 8 floats), each nonzero
// block's k rows broadcast-multiplied in. Tasks pair a group of tiles with a
// group of column blocks small enough to stay in L2; they split over threads.
// Precision: float32, each output a sum over the nonzero blocks in row
// order (the dense GEMM sums in another order: results agree to rounding).
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
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

// A's element (i, c) is w[i * rs + c * cs]: W (rs = n, cs = 1) or W^T.
struct Source {
  const float* w;
  int64_t rs, cs;
};

// Column block j's nonzero blocks into row_block / values from slot
// `first` on; returns how many.
int64_t PackColumn(Source a, int64_t k, int64_t bk, int64_t bn, int64_t j, int64_t first,
                   int64_t* row_block, float* values) {
  int64_t count = 0;
  for (int64_t kb = 0; kb < k / bk; ++kb) {
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

// One tile: kR rows of y from m0 (`rows` of them real; the packed rows
// past them are zeros), column block j. xt is the tile of x transposed,
// [K][kR], so each k's kR values are adjacent. Every loop bound is a
// compile-time constant, so the accumulators (kR x kCols / 8 vectors of 8
// floats: 12 AVX2 registers for 6 x 16 and for 12 x 8) stay in registers.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4)));

template <int kCols, int kBk, int kR>
void Tile(const Packed& p, const float* xt, const float* bias, const float* res, float* y,
          int64_t m0, int rows, int64_t j) {
  constexpr int kV = kCols / 8;
  V8 acc[kR][kV];
#pragma GCC unroll 16
  for (int v = 0; v < kV; ++v) {
    const V8 start = bias ? V8(*reinterpret_cast<const V8u*>(bias + j * kCols + v * 8)) : V8{};
#pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) acc[r][v] = start;
  }
  const int64_t end = p.end[j];
  for (int64_t b = p.begin[j]; b < end; ++b) {
    const float* w = p.values + b * kBk * kCols;
    const float* xb = xt + p.row_block[b] * kBk * kR;
#pragma GCC unroll 4
    for (int kk = 0; kk < kBk; ++kk) {
      V8 wv[kV];
#pragma GCC unroll 16
      for (int v = 0; v < kV; ++v) wv[v] = *reinterpret_cast<const V8u*>(w + kk * kCols + v * 8);
#pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) {
        const float xv = xb[kk * kR + r];
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
      V8 o = acc[r][v];
      if (res) o += *reinterpret_cast<const V8u*>(res + (m0 + r) * n + j * kCols + v * 8);
      *reinterpret_cast<V8u*>(out + v * 8) = o;
    }
  }
}

using TileFn = void (*)(const Packed&, const float*, const float*, const float*, float*, int64_t,
                        int, int64_t);

// A block shape's tile function and its rows: 16x16 blocks take two
// vectors per row (6 rows), 1x8 blocks one (12 rows).
struct Tiling {
  TileFn tile = nullptr;
  int rows = 0;
};
Tiling TilingFor(int64_t bk, int64_t bn) {
  if (bk == 16 && bn == 16) return {Tile<16, 16, 6>, 6};
  if (bk == 1 && bn == 8) return {Tile<8, 1, 12>, 12};
  return {};
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
  const Tiling tiling = TilingFor(bk, bn);
  if (!tiling.tile) Unsupported(op, "block shape {}x{} (the kernel has 16x16 and 1x8)", bk, bn);
  // A = W [k, n] or W^T.
  const int64_t wk = w->shape()[0], wn = w->shape()[1];
  const int64_t k = transpose ? wn : wk, n = transpose ? wk : wn;
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
  const int64_t m = NumElements(op.output(0)->shape()) / n;
  const ActFn act_fn = Activation(op);
  const bool has_bias = op.input(2) != nullptr, has_res = op.input(3) != nullptr;
  const int mr = tiling.rows;
  const TileFn tile = tiling.tile;
  const int64_t tiles_m = (m + mr - 1) / mr;
  // x transposed tile by tile ([tile][K][mr], zero rows past m): each k's
  // mr values adjacent for the broadcasts.
  // (Rounded to a cache line: the packed blocks' indices follow.)
  const size_t xt_floats = static_cast<size_t>((tiles_m * k * mr + 15) / 16 * 16);
  const size_t pack_bytes = store ? 0
                                  : static_cast<size_t>(2 * cols + cols * kbs) * sizeof(int64_t) +
                                        static_cast<size_t>(k * n) * sizeof(float);
  // Tasks: a group of row tiles x a group of column blocks, sized so the
  // group's x tiles (<= 256 KB) and A's blocks (<= 128 KB) stay in L2 while
  // the tiles sweep the blocks: A is read from memory once per row group,
  // not once per row tile.
  const int64_t tile_bytes = k * mr * 4;
  const int64_t row_group = std::max<int64_t>(1, (256 << 10) / tile_bytes);
  const int64_t row_groups = (tiles_m + row_group - 1) / row_group;
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
          auto* begin = reinterpret_cast<int64_t*>(xt + xt_floats);
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
        ParallelRange(
            tiles_m, k * mr,
            [&](int64_t b, int64_t e) {
              for (int64_t t = b; t < e; ++t) {
                float* dst = xt + t * k * mr;
                const int64_t m0 = t * mr;
                const int rows = static_cast<int>(std::min<int64_t>(mr, m - m0));
                for (int r = 0; r < mr; ++r) {
                  const float* src = x + (m0 + r) * k;
                  if (r < rows) {
                    for (int64_t kk = 0; kk < k; ++kk) dst[kk * mr + r] = src[kk];
                  } else {
                    for (int64_t kk = 0; kk < k; ++kk) dst[kk * mr + r] = 0.0f;
                  }
                }
              }
            },
            1);
        ParallelRange(
            row_groups * col_groups, task_work,
            [&](int64_t b, int64_t e) {
              for (int64_t task = b; task < e; ++task) {
                const int64_t rg = task / col_groups, cg = task % col_groups;
                const int64_t t_end = std::min(tiles_m, (rg + 1) * row_group);
                const int64_t j_end = std::min(cols, (cg + 1) * col_group);
                for (int64_t t = rg * row_group; t < t_end; ++t) {
                  const int64_t m0 = t * mr;
                  const int rows = static_cast<int>(std::min<int64_t>(mr, m - m0));
                  for (int64_t j = cg * col_group; j < j_end; ++j)
                    tile(p, xt + t * k * mr, bias, res, y, m0, rows, j);
                }
              }
            },
            1);
        if (act_fn) {
          ParallelRange(m, n,
                        [&](int64_t b, int64_t e) { act_fn(y + b * n, y + b * n, (e - b) * n); });
        }
      },
      xt_floats * sizeof(float) + pack_bytes);
  if (store) kernel->MarkInputCopied(1);  // packed: the dense W is not read again
  return kernel;
}

TILLER_CPU_KERNEL("linear_block_sparse", MakeLinearBlockSparse,
                  Signature("T, T, T?, T? -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
