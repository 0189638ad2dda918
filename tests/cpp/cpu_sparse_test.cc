// The CPU kernels of issue 44's sparse ops against scalar references:
// the row-sparse optimizers (backends/cpu/kernels/row_optimizer.cc) with
// repeated ids, a padding id and outputs apart from their inputs, and
// linear_block_sparse (backends/cpu/kernels/block_sparse.cc) with row
// counts that leave partial tiles, bias, residual and activation; the
// merges and coalesce of hybrid COO tensors (backends/cpu/kernels/coo.cc)
// against dense arithmetic on the positions they hold.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "cpu_kernel_test_util.h"
#include "ir/graph.h"

namespace tiller::cpu {
namespace {

using ir::Graph;
using ir::Value;
using kernel_test::ExpectClose;
using kernel_test::Ptr;
using kernel_test::RandF;
using kernel_test::RunOp;

constexpr int64_t kV = 7, kD = 5, kN = 6;
const std::vector<int64_t> kIds = {4, 1, 4, 0, 6, 4};  // 4 three times; 0 is the padding id

// The rows summed by id, in order (Paddle's MergeAdd); the padding id's sum is zero.
std::vector<std::vector<double>> Merged(const std::vector<float>& rows, int64_t padding) {
  std::vector<std::vector<double>> g(kV);
  for (int64_t i = 0; i < kN; ++i) {
    std::vector<double>& r = g[kIds[i]];
    if (r.empty()) r.assign(kD, 0.0);
    if (kIds[i] == padding) continue;
    for (int64_t j = 0; j < kD; ++j) r[j] += rows[i * kD + j];
  }
  return g;
}

Value* Table(Graph& g, const char* name) {
  return g.AddInput(name, {DType::kF32, {kV, kD}});
}

// What the sgd / adagrad tests share: a random table p, Adagrad moment m
// and rows of kIds, a learning rate, and a graph whose inputs ids, rows
// and lr the ops under test read.
struct RowUpdateCase {
  explicit RowUpdateCase(float learning_rate) : lr{learning_rate} {}
  std::vector<float> p = RandF(kV * kD), rows = RandF(kN * kD), lr;
  std::vector<float> m = RandF(kV * kD, 0.1f, 1.0f);
  Graph g;
  Value* ids = g.AddInput("ids", {DType::kI64, {kN}});
  Value* r = g.AddInput("rows", {DType::kF32, {kN, kD}});
  Value* l = g.AddInput("lr", {DType::kF32, {1}});
};

TEST(CpuKernelRowOptimizers, SgdAndAdagradMoveOnlyTheMergedRows) {
  RowUpdateCase c(0.1f);
  auto& [p, rows, lr, m, g, ids, r, l] = c;
  ir::Op* sgd = g.AddOp("sgd_rows", {Table(g, "p"), r, l, ids}, {{"padding_idx", int64_t{0}}});
  ir::Op* ada = g.AddOp("adagrad_rows", {Table(g, "p2"), r, l, Table(g, "m"), ids},
                        {{"epsilon", 1e-6}, {"padding_idx", int64_t{0}}});
  auto merged = Merged(rows, 0);
  std::vector<double> want_p(p.begin(), p.end()), want_p2(want_p), want_m(m.begin(), m.end());
  for (int64_t v = 0; v < kV; ++v) {
    if (merged[v].empty()) continue;
    for (int64_t j = 0; j < kD; ++j) {
      const double gj = merged[v][j];
      want_p[v * kD + j] -= 0.1 * gj;
      want_m[v * kD + j] += gj * gj;
      want_p2[v * kD + j] -= 0.1 * gj / (std::sqrt(want_m[v * kD + j]) + 1e-6);
    }
  }
  auto s = RunOp(*sgd, {p.data(), rows.data(), lr.data(), kIds.data()});
  ExpectClose(Ptr<float>(s[0]), want_p, 1e-5, 1e-6, "sgd_rows param");
  auto a = RunOp(*ada, {p.data(), rows.data(), lr.data(), m.data(), kIds.data()});
  ExpectClose(Ptr<float>(a[0]), want_p2, 1e-5, 1e-6, "adagrad_rows param");
  ExpectClose(Ptr<float>(a[1]), want_m, 1e-5, 1e-6, "adagrad_rows moment");
}

TEST(CpuKernelRowOptimizers, AdamLazyLeavesOtherRowsNonLazyMovesThemWithPlainEpsilon) {
  std::vector<float> p = RandF(kV * kD), rows = RandF(kN * kD), lr = {0.05f};
  std::vector<float> m1 = RandF(kV * kD, -0.1f, 0.1f), m2 = RandF(kV * kD, 1e-4f, 1e-2f);
  std::vector<float> b1p = {0.81f}, b2p = {0.998f};
  for (bool lazy : {true, false}) {
    Graph g;
    Value* ids = g.AddInput("ids", {DType::kI64, {kN}});
    auto scalar = [&](const char* n) { return g.AddInput(n, {DType::kF32, {1}}); };
    ir::Op* op = g.AddOp("adam_rows",
                         {Table(g, "p"), g.AddInput("rows", {DType::kF32, {kN, kD}}), scalar("lr"),
                          Table(g, "m1"), Table(g, "m2"), scalar("b1p"), scalar("b2p"), ids},
                         {{"epsilon", 1e-3}, {"lazy", lazy}});  // a large epsilon shows which one
    auto out = RunOp(*op, {p.data(), rows.data(), lr.data(), m1.data(), m2.data(), b1p.data(),
                           b2p.data(), kIds.data()});
    auto merged = Merged(rows, -1);
    // The betas as the kernel has them: float32 attributes, 1 - beta in float.
    const double b1 = 0.9f, b2 = 0.999f, omb1 = 1.0f - 0.9f, omb2 = 1.0f - 0.999f;
    const double lr_t = 0.05 * std::sqrt(1 - 0.998) / (1 - 0.81);
    std::vector<double> wp(p.begin(), p.end()), wm1(m1.begin(), m1.end()),
        wm2(m2.begin(), m2.end());
    for (int64_t v = 0; v < kV; ++v) {
      const bool touched = !merged[v].empty();
      if (!touched && lazy) continue;
      const double eps = touched ? 1e-3 * std::sqrt(1 - 0.998) : 1e-3;
      for (int64_t j = 0; j < kD; ++j) {
        const size_t i = v * kD + j;
        const double gj = touched ? merged[v][j] : 0.0;
        wm1[i] = b1 * wm1[i] + omb1 * gj;
        wm2[i] = b2 * wm2[i] + omb2 * gj * gj;
        wp[i] -= lr_t * (wm1[i] / (std::sqrt(wm2[i]) + eps));
      }
    }
    const std::string what = lazy ? "lazy" : "non-lazy";
    ExpectClose(Ptr<float>(out[0]), wp, 1e-5, 1e-6, what + " param");
    ExpectClose(Ptr<float>(out[1]), wm1, 1e-5, 1e-7, what + " moment1");
    ExpectClose(Ptr<float>(out[2]), wm2, 1e-5, 1e-9, what + " moment2");
    EXPECT_FLOAT_EQ(Ptr<float>(out[3])[0], 0.81f * 0.9f);
    EXPECT_FLOAT_EQ(Ptr<float>(out[4])[0], 0.998f * 0.999f);
  }
}

// A table split by rows (passes/shard_embedding_rows.cc): rows [0, 3) and
// [3, 7) as two parts. Each part's lookup gives its rows and zeros for the
// other part's ids, so the two add up to the whole table's lookup; each
// part's adagrad_rows updates its own rows as the whole table's would.
TEST(CpuKernelRowOptimizers, TablePartsAddUpToTheWholeTable) {
  RowUpdateCase c(0.1f);
  auto& [p, rows, lr, m, g, ids, r, l] = c;
  const ir::AttrMap pad = {{"padding_idx", int64_t{0}}};
  ir::Op* whole_lookup = g.AddOp("embedding", {Table(g, "w"), ids}, pad);
  ir::Op* whole_update = g.AddOp("adagrad_rows", {Table(g, "p"), r, l, Table(g, "m"), ids},
                                 {{"epsilon", 1e-6}, {"padding_idx", int64_t{0}}});
  const auto lookup = RunOp(*whole_lookup, {p.data(), kIds.data()});
  const auto update =
      RunOp(*whole_update, {p.data(), rows.data(), lr.data(), m.data(), kIds.data()});
  std::vector<double> sum(kN * kD, 0.0);
  for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 3}, {3, kV}}) {
    const ir::TensorType part{DType::kF32, {end - begin, kD}};
    ir::AttrMap attrs = {{"padding_idx", int64_t{0}}, {"table_rows", kV}, {"row_begin", begin}};
    ir::Op* part_lookup = g.AddOp("embedding", {g.AddInput("wp", part), ids}, attrs);
    attrs.Set("epsilon", 1e-6);
    ir::Op* part_update =
        g.AddOp("adagrad_rows", {g.AddInput("pp", part), r, l, g.AddInput("mp", part), ids}, attrs);
    const float* p_part = p.data() + begin * kD;
    const float* m_part = m.data() + begin * kD;
    const auto found = RunOp(*part_lookup, {p_part, kIds.data()});
    for (int64_t i = 0; i < kN; ++i) {
      const bool mine = kIds[i] >= begin && kIds[i] < end;
      for (int64_t j = 0; j < kD; ++j) {
        const float v = Ptr<float>(found[0])[i * kD + j];
        if (!mine) {
          EXPECT_EQ(v, 0.f) << "id " << kIds[i] << " of another part";
        }
        sum[i * kD + j] += v;
      }
    }
    const auto moved = RunOp(*part_update, {p_part, rows.data(), lr.data(), m_part, kIds.data()});
    for (int64_t k = 0; k < (end - begin) * kD; ++k) {
      EXPECT_EQ(Ptr<float>(moved[0])[k], Ptr<float>(update[0])[begin * kD + k]) << "param " << k;
      EXPECT_EQ(Ptr<float>(moved[1])[k], Ptr<float>(update[1])[begin * kD + k]) << "moment " << k;
    }
  }
  ExpectClose(Ptr<float>(lookup[0]), sum, 0.0, 0.0, "the parts' lookups added");
}

