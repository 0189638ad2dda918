// Optimizer update ops: functional forms of Paddle's optimizer ops, with
// Paddle's CPU update rules (backends/cpu/kernels/optimizer.cc has the
// formulas). Every op takes (param, grad, lr, state...) and returns
// (param_out, state_out...): output 0 is the new value of input 0 and output
// k >= 1 the new value of input k + 2 (OptimizerUpdatedInput). A training
// compiler binds each output to its input's storage, so every kernel is
// correct when output k aliases that input: it reads all inputs of an element
// before writing any output of it. lr and the beta powers hold one element
// (shape [1] or []); param, grad and the per-element state share param's
// shape; float32 or float64, one dtype for all operands.
//
// Attributes are floats unless a kind is named; the defaults are the Paddle
// defaults translate/optimizer.cc falls back to.
//   sgd(param, grad, lr) -> param
//   momentum(param, grad, lr, velocity) -> (param, velocity)
//     {mu = 0.9, use_nesterov: bool = false, l2_decay = 0: coefficient of an
//      L2 term added to the gradient, 0 for none}
//   adam(param, grad, lr, moment1, moment2, beta1_pow, beta2_pow, moment2_max?)
//     -> (param, moment1, moment2, beta1_pow, beta2_pow, moment2_max?)
//     {beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, update_beta_pow: bool =
//      true (false: the pow outputs copy the inputs, Paddle's
//      use_global_beta_pow), weight_decay = 0 and lr_ratio = 1 (AdamW's
//      decoupled decay, 0 for Adam), bias_correction: bool = true (false: as
//      if beta1_pow = beta2_pow = 0, the IPU use_no_bias_optimizer)};
//     moment2_max present = AMSGrad
//   adamax(param, grad, lr, moment, inf_norm, beta1_pow)
//     -> (param, moment, inf_norm) {beta1 = 0.9, beta2 = 0.999, epsilon =
//     1e-8}; beta1_pow is read only (Paddle advances it with a separate
//     scale op)
//   lamb(param, grad, lr, moment1, moment2, beta1_pow, beta2_pow)
//     -> (param, moment1, moment2, beta1_pow, beta2_pow)
//     {beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6, weight_decay = 0.01,
//      always_adapt: bool = false, bias_correction: bool = true}
//   adagrad(param, grad, lr, moment) -> (param, moment) {epsilon = 1e-6}
//   adadelta(param, grad, lr, avg_squared_grad, avg_squared_update)
//     -> (param, avg_squared_grad, avg_squared_update) {rho = 0.95,
//     epsilon = 1e-6}
//   rmsprop(param, grad, lr, mean_square, moment, mean_grad?)
//     -> (param, mean_square, moment, mean_grad?) {epsilon = 1e-10,
//     decay = 0.9, momentum = 0}; mean_grad present = centered
//
// Row-sparse updates (Paddle's updates of a SelectedRows gradient: an
// embedding table looked up with is_sparse / sparse = true). The gradient
// is the looked-up rows' gradients, rows [N, D] with their table rows in
// ids [N] (int32|int64; repeats allowed, summed first; an id equal to
// padding_idx counts as a zero row), as the last operand, so outputs map to
// inputs as for the dense ops. param and the per-element state are the
// table [V, D]; only the rows in ids are read or written.
//   sgd_rows(param, rows, lr, ids) -> param {padding_idx = -1}
//   adagrad_rows(param, rows, lr, moment, ids) -> (param, moment)
//     {epsilon = 1e-6, padding_idx = -1}
//   adam_rows(param, rows, lr, moment1, moment2, beta1_pow, beta2_pow, ids)
//     -> (param, moment1, moment2, beta1_pow, beta2_pow): Paddle's Adam of a
//     SelectedRows gradient; lazy: bool = true (lazy_mode) leaves rows not
//     in ids as they are, false moves them as a zero gradient would, but
//     with epsilon not scaled by sqrt(1 - beta2_pow) (Paddle's sparse
//     kernel); attributes as adam's (no AMSGrad) plus padding_idx = -1.
// A part of a table split by rows (passes/shard_embedding_rows.cc): param
// and the per-element state hold rows [row_begin, row_begin + their rows)
// of a table of table_rows rows (-1: the operands are the whole table);
// ids and padding_idx count in the whole table, and ids of other parts are
// left out (each part updates its own rows; non-lazy adam_rows moves every
// row of its part that the gradient does not hold).
// sgd_rows and adagrad_rows equal their dense ops on the gradient scattered
// into a table of zeros (untouched rows do not move there either); adam_rows
// does not.
// Precision: float32 (updates add small steps to large values; the state
// must not lose them). Layout: agnostic (elementwise over param-shaped
// tensors plus one-element scalars; lamb's norms do not depend on the order).
#include "ir/ops/optimizer.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

