// Depthwise convolutions fused with the pointwise (1 x 1) convolution
// before or after them, computed row by row so the tensor between the two
// never exists:
// - conv2d_1x1_depthwise(x NHWC, w1, b1, w2, b2): a pointwise convolution
//   expanding C channels to E, then the depthwise one. MobileNet's inverted
//   residual blocks expand 16-240 channels to 64-960 at high resolution,
//   where oneDNN's two kernels are memory-bound writing the expanded tensor
//   and reading it back (MobileNetV3's 112 x 112 x 64 at batch 8 is 26 MB,
//   past the L2 and most of the L3).
// - conv2d_depthwise_1x1(x NHWC, w2, b2, w3, b3, r?): the depthwise
//   convolution, then a pointwise one projecting its E channels to O, the
//   residual r added (MobileNets' depthwise separable blocks).
// - conv2d_1x1_depthwise_1x1(x NHWC, w1, b1, w2, b2, w3, b3, r?): all
//   three (an inverted residual block without squeeze-excitation).
//
// A task computes output rows [oy0, oy1) of one image. It keeps the last KH
// rows of the depthwise input in a ring in its thread's scratch (row iy in
// slot iy % KH) and, for each output row, fills the rows it has not yet
// (expanding them, or copying the input's), then applies the depthwise
// window to the ring: each row is filled once per task and read from the
// core's caches KH / stride times. Projecting, the depthwise row goes to a
// row buffer and the projection reads it from there.
// A ring row is channel-blocked (kL channels of all its pixels, then the
// next kL), with the window's left and right zero padding around the
// pixels, so the window reads consecutive vectors.
//
// The pointwise products are register-tiled: kTilePixels pixels by up to
// kTileVecs vectors of channels, the C loop broadcasting one input value
// per pixel and loading the filter's row from a chunk-major copy packed at
// creation. The depthwise window runs blocks of up to kDwPixels output
// pixels per channel vector, loading each input column once for all the
// pixels whose window holds it. Its filter is packed per channel vector
// (all of a vector's taps together: with the taps an output vector apart,
// as [tap][channel], a 5 x 5 window's 25 filter lines fell into the same
// few L1 sets as the ring's rows, and the kernel ran 1.5x slower in some
// processes than in others, by where the allocations landed).
// Results: the two convolutions' up to float rounding (different summation
// order than oneDNN's kernels; activations as Paddle's formulas).
#include <numeric>
#include <utility>

#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

using simd::Vec;
constexpr int64_t kL = simd::kLanes;

#if defined(__AVX512F__)
constexpr int kTileVecs = 4, kTilePixels = 6;  // 24 accumulators of 32 registers
#elif defined(__AVX2__)
constexpr int kTileVecs = 2, kTilePixels = 4;  // 8 of 16
#else
constexpr int kTileVecs = 1, kTilePixels = 4;
#endif
constexpr int kDwPixels = 8;

// Vectors per chunk of a 1 x 1 filter's `vecs` vectors of outputs: as few
// chunks of at most kTileVecs as cover them, as even as they come (5 as 3 +
// 2, not 4 + 1: a one-vector tile does one FMA per broadcast).
inline int64_t ChunkVecs(int64_t vecs) {
  const int64_t chunks = (vecs + kTileVecs - 1) / kTileVecs;
  return (vecs + chunks - 1) / std::max<int64_t>(chunks, 1);
}

enum class Act { kNone, kRelu, kRelu6, kHardSwish };

Act ReadAct(const std::string& a) {
  if (a == "relu") return Act::kRelu;
  if (a == "relu6") return Act::kRelu6;
  if (a == "hard_swish") return Act::kHardSwish;
  return Act::kNone;  // "" (inference refuses the others)
}

// Max(0, v) keeps a NaN v (AVX-512's max returns its second operand then),
// as Paddle's relu does.
inline Vec Apply(Act a, Vec v) {
  switch (a) {
    case Act::kNone:
      return v;
    case Act::kRelu:
      return simd::Max(simd::Zero(), v);
    case Act::kRelu6:
      return simd::Min(simd::Set(6.0f), simd::Max(simd::Zero(), v));
    case Act::kHardSwish:  // x * min(max(x + 3, 0), 6) / 6
      return v * simd::Min(simd::Set(6.0f), simd::Max(simd::Zero(), v + simd::Set(3.0f))) *
             simd::Set(1.0f / 6.0f);
  }
  return v;
}