TEST(CpuKernelRowOptimizers, AnIdOutOfRangeIsReportedAndTouchesNothing) {
  std::vector<float> p = RandF(kV * kD), rows = RandF(kN * kD), lr = {0.1f};
  const std::vector<int32_t> ids = {1, 7, 2, -1, 1, 3};
  Graph g;
  ir::Op* op = g.AddOp(
      "sgd_rows", {Table(g, "p"), g.AddInput("rows", {DType::kF32, {kN, kD}}),
                   g.AddInput("lr", {DType::kF32, {1}}), g.AddInput("ids", {DType::kI32, {kN}})});
  auto k = CreateKernel(*op);
  std::vector<float> out(p);
  backend::IndexFault fault;
  backend::KernelArgs args;
  args.inputs = {out.data(), rows.data(), lr.data(), ids.data()};
  args.outputs = {out.data()};  // in place
  AlignedBuffer ws(k->workspace_bytes());
  args.workspace = ws.data();
  args.index_fault = &fault;
  k->Run(args);
  ASSERT_TRUE(fault.hit());
  EXPECT_EQ(fault.bound(), kV);
  EXPECT_EQ(fault.operand(), 3);
  for (int64_t j = 0; j < kD; ++j) {  // row 2 got its update, rows 0 and 6 none
    EXPECT_FLOAT_EQ(out[2 * kD + j], p[2 * kD + j] - 0.1f * rows[2 * kD + j]);
    EXPECT_EQ(out[0 * kD + j], p[0 * kD + j]);
    EXPECT_EQ(out[6 * kD + j], p[6 * kD + j]);
  }
}

