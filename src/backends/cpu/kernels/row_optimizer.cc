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
// A part of a table split by rows (table_rows, row_begin: ir/ops/
// optimizer.cc) skips the ids of other parts before grouping.
//
// In-place safety: outputs may alias the inputs they update (the usual
// case: the table is updated where it lives). When they do not, the kernel
// copies the table and state first and updates the copy.
#pragma GCC optimize("fp-contract=off")
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {
namespace {

// The hash table's slots for n ids: a power of two, at least 2n (probes
// stay short).
int64_t SlotCount(int64_t n) {
  int64_t s = 16;
  while (s < 2 * n) s *= 2;
  return s;
}

// A slot of the hash table: an id and its group + 1 (0: empty), side by
// side so that a probe is one load.
struct Slot {
  int64_t id;
  int64_t group;
};

// The workspace: order [N], starts [N + 1], kept [N], group_of [N] and
// cursor [N] (int64), the slots, then each group's merged row [N, D]
// (float).
constexpr int64_t kIndexArrays = 5;  // of N int64 each, besides starts' one more
size_t IndexBytes(int64_t n) {
  return static_cast<size_t>(kIndexArrays * n + 1) * sizeof(int64_t) +
         static_cast<size_t>(SlotCount(n)) * sizeof(Slot);
}
size_t GroupBytes(int64_t n, int64_t d) {
  return IndexBytes(n) + static_cast<size_t>(n * d) * 4;
}
float* MergedRows(const KernelArgs& a, int64_t n) {
  return reinterpret_cast<float*>(static_cast<std::byte*>(a.workspace) + IndexBytes(n));
}

// Rows grouped by id: group g holds the positions order[starts[g]] ..
// order[starts[g + 1] - 1], in the order they came; groups in the order
// their ids first came.
struct Groups {
  const int64_t* order;
  const int64_t* starts;
  int64_t count = 0;
};

// The ids of the part's rows [begin, begin + rows) of a table of `vocab`
// rows, grouped (an id outside [0, vocab) is reported and left out, one of
// another part left out). A hash table (open addressing, sized by the ids
// kept) finds each id's group in O(1) expected time: sorting the positions
// by id cost most of a small table's update.
template <typename Id>
Groups GroupRows(const KernelArgs& a, const Id* ids, int64_t n, const ir::TablePart& part,
                 int ids_operand) {
  const int64_t vocab = part.vocab, begin = part.begin, rows = part.rows;
  auto* order = static_cast<int64_t*>(a.workspace);
  int64_t* starts = order + n;  // counts first, then the groups' offsets
  int64_t* kept = starts + n + 1;
  int64_t* group_of = kept + n;    // of each kept position
  int64_t* cursor = group_of + n;  // each group's next place in order
  auto* slots = reinterpret_cast<Slot*>(cursor + n);
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = static_cast<int64_t>(ids[i]);
    if (static_cast<uint64_t>(id - begin) < static_cast<uint64_t>(rows))
      kept[m++] = i;
    else if (id < 0 || id >= vocab)
      RecordIndexFault(a, id, vocab, ids_operand);
  }
  const int64_t slot_count = SlotCount(m);
  const auto mask = static_cast<uint64_t>(slot_count - 1);
  const int shift = 64 - std::countr_zero(static_cast<uint64_t>(slot_count));
  std::memset(static_cast<void*>(slots), 0, static_cast<size_t>(slot_count) * sizeof(Slot));
  int64_t groups = 0;
  for (int64_t k = 0; k < m; ++k) {
    const int64_t id = static_cast<int64_t>(ids[kept[k]]);
    // Fibonacci hashing: the top bits of id x 2^64 / phi.
    uint64_t h = (static_cast<uint64_t>(id) * 0x9E3779B97F4A7C15ull) >> shift;
    while (slots[h].group != 0 && slots[h].id != id) h = (h + 1) & mask;
    if (slots[h].group == 0) {
      slots[h] = {id, groups + 1};
      starts[groups++] = 0;
    }
    group_of[k] = slots[h].group - 1;
    ++starts[group_of[k]];
  }
  int64_t offset = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t count = starts[g];
    starts[g] = cursor[g] = offset;
    offset += count;
  }
  starts[groups] = m;
  for (int64_t k = 0; k < m; ++k) order[cursor[group_of[k]]++] = kept[k];
  return {order, starts, groups};
}

