// linear(x, Wq, bq), linear(x, Wk, bk), linear(x, Wv, bv) -> attention(q, k, v, mask?)
//   ==>  attention(qkv, qkv, qkv, mask?){offsets [0, n, 2n], head_dim}
//        with qkv = linear(x, [Wq | Wk | Wv], [bq | bk | bv])   (constant weights)
// The three projections of one input are one GEMM three times as wide
// (BERT-Base: [128, 768] x [768, 2304] once instead of x [768, 768] three
// times): x is read once, and one call replaces three (where a GEMM runs both
// forms at the same rate nothing is lost; one whose small N costs it
// efficiency gains). The attention kernel reads q, k and v
// in place from the columns of the one result. The merged weight's origin derives from the three
// loaded ones, so steps compiled for other shapes and clones share its packed copy.
#include <cstring>

#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

// The linear producing `v` when it can be merged: constant float32 weight,
// no activation, no half result, read by `attn` alone.
ir::Op* Projection(const ir::Graph& g, const ir::Value* v, const ir::Op* attn) {
  ir::Op* p = v->producer;
  if (!p || !p->is(ir::Opcode::linear) || SoleUser(g, v) != attn || p->placement != attn->placement)
    return nullptr;
  const ir::Value* w = p->inputs[1];
  if (!HasData(w) || w->dtype() != DType::kF32 || !p->GetStr("activation").empty() ||
      !p->GetStr("out_dtype").empty())
    return nullptr;
  const ir::Value* b = p->input(2);
  if (b && (!HasData(b) || b->dtype() != DType::kF32)) return nullptr;
  return p;
}

// The rows of the three [k, n] weights side by side: [k, 3n] (bias: k = 1).
std::shared_ptr<AlignedBuffer> SideBySide(const ir::Op* const (&lin)[3], size_t input, int64_t k,
                                          int64_t n, const char* recipe) {
  auto out = std::make_shared<AlignedBuffer>(static_cast<size_t>(k * 3 * n) * sizeof(float));
  std::vector<uint64_t> origins;
  for (int i = 0; i < 3; ++i) {
    const ir::Value* src = lin[i]->inputs[input];
    origins.push_back(src->data->origin());
    for (int64_t r = 0; r < k; ++r)
      std::memcpy(out->as<float>() + r * 3 * n + i * n, src->const_data<float>() + r * n,
                  static_cast<size_t>(n) * sizeof(float));
  }
  out->set_origin(AlignedBuffer::DerivedOrigin(recipe, origins));
  return out;
}

}  // namespace

int MergeQkv(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* attn : OpsOfType(g, ir::Opcode::attention)) {
    if (!attn->GetInts("offsets").empty()) continue;
    ir::Value *q = attn->inputs[0], *k = attn->inputs[1], *v = attn->inputs[2];
    if (q == k || k == v || q == v) continue;
    const ir::Op* lin[3] = {Projection(g, q, attn), Projection(g, k, attn), Projection(g, v, attn)};
    if (!lin[0] || !lin[1] || !lin[2]) continue;
    ir::Value* x = lin[0]->inputs[0];
    const int64_t rows = lin[0]->inputs[1]->shape()[0], n = lin[0]->inputs[1]->shape()[1];
    const bool bias = lin[0]->input(2) != nullptr;
    bool same = true;
    for (const ir::Op* p : lin) {
      same = same && p->inputs[0] == x && p->inputs[1]->shape() == Shape{rows, n} &&
             (p->input(2) != nullptr) == bias;
    }
    if (!same) continue;
    const int64_t heads = attn->GetInt("heads");
    ir::Value* w =
        g.AddData(lin[0]->inputs[1]->name + ".qkv", {DType::kF32, {rows, 3 * n}},
                  ir::ValueKind::kConstant, SideBySide(lin, 1, rows, n, "merge_qkv.weight"));
    std::vector<ir::Value*> ins{x, w};
    if (bias)
      ins.push_back(g.AddData(lin[0]->input(2)->name + ".qkv", {DType::kF32, {3 * n}},
                              ir::ValueKind::kConstant,
                              SideBySide(lin, 2, 1, n, "merge_qkv.bias")));
    g.SetInsertionPoint(attn);
    ir::Value* qkv = g.Add1("linear", std::move(ins), {}, lin[0]->name + ".qkv");
    std::vector<ir::Value*> attn_ins{qkv, qkv, qkv};
    if (ir::Value* mask = attn->input(3)) attn_ins.push_back(mask);
    ir::Value* out = g.Add1("attention", std::move(attn_ins),
                            {{"heads", heads},
                             {"head_dim", n / heads},
                             {"alpha", attn->GetFloat("alpha")},
                             {"offsets", std::vector<int64_t>{0, n, 2 * n}}},
                            attn->name);
    g.SetInsertionPoint(nullptr);
    out->name = attn->outputs[0]->name;
    g.ReplaceAllUses(attn->outputs[0], out);
    // Now, so the three weights' bytes go before the next layer's copy is made.
    g.RemoveDeadCode();
    ++rewrites;
  }
  return rewrites;
}

}  // namespace tiller::passes
