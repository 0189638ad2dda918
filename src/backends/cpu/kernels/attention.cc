// attention(q, k, v, mask?): one task per (batch, head) - or per part of
// its query blocks when there are fewer heads than twice the threads - on
// its thread's scratch: the head's keys and values packed once, then per
// block of query rows:
//   Kt   = k[b, :, h]^T                          [head_dim, Sk]  (packed once)
//   S    = alpha * q[b, rows, h] Kt + mask rows    [rows, Sk]
//   S    = exp(S - row max), row sums kept
//   out[b, rows, h] = (S v[b, :, h]) / row sums    written in place, heads side by side
// so the [B, heads, Sq, Sk] score tensor of the unfused graph never exists:
// a block holds at most kScoreFloats scores (the rows shrink as Sk grows),
// and the scores stay in the core's cache between the two products instead
// of making four trips through memory (matmul, mask add, softmax, matmul).
// The products are register-tiled: kRows rows by two vectors of columns,
// the k loop broadcasting A's element and loading B's row from panels that
// PackPanels lays out contiguously (Kt transposed there).
// Results: the unfused ops' up to float rounding (the softmax's 1/sum is
// applied to the context rows, after the second product).
#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/attention_layout.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

// A register tile: kRows rows by kPanel columns (two vectors), 2 * kRows
// accumulators: 16 of AVX-512's 32 registers, 12 of AVX2's 16. Eight rows
// divide the usual sequence lengths (a block of 64 query rows takes no
// partial tile), and per k the tile's 16 FMAs outnumber its loads (two
// vectors of B, eight broadcasts of A).
#if defined(__AVX512F__)
constexpr int kRows = 8;
constexpr int64_t kMaxBlockRows = 64;  // a multiple of kRows
#else
constexpr int kRows = 6;
constexpr int64_t kMaxBlockRows = 66;
#endif
constexpr int64_t kPanel = int64_t{2} * simd::kLanes;
constexpr int64_t kScoreFloats = 16384;  // scores per block: 64 KiB

int64_t Panels(int64_t n) {
  return (n + kPanel - 1) / kPanel;
}