struct Geometry {
  int64_t n = 0, h = 0, w = 0, c = 0, e = 0, ep = 0;  // ep: e rounded up to whole vectors
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, pt = 0, pl = 0;
  int64_t oh = 0, ow = 0;
  int64_t wp = 0;           // a ring row's pixels: left pad, w, right pad
  int64_t block_pitch = 0;  // floats of a ring row's block: wp vectors
  int64_t row_pitch = 0;    // floats of a ring row: ep / kL blocks
  Act act1 = Act::kNone, act2 = Act::kNone;
  // expand: the ring rows are the pointwise stage's (else copies of the
  // input rows). o > 0: the depthwise rows go through a row buffer
  // ([ow][ep]) into the projection to o channels, its bias, optional
  // residual and act3.
  bool expand = true;
  int64_t o = 0;
  bool residual = false;
  Act act3 = Act::kNone;
};

// acc = bias + P pixels' (in_stride apart, k channels) products with one
// chunk of V vectors of a packed 1 x 1 filter (wc: [k][V * kL]).
template <int V, int P>
inline void Products(Vec (&acc)[P][V], const float* in, int64_t in_stride, int64_t k,
                     const float* wc, const float* bias) {
#pragma GCC unroll 32
  for (int v = 0; v < V; ++v) {
    const Vec b = simd::Load(bias + v * kL);
#pragma GCC unroll 32
    for (int p = 0; p < P; ++p) acc[p][v] = b;
  }
  for (int64_t i = 0; i < k; ++i) {
    Vec wv[V];
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) wv[v] = simd::Load(wc + i * V * kL + v * kL);
#pragma GCC unroll 32
    for (int p = 0; p < P; ++p) {
      const Vec xv = simd::Set(in[p * in_stride + i]);
#pragma GCC unroll 32
      for (int v = 0; v < V; ++v) acc[p][v] = simd::Fma(xv, wv[v], acc[p][v]);
    }
  }
}

// P input pixels (c channels each) expanded through one chunk of V vectors
// of filter columns, act1 applied, into a ring row (pixel p's vector v at
// out + v * block_pitch + p * kL).
template <int V, int P>
void PointwiseTile(const Geometry& g, const float* x, const float* wc, const float* bias,
                   float* out) {
  Vec acc[P][V];
  Products<V, P>(acc, x, g.c, g.c, wc, bias);
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v)
      simd::Store(out + v * g.block_pitch + p * kL, Apply(g.act1, acc[p][v]));
  }
}

// A 1 x 1 stage's tile instances: table[V - 1][P - 1] is Tile<V, P>::kRun,
// V vectors by P pixels, for V up to kTileVecs and P up to kTilePixels.
template <template <int, int> class Tile, int V, int... P>
constexpr auto TileRow(std::integer_sequence<int, P...>) {
  return std::array{Tile<V, P + 1>::kRun...};
}
template <template <int, int> class Tile, int... V>
constexpr auto TileTable(std::integer_sequence<int, V...>) {
  return std::array{TileRow<Tile, V + 1>(std::make_integer_sequence<int, kTilePixels>{})...};
}

template <int V, int P>
struct Pointwise {
  static constexpr auto kRun = &PointwiseTile<V, P>;
};
constexpr auto kTiles = TileTable<Pointwise>(std::make_integer_sequence<int, kTileVecs>{});

