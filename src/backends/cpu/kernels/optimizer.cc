// Optimizer update kernels (ir/ops/optimizer.cc has the operands), float32
// and float64. Each follows the expression order of Paddle 3.3.1's CPU kernel
// for the op (phi/kernels/cpu/*, funcs/jit/refer, impl/*_kernel_impl.h), so
// results agree with Paddle's to rounding; formulas are at each kernel.
//
// In-place safety: output k may alias the input it updates (a training
// compiler binds them to one buffer). Every loop reads all operands of
// element i into locals before writing any output of element i, and the
// one-element operands (lr, beta powers) are read before the first write.
// Paddle's Eigen kernels round every product and sum separately, so a * b + c
// is not contracted into an FMA here; where Paddle fuses (its AVX-512 Adam)
// the kernel calls std::fma itself.
#pragma GCC optimize("fp-contract=off")
#include "ir/ops/optimizer.h"

#include <omp.h>

#include "backends/cpu/kernels/kernel_utils.h"
#include "core/cpu_isa.h"

namespace tiller::cpu {
namespace {

// Elementwise updates are a handful of flops per element.
constexpr int64_t kWorkPerElement = 8;

// The update loops run in place (outputs bound to the inputs they update):
// iteration i reads element i of each input before writing element i of
// each output, so no iteration depends on another's writes. The compiler
// cannot prove that for aliased pointers and would fall back to its scalar
// loop (measured: BERT-Base's Adam 7 ns per element and thread); ivdep
// tells it, and the vector code computes the same IEEE operations per
// element (sqrt and division are correctly rounded in both). A loop also
// needs no branches (options are template arguments: AdamRange) and
// std::sqrt without errno (-fno-math-errno, CMakeLists.txt) to vectorize.
#define TILLER_UPDATE_LOOP _Pragma("GCC ivdep")

template <typename T>
const T* In(const KernelArgs& a, size_t i) {
  return static_cast<const T*>(a.inputs[i]);
}
template <typename T>
T* Out(const KernelArgs& a, size_t i) {
  return static_cast<T*>(a.outputs[i]);
}

// Runs Make<T>(op) for the op's dtype.
template <template <typename> class Make>
std::unique_ptr<Kernel> ForDType(const ir::Op& op) {
  std::unique_ptr<Kernel> k;
  DispatchDType<float, double>(InDType(op), [&](auto tag) { k = Make<decltype(tag)>::Create(op); });
  return k;
}

// Paddle's optimizer attributes are float32; both kernels use the attribute
// rounded to float32.
float AttrF(const ir::Op& op, const char* name) {
  return static_cast<float>(op.GetFloat(name));
}

// The moment decay rates and epsilon of adam, adamax and lamb, as T (read
// through float, as Paddle's kernels take them).
template <typename T>
struct Betas {
  T b1, b2, eps;
};
template <typename T>
Betas<T> ReadBetas(const ir::Op& op) {
  return {static_cast<T>(AttrF(op, "beta1")), static_cast<T>(AttrF(op, "beta2")),
          static_cast<T>(AttrF(op, "epsilon"))};
}

// sgd: p -= lr * g (jit refer Sgd).
template <typename T>
struct Sgd {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    return std::make_unique<LambdaKernel>([n](const KernelArgs& a) {
      const T *p = In<T>(a, 0), *g = In<T>(a, 1);
      const T lr = In<T>(a, 2)[0];
      T* po = Out<T>(a, 0);
      ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
        TILLER_UPDATE_LOOP
        for (int64_t i = b; i < e; ++i) po[i] = p[i] - lr * g[i];
      });
    });
  }
};

// momentum (CPUDenseMomentumFunctor): g' = g + l2 * p when l2_decay,
// v = mu * v + g'; nesterov: p -= (g' + mu * v) * lr, else p -= lr * v.
template <typename T>
struct Momentum {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    const T mu = static_cast<T>(AttrF(op, "mu"));
    const T l2 = static_cast<T>(AttrF(op, "l2_decay"));
    const bool nesterov = op.GetBool("use_nesterov");
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      const T *p = In<T>(a, 0), *g = In<T>(a, 1), *v = In<T>(a, 3);
      const T lr = In<T>(a, 2)[0];
      T *po = Out<T>(a, 0), *vo = Out<T>(a, 1);
      ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
        TILLER_UPDATE_LOOP
        for (int64_t i = b; i < e; ++i) {
          T pi = p[i];
          T gi = l2 != T(0) ? pi * l2 + g[i] : g[i];
          T vi = v[i] * mu + gi;
          vo[i] = vi;
          po[i] = nesterov ? pi - (gi + vi * mu) * lr : pi - lr * vi;
        }
      });
    });
  }
};

