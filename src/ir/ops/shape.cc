// Data-movement and reduction ops and their gradient rules (plus cumsum's,
// whose schema is in scan.cc). Attributes (defaults after =):
//   reshape(x){shape (required): concrete dims}: a view, no data moves
//   transpose(x){perm (required)}
//   slice(x){axes, starts, ends (required), steps = [] (all 1)}: python
//     slicing (see ResolveSlice)
//   concat(x...){axis = 0}, split(x){axis = 0, sections (required): sizes}
//     -> one output per section
//   expand(x){shape (required)}: numpy broadcast of x to `shape`
//   gather(x, index int){axis = 0}: numpy take
//   gather_nd(x, index int [..., k]): the slabs x[index[..., :]], out
//     index.shape[:-1] + x.shape[k:] (Paddle's gather_nd; negative indices
//     count from the end)
//   reduce_sum|mean|max|min|prod(x){axes = [] (all), keepdim = false}
//   logsumexp(x){axes = [] (all), keepdim = false}: max + log(sum(exp(x - max)))
//     over the axes, the max shifted out so exp cannot overflow (Paddle's
//     CPU kernel's formula, inf and NaN included: an inf max gives NaN)
//   argmax|argmin(x){axis = -1, keepdim = false, dtype = "int64" | "int32"}
//
// Precision: reduce_sum, reduce_mean, reduce_prod and logsumexp accumulate:
// float32.
// Movement ops, reduce_max/min and argmax/argmin copy or compare values
// exactly: they follow their input.
// Layout: transpose, slice, concat, split, the reductions and argmax/argmin
// name their axes (perm, axes, axis), which a layout pass remaps. reshape and
// expand state a shape in dim order and gather inserts the index's dims at
// its axis: fixed.
#include <algorithm>

#include "ir/grad.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

void InferReshape(InferContext& c) {
  Shape shape = c.op().GetInts("shape");
  for (int64_t d : shape) {
    if (d < 0) c.Fail("target shape {} is not concrete", ShapeToString(shape));
  }
  if (NumElements(shape) != NumElements(c.input(0).shape))
    c.Fail("cannot reshape {} to {}", ShapeToString(c.input(0).shape), ShapeToString(shape));
  c.AddOutput({c.input(0).dtype, shape});
}

void InferTranspose(InferContext& c) {
  const TensorType& x = c.input(0);
  const auto& perm = c.op().GetInts("perm");
  if (perm.size() != x.shape.size())
    c.Fail("perm has {} dims, input {}", perm.size(), x.shape.size());
  std::vector<int64_t> axes;
  if (!NormalizePermutation(perm, static_cast<int>(perm.size()), &axes))
    c.Fail("perm is not a permutation");
  Shape out;
  for (int64_t a : axes) out.push_back(x.shape[static_cast<size_t>(a)]);
  c.AddOutput({x.dtype, out});
}

void InferSlice(InferContext& c) {
  SliceSpec spec;
  if (!ResolveSlice(c.input(0).shape, c.op(), &spec))
    c.Fail("bad axes/starts/ends/steps for input {}", ShapeToString(c.input(0).shape));
  c.AddOutput({c.input(0).dtype, spec.out});
}

void InferConcat(InferContext& c) {
  const TensorType& first = c.input(0);
  int rank = static_cast<int>(first.shape.size());
  int axis = NormalizeAxis(c.op().GetInt("axis"), rank);
  if (axis < 0) c.Fail("axis out of range");
  Shape out = first.shape;
  out[axis] = 0;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const TensorType& t = c.input(i);
    if (t.dtype != first.dtype || static_cast<int>(t.shape.size()) != rank)
      c.Fail("input {} is {}, input 0 is {}", i, t.ToString(), first.ToString());
    for (int d = 0; d < rank; ++d) {
      if (d != axis && t.shape[d] != first.shape[d])
        c.Fail("input {} is {}, input 0 is {}", i, t.ToString(), first.ToString());
    }
    out[axis] += t.shape[axis];
  }
  c.AddOutput({first.dtype, out});
}

void InferSplit(InferContext& c) {
  const TensorType& x = c.input(0);
  int axis = NormalizeAxis(c.op().GetInt("axis"), static_cast<int>(x.shape.size()));
  if (axis < 0) c.Fail("axis out of range");
  const auto& sections = c.op().GetInts("sections");
  int64_t total = 0;
  for (int64_t s : sections) total += s;
  if (total != x.shape[axis]) c.Fail("sections sum to {}, dim is {}", total, x.shape[axis]);
  for (int64_t s : sections) {
    Shape out = x.shape;
    out[axis] = s;
    c.AddOutput({x.dtype, out});
  }
}