// Input row x (w pixels of c) expanded into the ring row at out (its first
// unpadded pixel).
void PointwiseRow(const Geometry& g, const float* x, const float* w1, const float* b1, float* out) {
  const int64_t vecs = g.ep / kL;
  const int64_t per_chunk = ChunkVecs(vecs);
  for (int64_t v0 = 0; v0 < vecs; v0 += per_chunk) {
    const int64_t nv = std::min(per_chunk, vecs - v0);
    const float* wc = w1 + v0 * kL * g.c;
    const auto& tiles = kTiles[nv - 1];
    int64_t p = 0;
    for (; p + kTilePixels <= g.w; p += kTilePixels)
      tiles[kTilePixels - 1](g, x + p * g.c, wc, b1 + v0 * kL, out + v0 * g.block_pitch + p * kL);
    if (p < g.w)
      tiles[g.w - p - 1](g, x + p * g.c, wc, b1 + v0 * kL, out + v0 * g.block_pitch + p * kL);
  }
}

// Stores one output vector (the last of a row may be partial).
inline void StoreOut(Act act, Vec r, float* out, int64_t left) {
  r = Apply(act, r);
  if (left >= kL) {
    simd::Store(out, r);
  } else {
    simd::StorePart(out, simd::Tail(left), r);
  }
}

// Q output pixels from ox of one output row, channels [v * kL, +kL), for a
// window KW wide with horizontal stride S: per window row, each input
// column the Q pixels read is loaded once and multiplied into every pixel
// whose window holds it (Q * KW FMAs from (Q - 1) * S + KW loads and KW
// filter loads). rows[ky] is the ring row of window row ky (valid for ky in
// [k0, k1)), its pixel 0 the window's first padded column.
template <int Q, int KW, int S>
void DepthwisePixels(const Geometry& g, const float* const* rows, int64_t k0, int64_t k1,
                     const float* w2, const float* b2, int64_t ox, int64_t v, float* y,
                     int64_t ys) {
  Vec acc[Q];
  const Vec b = simd::Load(b2 + v * kL);
#pragma GCC unroll 32
  for (int q = 0; q < Q; ++q) acc[q] = b;
  for (int64_t ky = k0; ky < k1; ++ky) {
    const float* r = rows[ky] + v * g.block_pitch + ox * S * kL;
    Vec wv[KW];
#pragma GCC unroll 32
    for (int kx = 0; kx < KW; ++kx) wv[kx] = simd::Load(w2 + (v * g.kh * KW + ky * KW + kx) * kL);
#pragma GCC unroll 32
    for (int j = 0; j < (Q - 1) * S + KW; ++j) {
      const Vec in = simd::Load(r + j * kL);
#pragma GCC unroll 32
      for (int kx = 0; kx < KW; ++kx) {
        const int d = j - kx;
        if (d >= 0 && d % S == 0 && d / S < Q) acc[d / S] = simd::Fma(in, wv[kx], acc[d / S]);
      }
    }
  }
#pragma GCC unroll 32
  for (int q = 0; q < Q; ++q) StoreOut(g.act2, acc[q], y + (ox + q) * ys + v * kL, ys - v * kL);
}

// Any window: one output pixel per channel vector.
void DepthwisePixel(const Geometry& g, const float* const* rows, int64_t k0, int64_t k1,
                    const float* w2, const float* b2, int64_t ox, int64_t v, float* y, int64_t ys) {
  Vec acc = simd::Load(b2 + v * kL);
  for (int64_t ky = k0; ky < k1; ++ky) {
    const float* r = rows[ky] + v * g.block_pitch + ox * g.sw * kL;
    for (int64_t kx = 0; kx < g.kw; ++kx)
      acc = simd::Fma(simd::Load(r + kx * kL),
                      simd::Load(w2 + (v * g.kh * g.kw + ky * g.kw + kx) * kL), acc);
  }
  StoreOut(g.act2, acc, y + ox * ys + v * kL, ys - v * kL);
}

// One output row y: ow pixels, ys floats apart, of min(ys, ep) channels
// (the result's e, or the projection's row buffer of ep).
using DepthwiseRowFn = void (*)(const Geometry&, const float* const*, int64_t, int64_t,
                                const float*, const float*, float*, int64_t);

using PixelsFn = void (*)(const Geometry&, const float* const*, int64_t, int64_t, const float*,
                          const float*, int64_t, int64_t, float*, int64_t);

template <int KW, int S, int... Q>
constexpr std::array<PixelsFn, sizeof...(Q)> PixelsOf(std::integer_sequence<int, Q...>) {
  return {&DepthwisePixels<Q + 1, KW, S>...};
}

