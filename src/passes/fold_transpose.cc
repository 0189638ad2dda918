// transpose(x){perm} -> matmul              ==>  matmul(x){perm_a | perm_b}
// matmul -> transpose(.){perm}              ==>  matmul{perm_out}
// A transformer splits its heads with reshape + transpose before the
// attention's two matmuls and merges them after: four transposes a layer,
// each moving a whole activation (BERT-Base at batch 8: 1.4% of the time on
// an idle machine, 9.6% while another job ran; memory-bound work suffers
// first).
// oneDNN's matmul reads and writes strided memory, so the matmul takes the
// transpose's permutation as strides instead. Only permutations that keep
// the last dim last (contiguous rows: BERT's [0, 2, 1, 3]); only transposes
// whose matmul is their sole user (or whose sole user is the transpose),
// so no other op needs the moved tensor (a training graph's backward reads
// it, and keeps it).
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

bool KeepsLastDim(const std::vector<int64_t>& perm) {
  return !perm.empty() && perm.back() == static_cast<int64_t>(perm.size()) - 1;
}

bool IsFoldable(const ir::Op* op) {
  return op && op->type == "transpose" && KeepsLastDim(op->GetInts("perm"));
}

// A copy of matmul `mm` (placed where it was) with inputs `ins` and
// attributes `attrs`; returns its output.
ir::Value* Rebuild(ir::Graph& g, ir::Op* mm, std::vector<ir::Value*> ins, ir::AttrMap attrs) {
  g.SetInsertionPoint(mm);
  ir::Value* out = g.Add1("matmul", std::move(ins), std::move(attrs), mm->name);
  g.SetInsertionPoint(nullptr);
  return out;
}

}  // namespace

int FoldTransposeIntoMatmul(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* mm : OpsOfType(g, "matmul")) {
    std::vector<ir::Value*> ins = mm->inputs;
    ir::AttrMap attrs = mm->attrs;
    int folded = 0;
    const char* perm_attr[] = {"perm_a", "perm_b"};
    for (size_t i = 0; i < 2; ++i) {
      ir::Op* t = ins[i]->producer;
      if (!IsFoldable(t) || SoleUser(g, ins[i]) != mm || !mm->GetInts(perm_attr[i]).empty() ||
          (i == 1 && mm->inputs[0] == mm->inputs[1]))
        continue;
      attrs.Set(perm_attr[i], t->GetInts("perm"));
      ins[i] = t->inputs[0];
      ++folded;
    }
    ir::Value* result = mm->outputs[0];
    ir::Op* after = SoleUser(g, result);
    const bool fold_out = IsFoldable(after) && mm->GetInts("perm_out").empty();
    if (fold_out) {
      attrs.Set("perm_out", after->GetInts("perm"));
      result = after->outputs[0];
      ++folded;
    }
    if (!folded) continue;
    ir::Value* out = Rebuild(g, mm, std::move(ins), std::move(attrs));
    out->name = result->name;
    g.ReplaceAllUses(result, out);
    rewrites += folded;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