// The output holds the input's values (a copy unless they share storage).
float* Updated(const KernelArgs& a, size_t in, size_t out, size_t bytes) {
  auto* o = static_cast<float*>(a.outputs[out]);
  if (o != a.inputs[in]) std::memcpy(o, a.inputs[in], bytes);
  return o;
}

// Shapes and attributes every row kernel reads: the operand's place in the
// table (ir/ops/op_helpers.h), the width, the ids' count and operand.
struct RowShape {
  ir::TablePart part;
  int64_t d, n;
  int ids_operand;
  bool i64;
  size_t table_bytes;
};
RowShape ReadRowShape(const ir::Op& op) {
  RowShape s;
  s.part = ir::ReadTablePart(op, op.inputs[0]->shape()[0]);
  s.d = op.inputs[0]->shape()[1];
  s.ids_operand = static_cast<int>(op.inputs.size()) - 1;
  s.n = op.inputs.back()->shape()[0];
  s.i64 = op.inputs.back()->dtype() == DType::kI64;
  s.table_bytes = static_cast<size_t>(s.part.rows * s.d) * sizeof(float);
  return s;
}

constexpr int64_t kAhead = 8;  // groups between a row's prefetch and its update

// Runs update(row of the operand, merged gradient row) for each distinct
// id of its part, in parallel: each group's rows summed into its row of the
// workspace (zeros for the padding id), then handed over; `update` captures
// the tables, of which `tables` (null: none) are prefetched ahead.
template <typename F>
void ForEachRow(const KernelArgs& a, const RowShape& s, const std::array<float*, 3>& tables,
                F&& update) {
  auto run = [&](auto id_tag) {
    using Id = decltype(id_tag);
    const auto* ids = static_cast<const Id*>(a.inputs[s.ids_operand]);
    const auto* rows = static_cast<const float*>(a.inputs[1]);
    const Groups g = GroupRows(a, ids, s.n, s.part, s.ids_operand);
    float* merged = MergedRows(a, s.n);
    const size_t row_bytes = static_cast<size_t>(s.d) * sizeof(float);
    ParallelRange(
        g.count, s.d * 10,
        [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k) {
            // The rows kAhead groups on are fetched meanwhile: a large
            // table's rows are cache misses, one after another otherwise.
            if (k + kAhead < e) {
              const int64_t ahead = static_cast<int64_t>(ids[g.order[g.starts[k + kAhead]]]);
              for (float* t : tables) {
                if (!t) continue;
                const float* row = t + (ahead - s.part.begin) * s.d;
                for (int64_t j = 0; j < s.d; j += 16) __builtin_prefetch(row + j, 1);
              }
            }
            float* sum = merged + k * s.d;
            const int64_t first = g.order[g.starts[k]];
            const int64_t id = static_cast<int64_t>(ids[first]);
            if (id == s.part.padding_row) {
              std::memset(sum, 0, row_bytes);
            } else {
              std::memcpy(sum, rows + first * s.d, row_bytes);
              for (int64_t q = g.starts[k] + 1; q < g.starts[k + 1]; ++q) {
                const float* src = rows + g.order[q] * s.d;
                for (int64_t j = 0; j < s.d; ++j) sum[j] += src[j];
              }
            }
            update(id - s.part.begin, sum);
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
        ForEachRow(a, s, {p, nullptr, nullptr}, [&](int64_t row_index, const float* g) {
          float* row = p + row_index * s.d;
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
        ForEachRow(a, s, {p, m, nullptr}, [&](int64_t row_index, const float* g) {
          float *pr = p + row_index * s.d, *mr = m + row_index * s.d;
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
  const size_t workspace = groups_bytes + (lazy ? 0 : static_cast<size_t>(s.part.rows));
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
        if (!lazy) std::memset(touched, 0, static_cast<size_t>(s.part.rows));
        ForEachRow(a, s, {p, m, v}, [&](int64_t r, const float* g) {
          if (!lazy) touched[r] = 1;
          AdamRow<true>(co, p + r * s.d, m + r * s.d, v + r * s.d, g, eps_t, s.d);
        });
        if (!lazy) {
          ParallelRange(
              s.part.rows, s.d * 8,
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