// W [k, n] with about `zero_share` of its bk x bn blocks zero.
std::vector<float> BlockSparse(int64_t k, int64_t n, int64_t bk, int64_t bn, double zero_share) {
  std::vector<float> w = RandF(k * n, -1, 1);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t kb = 0; kb < k / bk; ++kb)
    for (int64_t nb = 0; nb < n / bn; ++nb)
      if (u(rng) < zero_share)
        for (int64_t r = 0; r < bk; ++r)
          for (int64_t c = 0; c < bn; ++c) w[(kb * bk + r) * n + nb * bn + c] = 0.0f;
  return w;
}

TEST(CpuKernelLinearBlockSparse, EqualsTheDenseMathWithBiasResidualAndActivation) {
  struct Case {
    int64_t bk, bn, m, k, n;
    const char* act;
  };
  // 1x8 blocks at k = 6000: a transposed 12-row tile is 288 KB, one tile
  // per row group, so the threads transpose five row groups, each its own
  // (with 2 or more threads: this test's product is over the parallel
  // threshold). With 512-bit vectors 1x8 tiles are 32 rows (16 where m <=
  // 16): m = 64 and 16 are whole tiles, transposed as 8 x 8 squares with an
  // element-wise tail past k's last multiple of 8 (k = 44, 20).
  for (const Case& c : {Case{16, 16, 13, 32, 48, "relu"}, Case{16, 16, 6, 48, 16, ""},
                        Case{1, 8, 25, 7, 24, "gelu"}, Case{1, 8, 12, 16, 8, "tanh"},
                        Case{1, 8, 50, 6000, 16, "relu"}, Case{16, 16, 7, 320, 32, ""},
                        Case{1, 8, 64, 44, 24, "relu"}, Case{1, 8, 16, 20, 16, ""},
                        Case{16, 16, 30, 64, 32, "gelu"}, Case{8, 1, 13, 64, 5, "gelu"},
                        Case{8, 1, 30, 40, 17, ""}}) {
    std::vector<float> w = BlockSparse(c.k, c.n, c.bk, c.bn, 0.7);
    std::vector<float> x = RandF(c.m * c.k), b = RandF(c.n), res = RandF(c.m * c.n);
    if (c.k > 512) {
      // Quarters: every product and partial sum is exact in float32, so the
      // 1800-term sums compare at the same tolerance as the short ones.
      for (auto* v : {&w, &x, &b, &res})
        for (float& e : *v) e = std::round(e * 4) / 4;
    }
    Graph g;
    auto wbuf = std::make_shared<AlignedBuffer>(w.size() * sizeof(float));
    std::memcpy(wbuf->data(), w.data(), wbuf->size());
    Value* wv = g.AddData("w", {DType::kF32, {c.k, c.n}}, ir::ValueKind::kConstant, wbuf);
    ir::Op* op =
        g.AddOp("linear_block_sparse",
                {g.AddInput("x", {DType::kF32, {c.m, c.k}}), wv,
                 g.AddInput("b", {DType::kF32, {c.n}}), g.AddInput("r", {DType::kF32, {c.m, c.n}})},
                {{"block_rows", c.bk}, {"block_cols", c.bn}, {"activation", c.act}});
    auto out = RunOp(*op, {x.data(), nullptr, b.data(), res.data()});
    std::vector<double> want(c.m * c.n);
    const std::string act = c.act;
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double s = b[j] + res[i * c.n + j];
        for (int64_t q = 0; q < c.k; ++q) s += double(x[i * c.k + q]) * w[q * c.n + j];
        if (act == "relu") s = std::max(s, 0.0);
        if (act == "gelu") s = 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)));
        if (act == "tanh") s = std::tanh(s);
        want[i * c.n + j] = s;
      }
    }
    ExpectClose(Ptr<float>(out[0]), want, 1e-5, 1e-5,
                fmt::format("{}x{} blocks, {} rows, {}", c.bk, c.bn, c.m, act));
    // The residual's storage may be the output's (OpSchema::inplace_input):
    // the same values when y overwrites it.
    auto k = CreateKernel(*op);
    std::vector<float> y = res;
    KernelArgs args;
    args.inputs = {x.data(), nullptr, b.data(), y.data()};
    args.outputs = {y.data()};
    AlignedBuffer ws(k->workspace_bytes());
    args.workspace = ws.data();
    k->Run(args);
    ExpectClose(y.data(), want, 1e-5, 1e-5,
                fmt::format("in place: {}x{} blocks, {} rows, {}", c.bk, c.bn, c.m, act));
  }
}

