// Row-sparse optimizer kernels: sgd_rows, adagrad_rows, adam_rows
// (ir/ops/optimizer.cc has the operands), float32, ids int32|int64.
//
// Each run first groups the rows by id (Paddle's MergeAdd): the positions
// sorted by (id, position), and each distinct id's rows summed in the order
// they came, so a repeated id is one update of the summed gradient. An id
// equal to padding_idx keeps its update with a zero row (Paddle's sparse
// lookup gradient writes zeros there). An id outside [0, rows) is reported
// (backend::IndexFault: the step fails naming the op) and never touches the
// table. Distinct ids update distinct rows, so groups run in parallel.
//
// In-place safety: outputs may alias the inputs they update (the usual
// case: the table is updated where it lives). When they do not, the kernel
// copies the table and state first and updates the copy.
#pragma GCC optimize("fp-contract=off")
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/kernel_utils.h"

namespace tiller::cpu {
namespace {

// The workspace: order [N] and starts [N + 1] (int64), then each group's
// merged row [N, D] (float).
size_t GroupBytes(int64_t n, int64_t d) {
  return static_cast<size_t>(2 * n + 1) * sizeof(int64_t) + static_cast<size_t>(n * d) * 4;
}

// Rows grouped by id: group g holds the positions order[starts[g]] ..
// order[starts[g + 1] - 1], in the order they came.
struct Groups {
  const int64_t* order;
  const int64_t* starts;
  int64_t count = 0;
};

// The ids in range, grouped (an id out of range is reported and left out).
template <typename Id>
Groups GroupRows(const KernelArgs& a, const Id* ids, int64_t n, int64_t vocab, int ids_operand) {
  auto* order = static_cast<int64_t*>(a.workspace);
  int64_t* starts = order + n;
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (id < 0 || id >= vocab) {
      RecordIndexFault(a, id, vocab, ids_operand);
      continue;
    }
    order[m++] = i;
  }
  std::sort(order, order + m,
            [&](int64_t x, int64_t y) { return ids[x] < ids[y] || (ids[x] == ids[y] && x < y); });
  int64_t groups = 0;
  for (int64_t k = 0; k < m; ++k) {
    if (k == 0 || ids[order[k]] != ids[order[k - 1]]) starts[groups++] = k;
  }
  starts[groups] = m;
  return {order, starts, groups};
}

// The output holds the input's values (a copy unless they share storage).
float* Updated(const KernelArgs& a, size_t in, size_t out, size_t bytes) {
  auto* o = static_cast<float*>(a.outputs[out]);
  if (o != a.inputs[in]) std::memcpy(o, a.inputs[in], bytes);
  return o;
}

// Shapes and attributes every row kernel reads.
struct RowShape {
  int64_t vocab, d, n;
  int64_t padding_idx;
  int ids_operand;
  bool i64;
  size_t table_bytes;
};
RowShape ReadRowShape(const ir::Op& op) {
  RowShape s;
  s.vocab = op.inputs[0]->shape()[0];
  s.d = op.inputs[0]->shape()[1];
  s.ids_operand = static_cast<int>(op.inputs.size()) - 1;
  s.n = op.inputs.back()->shape()[0];
  s.padding_idx = PaddingRow(op, s.vocab);
  s.i64 = op.inputs.back()->dtype() == DType::kI64;
  s.table_bytes = static_cast<size_t>(s.vocab * s.d) * sizeof(float);
  return s;
}

// Runs update(row of the table, merged gradient row) for each distinct id,
// in parallel: each group's rows summed into its row of the workspace
// (zeros for the padding id), then handed over; `update` captures the
// tables.
template <typename F>
void ForEachRow(const KernelArgs& a, const RowShape& s, F&& update) {
  auto run = [&](auto id_tag) {
    using Id = decltype(id_tag);
    const auto* ids = static_cast<const Id*>(a.inputs[s.ids_operand]);
    const auto* rows = static_cast<const float*>(a.inputs[1]);
    const Groups g = GroupRows(a, ids, s.n, s.vocab, s.ids_operand);
    auto* merged = reinterpret_cast<float*>(static_cast<int64_t*>(a.workspace) + 2 * s.n + 1);
    const size_t row_bytes = static_cast<size_t>(s.d) * sizeof(float);
    ParallelRange(
        g.count, s.d * 10,
        [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k) {
            float* sum = merged + k * s.d;
            const int64_t first = g.order[g.starts[k]];
            const int64_t id = static_cast<int64_t>(ids[first]);
            if (id == s.padding_idx) {
              std::memset(sum, 0, row_bytes);
            } else {
              std::memcpy(sum, rows + first * s.d, row_bytes);
              for (int64_t q = g.starts[k] + 1; q < g.starts[k + 1]; ++q) {
                const float* src = rows + g.order[q] * s.d;
                for (int64_t j = 0; j < s.d; ++j) sum[j] += src[j];
              }
            }
            update(id, sum);
          }
        },
        1);
  };
  if (s.i64)
    run(int64_t{});
  else
    run(int32_t{});
}