void InferExpand(InferContext& c) {
  Shape target = c.op().GetInts("shape"), out;
  if (!BroadcastShapes(c.input(0).shape, target, &out) || out != target)
    c.Fail("cannot expand {} to {}", ShapeToString(c.input(0).shape), ShapeToString(target));
  c.AddOutput({c.input(0).dtype, out});
}

void InferGather(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& idx = c.input(1);
  if (!IsInteger(idx.dtype)) c.Fail("index must be an integer tensor");
  int axis = NormalizeAxis(c.op().GetInt("axis"), static_cast<int>(x.shape.size()));
  if (axis < 0) c.Fail("axis out of range");
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  c.AddOutput({x.dtype, out});
}

// gather_nd: index [..., k] picks x's slabs x[i_0, ..., i_(k-1)]: out
// index.shape[:-1] + x.shape[k:].
void InferGatherNd(InferContext& c) {
  const TensorType& x = c.input(0);
  const TensorType& idx = c.input(1);
  if (!IsInteger(idx.dtype)) c.Fail("index must be an integer tensor");
  if (idx.shape.empty()) c.Fail("index must have at least one dim, got a scalar");
  const int64_t k = idx.shape.back();
  if (k > static_cast<int64_t>(x.shape.size()))
    c.Fail("index rows of {} indices for x {} of rank {}", k, ShapeToString(x.shape),
           x.shape.size());
  Shape out(idx.shape.begin(), idx.shape.end() - 1);
  out.insert(out.end(), x.shape.begin() + k, x.shape.end());
  c.AddOutput({x.dtype, out});
}

void InferReduce(InferContext& c) {
  const TensorType& x = c.input(0);
  std::vector<int> axes;
  if (!ResolveAxes(c.op().GetInts("axes"), static_cast<int>(x.shape.size()), &axes))
    c.Fail("axes out of range for {}", ShapeToString(x.shape));
  c.AddOutput({x.dtype, ReducedShape(x.shape, axes, c.op().GetBool("keepdim"))});
}

void InferArg(InferContext& c) {
  const TensorType& x = c.input(0);
  int axis = NormalizeAxis(c.op().GetInt("axis"), static_cast<int>(x.shape.size()));
  if (axis < 0) c.Fail("axis out of range");
  DType dt;
  if (!ParseDType(c.op().GetStr("dtype"), &dt) || (dt != DType::kI64 && dt != DType::kI32))
    c.Fail("dtype must be int32 or int64");
  c.AddOutput({dt, ReducedShape(x.shape, {axis}, c.op().GetBool("keepdim"))});
}

constexpr auto kFollows = PrecisionRule::kFollowsInput;
constexpr auto kAxes = LayoutRule::kAxisAttrs;

