// Elementwise ops: binary with numpy broadcasting, comparisons and logic
// (bool results), `cast` and `where`. Unary math lives in activation.cc.
//   cast{dtype: "float32"...}; where(cond, x, y) broadcasts all three.
#include <string>

#include "ir/op_schema.h"

namespace tiller::ir {
namespace {

void InferBinary(InferContext& ctx, bool bool_out) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.dtype != b.dtype)
    ctx.Fail("operand dtypes differ: {} vs {}", DTypeName(a.dtype), DTypeName(b.dtype));
  Shape out;
  if (!BroadcastShapes(a.shape, b.shape, &out))
    ctx.Fail("shapes {} and {} do not broadcast", ShapeToString(a.shape), ShapeToString(b.shape));
  ctx.AddOutput({bool_out ? DType::kBool : a.dtype, out});
}

const bool kRegistered = [] {
  for (const char* name : {"add", "sub", "mul", "div", "max", "min", "pow", "mod", "floor_div"}) {
    RegisterOpSchema({name, 2, 2, [](InferContext& c) { InferBinary(c, false); }});
  }
  for (const char* name : {"equal", "not_equal", "less", "less_equal", "greater",
                           "greater_equal", "logical_and", "logical_or", "logical_xor"}) {
    RegisterOpSchema({name, 2, 2, [](InferContext& c) { InferBinary(c, true); }});
  }
  RegisterOpSchema({"logical_not", 1, 1, [](InferContext& c) {
                      c.AddOutput({DType::kBool, c.input(0).shape});
                    }});
  RegisterOpSchema({"cast", 1, 1, [](InferContext& c) {
                      DType to;
                      std::string name = c.attrs().Str("dtype", "");
                      if (!ParseDType(name, &to)) c.Fail("unknown cast dtype '{}'", name);
                      c.AddOutput({to, c.input(0).shape});
                    }});
  RegisterOpSchema({"where", 3, 3, [](InferContext& c) {
                      if (c.input(0).dtype != DType::kBool) c.Fail("condition must be bool");
                      if (c.input(1).dtype != c.input(2).dtype) c.Fail("x and y dtypes differ");
                      Shape s1, s2;
                      if (!BroadcastShapes(c.input(0).shape, c.input(1).shape, &s1) ||
                          !BroadcastShapes(s1, c.input(2).shape, &s2))
                        c.Fail("shapes do not broadcast");
                      c.AddOutput({c.input(1).dtype, s2});
                    }});
  return true;
}();

}  // namespace
}  // namespace tiller::ir
