// add(x, embedding_grad(ids, dy){rows, padding_idx})   (either operand order)
//   ==>  embedding_grad_add(x, ids, dy){padding_idx}
// A table used twice (BERT's word embeddings, tied to the masked-LM
// decoder) gets the sum of two gradients: the decoder's dense one and the
// lookup's, which touches only the rows of the batch's ids. As an add, the
// lookup's gradient is a zero-filled table-sized tensor (94 MB for BERT's
// 30522 x 768) and the add reads two of them and writes a third; fused, the
// ids' rows of dy are added into x, in x's storage when nothing reads x
// afterwards (embedding_grad_add declares its input 0 in place). A row
// with one id gets x + dy as before, bit for bit; a row whose id occurs k
// times gets ((x + dy1) + dy2) ... instead of x + ((dy1 + dy2) ...): the
// same sum in another order, within float32 rounding.
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FuseEmbeddingGradAdd(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* add : OpsOfType(g, ir::Opcode::add)) {
    for (int side = 1; side >= 0; --side) {
      ir::Value* grad = add->inputs[side];
      ir::Value* acc = add->inputs[1 - side];
      ir::Op* eg = grad->producer;
      // (The fused op runs where the add did: the scatter must run there too.)
      // (A part of a table's gradient, row_begin > 0, keeps its own op.)
      if (!eg || !eg->is(ir::Opcode::embedding_grad) || eg->GetInt("row_begin") != 0 ||
          SoleUser(g, grad) != add || acc == grad || acc->type != grad->type ||
          add->outputs[0]->type != grad->type || eg->placement != add->placement)
        continue;
      ReplaceResult(g, add, "embedding_grad_add", {acc, eg->inputs[0], eg->inputs[1]},
                    {{"padding_idx", eg->GetInt("padding_idx")}}, add->name);
      ++rewrites;
      break;
    }
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