// adam / adamw (AdamDenseKernel, AdamwDenseKernel, jit refer Adam/AdamW):
//   lr_t = lr * sqrt(1 - b2p) / (1 - b1p), eps_t = epsilon * sqrt(1 - b2p)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  vmax = max(v, vmax)
//   p = p - lr * lr_ratio * weight_decay * p       (AdamW only)
//   p = p - lr_t * m / (sqrt(v or vmax) + eps_t)
//   b1p *= b1, b2p *= b2 (unless update_beta_pow is false).
// bias_correction = false (use_no_bias_optimizer) computes with b1p = b2p = 0.
// Paddle's CPU AdamW applies lr_ratio to the decay term only. On CPUs with
// AVX-512 Paddle runs float Adam/AdamW through its jit kernel
// (funcs/jit/gen/adam.cc, adamw.cc), which fuses the steps below into FMAs;
// the float path here uses the same FMAs there, so results match bit for bit.
// Paddle asks the CPU, not the build, so this does too, and TILLER_MAX_ISA
// does not change it (a capped run still equals Paddle on the same CPU).
bool PaddleAdamJit() {
  static const bool jit = CpuIsa().detected >= IsaLevel::kAvx512;
  return jit;
}

// One element range of Adam's update; no branch in the loop (the options
// are template arguments), so it vectorizes.
template <typename T, bool kJit, bool kDecay, bool kAmsgrad>
void AdamRange(int64_t b, int64_t e, const T* p, const T* g, const T* m, const T* v, const T* vmax,
               T* po, T* mo, T* vo, T* vmaxo, T b1, T b2, T omb1, T omb2, T decay, T lr_t,
               T eps_t) {
  TILLER_UPDATE_LOOP
  for (int64_t i = b; i < e; ++i) {
    T gi = g[i], pi = p[i], mi, vi;
    if constexpr (kJit) {
      mi = std::fma(b1, m[i], omb1 * gi);
      vi = std::fma(b2, v[i], omb2 * (gi * gi));
      if constexpr (kDecay) pi = std::fma(-decay, pi, pi);
    } else {
      mi = b1 * m[i] + omb1 * gi;
      vi = b2 * v[i] + omb2 * gi * gi;
      if constexpr (kDecay) pi = pi - decay * pi;
    }
    T denom_v = vi;
    if constexpr (kAmsgrad) {
      denom_v = std::max(vi, vmax[i]);
      vmaxo[i] = denom_v;
    }
    T q = mi / (std::sqrt(denom_v) + eps_t);
    mo[i] = mi;
    vo[i] = vi;
    if constexpr (kJit)
      po[i] = std::fma(q, -lr_t, pi);
    else
      po[i] = pi - lr_t * q;
  }
}