struct Operands {
  const char* name;
  int state;     // per-element state inputs after (param, grad, lr)
  int scalars;   // one-element state inputs after those (beta powers)
  int optional;  // trailing optional per-element state inputs
  int outputs;   // outputs when every optional input is present
};

constexpr std::array<Operands, 8> kOperands = {{{"sgd", 0, 0, 0, 1},
                                                {"momentum", 1, 0, 0, 2},
                                                {"adam", 2, 2, 1, 6},
                                                {"adamax", 2, 1, 0, 3},
                                                {"lamb", 2, 2, 0, 5},
                                                {"adagrad", 1, 0, 0, 2},
                                                {"adadelta", 2, 0, 0, 3},
                                                {"rmsprop", 2, 0, 1, 4}}};

// The row-sparse forms: the dense op they follow, by name.
constexpr std::array<std::pair<const char*, const char*>, 3> kRowOps = {
    {{"sgd_rows", "sgd"}, {"adagrad_rows", "adagrad"}, {"adam_rows", "adam"}}};

const char* kSlotNames[] = {"param", "grad", "lr"};

std::string OperandName(size_t i) {
  return i < 3 ? kSlotNames[i] : fmt::format("state operand {}", i);
}

void InferOptimizer(InferContext& c, const Operands& l) {
  const TensorType& param = c.input(0);
  if (param.dtype != DType::kF32 && param.dtype != DType::kF64)
    c.Fail("param must be float32 or float64, got {}", param.ToString());
  const size_t scalar_begin = 3 + l.state, scalar_end = scalar_begin + l.scalars;
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const TensorType& t = c.input(i);
    if (t.dtype != param.dtype)
      c.Fail("{} is {}, expected dtype {}", OperandName(i), t.ToString(), DTypeName(param.dtype));
    bool one = i == 2 || (i >= scalar_begin && i < scalar_end);
    if (one && NumElements(t.shape) != 1)
      c.Fail("{} must hold one element, got {}", OperandName(i), t.ToString());
    if (!one && t.shape != param.shape)
      c.Fail("{} is {}, expected param's shape {}", OperandName(i), t.ToString(),
             ShapeToString(param.shape));
  }
  // The output list follows the inputs; adamax's beta1_pow has no output.
  int outputs = l.outputs - (l.optional && !c.has_input(scalar_end) ? 1 : 0);
  c.AddOutput(param);
  for (int k = 1; k < outputs; ++k) c.AddOutput(c.input(OptimizerUpdatedInput(k)));
}

// A row-sparse update: (param [V, D], rows [N, D], lr, state..., ids [N]).
void InferRowOptimizer(InferContext& c, const Operands& l) {
  const TensorType& param = c.input(0);
  if (param.dtype != DType::kF32) c.Fail("param must be float32, got {}", param.ToString());
  if (param.shape.size() != 2)
    c.Fail("param must be a table [rows, width], got {}", param.ToString());
  const size_t ids_at = c.num_inputs() - 1;
  const TensorType& ids = c.input(ids_at);
  if ((ids.dtype != DType::kI32 && ids.dtype != DType::kI64) || ids.shape.size() != 1)
    c.Fail("ids must be int32 or int64 [N], got {}", ids.ToString());
  const TensorType& rows = c.input(1);
  if (rows.dtype != param.dtype || rows.shape != Shape{ids.shape[0], param.shape[1]})
    c.Fail("rows are {}, expected {} [{}, {}] (one row per id)", rows.ToString(),
           DTypeName(param.dtype), ids.shape[0], param.shape[1]);
  const size_t scalar_begin = 3 + l.state, scalar_end = scalar_begin + l.scalars;
  for (size_t i = 2; i < ids_at; ++i) {
    const TensorType& t = c.input(i);
    bool one = i == 2 || (i >= scalar_begin && i < scalar_end);
    if (t.dtype != param.dtype || (one ? NumElements(t.shape) != 1 : t.shape != param.shape))
      c.Fail("{} is {}, expected {}", OperandName(i), t.ToString(),
             one ? fmt::format("one {}", DTypeName(param.dtype)) : param.ToString());
  }
  if (const std::string p = ReadTablePart(c.op(), param.shape[0]).Problem(); !p.empty())
    c.Fail("{}", p);
  c.AddOutput(param);
  for (int k = 1; k < l.outputs - l.optional; ++k) c.AddOutput(c.input(OptimizerUpdatedInput(k)));
}

