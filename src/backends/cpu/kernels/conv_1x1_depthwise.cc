// conv2d_1x1_depthwise(x NHWC, w1, b1, w2, b2): a pointwise convolution
// (expanding C channels to E) and the depthwise convolution reading its
// result, row by row, so the expanded tensor never exists: MobileNet's
// inverted residual blocks expand 16-240 channels to 64-960 at high
// resolution, where oneDNN's two kernels are memory-bound writing the
// expanded tensor and reading it back (MobileNetV3's 112 x 112 x 64 at
// batch 8 is 26 MB, past the L2 and most of the L3).
//
// A task computes output rows [oy0, oy1) of one image. It keeps the last KH
// expanded rows in a ring in its thread's scratch (row iy in slot iy % KH)
// and, for each output row, expands the input rows it has not yet computed,
// then applies the depthwise window to the ring: each expanded row is
// computed once per task and read from the core's caches KH / stride times.
// A ring row is channel-blocked (kL channels of all its pixels, then the
// next kL), with the window's left and right zero padding around the
// pixels, so the window reads consecutive vectors.
//
// The pointwise product is register-tiled: kTilePixels pixels by up to
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

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
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
};

// P pixels' (each c apart) products with one chunk of V vectors of
// filter columns, bias added and the activation applied, into a ring row
// (pixel p's vector v at out + v * block_pitch + p * kL). wc: the chunk's
// packed filter, [c][V * kL].
template <int V, int P>
void PointwiseTile(const Geometry& g, const float* x, const float* wc, const float* bias,
                   float* out) {
  Vec acc[P][V];
#pragma GCC unroll 32
  for (int v = 0; v < V; ++v) {
    const Vec b = simd::Load(bias + v * kL);
#pragma GCC unroll 32
    for (int p = 0; p < P; ++p) acc[p][v] = b;
  }
  for (int64_t k = 0; k < g.c; ++k) {
    Vec wv[V];
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v) wv[v] = simd::Load(wc + k * V * kL + v * kL);
#pragma GCC unroll 32
    for (int p = 0; p < P; ++p) {
      const Vec xv = simd::Set(x[p * g.c + k]);
#pragma GCC unroll 32
      for (int v = 0; v < V; ++v) acc[p][v] = simd::Fma(xv, wv[v], acc[p][v]);
    }
  }
#pragma GCC unroll 32
  for (int p = 0; p < P; ++p) {
#pragma GCC unroll 32
    for (int v = 0; v < V; ++v)
      simd::Store(out + v * g.block_pitch + p * kL, Apply(g.act1, acc[p][v]));
  }
}

using TileFn = void (*)(const Geometry&, const float*, const float*, const float*, float*);

template <int V, int... P>
constexpr std::array<TileFn, sizeof...(P)> TilesOf(std::integer_sequence<int, P...>) {
  return {&PointwiseTile<V, P + 1>...};
}
template <int... V>
constexpr std::array<std::array<TileFn, kTilePixels>, sizeof...(V)> AllTiles(
    std::integer_sequence<int, V...>) {
  return {TilesOf<V + 1>(std::make_integer_sequence<int, kTilePixels>{})...};
}
// kTiles[V - 1][P - 1]
constexpr auto kTiles = AllTiles(std::make_integer_sequence<int, kTileVecs>{});

