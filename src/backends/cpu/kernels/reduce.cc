// Reductions (reduce_sum/mean/max/min/prod, logsumexp) and argmax/argmin.
//
// At creation the input is viewed as alternating groups of kept and reduced
// dims (size-1 dims dropped, neighbours merged). The common layouts get
// contiguous loops: [outer, R] reduces rows; [outer, R, inner] accumulates
// whole rows of `inner` into the output. Anything else (e.g. axes {0, 2} of a
// 4-D tensor) walks each output's reduced positions with an odometer.
// reduce_mean of integers truncates (sum / count in integer arithmetic).
// logsumexp reads each output's positions twice (max, then the sum of
// exp(x - max)) in the same layouts, so it needs no scratch.
#include "backends/cpu/kernels/isa_copy.h"
#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu::TILLER_ISA_COPY {
namespace {

enum class RKind { kSum, kMean, kMax, kMin, kProd };

template <typename T>
struct Reducer {
  RKind kind;
  T init() const {
    switch (kind) {
      case RKind::kMax:
        return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                    : std::numeric_limits<T>::lowest();
      case RKind::kMin:
        return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                    : std::numeric_limits<T>::max();
      case RKind::kProd:
        return T(1);
      default:
        return T(0);
    }
  }
};

// One reduction's combine step, as a functor so the inner loops inline it.
template <typename T, RKind K>
inline T Combine(T a, T b) {
  if constexpr (K == RKind::kMax)
    return a > b ? a : b;
  else if constexpr (K == RKind::kMin)
    return a < b ? a : b;
  else if constexpr (K == RKind::kProd)
    return T(a * b);
  else
    return T(a + b);
}

// A row with 8 independent accumulators: hand-reassociated so gcc can
// vectorize it without -ffast-math.
template <typename T, RKind K>
T RowReduce(const T* x, int64_t n, T init) {
  if constexpr (std::is_same_v<T, float> && (K == RKind::kSum || K == RKind::kMean)) {
    return RowSum(x, n);
  } else if constexpr (std::is_same_v<T, float> && K == RKind::kMax) {
    return RowMax(x, n);
  } else {
    T acc[8] = {init, init, init, init, init, init, init, init};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] = Combine<T, K>(acc[j], x[i + j]);
    for (; i < n; ++i) acc[0] = Combine<T, K>(acc[0], x[i]);
    T r = init;
    for (T a : acc) r = Combine<T, K>(r, a);
    return r;
  }
}

struct ReducePlan {
  // Layout [outer, r, inner] when it fits (r reduced; outer, inner kept);
  // otherwise `generic` with the full group lists.
  bool generic = false;
  int64_t outer = 1, r = 1, inner = 1;
  IterPlan out_plan;  // generic: kept dims, input strides
  IterPlan red_plan;  // generic: reduced dims, input strides
};

ReducePlan PlanReduce(const ir::Op& op, const Shape& in, const std::vector<int>& axes) {
  std::vector<int64_t> size;
  std::vector<bool> red;
  for (int d = 0; d < static_cast<int>(in.size()); ++d) {
    if (in[d] == 1) continue;
    bool is_red = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!size.empty() && red.back() == is_red) {
      size.back() *= in[d];
    } else {
      size.push_back(in[d]);
      red.push_back(is_red);
    }
  }
  ReducePlan p;
  size_t g = size.size();
  if (g == 0) return p;
  if (g <= 3 && !(g == 3 && !red[1]) && !(g == 2 && red[0] && red[1])) {
    // kept? reduced kept?
    size_t i = 0;
    if (!red[0]) p.outer = size[i++];
    if (i < g && red[i]) p.r = size[i++];
    if (i < g) p.inner = size[i++];
    if (i == g) return p;
  }
  p.generic = true;
  std::vector<int64_t> st = Strides(in);
  Shape kept_dims, red_dims;
  std::vector<int64_t> kept_st, red_st;
  for (int d = 0; d < static_cast<int>(in.size()); ++d) {
    bool is_red = std::find(axes.begin(), axes.end(), d) != axes.end();
    (is_red ? red_dims : kept_dims).push_back(in[d]);
    (is_red ? red_st : kept_st).push_back(st[d]);
  }
  p.out_plan = MakeIterPlan(op, kept_dims, {kept_st});
  p.red_plan = MakeIterPlan(op, red_dims, {red_st});
  return p;
}

