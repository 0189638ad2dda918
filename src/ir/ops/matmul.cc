// matmul(a, b){transpose_a, transpose_b, alpha=1}: numpy matmul over the last
// two dims with broadcast batch dims; both operands have rank >= 2 (frontends
// reshape vectors). Output: batch... x M x N, times alpha.
// linear(x, w, bias?){}: x[..., K] @ w[K, N] + bias[N]; the fused form the
// inference passes produce from matmul + add.
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferMatmul(InferContext& c) {
  const TensorType& a = c.input(0);
  const TensorType& b = c.input(1);
  if (a.shape.size() < 2 || b.shape.size() < 2)
    c.Fail("operands need rank >= 2, got {} and {}", ShapeToString(a.shape),
           ShapeToString(b.shape));
  if (a.dtype != b.dtype) c.Fail("operand dtypes differ");
  bool ta = c.attrs().Bool("transpose_a", false), tb = c.attrs().Bool("transpose_b", false);
  size_t ra = a.shape.size(), rb = b.shape.size();
  int64_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  int64_t ka = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t kb = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  if (ka != kb)
    c.Fail("inner dims differ: {}{} x {}{}", ShapeToString(a.shape), ta ? "^T" : "",
           ShapeToString(b.shape), tb ? "^T" : "");
  Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
  Shape batch;
  if (!BroadcastShapes(batch_a, batch_b, &batch)) c.Fail("batch dims do not broadcast");
  batch.push_back(m);
  batch.push_back(n);
  c.AddOutput({a.dtype, batch});
}

void InferLinear(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& w = c.input(1);
  if (x.shape.empty() || w.shape.size() != 2 || x.shape.back() != w.shape[0])
    c.Fail("bad shapes {} x {}", ShapeToString(x.shape), ShapeToString(w.shape));
  if (c.has_input(2) && NumElements(c.input(2).shape) != w.shape[1]) c.Fail("bias size mismatch");
  Shape out = x.shape;
  out.back() = w.shape[1];
  c.AddOutput({x.dtype, out});
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"matmul", 2, 2, InferMatmul});
TILLER_REGISTER_OP_SCHEMA(OpSchema{"linear", 2, 3, InferLinear});

}  // namespace
}  // namespace tiller::ir