// sgd_rows: p[id] -= lr * g (the merged row), as Paddle's SGD of a
// SelectedRows gradient.
std::unique_ptr<Kernel> MakeSgdRows(const ir::Op& op) {
  const RowShape s = ReadRowShape(op);
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        const float lr = static_cast<const float*>(a.inputs[2])[0];
        float* p = Updated(a, 0, 0, s.table_bytes);
        ForEachRow(a, s, [&](int64_t id, const float* g) {
          float* row = p + id * s.d;
          for (int64_t j = 0; j < s.d; ++j) row[j] = row[j] - lr * g[j];
        });
      },
      GroupBytes(s.n, s.d));
}

// adagrad_rows (SparseAdagradFunctor): m[id] += g g; p[id] -= lr * g /
// (sqrt(m[id]) + eps), for the merged rows only.
std::unique_ptr<Kernel> MakeAdagradRows(const ir::Op& op) {
  const RowShape s = ReadRowShape(op);
  const float eps = static_cast<float>(op.GetFloat("epsilon"));
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        const float lr = static_cast<const float*>(a.inputs[2])[0];
        float* p = Updated(a, 0, 0, s.table_bytes);
        float* m = Updated(a, 3, 1, s.table_bytes);
        ForEachRow(a, s, [&](int64_t id, const float* g) {
          float *pr = p + id * s.d, *mr = m + id * s.d;
          for (int64_t j = 0; j < s.d; ++j) {
            const float mi = mr[j] + g[j] * g[j];
            mr[j] = mi;
            pr[j] = pr[j] - lr * g[j] / (std::sqrt(mi) + eps);
          }
        });
      },
      GroupBytes(s.n, s.d));
}

// adam_rows (Paddle's Adam of a SelectedRows gradient, SparseAdamFunctor):
// each merged row (adam_update)
//   lr_t = lr * sqrt(1 - b2p) / (1 - b1p)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g
//   p -= lr_t * (m / (sqrt(v) + eps * sqrt(1 - b2p)))
// and, unless lazy, every other row with g = 0 and epsilon unscaled:
//   m = b1 m;  v = b2 v;  p -= lr_t * (m / (sqrt(v) + eps)).
// A decoupled decay p -= lr * lr_ratio * coeff * p comes first on the rows
// updated. b1p *= b1, b2p *= b2 unless update_beta_pow is false.
// Adam's update of one table row of d values: with its merged gradient g
// and eps_t, or (kTouched false: a row the gradient does not hold, non-lazy)
// as a zero gradient with the unscaled epsilon.
struct AdamRowCoefficients {
  float b1, b2, lr_t, decay;
  bool decays;
};
template <bool kTouched>
void AdamRow(const AdamRowCoefficients& c, float* p, float* m, float* v, const float* g, float eps,
             int64_t d) {
  for (int64_t j = 0; j < d; ++j) {
    float pj = p[j];
    if (c.decays) pj = pj - c.decay * pj;
    float mj, vj;
    if constexpr (kTouched) {
      mj = c.b1 * m[j] + (1.f - c.b1) * g[j];
      vj = c.b2 * v[j] + (1.f - c.b2) * g[j] * g[j];
    } else {
      mj = c.b1 * m[j];
      vj = c.b2 * v[j];
    }
    m[j] = mj;
    v[j] = vj;
    p[j] = pj - c.lr_t * (mj / (std::sqrt(vj) + eps));
  }
}