// A W that is no constant (a trained weight): the kernel finds its zero
// blocks at every run, so a second run with another pattern (a block
// pruned, another grown back) gives that W's product; transpose_w
// multiplies by W^T (a linear's input gradient g W^T), whose blocks are
// W's transposed: 8x1 for a W pruned in 1x8 blocks.
TEST(CpuKernelLinearBlockSparse, AWeightThatChangesIsPackedAtEveryRunPlainOrTransposed) {
  constexpr int64_t kM = 13, kK = 32, kNn = 48;
  struct Case {
    bool transpose;
    int64_t bk, bn;  // W's pruned blocks
  };
  for (const Case& c :
       {Case{false, 16, 16}, Case{true, 16, 16}, Case{false, 1, 8}, Case{true, 1, 8}}) {
    const bool transpose = c.transpose;
    const int64_t in = transpose ? kNn : kK, out = transpose ? kK : kNn;
    Graph g;
    Value* w = g.AddInput("w", {DType::kF32, {kK, kNn}});
    ir::Op* op = g.AddOp("linear_block_sparse", {g.AddInput("x", {DType::kF32, {kM, in}}), w},
                         {{"block_rows", transpose ? c.bn : c.bk},
                          {"block_cols", transpose ? c.bk : c.bn},
                          {"transpose_w", transpose}});
    ASSERT_EQ(op->output(0)->shape(), (Shape{kM, out}));
    auto k = CreateKernel(*op);
    AlignedBuffer ws(k->workspace_bytes());
    for (int run = 0; run < 2; ++run) {
      std::vector<float> wv = BlockSparse(kK, kNn, c.bk, c.bn, run == 0 ? 0.6 : 0.3),
                         x = RandF(kM * in);
      AlignedBuffer y(op->output(0)->bytes());
      KernelArgs args;
      args.inputs = {x.data(), wv.data()};
      args.outputs = {y.data()};
      args.workspace = ws.data();
      k->Run(args);
      std::vector<double> want(kM * out);
      for (int64_t i = 0; i < kM; ++i)
        for (int64_t j = 0; j < out; ++j) {
          double s = 0;
          for (int64_t q = 0; q < in; ++q)
            s += double(x[i * in + q]) * (transpose ? wv[j * kNn + q] : wv[q * kNn + j]);
          want[i * out + j] = s;
        }
      ExpectClose(y.as<float>(), want, 1e-5, 1e-5,
                  fmt::format("{} run {}", transpose ? "W^T" : "W", run));
    }
  }
}