// The row in blocks of equal width (at most kDwPixels; 14 pixels as 7 + 7,
// not 8 + six single ones).
template <int KW, int S>
void DepthwiseRow(const Geometry& g, const float* const* rows, int64_t k0, int64_t k1,
                  const float* w2, const float* b2, float* y, int64_t ys) {
  static constexpr auto kBlocks = PixelsOf<KW, S>(std::make_integer_sequence<int, kDwPixels>{});
  const int64_t vecs = g.ep / kL;
  const int64_t blocks = (g.ow + kDwPixels - 1) / kDwPixels;
  const int64_t q = (g.ow + blocks - 1) / blocks;
  for (int64_t ox = 0; ox < g.ow; ox += q) {
    const PixelsFn pixels = kBlocks[std::min(q, g.ow - ox) - 1];
    for (int64_t v = 0; v < vecs; ++v) pixels(g, rows, k0, k1, w2, b2, ox, v, y, ys);
  }
}

void DepthwiseRowAny(const Geometry& g, const float* const* rows, int64_t k0, int64_t k1,
                     const float* w2, const float* b2, float* y, int64_t ys) {
  const int64_t vecs = g.ep / kL;
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    for (int64_t v = 0; v < vecs; ++v) DepthwisePixel(g, rows, k0, k1, w2, b2, ox, v, y, ys);
  }
}

// MobileNets' windows (3 x 3 and 5 x 5, stride 1 or 2) unrolled.
DepthwiseRowFn ChooseDepthwiseRow(const Geometry& g) {
  if (g.kw == 3 && g.sw == 1) return DepthwiseRow<3, 1>;
  if (g.kw == 3 && g.sw == 2) return DepthwiseRow<3, 2>;
  if (g.kw == 5 && g.sw == 1) return DepthwiseRow<5, 1>;
  if (g.kw == 5 && g.sw == 2) return DepthwiseRow<5, 2>;
  return DepthwiseRowAny;
}

// Without a pointwise stage: input row x (w pixels of c = e channels) copied
// into the ring row at out (its first unpadded pixel), the lanes past e
// zero.
void CopyRow(const Geometry& g, const float* x, float* out) {
  const int64_t vecs = g.ep / kL;
  for (int64_t v = 0; v < vecs; ++v) {
    const simd::Mask m = simd::Tail(g.e - v * kL);
    float* block = out + v * g.block_pitch;
    for (int64_t p = 0; p < g.w; ++p)
      simd::Store(block + p * kL, simd::LoadPart(m, x + p * g.e + v * kL));
  }
}

// The projection of P pixels of the depthwise row buffer (pixels ep apart,
// e channels) onto one chunk of V vectors of its o outputs: bias, the
// residual (pixels o apart, or none), act3, into y (pixels o apart); the
// chunk's last vector holds `left` outputs (kL or fewer).
template <int V, int P>
void ProjectTile(const Geometry& g, const float* in, const float* wc, const float* bias,
                 const float* residual, float* y, int64_t left) {
  Vec acc[P][V];
  Products<V, P>(acc, in, g.ep, g.e, wc, bias);
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) {
      const simd::Mask m = simd::Tail(v == V - 1 ? left : kL);
      Vec r = acc[p][v];
      if (residual) r = r + simd::LoadPart(m, residual + p * g.o + v * kL);
      r = Apply(g.act3, r);
      if (v == V - 1 && left < kL) {
        simd::StorePart(y + p * g.o + v * kL, m, r);
      } else {
        simd::Store(y + p * g.o + v * kL, r);
      }
    }
  }
}

template <int V, int P>
struct Project {
  static constexpr auto kRun = &ProjectTile<V, P>;
};
constexpr auto kProjectTiles = TileTable<Project>(std::make_integer_sequence<int, kTileVecs>{});

