// matmul(q4, k4){perm [0,2,1,3] both, transpose_b, alpha} [-> add(., mask)]
//   (or q4 read as scale(transpose(q4)){s}: alpha s)
//   -> softmax{last axis} -> matmul(., v4){perm_b, perm_out [0,2,1,3]}
//   ==>  reshape(attention(q, k, v, mask){heads, alpha}) (q = q4 as [B, S, heads * dim], ...)
// A transformer's attention after fold_transpose: four ops moving the
// [B, heads, Sq, Sk] scores through memory (two products, the mask add,
// the softmax), the scores growing with the square of the sequence. The
// attention kernel keeps a block of them in cache per task and never holds
// them all. Float32 only (the mixed-precision pass, later, leaves
// attention in float32), and only when every intermediate has this pattern
// as its sole reader (fetched scores or probabilities keep the ops).
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

const std::vector<int64_t> kHeads{0, 2, 1, 3};

bool IsF32(const ir::Value* v) {
  return v->dtype() == DType::kF32;
}

// A [B, S, heads, dim] operand as [B, S, heads * dim]: its reshape's input
// when it is one of that shape, else a new reshape (a view) before `at`.
ir::Value* Merged(ir::Graph& g, ir::Value* v4, ir::Op* at) {
  const Shape& s = v4->shape();
  const Shape want{s[0], s[1], s[2] * s[3]};
  if (ir::Op* p = v4->producer; p && p->is(ir::Opcode::reshape) && p->inputs[0]->shape() == want)
    return p->inputs[0];
  g.SetInsertionPoint(at);
  ir::Value* r = g.Add1("reshape", {v4}, {{"shape", want}}, v4->name + ".merged");
  g.SetInsertionPoint(nullptr);
  return r;
}

// The scores matmul's query operand as [B, Sq, heads, d] heads and the
// factor on the product: read through perm_a [0, 2, 1, 3] (fold_transpose),
// or Paddle's scale(transpose(q){[0, 2, 1, 3]}){s, bias 0} where s is no
// power of two (fold_scale folds only those, exactly), s then joining alpha
// (scaling the product instead of q: a rounding's difference). The ops it
// reads through go to `chain`. nullptr when neither.
ir::Value* QueryHeads(const ir::Graph& g, const ir::Op* scores, double* alpha,
                      std::vector<const ir::Op*>* chain) {
  *alpha = scores->GetFloat("alpha");
  ir::Value* a = scores->inputs[0];
  if (scores->GetInts("perm_a") == kHeads) return a;
  if (!scores->GetInts("perm_a").empty()) return nullptr;
  const ir::Op* sc = a->producer;
  if (!sc || !sc->is(ir::Opcode::scale) || sc->GetFloat("bias") != 0.0 || SoleUser(g, a) != scores)
    return nullptr;
  const ir::Op* t = sc->inputs[0]->producer;
  if (!t || !t->is(ir::Opcode::transpose) || SoleUser(g, sc->inputs[0]) != sc) return nullptr;
  std::vector<int64_t> perm;
  if (!NormalizePermutation(t->GetInts("perm"), 4, &perm) || perm != kHeads) return nullptr;
  *alpha *= sc->GetFloat("scale");
  chain->push_back(sc);
  chain->push_back(t);
  return t->inputs[0];
}

}  // namespace

int FuseAttention(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* scores : OpsOfType(g, ir::Opcode::matmul)) {
    if (scores->GetInts("perm_b") != kHeads || !scores->GetBool("transpose_b") ||
        scores->GetBool("transpose_a") || !scores->GetInts("perm_out").empty() ||
        !scores->GetStr("out_dtype").empty())
      continue;
    std::vector<const ir::Op*> chain{scores};
    double alpha = 1.0;
    ir::Value *q4 = QueryHeads(g, scores, &alpha, &chain), *k4 = scores->inputs[1];
    if (!q4 || q4->rank() != 4 || k4->rank() != 4 || !IsF32(q4) || !IsF32(k4)) continue;
    ir::Op* next = SoleUser(g, scores->outputs[0]);
    ir::Value* mask = nullptr;
    if (next && next->is(ir::Opcode::add) &&
        next->outputs[0]->shape() == scores->outputs[0]->shape()) {
      mask = next->inputs[0] == scores->outputs[0] ? next->inputs[1] : next->inputs[0];
      Shape b;
      if (mask == scores->outputs[0] || !IsF32(mask) || mask->rank() > 4 ||
          !BroadcastShapes(mask->shape(), scores->outputs[0]->shape(), &b) ||
          b != scores->outputs[0]->shape())
        continue;
      chain.push_back(next);
      next = SoleUser(g, next->outputs[0]);
    }
    ir::Op* softmax = next;
    if (!softmax || !softmax->is(ir::Opcode::softmax) ||
        NormalizeAxis(softmax->GetInt("axis"), 4) != 3)
      continue;
    chain.push_back(softmax);
    ir::Op* context = SoleUser(g, softmax->outputs[0]);
    if (!context || !context->is(ir::Opcode::matmul) || context->inputs[0] != softmax->outputs[0] ||
        !context->GetInts("perm_a").empty() || context->GetInts("perm_b") != kHeads ||
        context->GetInts("perm_out") != kHeads || context->GetBool("transpose_a") ||
        context->GetBool("transpose_b") || context->GetFloat("alpha") != 1.0 ||
        !context->GetStr("out_dtype").empty())
      continue;
    chain.push_back(context);
    ir::Value* v4 = context->inputs[1];
    if (v4->rank() != 4 || !IsF32(v4)) continue;
    // One placement for the whole pattern (a pipeline stage may end inside it).
    bool one_place = true;
    for (const ir::Op* op : chain) one_place = one_place && op->placement == scores->placement;
    if (!one_place) continue;
    const Shape& qs = q4->shape();
    const int64_t heads = qs[2];
    std::vector<ir::Value*> ins{Merged(g, q4, context), Merged(g, k4, context),
                                Merged(g, v4, context)};
    if (mask) ins.push_back(mask);
    // The context as [B, Sq, heads * dv], seen by the readers as the
    // matmul's [B, Sq, heads, dv] through a reshape (a view).
    g.SetInsertionPoint(context);
    ir::Value* out =
        g.Add1("attention", std::move(ins), {{"heads", heads}, {"alpha", alpha}}, context->name);
    ir::Value* split = g.Add1("reshape", {out}, {{"shape", context->outputs[0]->shape()}});
    g.SetInsertionPoint(nullptr);
    out->name = context->outputs[0]->name + ".merged";
    split->name = context->outputs[0]->name;
    g.ReplaceAllUses(context->outputs[0], split);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