// A hybrid COO operand of a [kRows, kCols, kBlock] tensor: indices [2, n]
// over the two sparse dims, values [n, kBlock].
constexpr int64_t kRows = 3, kCols = 4, kBlock = 2;

struct HybridCoo {
  std::vector<int64_t> positions;  // row-major over [kRows, kCols], in entry order
  std::vector<float> values = RandF(static_cast<int64_t>(positions.size()) * kBlock);
  std::vector<int64_t> Indices() const {
    const auto n = positions.size();
    std::vector<int64_t> idx(2 * n);
    for (size_t e = 0; e < n; ++e) {
      idx[e] = positions[e] / kCols;
      idx[n + e] = positions[e] % kCols;
    }
    return idx;
  }
  // Each position's block summed over its entries.
  std::map<int64_t, std::vector<double>> Summed() const {
    std::map<int64_t, std::vector<double>> m;
    for (size_t e = 0; e < positions.size(); ++e) {
      std::vector<double>& b = m[positions[e]];
      b.resize(kBlock, 0.0);
      for (int64_t j = 0; j < kBlock; ++j) b[j] += values[e * kBlock + j];
    }
    return m;
  }
};

// Checks a padded COO result: `want` (position -> block) in row-major
// order first, then padding (indices -1, values 0) up to `room`.
void ExpectEntries(const std::vector<AlignedBuffer>& out, int64_t room,
                   const std::map<int64_t, std::vector<double>>& want, const std::string& what) {
  const auto* idx = out[0].as<int64_t>();
  const auto* val = out[1].as<float>();
  std::vector<int64_t> want_idx(2 * room, -1);
  std::vector<double> want_val(room * kBlock, 0.0);
  int64_t k = 0;
  for (const auto& [pos, block] : want) {
    want_idx[k] = pos / kCols;
    want_idx[room + k] = pos % kCols;
    for (int64_t j = 0; j < kBlock; ++j) want_val[k * kBlock + j] = block[j];
    ++k;
  }
  kernel_test::ExpectEq(idx, want_idx, what + " indices");
  ExpectClose(val, want_val, 1e-6, 1e-6, what + " values");
}