std::unique_ptr<Kernel> MakeAdamRows(const ir::Op& op) {
  const RowShape s = ReadRowShape(op);
  const float b1 = static_cast<float>(op.GetFloat("beta1"));
  const float b2 = static_cast<float>(op.GetFloat("beta2"));
  const float eps = static_cast<float>(op.GetFloat("epsilon"));
  const float wd = static_cast<float>(op.GetFloat("weight_decay"));
  const float lr_ratio = static_cast<float>(op.GetFloat("lr_ratio"));
  const bool update_pow = op.GetBool("update_beta_pow");
  const bool bias_correction = op.GetBool("bias_correction");
  const bool lazy = op.GetBool("lazy");
  // Not lazy: a byte per table row marks the rows the gradient holds.
  const size_t groups_bytes = GroupBytes(s.n, s.d);
  const size_t workspace = groups_bytes + (lazy ? 0 : static_cast<size_t>(s.vocab));
  return std::make_unique<LambdaKernel>(
      [=](const KernelArgs& a) {
        const auto f = [&](size_t i) { return static_cast<const float*>(a.inputs[i]); };
        const float lr = f(2)[0], b1p = f(5)[0], b2p = f(6)[0];
        const float c1 = bias_correction ? b1p : 0.f, c2 = bias_correction ? b2p : 0.f;
        const AdamRowCoefficients co{b1, b2, lr * (std::sqrt(1.f - c2) / (1.f - c1)),
                                     lr * lr_ratio * wd, wd != 0.f};
        const float eps_t = eps * std::sqrt(1.f - c2);
        float* p = Updated(a, 0, 0, s.table_bytes);
        float* m = Updated(a, 3, 1, s.table_bytes);
        float* v = Updated(a, 4, 2, s.table_bytes);
        auto* touched = static_cast<uint8_t*>(a.workspace) + groups_bytes;
        if (!lazy) std::memset(touched, 0, static_cast<size_t>(s.vocab));
        ForEachRow(a, s, [&](int64_t id, const float* g) {
          if (!lazy) touched[id] = 1;
          AdamRow<true>(co, p + id * s.d, m + id * s.d, v + id * s.d, g, eps_t, s.d);
        });
        if (!lazy) {
          ParallelRange(
              s.vocab, s.d * 8,
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  if (!touched[r])
                    AdamRow<false>(co, p + r * s.d, m + r * s.d, v + r * s.d, nullptr, eps, s.d);
                }
              },
              1);
        }
        static_cast<float*>(a.outputs[3])[0] = update_pow ? b1 * b1p : b1p;
        static_cast<float*>(a.outputs[4])[0] = update_pow ? b2 * b2p : b2p;
      },
      workspace);
}

const bool kRegistered = [] {
  auto sig = [](const char* spec) {
    return Signature(spec).Where("T", {DType::kF32}).Where("I", {DType::kI32, DType::kI64});
  };
  RegisterKernel("sgd_rows", MakeSgdRows, sig("T, T, T, I -> T"));
  RegisterKernel("adagrad_rows", MakeAdagradRows, sig("T, T, T, T, I -> T, T"));
  RegisterKernel("adam_rows", MakeAdamRows, sig("T, T, T, T, T, T, T, I -> T, T, T, T, T"));
  return true;
}();

}  // namespace
}  // namespace tiller::cpu
