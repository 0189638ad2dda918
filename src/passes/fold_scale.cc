// scale(x){s, bias 0} -> matmul(., y)   (s a power of two; every reader of
//   ==>  matmul(x, y){alpha * s}          the scaled x a matmul)
// matmul(x, y) -> scale(.){s, bias 0}   (the scale the product's only reader)
//   ==>  matmul(x, y){alpha * s}
// Attention scales q by 1/sqrt(head dim) before q·kᵀ; the GEMM applies alpha
// to its accumulators instead, saving a pass over q. Only powers of
// two fold, so the result is bit-identical (scaling by 2^k is exact, and
// (2^k·x)·y = 2^k·(x·y) term by term).
#include <cmath>

#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {
namespace {

bool PowerOfTwo(double s) {
  int exp = 0;
  return s != 0 && std::isfinite(s) && std::frexp(std::abs(s), &exp) == 0.5;
}

}  // namespace

int FoldScaleIntoMatmul(ir::Graph& g) {
  int rewrites = 0;
  for (ir::Op* sc : OpsOfType(g, ir::Opcode::scale)) {
    ir::Value* scaled = sc->outputs[0];
    const double s = sc->GetFloat("scale");
    if (scaled->dtype() != DType::kF32 || sc->GetFloat("bias") != 0.0 || !PowerOfTwo(s)) continue;
    // Into every matmul reading the scaled value (a training graph's
    // backward reads attention's scaled q too).
    if (std::vector<ir::Op*> users = MatmulUsers(g, scaled); !users.empty()) {
      for (ir::Op* mm : users) {
        ir::AttrMap attrs = mm->attrs;
        attrs.Set("alpha", mm->GetFloat("alpha") * s);
        std::vector<ir::Value*> ins = mm->inputs;
        for (ir::Value*& in : ins) {
          if (in == scaled) in = sc->inputs[0];
        }
        ReplaceResult(g, mm, "matmul", ins, attrs, mm->name);
      }
      ++rewrites;
      continue;
    }
    // Or into the matmul computing x, when the scale is its only reader
    // (the backward's scaled gradient of q).
    ir::Op* mm = sc->inputs[0]->producer;
    if (mm && mm->is(ir::Opcode::matmul) && SoleUser(g, mm->outputs[0]) == sc &&
        mm->placement == sc->placement) {  // (the product is computed where the scale was)
      ir::AttrMap attrs = mm->attrs;
      attrs.Set("alpha", mm->GetFloat("alpha") * s);
      ReplaceResult(g, sc, "matmul", mm->inputs, attrs, mm->name);
      ++rewrites;
    }
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
