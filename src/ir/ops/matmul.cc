// matmul(a, b){transpose_a: bool = false, transpose_b: bool = false,
// alpha: float = 1.0, perm_a: ints = [], perm_b: ints = [], perm_out:
// ints = []}: numpy matmul over the last two dims with broadcast batch dims;
// both operands have rank >= 2 (frontends reshape vectors).
// Output: batch... x M x N, times alpha.
// perm_a / perm_b / perm_out (set by the fold_transpose pass only, after
// autodiff): the operand is transpose(a, perm_a) (before transpose_a), and
// the output is transpose(result, perm_out); the kernel reads and writes
// through strides instead of a transpose op moving the tensor. Each keeps
// the last dim last (the rows stay contiguous).
// linear(x, w, bias?){activation: string = ""}: x[..., K] @ w[K, N] +
// bias[N]; the fused form the inference passes produce from matmul + add.
// `activation` (relu, tanh, gelu, gelu_tanh; "" for none) is set by
// fuse_activation only, so it never reaches autodiff.
// Precision: half safe (float32 accumulation). Layout: fixed (the last two
// dims are the matrix).
// matmul_accumulate(acc, a, b){transpose_a, transpose_b, alpha}: acc +
// matmul(a, b), the matmul's shape equal to acc's: the driver's gradient
// accumulation of a weight gradient that a matmul computes, written into the
// accumulator's storage by the GEMM itself (no gradient-sized temporary,
// one pass over the accumulator instead of three). The accumulator is
// float32; a and b may be half with out_dtype float32.
// attention(q, k, v, mask?){heads: int = 1, head_dim: int = 0, alpha: float
// = 1.0, offsets: ints = []}: multi-head scaled dot-product attention over
// [B, S, heads * head_dim] activations, the heads side by side in the last
// dim (as the projections write them): for each batch b and head h,
//   out[b, :, h] = softmax(alpha * q[b, :, h] k[b, :, h]^T + mask) v[b, :, h]
// with the mask (float32, rank <= 4) broadcast to [B, heads, Sq, Sk] and
// added before the softmax over the keys. q: [B, Sq, heads * head_dim], k:
// [B, Sk, heads * head_dim], v: [B, Sk, heads * dv]; out [B, Sq, heads * dv].
// offsets [oq, ok, ov] (with head_dim set): q, k and v are the columns
// [o, o + heads * head_dim) of their inputs' last dims, so one tensor
// holding all three side by side (merge_qkv's single projection) is read
// in place. Set by the fuse_attention / merge_qkv inference passes only
// (no gradient rule). Precision: float32.
// out_dtype (matmul, matmul_accumulate, linear): see HalfSafeOutDType
// (ir/op_schema.h); set by the mixed-precision pass only, after autodiff,
// so gradient rules never see half operands.
//
// Gradients, with C = op(A) op(B) (op = optional transpose of the last two
// dims):
//   no transposes: dA = dC B^T,        dB = A^T dC
//   A transposed:  dA = B dC^T,        dB = A dC
//   B transposed:  dA = dC B,          dB = dC^T A
//   both:          dA = B^T dC^T,      dB = dC^T A^T
// Broadcast batch dims are summed back by ReduceTo, except for a 2-D B
// under a batched, untransposed A (a layer's weight): there dB is one GEMM
// over the batch rows flattened.
#include "ir/grad.h"
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

// `shape` permuted by `perm` (empty: as it is), checked to be a permutation
// of its dims (negative ones counted from the end) that keeps the last one
// last.
Shape Permuted(InferContext& c, const Shape& shape, const std::vector<int64_t>& perm,
               const char* attr) {
  if (perm.empty()) return shape;
  std::vector<int64_t> axes;
  if (!NormalizePermutation(perm, static_cast<int>(shape.size()), &axes) ||
      axes.back() != static_cast<int64_t>(shape.size()) - 1)
    c.Fail("{} {} is not a permutation of {}'s dims keeping the last one last", attr,
           ShapeToString(perm), ShapeToString(shape));
  Shape out;
  for (int64_t a : axes) out.push_back(shape[static_cast<size_t>(a)]);
  return out;
}