template <typename T>
struct Adam {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    // Plain variables, not a structured binding: lambdas capture them (clang
    // before 16, which builds the fuzz targets, cannot capture bindings).
    const Betas<T> betas = ReadBetas<T>(op);
    const T b1 = betas.b1, b2 = betas.b2, eps = betas.eps;
    const T wd = static_cast<T>(AttrF(op, "weight_decay"));
    const T lr_ratio = static_cast<T>(AttrF(op, "lr_ratio"));
    const bool update_pow = op.GetBool("update_beta_pow");
    const bool bias_correction = op.GetBool("bias_correction");
    const bool amsgrad = op.input(7) != nullptr;
    // The loop for these options, chosen once.
    using Range = void (*)(int64_t, int64_t, const T*, const T*, const T*, const T*, const T*, T*,
                           T*, T*, T*, T, T, T, T, T, T, T);
    auto pick = [&](auto jit) -> Range {
      constexpr bool kJit = decltype(jit)::value;
      return wd != T(0)
                 ? (amsgrad ? AdamRange<T, kJit, true, true> : AdamRange<T, kJit, true, false>)
                 : (amsgrad ? AdamRange<T, kJit, false, true> : AdamRange<T, kJit, false, false>);
    };
    const Range range = std::is_same_v<T, float> && PaddleAdamJit() ? pick(std::true_type{})
                                                                    : pick(std::false_type{});
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      const T *p = In<T>(a, 0), *g = In<T>(a, 1), *m = In<T>(a, 3), *v = In<T>(a, 4);
      const T* vmax = amsgrad ? In<T>(a, 7) : nullptr;
      const T lr = In<T>(a, 2)[0], b1p = In<T>(a, 5)[0], b2p = In<T>(a, 6)[0];
      T *po = Out<T>(a, 0), *mo = Out<T>(a, 1), *vo = Out<T>(a, 2);
      T* vmaxo = amsgrad ? Out<T>(a, 5) : nullptr;
      const T c1 = bias_correction ? b1p : T(0), c2 = bias_correction ? b2p : T(0);
      const T lr_t = lr * (std::sqrt(T(1) - c2) / (T(1) - c1));
      const T eps_t = eps * std::sqrt(T(1) - c2);
      const T decay = lr * lr_ratio * wd;
      const T omb1 = T(1) - b1, omb2 = T(1) - b2;
      ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
        range(b, e, p, g, m, v, vmax, po, mo, vo, vmaxo, b1, b2, omb1, omb2, decay, lr_t, eps_t);
      });
      Out<T>(a, 3)[0] = update_pow ? b1 * b1p : b1p;
      Out<T>(a, 4)[0] = update_pow ? b2 * b2p : b2p;
    });
  }
};

// adamax (AdamaxKernel): m = b1 m + (1 - b1) g; u = max(|g|, b2 u + eps);
// p -= lr / (1 - b1p) * (m / u). beta1_pow is not advanced here.
template <typename T>
struct Adamax {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    // Plain variables, not a structured binding: lambdas capture them (clang
    // before 16, which builds the fuzz targets, cannot capture bindings).
    const Betas<T> betas = ReadBetas<T>(op);
    const T b1 = betas.b1, b2 = betas.b2, eps = betas.eps;
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      const T *p = In<T>(a, 0), *g = In<T>(a, 1), *m = In<T>(a, 3), *u = In<T>(a, 4);
      const T lr_t = In<T>(a, 2)[0] / (T(1) - In<T>(a, 5)[0]);
      T *po = Out<T>(a, 0), *mo = Out<T>(a, 1), *uo = Out<T>(a, 2);
      ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
        TILLER_UPDATE_LOOP
        for (int64_t i = b; i < e; ++i) {
          T gi = g[i], pi = p[i];
          T mi = b1 * m[i] + (T(1) - b1) * gi;
          T ui = std::max(std::abs(gi), b2 * u[i] + eps);
          mo[i] = mi;
          uo[i] = ui;
          po[i] = pi - lr_t * (mi / ui);
        }
      });
    });
  }
};

