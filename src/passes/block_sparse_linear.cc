// linear(x, W const, b?, r?){activation} with W mostly zero blocks
//   ==>  linear_block_sparse(x, W, b?, r?){block_rows, block_cols, activation}
// A pruned model's weights (magnitude pruning by blocks, or by rows of a
// few columns) leave most blocks of W all zero; the block-sparse kernel
// multiplies only the others. Of the block shapes the kernel has (16 x 16,
// and 1 x 8: one input feature into 8 outputs), the pass takes the one with
// the most zero blocks, when at least kMinZeroBlocks of them are zero: below
// that the dense GEMM (oneDNN, packed) wins. Float32 weights only.
#include <cstring>

#include "ir/ops/op_helpers.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

// The share of zero blocks at which the block-sparse kernel beats the dense
// GEMM: its multiply-adds are ~2x the dense kernel's cost each (no packing
// of x, short inner loops), so it needs more than half the blocks gone.
constexpr double kMinZeroBlocks = 0.7;

struct BlockShape {
  int64_t rows, cols;
};
constexpr BlockShape kShapes[] = {{16, 16}, {1, 8}};

// The share of all-zero blocks of w [k, n] in blocks of s; -1 when the
// shape does not tile w or the share is below `least` (the scan stops once
// too many blocks hold a nonzero: a dense weight's after 30% of its
// blocks, where every weight of every model was read whole at load).
double ZeroBlocks(const float* w, int64_t k, int64_t n, BlockShape s, double least) {
  if (k % s.rows || n % s.cols) return -1;
  int64_t zero = 0;
  const int64_t per_row = n / s.cols, blocks = (k / s.rows) * per_row;
  const auto most_nonzero = static_cast<int64_t>((1.0 - least) * static_cast<double>(blocks));
  for (int64_t kb = 0; kb < k / s.rows; ++kb) {
    if (kb * per_row - zero > most_nonzero) return -1;  // the blocks seen that hold a nonzero
    for (int64_t nb = 0; nb < per_row; ++nb) {
      bool all_zero = true;
      for (int64_t r = 0; r < s.rows && all_zero; ++r) {
        const float* row = w + (kb * s.rows + r) * n + nb * s.cols;
        for (int64_t c = 0; c < s.cols; ++c) {
          if (row[c] != 0.0f) {
            all_zero = false;
            break;
          }
        }
      }
      zero += all_zero;
    }
  }
  return static_cast<double>(zero) / static_cast<double>(blocks);
}

}  // namespace

int BlockSparseLinear(ir::Graph& g) {
  std::vector<ir::Op*> linears;
  for (const auto& op : g.ops()) {
    if (op->is(ir::Opcode::linear)) linears.push_back(op.get());
  }
  int rewrites = 0;
  for (ir::Op* op : linears) {
    const ir::Value* w = op->input(1);
    if (!w->is_weight() || !w->data || w->dtype() != DType::kF32 ||
        op->input(0)->dtype() != DType::kF32 || !op->GetStr("out_dtype").empty() ||
        !ir::BlockSparseActivation(op->GetStr("activation")) ||
        (op->input(2) && op->input(2)->dtype() != DType::kF32))
      continue;
    const int64_t k = w->shape()[0], n = w->shape()[1];
    const auto* data = w->data->as<float>();
    BlockShape best{0, 0};
    double best_zero = kMinZeroBlocks;
    for (const BlockShape& s : kShapes) {
      const double z = ZeroBlocks(data, k, n, s, best_zero);
      if (z >= best_zero && (best.rows == 0 || z > best_zero)) {
        best = s;
        best_zero = z;
      }
    }
    if (best.rows == 0) continue;
    g.SetInsertionPoint(op);
    ir::Op* sparse = g.AddOp("linear_block_sparse", op->inputs,
                             {{"block_rows", best.rows},
                              {"block_cols", best.cols},
                              {"activation", op->GetStr("activation")}},
                             op->name);
    g.SetInsertionPoint(nullptr);
    g.ReplaceAllUses(op->output(0), sparse->output(0));
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
