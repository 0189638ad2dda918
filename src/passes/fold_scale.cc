// scale(x){s, bias 0} -> matmul(., y)        (s a power of two, x's only use)
//   ==>  matmul(x, y){alpha * s}
// Attention scales q by 1/sqrt(head dim) before q·kᵀ; oneDNN applies alpha
// to the GEMM's accumulators instead, saving a pass over q. Only powers of
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
  for (ir::Op* sc : OpsOfType(g, "scale")) {
    ir::Value* scaled = sc->outputs[0];
    ir::Op* mm = SoleUser(g, scaled);
    if (!mm || mm->type != "matmul" || scaled->dtype() != DType::kF32) continue;
    double s = sc->GetFloat("scale");
    if (sc->GetFloat("bias") != 0.0 || !PowerOfTwo(s)) continue;
    // The user takes it once (not as both operands of a square).
    if (mm->inputs[0] == mm->inputs[1]) continue;
    ir::AttrMap attrs = mm->attrs;
    attrs.Set("alpha", mm->GetFloat("alpha") * s);
    std::vector<ir::Value*> ins = mm->inputs;
    for (ir::Value*& in : ins) {
      if (in == scaled) in = sc->inputs[0];
    }
    ReplaceResult(g, mm, "matmul", ins, attrs, mm->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