void InferMatmul(InferContext& c) {
  const TensorType a{c.input(0).dtype,
                     Permuted(c, c.input(0).shape, c.op().GetInts("perm_a"), "perm_a")};
  const TensorType b{c.input(1).dtype,
                     Permuted(c, c.input(1).shape, c.op().GetInts("perm_b"), "perm_b")};
  if (a.shape.size() < 2 || b.shape.size() < 2)
    c.Fail("operands need rank >= 2, got {} and {}", ShapeToString(a.shape),
           ShapeToString(b.shape));
  if (a.dtype != b.dtype) c.Fail("operand dtypes differ");
  bool ta = c.op().GetBool("transpose_a"), tb = c.op().GetBool("transpose_b");
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
  c.AddOutput(
      {HalfSafeOutDType(c, a.dtype), Permuted(c, batch, c.op().GetInts("perm_out"), "perm_out")});
}

void InferMatmulAccumulate(InferContext& c) {
  const TensorType& acc = c.input(0);
  const TensorType& a = c.input(1);
  const TensorType& b = c.input(2);
  if (a.shape.size() < 2 || b.shape.size() < 2 || a.dtype != b.dtype ||
      HalfSafeOutDType(c, a.dtype) != acc.dtype)
    c.Fail("operands {} and {} do not multiply into acc {}", a.ToString(), b.ToString(),
           acc.ToString());
  bool ta = c.op().GetBool("transpose_a"), tb = c.op().GetBool("transpose_b");
  size_t ra = a.shape.size(), rb = b.shape.size();
  Shape want(a.shape.begin(), a.shape.end() - 2);
  want.push_back(ta ? a.shape[ra - 1] : a.shape[ra - 2]);
  want.push_back(tb ? b.shape[rb - 2] : b.shape[rb - 1]);
  const int64_t ka = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const int64_t kb = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  if (ka != kb ||
      Shape(b.shape.begin(), b.shape.end() - 2) != Shape(want.begin(), want.end() - 2) ||
      want != acc.shape)
    c.Fail("{}{} x {}{} is not an acc-shaped {} product (equal batch dims, no broadcast)",
           ShapeToString(a.shape), ta ? "^T" : "", ShapeToString(b.shape), tb ? "^T" : "",
           ShapeToString(acc.shape));
  c.AddOutput(acc);
}

void InferLinear(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& w = c.input(1);
  if (x.shape.empty() || w.shape.size() != 2 || x.shape.back() != w.shape[0])
    c.Fail("bad shapes {} x {}", ShapeToString(x.shape), ShapeToString(w.shape));
  if (w.dtype != x.dtype) c.Fail("operand dtypes differ");
  const DType out_dtype = HalfSafeOutDType(c, x.dtype);
  if (c.has_input(2) && NumElements(c.input(2).shape) != w.shape[1]) c.Fail("bias size mismatch");
  if (c.has_input(2) && c.input(2).dtype != out_dtype && c.input(2).dtype != DType::kF32)
    c.Fail("bias dtype {} is neither the result's nor float32", DTypeName(c.input(2).dtype));
  Shape out = x.shape;
  out.back() = w.shape[1];
  if (c.has_input(3) && (c.input(3).shape != out || c.input(3).dtype != out_dtype))
    c.Fail("residual {} {} is not the result's {} {}", DTypeName(c.input(3).dtype),
           ShapeToString(c.input(3).shape), DTypeName(out_dtype), ShapeToString(out));
  c.AddOutput({out_dtype, out});
}