#if defined(__AVX512F__)
// r[i] = row i of a 16 x 16 block  ->  r[i] = its column i: pairs of rows
// interleaved, then 64-bit pairs, then 128-bit lanes twice.
inline void Transpose16(__m512 r[16]) {
  __m512 t[16];
  for (size_t i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (size_t i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (size_t i = 0; i < 2; ++i) {
    for (size_t c = 0; c < 4; ++c) {
      t[8 * i + c] = _mm512_shuffle_f32x4(r[8 * i + c], r[8 * i + 4 + c], 0x88);
      t[8 * i + 4 + c] = _mm512_shuffle_f32x4(r[8 * i + c], r[8 * i + 4 + c], 0xDD);
    }
  }
  for (size_t c = 0; c < 8; ++c) {
    r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);
  }
}
#endif

// B [kn, n] (element (k, j) at b[k * ldk + j * ldj]) as panels of kPanel
// columns, each [kn, kPanel] contiguous and zero-padded: the tiles then
// read B sequentially whatever its strides (k's rows, or v's rows 3 * 768
// floats apart in a merged projection, would fall into few cache sets).
void PackPanels(const float* b, int64_t ldk, int64_t ldj, int64_t kn, int64_t n, float* out) {
  for (int64_t p = 0; p < Panels(n); ++p) {
    float* panel = out + p * kn * kPanel;
    const int64_t j0 = p * kPanel, w = std::min(kPanel, n - j0);
    if (w < kPanel) std::fill(panel, panel + kn * kPanel, 0.0f);
    if (ldj == 1 && w == kPanel) {
      for (int64_t k = 0; k < kn; ++k) {
        simd::Store(panel + k * kPanel, simd::Load(b + k * ldk + j0));
        simd::Store(panel + k * kPanel + simd::kLanes, simd::Load(b + k * ldk + j0 + simd::kLanes));
      }
    } else if (ldj == 1) {
      for (int64_t k = 0; k < kn; ++k)
        std::copy(b + k * ldk + j0, b + k * ldk + j0 + w, panel + k * kPanel);
    } else {  // a transpose: read b's contiguous k runs, write the panel's columns
      int64_t j = 0;
#if defined(__AVX512F__)
      // 16 x 16 blocks through registers (the keys' transpose was a scalar
      // store per element, ~10% of an attention head's time).
      if (ldk == 1) {
        for (; j + 16 <= w; j += 16) {
          const float* rows = b + (j0 + j) * ldj;
          int64_t k = 0;
          for (; k + 16 <= kn; k += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(rows + i * ldj + k);
            Transpose16(r);
            for (int i = 0; i < 16; ++i) _mm512_storeu_ps(panel + (k + i) * kPanel + j, r[i]);
          }
          for (; k < kn; ++k) {
            for (int i = 0; i < 16; ++i) panel[k * kPanel + j + i] = rows[i * ldj + k];
          }
        }
      }
#endif
      for (; j < w; ++j) {
        const float* col = b + (j0 + j) * ldj;
        for (int64_t k = 0; k < kn; ++k) panel[k * kPanel + j] = col[k * ldk];
      }
    }
  }
}

// C[r, 0:w) = row_scale[r] * sum_k A[r, k] panel[k, 0:w) for R rows; w is
// the whole panel (kFull) or less (masked stores).
template <int R, bool kFull>
void Tile(const float* a, int64_t lda, const float* panel, int64_t kn, float* c, int64_t ldc,
          int64_t w, const float* row_scale) {
  using simd::Vec;
  constexpr int64_t L = simd::kLanes;
  Vec acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = simd::Zero();
  for (int64_t k = 0; k < kn; ++k) {
    const Vec b0 = simd::Load(panel + k * kPanel), b1 = simd::Load(panel + k * kPanel + L);
    for (int r = 0; r < R; ++r) {
      const Vec x = simd::Set(a[r * lda + k]);
      acc0[r] = simd::Fma(x, b0, acc0[r]);
      acc1[r] = simd::Fma(x, b1, acc1[r]);
    }
  }
  const simd::Mask m0 = simd::Tail(w), m1 = simd::Tail(w - L);
  for (int r = 0; r < R; ++r) {
    const Vec s = simd::Set(row_scale[r]);
    if (kFull) {
      simd::Store(c + r * ldc, acc0[r] * s);
      simd::Store(c + r * ldc + L, acc1[r] * s);
    } else {
      simd::StorePart(c + r * ldc, m0, acc0[r] * s);
      if (w > L) simd::StorePart(c + r * ldc + L, m1, acc1[r] * s);
    }
  }
}

template <int R>
void TileOfWidth(const float* a, int64_t lda, const float* panel, int64_t kn, float* c, int64_t ldc,
                 int64_t w, const float* row_scale) {
  if (w == kPanel) return Tile<R, true>(a, lda, panel, kn, c, ldc, w, row_scale);
  Tile<R, false>(a, lda, panel, kn, c, ldc, w, row_scale);
}

// The last `rows` (< kRows) rows as one tile of that height (one row at a
// time would reload B's panel per row: load-bound).
template <int R = kRows - 1>
void LastRows(int64_t rows, const float* a, int64_t lda, const float* panel, int64_t kn, float* c,
              int64_t ldc, int64_t w, const float* row_scale) {
  if constexpr (R > 0) {
    if (rows == R) return TileOfWidth<R>(a, lda, panel, kn, c, ldc, w, row_scale);
    LastRows<R - 1>(rows, a, lda, panel, kn, c, ldc, w, row_scale);
  }
}

// C[rows, n] = diag(row_scale) A[rows, kn] B[kn, n], B packed by PackPanels.
void Product(const float* a, int64_t lda, const float* panels, int64_t rows, int64_t kn, int64_t n,
             float* c, int64_t ldc, const float* row_scale) {
  for (int64_t p = 0; p < Panels(n); ++p) {
    const float* panel = panels + p * kn * kPanel;
    const int64_t j = p * kPanel, w = std::min(kPanel, n - j);
    int64_t r = 0;
    for (; r + kRows <= rows; r += kRows)
      TileOfWidth<kRows>(a + r * lda, lda, panel, kn, c + r * ldc + j, ldc, w, row_scale + r);
    if (r < rows)
      LastRows(rows - r, a + r * lda, lda, panel, kn, c + r * ldc + j, ldc, w, row_scale + r);
  }
}

// The op's layout (ir/ops/attention_layout.h) and the query rows per task.
struct Geometry : ir::AttentionLayout {
  int64_t block = 0;
};

Geometry Describe(const ir::Op& op) {
  Geometry g;
  static_cast<ir::AttentionLayout&>(g) = ir::AttentionLayoutOf(op);
  // Whole register tiles, as many as kScoreFloats scores hold.
  g.block = std::clamp<int64_t>(kScoreFloats / std::max<int64_t>(g.sk, 1) / kRows * kRows, kRows,
                                kMaxBlockRows);
  g.block = std::min(g.block, std::max<int64_t>(g.sq, 1));
  return g;
}

// Head h of batch b's keys and values, packed into the thread's scratch
// for the query blocks that follow.
void PackHead(const Geometry& g, const float* k, const float* v, int64_t b, int64_t h,
              float* scratch) {
  float* kt = scratch;                           // k^T: [d, sk] as panels
  float* vp = kt + Panels(g.sk) * kPanel * g.d;  // v: [sk, dv] as panels
  PackPanels(k + b * g.sk * g.k_ld + g.k_off + h * g.d, 1, g.k_ld, g.d, g.sk, kt);
  PackPanels(v + b * g.sk * g.v_ld + g.v_off + h * g.dv, g.v_ld, 1, g.sk, g.dv, vp);
}

// Query rows [r0, r0 + rows) of head h of batch b, its keys and values packed.
void AttendRows(const Geometry& g, const float* q, const float* mask, float* out, int64_t b,
                int64_t h, int64_t r0, int64_t rows, float* scratch) {
  const float* kt = scratch;
  const float* vp = kt + Panels(g.sk) * kPanel * g.d;
  float* s = scratch + Panels(g.sk) * kPanel * g.d + Panels(g.dv) * kPanel * g.sk;  // [block, sk]
  float* inv = s + g.block * g.sk;  // [block]: alpha, then 1 / row sums
  const float* qh = q + (b * g.sq + r0) * g.q_ld + g.q_off + h * g.d;
  for (int64_t r = 0; r < rows; ++r) inv[r] = g.alpha;
  Product(qh, g.q_ld, kt, rows, g.d, g.sk, s, g.sk, inv);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * g.sk;
    if (g.has_mask) {
      const float* m = mask + b * g.mb + h * g.mh + (r0 + r) * g.mq;
      if (g.mk) {
        for (int64_t j = 0; j < g.sk; ++j) row[j] += m[j];
      } else {
        for (int64_t j = 0; j < g.sk; ++j) row[j] += m[0];
      }
    }
    inv[r] = 1.0f / RowExpSum(row, row, g.sk, RowMax(row, g.sk));
  }
  const int64_t out_ld = g.heads * g.dv;
  Product(s, g.sk, vp, rows, g.sk, g.dv, out + (b * g.sq + r0) * out_ld + h * g.dv, out_ld, inv);
}

