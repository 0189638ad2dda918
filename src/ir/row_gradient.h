// Row gradients: an embedding table's gradient kept as the rows its lookups
// touched (Paddle's SelectedRows, asked for with is_sparse / sparse = true)
// instead of a dense table of zeros with a few rows filled in.
//
// In the graph a row gradient is an embedding_grad{sparse} op: its value is
// the dense gradient (what a dense reader gets), and its inputs are the
// rows' ids and the rows. The compiler keeps that form through the steps
// between autodiff and the update (several lookups' contributions merged,
// the mean's scale, the loss scale, the replicas' exchange), so an update
// that reads rows (ir/ops/optimizer.h, sgd_rows ...) finds them, and the
// dense embedding_grad stays only where a dense update reads it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "ir/graph.h"

namespace tiller::ir {

struct RowGradient {
  Value* ids;           // int32|int64, any shape: N ids in all
  Value* rows;          // ids.shape + [D]: the gradient of each id's looked-up row
  int64_t padding_idx;  // an id whose row counts as zero (-1: none)
  int64_t table_rows;   // the table's rows (V)
};

// The row form of `grad` when an embedding_grad{sparse} computes it.
std::optional<RowGradient> AsRowGradient(const Value* grad);

// The dense value of `r`: an embedding_grad{sparse} op (which keeps the
// row form findable by AsRowGradient).
Value* RowGradientValue(Graph& g, const RowGradient& r);

// Where `grad` sums several lookups' row gradients of one table (an add
// tree whose leaves are all embedding_grad{sparse} with one padding_idx):
// one row gradient of them all, ids flattened to int64 [N] and rows to
// [N, D], concatenated in the tree's left-to-right order. Otherwise `grad`.
Value* MergeRowGradients(Graph& g, Value* grad);

// `f` (an elementwise scaling: the mean, the loss scale) applied to a
// gradient: to its rows when it is a row gradient, else to `grad`.
Value* MapGradient(Graph& g, Value* grad, const std::function<Value*(Value*)>& f);

// The value a finite check of the gradient reads: the rows of a row
// gradient (the dense value is them plus zeros), else `grad`.
Value* GradientToCheck(Value* grad);

}  // namespace tiller::ir