void InferAttention(InferContext& c) {
  const TensorType &q = c.input(0), &k = c.input(1), &v = c.input(2);
  const int64_t heads = c.op().GetInt("heads"), head_dim = c.op().GetInt("head_dim");
  const std::vector<int64_t>& offsets = c.op().GetInts("offsets");
  if (q.shape.size() != 3 || k.shape.size() != 3 || v.shape.size() != 3)
    c.Fail("q, k and v need rank 3 ([batch, seq, heads * dim]), got {}, {} and {}",
           ShapeToString(q.shape), ShapeToString(k.shape), ShapeToString(v.shape));
  if (q.dtype != DType::kF32 || k.dtype != q.dtype || v.dtype != q.dtype)
    c.Fail("q, k and v must be float32, got {}, {} and {}", DTypeName(q.dtype), DTypeName(k.dtype),
           DTypeName(v.dtype));
  if (heads < 1) c.Fail("heads {} < 1", heads);
  const int64_t batch = q.shape[0], sq = q.shape[1], sk = k.shape[1];
  if (k.shape[0] != batch || v.shape[0] != batch || v.shape[1] != sk)
    c.Fail("q {}, k {} and v {} disagree on batch or key length", ShapeToString(q.shape),
           ShapeToString(k.shape), ShapeToString(v.shape));
  int64_t dv = 0;
  if (offsets.empty()) {
    const int64_t d = q.shape[2] / heads;
    if (q.shape[2] != heads * d || k.shape[2] != q.shape[2] || v.shape[2] % heads != 0 ||
        (head_dim != 0 && head_dim != d))
      c.Fail("q {}, k {} and v {} do not split into {} heads (head_dim {})", ShapeToString(q.shape),
             ShapeToString(k.shape), ShapeToString(v.shape), heads, head_dim);
    dv = v.shape[2] / heads;
  } else {
    if (offsets.size() != 3 || head_dim < 1)
      c.Fail("offsets {} need 3 entries and head_dim ({}) >= 1", ShapeToString(offsets), head_dim);
    const int64_t width = heads * head_dim;
    for (int i = 0; i < 3; ++i) {
      const int64_t cols = c.input(i).shape[2];
      if (offsets[i] < 0 || offsets[i] + width > cols)
        c.Fail("columns [{}, {}) of {}'s {} are out of range", offsets[i], offsets[i] + width,
               "qkv"[i], cols);
    }
    dv = head_dim;
  }
  if (c.has_input(3)) {
    const TensorType& mask = c.input(3);
    const Shape full{batch, heads, sq, sk};
    Shape out;
    if (mask.dtype != DType::kF32 || mask.shape.size() > 4 ||
        !BroadcastShapes(mask.shape, full, &out) || out != full)
      c.Fail("mask {} does not broadcast to the scores' {}", mask.ToString(), ShapeToString(full));
  }
  c.AddOutput({DType::kF32, {batch, sq, heads * dv}});
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"matmul", 2, 2, InferMatmul}
                              .Attr("transpose_a", false)
                              .Attr("transpose_b", false)
                              .Attr("alpha", 1.0)
                              .Attr("perm_a", std::vector<int64_t>{})
                              .Attr("perm_b", std::vector<int64_t>{})
                              .Attr("perm_out", std::vector<int64_t>{})
                              .Attr("out_dtype", "")
                              .Precision(PrecisionRule::kHalfSafe)
                              .Layout(LayoutRule::kFixed));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"matmul_accumulate", 3, 3, InferMatmulAccumulate}
                              .Attr("transpose_a", false)
                              .Attr("transpose_b", false)
                              .Attr("alpha", 1.0)
                              .Attr("out_dtype", "")
                              .Precision(PrecisionRule::kHalfSafe)
                              .Layout(LayoutRule::kFixed)
                              .InPlaceSafe());
// linear(x, W, b?, r?): x W [+ b] [+ r], then the activation; r (a residual,
// fuse_linear_residual) has the result's shape and type, and the result may
// take its storage.
TILLER_REGISTER_OP_SCHEMA(OpSchema{"linear", 2, 4, InferLinear}
                              .Attr("activation", "")
                              .Attr("out_dtype", "")
                              .Precision(PrecisionRule::kHalfSafe)
                              .Layout(LayoutRule::kFixed)
                              .InPlaceInput(3));
// linear_block_sparse(x, W, b?, r?){block_rows, block_cols, transpose_w,
// activation}: linear's math (with W^T where transpose_w: x [.., n] gives
// [.., k] for W [k, n]) on a W whose nonzeros lie in few blocks of
// block_rows x block_cols of the multiplied matrix; the kernel multiplies
// only those blocks. W is a pruned model's constant (the
// block_sparse_linear pass finds its zero blocks), or a trained weight the
// program keeps pruned (the block_sparse_weights option), whose zero
// blocks the kernel finds at every run.
void InferLinearBlockSparse(InferContext& c) {
  if (!c.op().GetBool("transpose_w")) return InferLinear(c);
  const TensorType& x = c.input(0);
  const TensorType& w = c.input(1);
  if (x.shape.empty() || w.shape.size() != 2 || x.shape.back() != w.shape[1] ||
      w.dtype != x.dtype || x.dtype != DType::kF32 || c.has_input(2) || c.has_input(3))
    c.Fail("x {} times W^T of {}: float32, no bias or residual", x.ToString(), w.ToString());
  Shape out = x.shape;
  out.back() = w.shape[0];
  c.AddOutput({DType::kF32, out});
}
TILLER_REGISTER_OP_SCHEMA(OpSchema{"linear_block_sparse", 2, 4, InferLinearBlockSparse}
                              .RequiredAttr("block_rows", AttrKind::kInt)
                              .Attr("transpose_w", false)
                              .RequiredAttr("block_cols", AttrKind::kInt)
                              .Attr("activation", "")
                              .Attr("out_dtype", "")
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed)
                              .InPlaceInput(3));
