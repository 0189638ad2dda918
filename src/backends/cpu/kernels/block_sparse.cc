// linear_block_sparse: y = act(x W + b + r) for a constant W kept as its
// nonzero blocks (block-compressed by output column block: for column block
// j, the row blocks holding a nonzero and their values), packed when the
// kernel is made. Run multiplies only those blocks.
//
// Each task is a tile of kRows rows of x and one column block of bn
// outputs: bn-wide accumulators (GCC vector types: one or two AVX2
// registers, or one AVX-512 register, per row), each block's k rows
// broadcast-multiplied in. Tiles are independent, so they split over
// threads; the block's values stay in L1 across the tile's rows.
// Precision: float32, each output a sum over the nonzero blocks in row
// order (the dense GEMM sums in another order: results agree to rounding).
#include <array>
#include <cstring>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

constexpr int kRows = 6;  // rows of x per tile (accumulators: 6 x bn floats)

// The packed W: for column block j, blocks [col_ptr[j], col_ptr[j + 1]),
// block b at row block row_block[b] with values values[b * bk * bn ...]
// (row-major bk x bn).
struct Packed {
  int64_t bk, bn, k, n;
  std::vector<int64_t> col_ptr, row_block;
  std::vector<float> values;
};

Packed Pack(const float* w, int64_t k, int64_t n, int64_t bk, int64_t bn) {
  Packed p{bk, bn, k, n, {0}, {}, {}};
  for (int64_t j = 0; j < n / bn; ++j) {
    for (int64_t kb = 0; kb < k / bk; ++kb) {
      bool nonzero = false;
      for (int64_t r = 0; r < bk && !nonzero; ++r) {
        for (int64_t c = 0; c < bn; ++c) nonzero |= w[(kb * bk + r) * n + j * bn + c] != 0.0f;
      }
      if (!nonzero) continue;
      p.row_block.push_back(kb);
      for (int64_t r = 0; r < bk; ++r) {
        const float* src = w + (kb * bk + r) * n + j * bn;
        p.values.insert(p.values.end(), src, src + bn);
      }
    }
    p.col_ptr.push_back(static_cast<int64_t>(p.row_block.size()));
  }
  return p;
}

// One tile: kR rows of y from m0, column block j. Every loop bound is a
// compile-time constant, so the accumulators (kR x kCols / 8 vectors of 8
// floats: 12 AVX2 registers for 6 x 16) stay in registers.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4)));

template <int kCols, int kBk, int kR>
void Tile(const Packed& p, const float* x, const float* bias, const float* res, float* y,
          int64_t m0, int64_t j) {
  constexpr int kV = kCols / 8;
  V8 acc[kR][kV];
#pragma GCC unroll 16
  for (int v = 0; v < kV; ++v) {
    const V8 start = bias ? V8(*reinterpret_cast<const V8u*>(bias + j * kCols + v * 8)) : V8{};
#pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) acc[r][v] = start;
  }
  const int64_t k = p.k;
  const float* xr = x + m0 * k;
  const int64_t end = p.col_ptr[j + 1];
  for (int64_t b = p.col_ptr[j]; b < end; ++b) {
    const float* w = p.values.data() + b * kBk * kCols;
    const float* xb = xr + p.row_block[b] * kBk;
#pragma GCC unroll 4
    for (int kk = 0; kk < kBk; ++kk) {
      V8 wv[kV];
#pragma GCC unroll 16
      for (int v = 0; v < kV; ++v) wv[v] = *reinterpret_cast<const V8u*>(w + kk * kCols + v * 8);
#pragma GCC unroll 16
      for (int r = 0; r < kR; ++r) {
        const float xv = xb[r * k + kk];
#pragma GCC unroll 16
        for (int v = 0; v < kV; ++v) acc[r][v] += xv * wv[v];
      }
    }
  }
  const int64_t n = p.n;
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
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
                        int64_t);

// The tile functions of a block shape, by rows (1..kRows).
template <int kCols, int kBk>
std::array<TileFn, kRows + 1> TilesOf() {
  return {nullptr,
          Tile<kCols, kBk, 1>,
          Tile<kCols, kBk, 2>,
          Tile<kCols, kBk, 3>,
          Tile<kCols, kBk, 4>,
          Tile<kCols, kBk, 5>,
          Tile<kCols, kBk, 6>};
}

std::array<TileFn, kRows + 1> TilesFor(int64_t bk, int64_t bn) {
  if (bk == 16 && bn == 16) return TilesOf<16, 16>();
  if (bk == 1 && bn == 8) return TilesOf<8, 1>();
  return {};
}

using ActFn = void (*)(const float*, float*, int64_t);

std::unique_ptr<Kernel> MakeLinearBlockSparse(const ir::Op& op) {
  const ir::Value* w = op.input(1);
  if (!w->data) Unsupported(op, "W '{}' is not a constant", w->name);
  const int64_t bk = op.GetInt("block_rows"), bn = op.GetInt("block_cols");
  const std::array<TileFn, kRows + 1> tiles = TilesFor(bk, bn);
  if (!tiles[1]) Unsupported(op, "block shape {}x{} (the kernel has 16x16 and 1x8)", bk, bn);
  const int64_t k = w->shape()[0], n = w->shape()[1];
  if (k % bk || n % bn) Unsupported(op, "W {}x{} is not tiled by {}x{} blocks", k, n, bk, bn);
  auto packed = std::make_shared<Packed>(Pack(w->data->as<float>(), k, n, bk, bn));
  const int64_t m = NumElements(op.output(0)->shape()) / n;
  const std::string act = op.GetStr("activation");
  ActFn act_fn = nullptr;
  if (act == "relu")
    act_fn = [](const float* a, float* b, int64_t len) {
      for (int64_t i = 0; i < len; ++i) b[i] = a[i] > 0.0f ? a[i] : 0.0f;
    };
  else if (act == "gelu")
    act_fn = VGelu;
  else if (act == "gelu_tanh")
    act_fn = VGeluTanh;
  else if (act == "tanh")
    act_fn = VTanh;
  else if (!act.empty())
    Unsupported(op, "activation '{}'", act);
  const bool has_bias = op.input(2) != nullptr, has_res = op.input(3) != nullptr;
  auto kernel = std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
    const auto* x = static_cast<const float*>(a.inputs[0]);
    const auto* bias = has_bias ? static_cast<const float*>(a.inputs[2]) : nullptr;
    const auto* res = has_res ? static_cast<const float*>(a.inputs[3]) : nullptr;
    auto* y = static_cast<float*>(a.outputs[0]);
    const int64_t tiles_m = (m + kRows - 1) / kRows, cols = n / bn;
    // A task: one row tile across every column block (x's rows stay in
    // cache), then the activation over those rows.
    const int64_t work =
        static_cast<int64_t>(packed->values.size()) * kRows / std::max<int64_t>(1, tiles_m);
    ParallelRange(
        tiles_m, std::max<int64_t>(work, 1),
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t m0 = t * kRows;
            const int rows = static_cast<int>(std::min<int64_t>(kRows, m - m0));
            const TileFn tile = tiles[rows];
            for (int64_t j = 0; j < cols; ++j) tile(*packed, x, bias, res, y, m0, j);
            if (act_fn) act_fn(y + m0 * n, y + m0 * n, rows * n);
          }
        },
        1);
  });
  kernel->MarkInputCopied(1);  // packed: the dense W is not read again
  return kernel;
}

TILLER_CPU_KERNEL("linear_block_sparse", MakeLinearBlockSparse,
                  Signature("T, T, T?, T? -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