// Floats of one thread's scratch (AttendBlock's layout).
int64_t ScratchFloats(const Geometry& g) {
  return Panels(g.sk) * kPanel * g.d + Panels(g.dv) * kPanel * g.sk + g.block * g.sk + g.block;
}

std::unique_ptr<Kernel> MakeAttention(const ir::Op& op) {
  const Geometry g = Describe(op);
  const int threads = std::max(1, omp_get_max_threads());
  const int64_t per_thread = ScratchFloats(g);
  const size_t ws = static_cast<size_t>(threads * per_thread) * sizeof(float);
  const int64_t blocks = g.block ? (g.sq + g.block - 1) / g.block : 0;
  // A task packs one head's keys and values, then runs a run of its query
  // blocks: all of them when there are heads enough to keep every thread
  // busy (each head packed once), fewer when not.
  const int64_t heads = g.batch * g.heads;
  const int64_t chunks =
      std::clamp<int64_t>((int64_t{2} * threads + heads - 1) / std::max<int64_t>(heads, 1), 1,
                          std::max<int64_t>(blocks, 1));
  const int64_t per_chunk = (blocks + chunks - 1) / chunks;
  const int64_t tasks = heads * chunks;
  const int64_t work = g.sq * g.sk * (g.d + g.dv) / std::max<int64_t>(chunks, 1);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& args) {
        const auto* q = static_cast<const float*>(args.inputs[0]);
        const auto* k = static_cast<const float*>(args.inputs[1]);
        const auto* v = static_cast<const float*>(args.inputs[2]);
        const auto* mask = g.has_mask ? static_cast<const float*>(args.inputs[3]) : nullptr;
        auto* out = static_cast<float*>(args.outputs[0]);
        if (g.batch == 0 || g.sq == 0) return;  // no queries: an empty result
        if (g.sk == 0) {                        // no keys: every context row is an empty sum
          std::fill(out, out + g.batch * g.sq * g.heads * g.dv, 0.0f);
          return;
        }
        auto* scratch = static_cast<float*>(args.workspace);
        // At most the team the workspace was sized for (fewer when the
        // device halved its team under contention).
        const int team = std::min(threads, omp_get_max_threads());
#pragma omp parallel for num_threads(team) schedule(static) if (tasks * work >= kParallelThreshold)
        for (int64_t t = 0; t < tasks; ++t) {
          float* mine = scratch + omp_get_thread_num() * per_thread;
          const int64_t bh = t / chunks, first = (t % chunks) * per_chunk;
          const int64_t b = bh / g.heads, h = bh % g.heads;
          PackHead(g, k, v, b, h, mine);
          for (int64_t blk = first; blk < std::min(blocks, first + per_chunk); ++blk) {
            const int64_t r0 = blk * g.block;
            AttendRows(g, q, mask, out, b, h, r0, std::min(g.block, g.sq - r0), mine);
          }
        }
      },
      ws);
}

}  // namespace

TILLER_CPU_KERNEL_COPY("attention", MakeAttention,
                       Signature("T, T, T, T? -> T").Where("T", {DType::kF32}));

}  // namespace tiller::cpu::TILLER_ISA_COPY