const bool kSchemas = [] {
  RegisterOpSchema(OpSchema{"reshape", 1, 1, InferReshape, /*view=*/true}
                       .RequiredAttr("shape", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"transpose", 1, 1, InferTranspose}
                       .RequiredAttr("perm", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(kAxes, {"perm"}));
  RegisterOpSchema(WithSliceAttrs(OpSchema{"slice", 1, 1, InferSlice})
                       .Precision(kFollows)
                       .Layout(kAxes, {"axes"}));
  RegisterOpSchema(OpSchema{"concat", 1, 1 << 20, InferConcat}
                       .Attr("axis", int64_t{0})
                       .Precision(kFollows)
                       .Layout(kAxes, {"axis"}));
  RegisterOpSchema(OpSchema{"split", 1, 1, InferSplit}
                       .Attr("axis", int64_t{0})
                       .RequiredAttr("sections", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(kAxes, {"axis"}));
  RegisterOpSchema(OpSchema{"expand", 1, 1, InferExpand}
                       .RequiredAttr("shape", AttrKind::kInts)
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"gather", 2, 2, InferGather}
                       .Attr("axis", int64_t{0})
                       .Precision(kFollows)
                       .Layout(LayoutRule::kFixed));
  RegisterOpSchema(OpSchema{"gather_nd", 2, 2, InferGatherNd}.NoAttrs().Precision(kFollows).Layout(
      LayoutRule::kFixed));
  for (const char* n : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
    const Opcode opcode = OpcodeOf(n);
    bool exact = opcode == Opcode::reduce_max || opcode == Opcode::reduce_min;
    RegisterOpSchema(OpSchema{n, 1, 1, InferReduce}
                         .Attr("axes", std::vector<int64_t>{})
                         .Attr("keepdim", false)
                         .Precision(exact ? kFollows : PrecisionRule::kAlwaysF32)
                         .Layout(kAxes, {"axes"}));
  }
  RegisterOpSchema(OpSchema{"logsumexp", 1, 1, InferReduce}
                       .Attr("axes", std::vector<int64_t>{})
                       .Attr("keepdim", false)
                       .Precision(PrecisionRule::kAlwaysF32)
                       .Layout(kAxes, {"axes"}));
  for (const char* n : {"argmax", "argmin"}) {
    RegisterOpSchema(OpSchema{n, 1, 1, InferArg}
                         .Attr("axis", int64_t{-1})
                         .Attr("keepdim", false)
                         .Attr("dtype", "int64")
                         .Precision(kFollows)
                         .Layout(kAxes, {"axis"}));
  }
  return true;
}();

// ---- Gradient rules ----------------------------------------------------

// A reduction's output (or its gradient) with the reduced dims kept as 1s,
// so it broadcasts against the input.
Value* KeepDims(GradContext& c, Value* g) {
  const Shape& in = c.input(0)->shape();
  std::vector<int> axes;
  ResolveAxes(c.op().GetInts("axes"), static_cast<int>(in.size()), &axes);
  return c.Add("reshape", {g}, {{"shape", ShapeAttr(ReducedShape(in, axes, true))}});
}

// Gradient of a reduction's output, broadcast back over the input's shape.
Value* Unreduce(GradContext& c, Value* g) {
  return c.Add("expand", {KeepDims(c, g)}, {{"shape", ShapeAttr(c.input(0)->shape())}});
}

const bool kRules = [] {
  RegisterGrad("reshape", [](GradContext& c) {
    c.SetInputGrad(0,
                   c.Add("reshape", {c.out_grad()}, {{"shape", ShapeAttr(c.input(0)->shape())}}));
  });
  RegisterGrad("transpose", [](GradContext& c) {
    const auto& perm = c.op().GetInts("perm");
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      inverse[NormalizeAxis(perm[i], static_cast<int>(perm.size()))] = static_cast<int64_t>(i);
    }
    c.SetInputGrad(0, c.Add("transpose", {c.out_grad()}, {{"perm", inverse}}));
  });
  RegisterGrad("expand", [](GradContext& c) {
    c.SetInputGrad(0, c.ReduceTo(c.out_grad(), c.input(0)->shape()));
  });
  RegisterGrad("reduce_sum", [](GradContext& c) { c.SetInputGrad(0, Unreduce(c, c.out_grad())); });
  RegisterGrad("reduce_mean", [](GradContext& c) {
    double n = static_cast<double>(NumElements(c.input(0)->shape())) /
               static_cast<double>(std::max<int64_t>(1, NumElements(c.output()->shape())));
    Value* g = c.Add("scale", {c.out_grad()}, {{"scale", 1.0 / n}, {"bias", 0.0}});
    c.SetInputGrad(0, Unreduce(c, g));
  });
  RegisterGrad("concat", [](GradContext& c) {
    int rank = c.output()->rank();
    int64_t axis = NormalizeAxis(c.op().GetInt("axis"), rank);
    std::vector<int64_t> sections;
    for (const Value* in : c.op().inputs) sections.push_back(in->shape()[axis]);
    Op* split = c.graph().AddOp("split", {c.out_grad()}, {{"axis", axis}, {"sections", sections}},
                                c.op().name + ".grad");
    for (size_t i = 0; i < split->outputs.size(); ++i) c.SetInputGrad(i, split->outputs[i]);
  });
  RegisterGrad("split", [](GradContext& c) {
    // Outputs nobody differentiated contribute zeros.
    std::vector<Value*> parts;
    for (size_t i = 0; i < c.op().outputs.size(); ++i) {
      Value* g = c.out_grad(i);
      if (!g) {
        Value* zero = c.Constant(0.0, c.output(i)->dtype());
        g = c.Add("expand", {zero}, {{"shape", ShapeAttr(c.output(i)->shape())}});
      }
      parts.push_back(g);
    }
    c.SetInputGrad(0, c.Add("concat", parts, {{"axis", c.op().GetInt("axis")}}));
  });
  RegisterGrad("slice", [](GradContext& c) {
    const Op& op = c.op();
    AttrMap a{{"axes", op.GetInts("axes")},
              {"starts", op.GetInts("starts")},
              {"ends", op.GetInts("ends")},
              {"steps", op.GetInts("steps")},
              {"input_shape", ShapeAttr(c.input(0)->shape())}};
    c.SetInputGrad(0, c.Add("slice_grad", {c.out_grad()}, a));
  });
  RegisterGrad("gather", [](GradContext& c) {
    const Shape& x = c.input(0)->shape();
    int64_t axis = NormalizeAxis(c.op().GetInt("axis"), static_cast<int>(x.size()));
    c.SetInputGrad(
        0, c.Add("gather_grad", {c.input(1), c.out_grad()}, {{"axis", axis}, {"dim", x[axis]}}));
  });
  // gather_nd: the rows of out_grad scatter-added into x's first k dims
  // flattened: each index row's flat position sum_j wrap(i_j) * stride_j
  // (negative indices wrapped per dim, as the forward does), then
  // gather_grad along that flat dim.
  RegisterGrad("gather_nd", [](GradContext& c) {
    const Shape& x = c.input(0)->shape();
    Value* idx = c.input(1);
    const Shape& is = idx->shape();
    const int64_t k = is.back(), rows = NumElements(Shape(is.begin(), is.end() - 1));
    if (k == 0) Fail(ErrorKind::kUnimplemented, "the gradient of gather_nd with empty index rows");
    if (idx->dtype() != DType::kI64) idx = c.Add("cast", {idx}, {{"dtype", std::string("int64")}});
    idx = c.Reshape(idx, {rows, k});
    Value* flat = nullptr;
    int64_t stride = 1;
    for (int64_t j = k - 1; j >= 0; --j) {
      const int64_t dim = x[static_cast<size_t>(j)];
      Value* col = c.Add("slice", {idx},
                         {{"axes", std::vector<int64_t>{1}},
                          {"starts", std::vector<int64_t>{j}},
                          {"ends", std::vector<int64_t>{j + 1}}});
      Value* negative = c.Add("cast", {c.Add("less", {col, c.Constant(0, DType::kI64)})},
                              {{"dtype", std::string("int64")}});
      col = c.Add("add", {col, c.Add("mul", {negative, c.Constant(double(dim), DType::kI64)})});
      Value* term =
          stride == 1 ? col : c.Add("mul", {col, c.Constant(double(stride), DType::kI64)});
      flat = flat ? c.Add("add", {flat, term}) : term;
      stride *= dim;
    }
    Shape rest(x.begin() + k, x.end());
    Shape g_shape{rows};
    g_shape.insert(g_shape.end(), rest.begin(), rest.end());
    Value* g = c.Add("gather_grad", {c.Reshape(flat, {rows}), c.Reshape(c.out_grad(), g_shape)},
                     {{"axis", int64_t{0}}, {"dim", stride}});
    c.SetInputGrad(0, c.Reshape(g, x));
  });
  // max/min: every input equal to the result gets the gradient (ties
  // included), as Paddle's reduce_max/min gradients.
  for (const char* op : {"reduce_max", "reduce_min"}) {
    RegisterGrad(op, [](GradContext& c) {
      Value* x = c.input(0);
      Value* hit = c.Add("equal", {x, Unreduce(c, c.output())});
      Value* mask = c.Add("cast", {hit}, {{"dtype", std::string(DTypeName(x->dtype()))}});
      c.SetInputGrad(0, c.Add("mul", {Unreduce(c, c.out_grad()), mask}));
    });
  }
  // d logsumexp / dx = exp(x - y): softmax over the reduced positions, as
  // Paddle's logsumexp_grad computes it (from the output, not through a max).
  RegisterGrad("logsumexp", [](GradContext& c) {
    Value* p = c.Add("exp", {c.Add("sub", {c.input(0), KeepDims(c, c.output())})});
    c.SetInputGrad(0, c.Add("mul", {p, KeepDims(c, c.out_grad())}));
  });
  RegisterGrad("reduce_prod", [](GradContext& c) {  // g prod / x (Paddle's; undefined at x = 0)
    Value* ratio = c.Add("div", {Unreduce(c, c.output()), c.input(0)});
    c.SetInputGrad(0, c.Add("mul", {Unreduce(c, c.out_grad()), ratio}));
  });
  return true;
}();

}  // namespace
}  // namespace tiller::ir