// Input row x (w pixels of c) expanded into the ring row at out (its first
// unpadded pixel).
void PointwiseRow(const Geometry& g, const float* x, const float* w1, const float* b1, float* out) {
  const int64_t vecs = g.ep / kL;
  for (int64_t v0 = 0; v0 < vecs; v0 += kTileVecs) {
    const int64_t nv = std::min<int64_t>(kTileVecs, vecs - v0);
    const float* wc = w1 + v0 * kL * g.c;
    const std::array<TileFn, kTilePixels>& tiles = kTiles[nv - 1];
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
                     const float* w2, const float* b2, int64_t ox, int64_t v, float* y) {
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
  for (int q = 0; q < Q; ++q) StoreOut(g.act2, acc[q], y + (ox + q) * g.e + v * kL, g.e - v * kL);
}

// Any window: one output pixel per channel vector.
void DepthwisePixel(const Geometry& g, const float* const* rows, int64_t k0, int64_t k1,
                    const float* w2, const float* b2, int64_t ox, int64_t v, float* y) {
  Vec acc = simd::Load(b2 + v * kL);
  for (int64_t ky = k0; ky < k1; ++ky) {
    const float* r = rows[ky] + v * g.block_pitch + ox * g.sw * kL;
    for (int64_t kx = 0; kx < g.kw; ++kx)
      acc = simd::Fma(simd::Load(r + kx * kL),
                      simd::Load(w2 + (v * g.kh * g.kw + ky * g.kw + kx) * kL), acc);
  }
  StoreOut(g.act2, acc, y + ox * g.e + v * kL, g.e - v * kL);
}

// One output row y (ow pixels of e).
using DepthwiseRowFn = void (*)(const Geometry&, const float* const*, int64_t, int64_t,
                                const float*, const float*, float*);

using PixelsFn = void (*)(const Geometry&, const float* const*, int64_t, int64_t, const float*,
                          const float*, int64_t, int64_t, float*);

template <int KW, int S, int... Q>
constexpr std::array<PixelsFn, sizeof...(Q)> PixelsOf(std::integer_sequence<int, Q...>) {
  return {&DepthwisePixels<Q + 1, KW, S>...};
}

// The row in blocks of equal width (at most kDwPixels; 14 pixels as 7 + 7,
// not 8 + six single ones).
template <int KW, int S>
void DepthwiseRow(const Geometry& g, const float* const* rows, int64_t k0, int64_t k1,
                  const float* w2, const float* b2, float* y) {
  static constexpr auto kBlocks = PixelsOf<KW, S>(std::make_integer_sequence<int, kDwPixels>{});
  const int64_t vecs = g.ep / kL;
  const int64_t blocks = (g.ow + kDwPixels - 1) / kDwPixels;
  const int64_t q = (g.ow + blocks - 1) / blocks;
  for (int64_t ox = 0; ox < g.ow; ox += q) {
    const PixelsFn pixels = kBlocks[std::min(q, g.ow - ox) - 1];
    for (int64_t v = 0; v < vecs; ++v) pixels(g, rows, k0, k1, w2, b2, ox, v, y);
  }
}

void DepthwiseRowAny(const Geometry& g, const float* const* rows, int64_t k0, int64_t k1,
                     const float* w2, const float* b2, float* y) {
  const int64_t vecs = g.ep / kL;
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    for (int64_t v = 0; v < vecs; ++v) DepthwisePixel(g, rows, k0, k1, w2, b2, ox, v, y);
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

// Output rows [oy0, oy1) of image n, on a ring of kh rows at `ring`.
void RunRows(const Geometry& g, DepthwiseRowFn depthwise, const float* x, const float* w1,
             const float* b1, const float* w2, const float* b2, float* y, int64_t n, int64_t oy0,
             int64_t oy1, float* ring) {
  const int64_t row_floats = g.row_pitch;
  // The padding columns stay zero: the pointwise rows write [pl, pl + w).
  for (int64_t s = 0; s < g.kh; ++s) {
    float* r = ring + s * row_floats;
    for (int64_t b = 0; b < g.ep / kL; ++b) {
      float* block = r + b * g.block_pitch;
      std::fill(block, block + g.pl * kL, 0.0f);
      std::fill(block + (g.pl + g.w) * kL, block + g.wp * kL, 0.0f);
    }
  }
  const float* rows[64];  // window rows (kh <= 64: checked at creation)
  int64_t next = std::max<int64_t>(0, oy0 * g.sh - g.pt);  // first row not yet expanded
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    const int64_t top = oy * g.sh - g.pt;  // input row of window row 0
    const int64_t k0 = std::max<int64_t>(0, -top), k1 = std::min(g.kh, g.h - top);
    for (int64_t iy = std::max(next, top + k0); iy < top + k1; ++iy) {
      PointwiseRow(g, x + ((n * g.h + iy) * g.w) * g.c, w1, b1,
                   ring + (iy % g.kh) * row_floats + g.pl * kL);
      next = iy + 1;
    }
    for (int64_t ky = k0; ky < k1; ++ky) rows[ky] = ring + ((top + ky) % g.kh) * row_floats;
    depthwise(g, rows, k0, k1, w2, b2, y + ((n * g.oh + oy) * g.ow) * g.e);
  }
}

std::unique_ptr<Kernel> MakeConv1x1Depthwise(const ir::Op& op) {
  const Shape& xs = op.inputs[0]->shape();
  const Shape& w2s = op.inputs[3]->shape();
  const Shape& ys = op.outputs[0]->shape();
  for (size_t i = 1; i < 5; ++i) {
    if (!op.inputs[i]->has_bytes())
      Unsupported(op, "filters and biases must be constants ({} is not)", op.inputs[i]->name);
  }
  Geometry g;
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
  g.act1 = ReadAct(op.GetStr("pointwise_activation"));
  g.act2 = ReadAct(op.GetStr("activation"));

  // Packed copies: w1 chunk-major ([chunk][c][chunk's vectors * kL], the
  // columns past e zero), b1 [ep], w2 [kh * kw][ep], b2 [ep].
  const float* w1 = reinterpret_cast<const float*>(op.inputs[1]->data->data());
  const float* b1 = reinterpret_cast<const float*>(op.inputs[2]->data->data());
  const float* w2 = reinterpret_cast<const float*>(op.inputs[3]->data->data());
  const float* b2 = reinterpret_cast<const float*>(op.inputs[4]->data->data());
  const int64_t taps = g.kh * g.kw;
  auto packed = std::make_shared<AlignedBuffer>(
      static_cast<size_t>(g.ep * g.c + g.ep + taps * g.ep + g.ep) * sizeof(float));
  float* pw1 = packed->as<float>();
  float* pb1 = pw1 + g.ep * g.c;
  float* pw2 = pb1 + g.ep;
  float* pb2 = pw2 + taps * g.ep;
  std::fill(pw1, pw1 + packed->size() / sizeof(float), 0.0f);
  const int64_t vecs = g.ep / kL;
  for (int64_t v0 = 0; v0 < vecs; v0 += kTileVecs) {
    const int64_t width = std::min<int64_t>(kTileVecs, vecs - v0) * kL;
    float* chunk = pw1 + v0 * kL * g.c;
    for (int64_t k = 0; k < g.c; ++k) {
      for (int64_t j = 0; j < width && v0 * kL + j < g.e; ++j)
        chunk[k * width + j] = w1[(v0 * kL + j) * g.c + k];
    }
  }
  for (int64_t o = 0; o < g.e; ++o) {
    pb1[o] = b1[o];
    pb2[o] = b2[o];
    for (int64_t t = 0; t < taps; ++t) pw2[((o / kL) * taps + t) * kL + o % kL] = w2[o * taps + t];
  }

  const DepthwiseRowFn depthwise = ChooseDepthwiseRow(g);
  const int threads = std::max(1, omp_get_max_threads());
  const int64_t ring_floats = g.kh * g.row_pitch;
  const size_t ws = static_cast<size_t>(threads) * ring_floats * sizeof(float);
  // One task per image when the batch keeps the threads busy; otherwise
  // each image's rows split so the tasks divide evenly among the threads
  // (each part expands its window's overlap with the previous part again:
  // kh - stride rows).
  const int64_t parts =
      std::clamp<int64_t>(threads / std::gcd<int64_t>(std::max<int64_t>(g.n, 1), threads), 1,
                          std::max<int64_t>(g.oh, 1));
  const int64_t rows_per_part = (g.oh + parts - 1) / parts;
  const int64_t tasks = g.n * parts;
  const int64_t work = (g.oh * g.ow * g.e * (g.c + taps)) / parts;
  auto kernel = std::make_unique<LambdaKernel>(
      [=](const KernelArgs& args) {
        const auto* x = static_cast<const float*>(args.inputs[0]);
        auto* y = static_cast<float*>(args.outputs[0]);
        auto* scratch = static_cast<float*>(args.workspace);
        const float* k1 = packed->as<float>();
        const float* kb1 = k1 + g.ep * g.c;
        const float* k2 = kb1 + g.ep;
        const float* kb2 = k2 + taps * g.ep;
        // At most the team the workspace was sized for (fewer when the
        // device halved its team under contention).
        const int team = std::min(threads, omp_get_max_threads());
#pragma omp parallel for num_threads(team) \
    schedule(static) if (tasks > 1 && tasks * work >= kParallelThreshold)
        for (int64_t t = 0; t < tasks; ++t) {
          const int64_t n = t / parts, oy0 = (t % parts) * rows_per_part;
          const int64_t oy1 = std::min(g.oh, oy0 + rows_per_part);
          if (oy0 >= oy1) continue;
          RunRows(g, depthwise, x, k1, kb1, k2, kb2, y, n, oy0, oy1,
                  scratch + omp_get_thread_num() * ring_floats);
        }
      },
      ws);
  for (size_t i = 1; i < 5; ++i) kernel->MarkInputCopied(i);
  return kernel;
}

}  // namespace

TILLER_CPU_KERNEL("conv2d_1x1_depthwise", MakeConv1x1Depthwise,
                  Signature("T, T, T, T, T -> T").Where("T", {DType::kF32}));

}  // namespace tiller::cpu
