// matmul(x[..., K], W[K, N] const) -> add(., b[N] const)?
//   ==>  linear(x, W, b)
// oneDNN then adds the bias inside the GEMM's write-back, saving a pass over
// the activations; fuse_activation may then fold a following activation in.
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FuseLinear(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* mm : OpsOfType(g, "matmul")) {
    ir::Value* x = mm->inputs[0];
    ir::Value* w = mm->inputs[1];
    if (mm->GetBool("transpose_a") || mm->GetBool("transpose_b") || mm->GetFloat("alpha") != 1.0 ||
        !mm->GetInts("perm_a").empty() || !mm->GetInts("perm_out").empty() || !HasData(w) ||
        w->rank() != 2 || x->dtype() != DType::kF32)
      continue;
    ir::Value* out = mm->outputs[0];
    ir::Value* bias = nullptr;
    ir::Op* last = mm;
    ir::Op* add = SoleUser(g, out);
    if (add && add->type == "add") {
      ir::Value* other = add->inputs[0] == out ? add->inputs[1] : add->inputs[0];
      if (HasData(other) && NumElements(other->shape()) == w->shape()[1] &&
          other->shape().back() == w->shape()[1] && add->outputs[0]->shape() == out->shape()) {
        bias = other;
        last = add;
      }
    }
    if (bias && bias->rank() != 1) {
      g.SetInsertionPoint(last);
      bias =
          g.Add1("reshape", {bias}, {{"shape", std::vector<int64_t>{w->shape()[1]}}}, bias->name);
    }
    std::vector<ir::Value*> ins{x, w};
    if (bias) ins.push_back(bias);
    ReplaceResult(g, last, "linear", ins, {}, mm->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