// lamb (lamb_kernel_impl.h, lamb_functors.h):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g
//   r = m / (1 - b1p) / (sqrt(v / (1 - b2p)) + eps) + weight_decay * p
//   pn = |p|, rn = |r| (both 0 unless weight_decay > 0 or always_adapt)
//   p -= lr * (pn > 0 && rn > 0 ? pn / rn : 1) * r;  b1p *= b1, b2p *= b2.
// The norms need all of r before any p changes: pass 1 writes m and v and
// sums p^2 and r^2 (double partials per thread, in the workspace), pass 2
// recomputes r from the written m and v and updates p. No r buffer.
template <typename T>
struct Lamb {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    // Plain variables, not a structured binding: lambdas capture them (clang
    // before 16, which builds the fuzz targets, cannot capture bindings).
    const Betas<T> betas = ReadBetas<T>(op);
    const T b1 = betas.b1, b2 = betas.b2, eps = betas.eps;
    const T wd = static_cast<T>(AttrF(op, "weight_decay"));
    const bool adapt = wd > T(0) || op.GetBool("always_adapt");
    const bool bias_correction = op.GetBool("bias_correction");
    const T max_norm = static_cast<T>(AttrF(op, "max_weight_norm"));
    const int max_threads = std::max(1, omp_get_max_threads());
    const size_t ws = 2 * sizeof(double) * max_threads;
    return std::make_unique<LambdaKernel>(
        [=](const KernelArgs& a) {
          const T *p = In<T>(a, 0), *g = In<T>(a, 1), *m = In<T>(a, 3), *v = In<T>(a, 4);
          const T lr = In<T>(a, 2)[0], b1p = In<T>(a, 5)[0], b2p = In<T>(a, 6)[0];
          T *po = Out<T>(a, 0), *mo = Out<T>(a, 1), *vo = Out<T>(a, 2);
          const T c1 = bias_correction ? b1p : T(0), c2 = bias_correction ? b2p : T(0);
          auto ratio = [&](T mi, T vi, T pi) {
            T m_hat = mi / (T(1) - c1);
            T v_hat = vi / (T(1) - c2);
            return m_hat / (std::sqrt(v_hat) + eps) + wd * pi;
          };
          double* part = static_cast<double*>(a.workspace);
          auto moments = [&](int64_t b, int64_t e, double* sums) {
            double pp = 0, rr = 0;
            TILLER_UPDATE_LOOP
            for (int64_t i = b; i < e; ++i) {
              T gi = g[i], pi = p[i];
              T mi = b1 * m[i] + (T(1) - b1) * gi;
              T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
              mo[i] = mi;
              vo[i] = vi;
              if (adapt) {
                T r = ratio(mi, vi, pi);
                pp += static_cast<double>(pi) * pi;
                rr += static_cast<double>(r) * r;
              }
            }
            sums[0] = pp;
            sums[1] = rr;
          };
          int threads = 1;
          if (n * kWorkPerElement < kParallelThreshold || max_threads == 1) {
            moments(0, n, part);
          } else {
#pragma omp parallel num_threads(max_threads)
            {
              int nt = omp_get_num_threads(), t = omp_get_thread_num();
              if (t == 0) threads = nt;
              int64_t chunk = (n + nt - 1) / nt;
              int64_t b = std::min(n, chunk * t), e = std::min(n, b + chunk);
              moments(b, e, part + 2 * t);
            }
          }
          double pp = 0, rr = 0;
          for (int t = 0; t < threads; ++t) {
            pp += part[2 * t];
            rr += part[2 * t + 1];
          }
          T pn = static_cast<T>(std::sqrt(pp)), rn = static_cast<T>(std::sqrt(rr));
          if (max_norm > T(0)) pn = std::min(pn, max_norm);
          const T lr_r = lr * (pn > T(0) && rn > T(0) ? pn / rn : T(1));
          ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
            TILLER_UPDATE_LOOP
            for (int64_t i = b; i < e; ++i) {
              T pi = p[i];
              po[i] = pi - lr_r * ratio(mo[i], vo[i], pi);
            }
          });
          Out<T>(a, 3)[0] = b1p * b1;
          Out<T>(a, 4)[0] = b2p * b2;
        },
        ws);
  }
};

// adagrad (DenseAdagradFunctor): m += g g; p -= lr * g / (sqrt(m) + eps).
template <typename T>
struct Adagrad {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    const T eps = static_cast<T>(AttrF(op, "epsilon"));
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      const T *p = In<T>(a, 0), *g = In<T>(a, 1), *m = In<T>(a, 3);
      const T lr = In<T>(a, 2)[0];
      T *po = Out<T>(a, 0), *mo = Out<T>(a, 1);
      ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
        TILLER_UPDATE_LOOP
        for (int64_t i = b; i < e; ++i) {
          T gi = g[i], pi = p[i];
          T mi = m[i] + gi * gi;
          mo[i] = mi;
          po[i] = pi - lr * gi / (std::sqrt(mi) + eps);
        }
      });
    });
  }
};

