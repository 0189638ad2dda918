// Scans along one axis.
//   cumsum(x){axis, exclusive, reverse}: running sums, same shape and dtype
#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferScan(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  if (NormalizeAxis(c.attrs().Int("axis", -1), std::max(rank, 1)) < 0)
    c.Fail("axis {} out of range for {}", c.attrs().Int("axis", -1), ShapeToString(x.shape));
  c.AddOutput(x);
}

TILLER_REGISTER_OP_SCHEMA(OpSchema{"cumsum", 1, 1, InferScan});

}  // namespace
}  // namespace tiller::ir