template <typename T, RKind K>
void RunReduce(const ReducePlan& p, const T* x, T* y, int64_t out_n) {
  const T init = Reducer<T>{K}.init();
  const int64_t count = p.generic ? p.red_plan.total : p.r;
  auto finish = [count](T v) {
    if constexpr (K == RKind::kMean)
      return count ? T(v / T(count)) : v;
    else
      return v;
  };
  if (p.generic) {
    ParallelRange(
        out_n, count,
        [&](int64_t b, int64_t e) {
          ForEachRun(p.out_plan, b, e, [&](int64_t o, const int64_t* off, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              const T* base = x + off[0] + i * p.out_plan.inner_stride(0);
              T acc = init;
              ForEachRun(p.red_plan, 0, p.red_plan.total,
                         [&](int64_t, const int64_t* roff, int64_t m) {
                           const int64_t s = p.red_plan.inner_stride(0);
                           for (int64_t j = 0; j < m; ++j)
                             acc = Combine<T, K>(acc, base[roff[0] + j * s]);
                         });
              y[o + i] = finish(acc);
            }
          });
        },
        1);
  } else if (p.inner == 1 && p.outer == 1 && p.r * int64_t{sizeof(T)} > 4 * kParallelThreshold) {
    // One big reduction: a fixed number of contiguous chunks, whatever the
    // threads, each reduced on its own and then combined in chunk order, so
    // the result does not depend on how many threads ran it (a step split
    // over processes lends its update fewer threads than one process with
    // every device: compile/executable.h) nor on OpenMP's combining order.
    constexpr int kChunks = 64;
    T partial[kChunks];
    const int64_t chunk = (p.r + kChunks - 1) / kChunks;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < kChunks; ++c) {
      const int64_t b = std::min(p.r, c * chunk), e = std::min(p.r, b + chunk);
      partial[c] = RowReduce<T, K>(x + b, e - b, init);
    }
    T acc = init;
    for (T v : partial) acc = Combine<T, K>(acc, v);
    y[0] = finish(acc);
  } else if (p.inner == 1) {
    ParallelRange(
        p.outer, p.r,
        [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) y[o] = finish(RowReduce<T, K>(x + o * p.r, p.r, init));
        },
        1);
  } else {
    // Split outputs (outer x inner) into contiguous ranges; each range
    // accumulates full input rows so loads and stores stay contiguous.
    ParallelRange(p.outer * p.inner, p.r, [&](int64_t b, int64_t e) {
      while (b < e) {
        int64_t o = b / p.inner, j0 = b % p.inner, j1 = std::min(p.inner, j0 + (e - b));
        T* out = y + o * p.inner;
        const T* in = x + o * p.r * p.inner;
        for (int64_t j = j0; j < j1; ++j) out[j] = init;
        for (int64_t r = 0; r < p.r; ++r) {
          const T* row = in + r * p.inner;
          for (int64_t j = j0; j < j1; ++j) out[j] = Combine<T, K>(out[j], row[j]);
        }
        if constexpr (K == RKind::kMean) {
          for (int64_t j = j0; j < j1; ++j) out[j] = finish(out[j]);
        }
        b += j1 - j0;
      }
    });
  }
}

// The plan of a reduction op over its "axes" attribute; refuses axes out of
// range.
ReducePlan PlanReduceAxes(const ir::Op& op) {
  const Shape& in = op.inputs[0]->shape();
  std::vector<int> axes;
  if (!ir::ResolveAxes(op.GetInts("axes"), static_cast<int>(in.size()), &axes))
    Unsupported(op, "axes out of range");
  return PlanReduce(op, in, axes);
}