// adadelta (AdadeltaKernel): Eg = rho Eg + (1 - rho) g g;
// d = -(sqrt(Ed + eps) / sqrt(Eg + eps) * g); p += lr * d;
// Ed = rho Ed + (1 - rho) d d (Ed accumulates the update before lr).
template <typename T>
struct Adadelta {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    const T rho = static_cast<T>(AttrF(op, "rho"));
    const T eps = static_cast<T>(AttrF(op, "epsilon"));
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      const T *p = In<T>(a, 0), *g = In<T>(a, 1), *eg = In<T>(a, 3), *ed = In<T>(a, 4);
      const T lr = In<T>(a, 2)[0];
      T *po = Out<T>(a, 0), *ego = Out<T>(a, 1), *edo = Out<T>(a, 2);
      ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
        TILLER_UPDATE_LOOP
        for (int64_t i = b; i < e; ++i) {
          T gi = g[i], pi = p[i], edi = ed[i];
          T egi = rho * eg[i] + (T(1) - rho) * (gi * gi);
          T d = -(std::sqrt(edi + eps) / std::sqrt(egi + eps) * gi);
          ego[i] = egi;
          po[i] = pi + lr * d;
          edo[i] = rho * edi + (T(1) - rho) * (d * d);
        }
      });
    });
  }
};

// rmsprop (RmsFunctor<CPUContext>): ms = rho ms + (1 - rho) g g;
// centered: mg = rho mg + (1 - rho) g, mom = momentum mom + lr g / sqrt(ms - mg^2 + eps);
// plain: mom = momentum mom + lr g / sqrt(ms + eps); p -= mom.
template <typename T>
struct Rmsprop {
  static std::unique_ptr<Kernel> Create(const ir::Op& op) {
    int64_t n = NumElements(op.inputs[0]->shape());
    const T eps = static_cast<T>(AttrF(op, "epsilon"));
    const T rho = static_cast<T>(AttrF(op, "decay"));
    const T momentum = static_cast<T>(AttrF(op, "momentum"));
    const bool centered = op.input(5) != nullptr;
    return std::make_unique<LambdaKernel>([=](const KernelArgs& a) {
      const T *p = In<T>(a, 0), *g = In<T>(a, 1), *ms = In<T>(a, 3), *mom = In<T>(a, 4);
      const T* mg = centered ? In<T>(a, 5) : nullptr;
      const T lr = In<T>(a, 2)[0];
      T *po = Out<T>(a, 0), *mso = Out<T>(a, 1), *momo = Out<T>(a, 2);
      T* mgo = centered ? Out<T>(a, 3) : nullptr;
      ParallelRange(n, kWorkPerElement, [&](int64_t b, int64_t e) {
        TILLER_UPDATE_LOOP
        for (int64_t i = b; i < e; ++i) {
          T gi = g[i], pi = p[i], momi = mom[i];
          T msi = rho * ms[i] + (T(1) - rho) * gi * gi;
          T denom = msi;
          if (centered) {
            T mgi = rho * mg[i] + (T(1) - rho) * gi;
            mgo[i] = mgi;
            denom = msi - mgi * mgi;
          }
          momi = momentum * momi + lr * gi / std::sqrt(denom + eps);
          mso[i] = msi;
          momo[i] = momi;
          po[i] = pi - momi;
        }
      });
    });
  }
};

const bool kRegistered = [] {
  // One dtype for every operand (param, grad, lr, state...) and output.
  auto sig = [](const char* spec) {
    return Signature(spec).Where("T", {DType::kF32, DType::kF64});
  };
  RegisterKernel("sgd", ForDType<Sgd>, sig("T, T, T -> T"));
  RegisterKernel("momentum", ForDType<Momentum>, sig("T, T, T, T -> T, T"));
  RegisterKernel("adam", ForDType<Adam>, sig("T, T, T, T, T, T, T, T? -> T, T, T, T, T, T?"));
  RegisterKernel("adamax", ForDType<Adamax>, sig("T, T, T, T, T, T -> T, T, T"));
  RegisterKernel("lamb", ForDType<Lamb>, sig("T, T, T, T, T, T, T -> T, T, T, T, T"));
  RegisterKernel("adagrad", ForDType<Adagrad>, sig("T, T, T, T -> T, T"));
  RegisterKernel("adadelta", ForDType<Adadelta>, sig("T, T, T, T, T -> T, T, T"));
  RegisterKernel("rmsprop", ForDType<Rmsprop>, sig("T, T, T, T, T, T? -> T, T, T, T?"));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