// The row buffer (ow pixels of ep) projected into output row y (ow pixels
// of o), residual row r (or none) added. w3: chunk-major, [chunk][e][its
// vectors * kL].
void ProjectRow(const Geometry& g, const float* buf, const float* w3, const float* b3,
                const float* r, float* y) {
  const int64_t vecs = (g.o + kL - 1) / kL;
  const int64_t per_chunk = ChunkVecs(vecs);
  for (int64_t v0 = 0; v0 < vecs; v0 += per_chunk) {
    const int64_t nv = std::min(per_chunk, vecs - v0);
    const int64_t left = g.o - (v0 + nv - 1) * kL;
    const float* wc = w3 + v0 * kL * g.e;
    const auto& tiles = kProjectTiles[nv - 1];
    for (int64_t p = 0; p < g.ow; p += kTilePixels) {
      const int64_t np = std::min<int64_t>(kTilePixels, g.ow - p);
      tiles[np - 1](g, buf + p * g.ep, wc, b3 + v0 * kL, r ? r + p * g.o + v0 * kL : nullptr,
                    y + p * g.o + v0 * kL, std::min(left, kL));
    }
  }
}

// The packed filters and biases (unused ones null).
struct Weights {
  const float *w1 = nullptr, *b1 = nullptr, *w2 = nullptr, *b2 = nullptr, *w3 = nullptr,
              *b3 = nullptr;
};

// Output rows [oy0, oy1) of image n, on a ring of kh rows at `ring` (and,
// projecting, the row buffer at `buf`). r: the residual, or null.
void RunRows(const Geometry& g, DepthwiseRowFn depthwise, const float* x, const Weights& k,
             const float* r, float* y, int64_t n, int64_t oy0, int64_t oy1, float* ring,
             float* buf) {
  const int64_t row_floats = g.row_pitch;
  // The padding columns stay zero: the rows are written at [pl, pl + w).
  for (int64_t s = 0; s < g.kh; ++s) {
    float* row = ring + s * row_floats;
    for (int64_t b = 0; b < g.ep / kL; ++b) {
      float* block = row + b * g.block_pitch;
      std::fill(block, block + g.pl * kL, 0.0f);
      std::fill(block + (g.pl + g.w) * kL, block + g.wp * kL, 0.0f);
    }
  }
  const float* rows[64];  // window rows (kh <= 64: checked at creation)
  int64_t next = std::max<int64_t>(0, oy0 * g.sh - g.pt);  // first row not yet in the ring
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    const int64_t top = oy * g.sh - g.pt;  // input row of window row 0
    const int64_t k0 = std::max<int64_t>(0, -top), k1 = std::min(g.kh, g.h - top);
    for (int64_t iy = std::max(next, top + k0); iy < top + k1; ++iy) {
      float* slot = ring + (iy % g.kh) * row_floats + g.pl * kL;
      if (g.expand) {
        PointwiseRow(g, x + ((n * g.h + iy) * g.w) * g.c, k.w1, k.b1, slot);
      } else {
        CopyRow(g, x + ((n * g.h + iy) * g.w) * g.e, slot);
      }
      next = iy + 1;
    }
    for (int64_t ky = k0; ky < k1; ++ky) rows[ky] = ring + ((top + ky) % g.kh) * row_floats;
    const int64_t out_row = (n * g.oh + oy) * g.ow;
    if (g.o == 0) {
      depthwise(g, rows, k0, k1, k.w2, k.b2, y + out_row * g.e, g.e);
    } else {
      depthwise(g, rows, k0, k1, k.w2, k.b2, buf, g.ep);
      ProjectRow(g, buf, k.w3, k.b3, r ? r + out_row * g.o : nullptr, y + out_row * g.o);
    }
  }
}

const float* Data(const ir::Value* v) {
  return reinterpret_cast<const float*>(v->data->data());
}

// A 1 x 1 filter [outs, ins, 1, 1] as chunks of ChunkVecs vectors of
// outputs, chunk-major: [chunk][ins][its vectors * kL], outputs past `outs`
// zero. `out` holds round_up(outs, kL) * ins floats.
void PackPointwise(const float* w, int64_t outs, int64_t ins, float* out) {
  const int64_t vecs = (outs + kL - 1) / kL;
  const int64_t per_chunk = ChunkVecs(vecs);
  for (int64_t v0 = 0; v0 < vecs; v0 += per_chunk) {
    const int64_t width = std::min(per_chunk, vecs - v0) * kL;
    float* chunk = out + v0 * kL * ins;
    for (int64_t k = 0; k < ins; ++k) {
      for (int64_t j = 0; j < width; ++j)
        chunk[k * width + j] = v0 * kL + j < outs ? w[(v0 * kL + j) * ins + k] : 0.0f;
    }
  }
}

