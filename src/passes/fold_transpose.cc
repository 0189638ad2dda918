// transpose(x){perm} -> matmul              ==>  matmul(x){perm_a | perm_b}
// matmul -> transpose(.){perm}              ==>  matmul{perm_out}
// A transformer splits its heads with reshape + transpose before the
// attention's two matmuls and merges them after: four transposes a layer,
// each moving a whole activation (BERT-Base at batch 8: 1.4% of the time on
// an idle machine, 9.6% while another job ran; memory-bound work suffers
// first).
// matmul kernels read and write strided memory, so the matmul takes the
// transpose's permutation as strides instead. Only permutations that keep
// the last dim last (contiguous rows: BERT's [0, 2, 1, 3]); only transposes
// read by matmuls alone (a training graph's backward matmuls read the heads
// too: each takes the permutation) or whose sole user is the transpose, so
// no other op needs the moved tensor.
#include <algorithm>

#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

// A transpose's permutation, normalized (the matmul's perm attributes hold
// axes counted from the front), when it keeps the last dim last; else empty.
std::vector<int64_t> FoldablePerm(const ir::Op* op) {
  std::vector<int64_t> axes;
  if (!op || !op->is(ir::Opcode::transpose)) return {};
  const auto& perm = op->GetInts("perm");
  if (!NormalizePermutation(perm, static_cast<int>(perm.size()), &axes) || axes.empty() ||
      axes.back() != static_cast<int64_t>(axes.size()) - 1)
    return {};
  return axes;
}

// Whether every reader of `v` is a matmul with no permutation yet on the
// operand v is: then each takes the transpose's, and the transpose goes.
bool FoldsIntoEveryReader(const ir::Graph& g, const ir::Value* v) {
  std::vector<ir::Op*> users = MatmulUsers(g, v);
  return !users.empty() && std::all_of(users.begin(), users.end(), [v](const ir::Op* u) {
    return u->GetInts(u->inputs[0] == v ? "perm_a" : "perm_b").empty();
  });
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
  for (ir::Op* mm : OpsOfType(g, ir::Opcode::matmul)) {
    std::vector<ir::Value*> ins = mm->inputs;
    ir::AttrMap attrs = mm->attrs;
    int folded = 0;
    const char* perm_attr[] = {"perm_a", "perm_b"};
    for (size_t i = 0; i < 2; ++i) {
      ir::Op* t = ins[i]->producer;
      std::vector<int64_t> perm = FoldablePerm(t);
      if (perm.empty() || !FoldsIntoEveryReader(g, ins[i])) continue;
      attrs.Set(perm_attr[i], std::move(perm));
      ins[i] = t->inputs[0];
      ++folded;
    }
    ir::Value* result = mm->outputs[0];
    ir::Op* after = SoleUser(g, result);
    if (std::vector<int64_t> perm = FoldablePerm(after);
        !perm.empty() && mm->GetInts("perm_out").empty()) {
      attrs.Set("perm_out", std::move(perm));
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