TEST(CpuKernelCoo, HybridMergesCombineBlocksAtTheUnionOfPositions) {
  // Coalesced operands (distinct positions in order): x and y share 5 and 9.
  const HybridCoo x{{1, 5, 6, 9}}, y{{0, 5, 9, 10, 11}};
  const auto xs = x.Summed(), ys = y.Summed();
  const auto xi = x.Indices(), yi = y.Indices();
  for (const std::string kind : {"add", "subtract", "multiply", "divide"}) {
    Graph g;
    const auto nx = static_cast<int64_t>(x.positions.size()),
               ny = static_cast<int64_t>(y.positions.size());
    ir::Op* op = g.AddOp(
        "coo_merge",
        {g.AddInput("xi", {DType::kI64, {2, nx}}), g.AddInput("xv", {DType::kF32, {nx, kBlock}}),
         g.AddInput("yi", {DType::kI64, {2, ny}}), g.AddInput("yv", {DType::kF32, {ny, kBlock}})},
        {{"shape", Shape{kRows, kCols, kBlock}}, {"kind", kind}});
    const int64_t room = nx + (kind == "divide" ? kRows * kCols : ny);
    ASSERT_EQ(op->output(1)->shape(), (Shape{room, kBlock})) << kind;
    // Divide walks every position; the others the positions either holds.
    std::set<int64_t> at;
    for (int64_t p = 0; p < kRows * kCols; ++p)
      if (kind == "divide" || xs.count(p) || ys.count(p)) at.insert(p);
    std::map<int64_t, std::vector<double>> want;
    for (int64_t p : at) {
      std::vector<double>& b = want[p];
      for (int64_t j = 0; j < kBlock; ++j) {
        const double a = xs.count(p) ? xs.at(p)[j] : 0.0, c = ys.count(p) ? ys.at(p)[j] : 0.0;
        b.push_back(kind == "add"        ? a + c
                    : kind == "subtract" ? a - c
                    : kind == "multiply" ? a * c
                                         : float(a) / float(c));  // 0 / 0: NaN, as Paddle
      }
    }
    auto out = RunOp(*op, {xi.data(), x.values.data(), yi.data(), y.values.data()});
    ExpectEntries(out, room, want, kind);
  }
}

TEST(CpuKernelCoo, HybridCoalesceSumsEachPositionsBlocksInOrder) {
  const HybridCoo x{{7, 2, 7, 0, 11, 2, 7}};  // 7 three times, 2 twice, out of order
  const auto n = static_cast<int64_t>(x.positions.size());
  Graph g;
  ir::Op* op =
      g.AddOp("coo_coalesce",
              {g.AddInput("i", {DType::kI64, {2, n}}), g.AddInput("v", {DType::kF32, {n, kBlock}})},
              {{"shape", Shape{kRows, kCols, kBlock}}});
  ASSERT_EQ(op->output(1)->shape(), (Shape{n, kBlock}));
  const auto xi = x.Indices();
  auto out = RunOp(*op, {xi.data(), x.values.data()});
  ExpectEntries(out, n, x.Summed(), "coalesce");
}

}  // namespace
}  // namespace tiller::cpu