// The three ops' kernel. x: [N, H, W, C] NHWC; w2 [e, 1, kh, kw] (input
// `dw`); with a pointwise stage (`expand`) w1 [e, C, 1, 1] and b1 at inputs
// 1, 2; with a projection (`project`) w3 [o, e, 1, 1] and b3 at inputs
// `dw` + 2, + 3 and the residual, if any, after them.
std::unique_ptr<Kernel> MakeFusedDepthwise(const ir::Op& op, bool expand, bool project) {
  const size_t dw = expand ? 3 : 1;
  const size_t constants = dw + (project ? 4 : 2);  // inputs [1, constants): filters, biases
  const Shape& xs = op.inputs[0]->shape();
  const Shape& w2s = op.inputs[dw]->shape();
  const Shape& ys = op.outputs[0]->shape();
  for (size_t i = 1; i < constants; ++i) {
    if (!op.inputs[i]->has_bytes())
      Unsupported(op, "filters and biases must be constants ({} is not)", op.inputs[i]->name);
  }
  Geometry g;
  g.expand = expand;
  g.n = xs[0], g.h = xs[1], g.w = xs[2], g.c = xs[3];
  g.e = w2s[0], g.ep = (g.e + kL - 1) / kL * kL;
  g.kh = w2s[2], g.kw = w2s[3];
  if (g.kh > 64) Unsupported(op, "depthwise filter height {} > 64", g.kh);
  const auto& s = op.GetInts("strides");
  const auto& p = op.GetInts("pads");
  g.sh = s[0], g.sw = s[1], g.pt = p[0], g.pl = p[2];
  g.oh = ys[1], g.ow = ys[2];
  // Wide enough for every window column the output reads (and the right pad).
  g.wp = std::max(g.pl + g.w + p[3], (g.ow - 1) * g.sw + g.kw);
  g.block_pitch = g.wp * kL;
  g.row_pitch = g.block_pitch * (g.ep / kL);
  if (expand) g.act1 = ReadAct(op.GetStr("pointwise_activation"));
  if (project) {
    g.act2 = ReadAct(op.GetStr("depthwise_activation"));
    g.act3 = ReadAct(op.GetStr("activation"));
    g.o = ys[3];
    g.residual = op.input(constants) != nullptr;
  } else {
    g.act2 = ReadAct(op.GetStr("activation"));
  }
  const int64_t o_pad = (g.o + kL - 1) / kL * kL;

  // Packed copies: w1 (PackPointwise), b1 [ep], w2 per channel vector
  // ([e / kL][kh * kw][kL]), b2 [ep], w3 (PackPointwise), b3 [o_pad].
  const int64_t taps = g.kh * g.kw;
  const int64_t w1_floats = expand ? g.ep * g.c : 0, b1_floats = expand ? g.ep : 0;
  const int64_t floats = w1_floats + b1_floats + taps * g.ep + g.ep + o_pad * g.e + o_pad;
  auto packed = std::make_shared<AlignedBuffer>(static_cast<size_t>(floats) * sizeof(float));
  float* base = packed->as<float>();
  std::fill(base, base + floats, 0.0f);
  float* pw1 = base;
  float* pb1 = pw1 + w1_floats;
  float* pw2 = pb1 + b1_floats;
  float* pb2 = pw2 + taps * g.ep;
  float* pw3 = pb2 + g.ep;
  float* pb3 = pw3 + o_pad * g.e;
  if (expand) {
    PackPointwise(Data(op.inputs[1]), g.e, g.c, pw1);
    std::copy_n(Data(op.inputs[2]), g.e, pb1);
  }
  if (project) {
    PackPointwise(Data(op.inputs[dw + 2]), g.o, g.e, pw3);
    std::copy_n(Data(op.inputs[dw + 3]), g.o, pb3);
  }
  const float* w2 = Data(op.inputs[dw]);
  for (int64_t c = 0; c < g.e; ++c) {
    for (int64_t t = 0; t < taps; ++t) pw2[((c / kL) * taps + t) * kL + c % kL] = w2[c * taps + t];
  }
  std::copy_n(Data(op.inputs[dw + 1]), g.e, pb2);
  Weights k;
  k.w1 = expand ? pw1 : nullptr, k.b1 = expand ? pb1 : nullptr;
  k.w2 = pw2, k.b2 = pb2;
  k.w3 = project ? pw3 : nullptr, k.b3 = project ? pb3 : nullptr;

  const DepthwiseRowFn depthwise = ChooseDepthwiseRow(g);
  const int threads = std::max(1, omp_get_max_threads());
  const int64_t ring_floats = g.kh * g.row_pitch;
  const int64_t buf_floats = g.o ? g.ow * g.ep : 0;
  const int64_t per_thread = ring_floats + buf_floats;
  const size_t ws = static_cast<size_t>(threads * per_thread) * sizeof(float);
  // One task per image when the batch keeps the threads busy; otherwise
  // each image's rows split so the tasks divide evenly among the threads
  // (each part fills its window's overlap with the previous part again:
  // kh - stride rows).
  const int64_t parts =
      std::clamp<int64_t>(threads / std::gcd<int64_t>(std::max<int64_t>(g.n, 1), threads), 1,
                          std::max<int64_t>(g.oh, 1));
  const int64_t rows_per_part = (g.oh + parts - 1) / parts;
  const int64_t tasks = g.n * parts;
  const int64_t work = (g.oh * g.ow * g.e * ((expand ? g.c : 0) + taps + g.o)) / parts;
  const bool residual = g.residual;
  auto kernel = std::make_unique<LambdaKernel>(
      [=](const KernelArgs& args) {
        const auto* x = static_cast<const float*>(args.inputs[0]);
        const auto* r = residual ? static_cast<const float*>(args.inputs[constants]) : nullptr;
        auto* y = static_cast<float*>(args.outputs[0]);
        auto* scratch = static_cast<float*>(args.workspace);
        // At most the team the workspace was sized for (fewer when the
        // device halved its team under contention).
        const int team = std::min(threads, omp_get_max_threads());
#pragma omp parallel for num_threads(team) \
    schedule(static) if (tasks > 1 && tasks * work >= kParallelThreshold)
        for (int64_t t = 0; t < tasks; ++t) {
          const int64_t n = t / parts, oy0 = (t % parts) * rows_per_part;
          const int64_t oy1 = std::min(g.oh, oy0 + rows_per_part);
          if (oy0 >= oy1) continue;
          float* mine = scratch + omp_get_thread_num() * per_thread;
          RunRows(g, depthwise, x, k, r, y, n, oy0, oy1, mine, mine + ring_floats);
        }
        (void)packed;  // the kernel owns the packed copies
      },
      ws);
  for (size_t i = 1; i < constants; ++i) kernel->MarkInputCopied(i);
  return kernel;
}

std::unique_ptr<Kernel> MakeConv1x1Depthwise(const ir::Op& op) {
  return MakeFusedDepthwise(op, true, false);
}

std::unique_ptr<Kernel> MakeConvDepthwise1x1(const ir::Op& op) {
  return MakeFusedDepthwise(op, false, true);
}

std::unique_ptr<Kernel> MakeConv1x1Depthwise1x1(const ir::Op& op) {
  return MakeFusedDepthwise(op, true, true);
}

}  // namespace

TILLER_CPU_KERNEL_COPY("conv2d_1x1_depthwise", MakeConv1x1Depthwise,
                       Signature("T, T, T, T, T -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL_COPY("conv2d_depthwise_1x1", MakeConvDepthwise1x1,
                       Signature("T, T, T, T, T, T? -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL_COPY("conv2d_1x1_depthwise_1x1", MakeConv1x1Depthwise1x1,
                       Signature("T, T, T, T, T, T, T, T? -> T").Where("T", {DType::kF32}));

}  // namespace tiller::cpu::TILLER_ISA_COPY