std::unique_ptr<Kernel> MakeReduce(const ir::Op& op) {
  ReducePlan plan = PlanReduceAxes(op);
  int64_t out_n = NumElements(op.outputs[0]->shape());
  RKind kind = op.is(ir::Opcode::reduce_sum)    ? RKind::kSum
               : op.is(ir::Opcode::reduce_mean) ? RKind::kMean
               : op.is(ir::Opcode::reduce_max)  ? RKind::kMax
               : op.is(ir::Opcode::reduce_min)  ? RKind::kMin
                                                : RKind::kProd;
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double, int32_t, int64_t>(InDType(op), [&](auto tag) {
    using T = decltype(tag);
    auto make = [&](auto fn) {
      k = std::make_unique<LambdaKernel>([plan, out_n, fn](const KernelArgs& args) {
        if (out_n == 0) return;
        fn(plan, static_cast<const T*>(args.inputs[0]), static_cast<T*>(args.outputs[0]), out_n);
      });
    };
    switch (kind) {
      case RKind::kSum:
        make(RunReduce<T, RKind::kSum>);
        break;
      case RKind::kMean:
        make(RunReduce<T, RKind::kMean>);
        break;
      case RKind::kMax:
        make(RunReduce<T, RKind::kMax>);
        break;
      case RKind::kMin:
        make(RunReduce<T, RKind::kMin>);
        break;
      case RKind::kProd:
        make(RunReduce<T, RKind::kProd>);
        break;
    }
  });
  return k;
}

// ---- logsumexp ----------------------------------------------------------
// y = m + log(sum exp(x - m)), m the max, in T (float32 as Paddle's kernel
// computes it). An inf max gives inf - inf = NaN and an all -inf set
// -inf - -inf = NaN, as Paddle's formula does; an empty set gives -inf.

// One output from a walk over its values: walk(f) calls f(v) for each.
template <typename T, typename Walk>
T LogSumExpOf(Walk walk) {
  T m = -std::numeric_limits<T>::infinity();
  walk([&](T v) { m = v > m ? v : m; });
  T s = 0;
  walk([&](T v) { s += std::exp(v - m); });
  return m + std::log(s);
}

// A contiguous float row, vectorized. ExpOfShifted drops terms below
// exp(-87), invisible next to the max's own term of 1.
float RowLogSumExp(const float* x, int64_t n) {
  const float m = RowMax(x, n);
  const simd::Vec shift = simd::Set(m);
  simd::Vec acc = simd::Zero();
  for (int64_t i = 0; i < n; i += simd::kLanes) {
    const simd::Mask k = simd::Tail(n - i);
    acc = acc + simd::ZeroUnless(k, simd::ExpOfShifted(simd::LoadPart(k, x + i) - shift));
  }
  return m + std::log(simd::ReduceAdd(acc));
}

// Columns [0, w) of an [r, inner] float slab (w <= kLanes): the running max
// and sum stay in vector registers.
void ColumnsLogSumExp(const float* x, float* y, int64_t r, int64_t inner, int64_t w) {
  const simd::Mask k = simd::Tail(w);
  simd::Vec m = simd::Set(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < r; ++i) m = simd::Max(m, simd::LoadPart(k, x + i * inner));
  simd::Vec s = simd::Zero();
  for (int64_t i = 0; i < r; ++i)
    s = s + simd::ZeroUnless(k, simd::ExpOfShifted(simd::LoadPart(k, x + i * inner) - m));
  float ms[simd::kLanes], ss[simd::kLanes];
  simd::Store(ms, m);
  simd::Store(ss, s);
  for (int64_t j = 0; j < w; ++j) y[j] = ms[j] + std::log(ss[j]);
}

template <typename T>
void RunLogSumExp(const ReducePlan& p, const T* x, T* y, int64_t out_n) {
  if (p.generic) {
    const int64_t count = p.red_plan.total;
    ParallelRange(
        out_n, 2 * count,
        [&](int64_t b, int64_t e) {
          ForEachRun(p.out_plan, b, e, [&](int64_t o, const int64_t* off, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              const T* base = x + off[0] + i * p.out_plan.inner_stride(0);
              y[o + i] = LogSumExpOf<T>([&](auto f) {
                ForEachRun(p.red_plan, 0, count, [&](int64_t, const int64_t* roff, int64_t m) {
                  const int64_t st = p.red_plan.inner_stride(0);
                  for (int64_t j = 0; j < m; ++j) f(base[roff[0] + j * st]);
                });
              });
            }
          });
        },
        1);
    return;
  }
  const int64_t r = p.r, inner = p.inner;
  if constexpr (std::is_same_v<T, float>) {
    if (inner == 1) {
      ParallelRange(
          p.outer, 2 * r,
          [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) y[o] = RowLogSumExp(x + o * r, r);
          },
          1);
      return;
    }
    constexpr int64_t L = simd::kLanes;
    const int64_t blocks = (inner + L - 1) / L;
    ParallelRange(
        p.outer * blocks, 2 * r * L,
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t o = t / blocks, j = (t % blocks) * L;
            ColumnsLogSumExp(x + o * r * inner + j, y + o * inner + j, r, inner,
                             std::min(L, inner - j));
          }
        },
        1);
  } else {
    ParallelRange(
        p.outer * inner, 2 * r,
        [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const T* col = x + (t / inner) * r * inner + t % inner;
            y[t] = LogSumExpOf<T>([&](auto f) {
              for (int64_t i = 0; i < r; ++i) f(col[i * inner]);
            });
          }
        },
        1);
  }
}