TILLER_REGISTER_OP_SCHEMA(OpSchema{"attention", 3, 4, InferAttention}
                              .Attr("heads", int64_t{1})
                              .Attr("head_dim", int64_t{0})
                              .Attr("alpha", 1.0)
                              .Attr("offsets", std::vector<int64_t>{})
                              .Precision(PrecisionRule::kAlwaysF32)
                              .Layout(LayoutRule::kFixed));

// ---- Gradients ----------------------------------------------------------

Value* Mm(GradContext& c, Value* a, Value* b, bool ta, bool tb) {
  return c.Add("matmul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
}

void MatmulGrad(GradContext& c) {
  for (const char* perm : {"perm_a", "perm_b", "perm_out"}) {
    if (!c.op().GetInts(perm).empty())
      Fail(ErrorKind::kInternal, "matmul ({}) with a folded transpose ({}) reached autodiff",
           c.op().name, perm);
  }
  Value* a = c.input(0);
  Value* b = c.input(1);
  Value* g = c.out_grad();
  double alpha = c.op().GetFloat("alpha");
  if (alpha != 1.0) g = c.Add("scale", {g}, {{"scale", alpha}, {"bias", 0.0}});
  bool ta = c.op().GetBool("transpose_a"), tb = c.op().GetBool("transpose_b");
  if (c.needs_grad(0)) {
    Value* da = !ta ? (!tb ? Mm(c, g, b, false, true) : Mm(c, g, b, false, false))
                    : (!tb ? Mm(c, b, g, false, true) : Mm(c, b, g, true, true));
    c.SetInputGrad(0, c.ReduceTo(da, a->shape()));
  }
  if (c.needs_grad(1)) {
    const Shape& as = a->shape();
    if (b->shape().size() == 2 && as.size() > 2 && !ta) {
      // A weight shared by every batch row (x[B.., M, K] @ W): the batch
      // rows are more rows of one GEMM, which sums over them as it goes
      // (no [B.., K, N] product to reduce afterwards).
      const int64_t k = as.back(), rows = NumElements(as) / k;
      Value* a2 = c.Add("reshape", {a}, {{"shape", std::vector<int64_t>{rows, k}}});
      Value* g2 = c.Add("reshape", {g}, {{"shape", std::vector<int64_t>{rows, g->shape().back()}}});
      c.SetInputGrad(1, !tb ? Mm(c, a2, g2, true, false) : Mm(c, g2, a2, true, false));
      return;
    }
    Value* db = !tb ? (!ta ? Mm(c, a, g, true, false) : Mm(c, a, g, false, false))
                    : (!ta ? Mm(c, g, a, true, false) : Mm(c, g, a, true, true));
    c.SetInputGrad(1, c.ReduceTo(db, b->shape()));
  }
}

// linear(x[..., K], W[K, N], b[N]): the rows of x are independent samples.
void LinearGrad(GradContext& c) {
  if (!c.op().GetStr("activation").empty())
    Fail(ErrorKind::kInternal, "linear ({}) with a fused activation reached autodiff", c.op().name);
  Value* x = c.input(0);
  Value* w = c.input(1);
  Value* g = c.out_grad();
  int64_t k = w->shape()[0], n = w->shape()[1];
  int64_t m = NumElements(x->shape()) / k;
  Value* g2 = c.Add("reshape", {g}, {{"shape", std::vector<int64_t>{m, n}}});
  if (c.needs_grad(0)) c.SetInputGrad(0, Mm(c, g, w, false, true));
  if (c.needs_grad(1)) {
    Value* x2 = c.Add("reshape", {x}, {{"shape", std::vector<int64_t>{m, k}}});
    c.SetInputGrad(1, Mm(c, x2, g2, true, false));
  }
  if (c.input(2) && c.needs_grad(2)) {
    Value* db = c.Add("reduce_sum", {g2}, {{"axes", std::vector<int64_t>{0}}, {"keepdim", false}});
    c.SetInputGrad(2, c.ReduceTo(db, c.input(2)->shape()));
  }
}

TILLER_REGISTER_GRAD("matmul", MatmulGrad);
TILLER_REGISTER_GRAD("linear", LinearGrad);

}  // namespace
}  // namespace tiller::ir
