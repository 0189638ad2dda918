// linear(x, W, b) -> add(., r)   ==>  linear(x, W, b, r)
// A transformer block ends each of its two halves by adding its input (the
// residual) to a projection's result before the layer_norm: a GEMM kernel adds r
// as it writes its result (a sum epilogue: into r's own storage when
// the memory plan hands it over, see OpSchema::inplace_input), so the add
// costs no pass of its own over the activations (BERT-Base at batch 8: 24
// adds reading 6 MiB and writing 3 MiB each). Inference only: in training
// r is read again by the backward pass, so the result could never take its
// storage and the copy would cost what the add did. The linear keeps no
// activation (epilogues apply in order: the add comes first, and
// fuse_activation may still fold an activation that follows the add).
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FuseLinearResidual(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* lin : OpsOfType(g, ir::Opcode::linear)) {
    // With a bias (the residual's slot is the fourth) and nothing after it.
    if (lin->inputs.size() != 3 || !lin->inputs[2] || !lin->GetStr("activation").empty()) continue;
    const ir::Value* y = lin->outputs[0];
    ir::Op* add = nullptr;
    ir::Value* r = FindResidualAdd(g, y, &add);
    // An empty product is left to the add.
    if (!r || y->dtype() != DType::kF32 || NumElements(y->shape()) == 0 ||
        NumElements(lin->inputs[0]->shape()) == 0)
      continue;
    std::vector<ir::Value*> ins = lin->inputs;
    ins.push_back(r);
    ReplaceResult(g, add, "linear", std::move(ins), lin->attrs, lin->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
