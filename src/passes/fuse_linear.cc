// matmul(x[..., K], W[K, N]) -> add(., b[N])?
//   ==>  linear(x, W, b)
// The GEMM kernel then adds the bias as it writes its result, saving a pass over
// the activations; fuse_activation may then fold a following activation in.
// W and b are constants (inference: W is packed once) or, with a bias add,
// values computed at run time (training's parameters: the kernel reads them
// as they are); a bare matmul of a variable W stays (fold_transpose may
// still fold a transpose into it).
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FuseLinear(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* mm : OpsOfType(g, ir::Opcode::matmul)) {
    ir::Value* x = mm->inputs[0];
    ir::Value* w = mm->inputs[1];
    if (mm->GetBool("transpose_a") || mm->GetBool("transpose_b") || mm->GetFloat("alpha") != 1.0 ||
        !mm->GetInts("perm_a").empty() || !mm->GetInts("perm_b").empty() ||
        !mm->GetInts("perm_out").empty() || w->rank() != 2 || x->dtype() != DType::kF32 ||
        w->dtype() != DType::kF32)
      continue;
    ir::Op* last = mm;
    ir::Value* bias = FindBiasAdd(g, mm->outputs[0], w->shape()[1], &last, /*variable=*/true);
    if (!HasData(w) && !bias) continue;
    std::vector<ir::Value*> ins{x, w};
    if (bias) ins.push_back(bias);
    ReplaceResult(g, last, "linear", ins, {}, mm->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