// Each op's attributes.
void DeclareAttrs(OpSchema& s) {
  switch (OpcodeOf(s.name)) {
    case Opcode::sgd:
      s.NoAttrs();
      break;
    case Opcode::momentum:
      s.Attr("mu", 0.9).Attr("use_nesterov", false).Attr("l2_decay", 0.0);
      break;
    case Opcode::adam:
      s.Attr("beta1", 0.9)
          .Attr("beta2", 0.999)
          .Attr("epsilon", 1e-8)
          .Attr("update_beta_pow", true)
          .Attr("weight_decay", 0.0)
          .Attr("lr_ratio", 1.0)
          .Attr("bias_correction", true);
      break;
    case Opcode::adamax:
      s.Attr("beta1", 0.9).Attr("beta2", 0.999).Attr("epsilon", 1e-8);
      break;
    case Opcode::lamb:
      s.Attr("beta1", 0.9)
          .Attr("beta2", 0.999)
          .Attr("epsilon", 1e-6)
          .Attr("weight_decay", 0.01)
          .Attr("always_adapt", false)
          .Attr("bias_correction", true)
          // PopART's Lamb clamps the weight norm of the trust ratio here (the
          // IPU option max_weight_norm); 0: no clamp, as Paddle's lamb op.
          .Attr("max_weight_norm", 0.0);
      break;
    case Opcode::adagrad:
      s.Attr("epsilon", 1e-6);
      break;
    case Opcode::adadelta:
      s.Attr("rho", 0.95).Attr("epsilon", 1e-6);
      break;
    case Opcode::rmsprop:
      s.Attr("epsilon", 1e-10).Attr("decay", 0.9).Attr("momentum", 0.0);
      break;
    default:
      break;
  }
  TILLER_CHECK(s.attrs_declared, "optimizer op '{}' declares no attributes", s.name);
}

const bool kRegistered = [] {
  for (const Operands& l : kOperands) {
    int min_in = 3 + l.state + l.scalars;
    OpSchema s(l.name, min_in, min_in + l.optional, [l](InferContext& c) { InferOptimizer(c, l); });
    DeclareAttrs(s);
    s.Precision(PrecisionRule::kAlwaysF32).Layout(LayoutRule::kAgnostic);
    // The kernels read every element before writing it: an update can go
    // straight into its state's storage.
    RegisterOpSchema(std::move(s).InPlaceSafe());
  }
  // (Plain names, not a structured binding: the lambda captures them, which
  // clang before 16, building the fuzz targets, cannot do for bindings.)
  for (const auto& row_op : kRowOps) {
    const char* row_name = row_op.first;
    const std::string_view dense_name = row_op.second;
    const Operands& l = *std::find_if(kOperands.begin(), kOperands.end(),
                                      [&](const Operands& o) { return dense_name == o.name; });
    const int n_in = 3 + l.state + l.scalars + 1;
    OpSchema s(row_name, n_in, n_in, [l](InferContext& c) { InferRowOptimizer(c, l); });
    // The dense op's attributes (AMSGrad aside: adam_rows has no moment2_max).
    OpSchema dense(std::string(dense_name), 0, 0, nullptr);
    DeclareAttrs(dense);
    s.attrs = dense.attrs;
    s.attrs_declared = true;
    s = WithTableAttrs(std::move(s));
    if (std::string_view(row_name) == "adam_rows") s.Attr("lazy", true);
    s.Precision(PrecisionRule::kAlwaysF32).Layout(LayoutRule::kFixed);
    RegisterOpSchema(std::move(s).InPlaceSafe());
  }
  return true;
}();

}  // namespace

bool IsOptimizerOp(const std::string& type) {
  for (const Operands& l : kOperands) {
    if (type == l.name) return true;
  }
  return false;
}

bool IsRowOptimizerOp(const std::string& type) {
  for (const auto& [row_name, dense_name] : kRowOps) {
    if (type == row_name) return true;
  }
  return false;
}

}  // namespace tiller::ir
