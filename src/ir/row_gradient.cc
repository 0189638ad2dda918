#include "ir/row_gradient.h"

#include <vector>

namespace tiller::ir {

std::optional<RowGradient> AsRowGradient(const Value* grad) {
  const Op* p = grad ? grad->producer : nullptr;
  if (!p || !p->is(Opcode::embedding_grad) || !p->GetBool("sparse")) return std::nullopt;
  return RowGradient{p->inputs[0], p->inputs[1], p->GetInt("padding_idx"), p->GetInt("rows")};
}

Value* RowGradientValue(Graph& g, const RowGradient& r) {
  return g.Add1("embedding_grad", {r.ids, r.rows},
                {{"rows", r.table_rows}, {"padding_idx", r.padding_idx}, {"sparse", true}});
}

namespace {

// The leaves of the add tree computing `v` (left to right); false when one
// is not a row gradient.
bool RowLeaves(Value* v, std::vector<RowGradient>* out) {
  if (auto r = AsRowGradient(v)) {
    out->push_back(*r);
    return true;
  }
  const Op* p = v->producer;
  if (!p || !p->is(Opcode::add) || p->inputs[0]->type != v->type || p->inputs[1]->type != v->type)
    return false;
  return RowLeaves(p->inputs[0], out) && RowLeaves(p->inputs[1], out);
}

}  // namespace

Value* MergeRowGradients(Graph& g, Value* grad) {
  std::vector<RowGradient> leaves;
  if (AsRowGradient(grad) || !RowLeaves(grad, &leaves) || leaves.empty()) return grad;
  for (const RowGradient& r : leaves) {
    if (r.padding_idx != leaves[0].padding_idx) return grad;
  }
  // Where the last contribution was summed, in the backward phase.
  ScopedPlacement scope(g, grad->producer->placement);
  std::vector<Value*> ids, rows;
  const int64_t width = grad->shape()[1];
  for (const RowGradient& r : leaves) {
    const int64_t n = NumElements(r.ids->shape());
    Value* i = g.Add1("reshape", {r.ids}, {{"shape", Shape{n}}});
    if (i->dtype() != DType::kI64) i = g.Add1("cast", {i}, {{"dtype", "int64"}});
    ids.push_back(i);
    rows.push_back(g.Add1("reshape", {r.rows}, {{"shape", Shape{n, width}}}));
  }
  RowGradient merged = leaves[0];
  merged.ids = g.Add1("concat", ids, {{"axis", int64_t{0}}});
  merged.rows = g.Add1("concat", rows, {{"axis", int64_t{0}}});
  return RowGradientValue(g, merged);
}

Value* MapGradient(Graph& g, Value* grad, const std::function<Value*(Value*)>& f) {
  auto r = AsRowGradient(grad);
  if (!r) return f(grad);
  r->rows = f(r->rows);
  return RowGradientValue(g, *r);
}

Value* GradientToCheck(Value* grad) {
  auto r = AsRowGradient(grad);
  return r ? r->rows : grad;
}

}  // namespace tiller::ir