std::unique_ptr<Kernel> MakeLogSumExp(const ir::Op& op) {
  ReducePlan plan = PlanReduceAxes(op);
  int64_t out_n = NumElements(op.outputs[0]->shape());
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double>(InDType(op), [&](auto tag) {
    using T = decltype(tag);
    k = std::make_unique<LambdaKernel>([plan, out_n](const KernelArgs& args) {
      if (out_n == 0) return;
      RunLogSumExp<T>(plan, static_cast<const T*>(args.inputs[0]), static_cast<T*>(args.outputs[0]),
                      out_n);
    });
  });
  return k;
}

// First index of the max (min) along the axis. For inner > 1 the output row
// itself holds the running best index, so loads stay contiguous without
// scratch memory.
template <typename T, typename I, bool kMax>
void RunArg(const T* x, I* y, int64_t outer, int64_t r, int64_t inner) {
  auto better = [](T a, T b) { return kMax ? a > b : a < b; };
  ParallelRange(
      outer, r * inner,
      [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* in = x + o * r * inner;
          I* out = y + o * inner;
          if (inner == 1) {
            T best = in[0];
            int64_t bi = 0;
            for (int64_t i = 1; i < r; ++i) {
              if (better(in[i], best)) {
                best = in[i];
                bi = i;
              }
            }
            out[0] = static_cast<I>(bi);
            continue;
          }
          for (int64_t j = 0; j < inner; ++j) out[j] = 0;
          for (int64_t i = 1; i < r; ++i) {
            const T* row = in + i * inner;
            for (int64_t j = 0; j < inner; ++j) {
              if (better(row[j], in[out[j] * inner + j])) out[j] = static_cast<I>(i);
            }
          }
        }
      },
      1);
}

std::unique_ptr<Kernel> MakeArg(const ir::Op& op) {
  const Shape& in = op.inputs[0]->shape();
  int axis = NormalizeAxis(op.GetInt("axis"), static_cast<int>(in.size()));
  if (axis < 0) Unsupported(op, "axis out of range");
  int64_t outer = 1, r = in[axis], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= in[d];
  for (int d = axis + 1; d < static_cast<int>(in.size()); ++d) inner *= in[d];
  if (r == 0) Unsupported(op, "empty axis");
  bool is_max = op.is(ir::Opcode::argmax);
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double, int32_t, int64_t>(InDType(op), [&](auto tag) {
    using T = decltype(tag);
    DispatchDType<int32_t, int64_t>(OutDType(op), [&](auto itag) {
      using I = decltype(itag);
      auto fn = is_max ? RunArg<T, I, true> : RunArg<T, I, false>;
      k = std::make_unique<LambdaKernel>([=](const KernelArgs& args) {
        fn(static_cast<const T*>(args.inputs[0]), static_cast<I*>(args.outputs[0]), outer, r,
           inner);
      });
    });
  });
  return k;
}

const bool kRegistered = TILLER_ISA_COPY_RUNS && [] {
  const std::vector<DType> types = {DType::kF32, DType::kF64, DType::kI32, DType::kI64};
  for (const char* n : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
    RegisterKernel(n, MakeReduce, Signature("T -> T").Where("T", types));
  RegisterKernel("logsumexp", MakeLogSumExp,
                 Signature("T -> T").Where("T", {DType::kF32, DType::kF64}));
  // The index output's dtype is the `dtype` attribute's.
  for (const char* n : {"argmax", "argmin"}) {
    RegisterKernel(n, MakeArg,
                   Signature("T -> I").Where("T", types).Where("I", {DType::kI32, DType::kI64}));
  }
  return true;
}();

}  // namespace
}  // namespace tiller::cpu::TILLER_ISA_COPY
