// Trained weights the program keeps pruned, multiplied by their nonzero
// blocks (training; the block_sparse_weights option names them):
//
//   matmul|linear(x, W)                 ==> linear_block_sparse(x, W){16 x 16}
//   matmul(g, W){transpose_b} (x's      ==> linear_block_sparse(g, W){16 x 16,
//     gradient)                                                  transpose_w}
//
// A program that trains a pruned weight keeps its pruned entries at zero
// (Paddle's ASP: paddle.incubate.asp.decorate multiplies each weight by
// its mask after the optimizer: W' = opt(W) * M). The kernel finds W's zero
// blocks at every run, so the products are x W whatever W holds: the
// option changes the speed, never the results. The weight's gradient
// (x^T g) stays dense: the optimizer's state moves for every entry, as in
// Paddle. 16 x 16 blocks (a 1 x 8 pattern transposed is 8 x 1, which the
// kernel has no tile for).
//
// "masked" names every weight whose new value the program multiplies by a
// constant mask of the same shape (a state nothing updates).
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "ir/ops/op_helpers.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

constexpr int64_t kBlock = 16;

// The weights multiplied by a mask after their update: W' = mul(U, M) or
// mul(M, U), M a state of W's shape that nothing updates.
std::set<const ir::Value*> MaskedWeights(const ir::Graph& g) {
  std::set<const ir::Value*> updated;
  for (const auto& [state, v] : g.state_updates()) updated.insert(state);
  std::set<const ir::Value*> out;
  for (const auto& [state, v] : g.state_updates()) {
    const ir::Op* mul = v->producer;
    if (!mul || !mul->is(ir::Opcode::mul) || mul->inputs.size() != 2) continue;
    for (const ir::Value* m : mul->inputs) {
      if (m->kind == ir::ValueKind::kState && !updated.count(m) && m->shape() == state->shape())
        out.insert(state);
    }
  }
  return out;
}

bool PlainMatmul(const ir::Op& op) {
  return op.GetFloat("alpha") == 1.0 && op.GetInts("perm_a").empty() &&
         op.GetInts("perm_b").empty() && op.GetInts("perm_out").empty() &&
         op.GetStr("out_dtype").empty() && !op.GetBool("transpose_a");
}

}  // namespace

int BlockSparseWeights(ir::Graph& g, const std::vector<std::string>& names, std::string* detail) {
  std::set<const ir::Value*> weights;
  const bool masked = std::find(names.begin(), names.end(), "masked") != names.end();
  if (masked) weights = MaskedWeights(g);
  std::vector<std::string> unknown;
  for (const std::string& name : names) {
    if (name == "masked") continue;
    const auto& states = g.states();
    auto it = std::find_if(states.begin(), states.end(),
                           [&](const ir::Value* s) { return s->name == name; });
    if (it == states.end()) {
      unknown.push_back(name);
      continue;
    }
    const ir::Value* w = *it;
    if (w->shape().size() != 2 || w->dtype() != DType::kF32 || w->shape()[0] % kBlock ||
        w->shape()[1] % kBlock)
      Fail(ErrorKind::kInvalidArgument,
           "block_sparse_weights: '{}' is {}; the block-sparse kernels take float32 matrices "
           "whose sides are multiples of {}",
           name, w->type.ToString(), kBlock);
    weights.insert(w);
  }
  if (!unknown.empty()) {
    std::string list;
    for (const std::string& u : unknown) list += (list.empty() ? "'" : ", '") + u + "'";
    Fail(ErrorKind::kInvalidArgument,
         "block_sparse_weights: {} {} not a weight of the program (names as in the program, or "
         "\"masked\" for every weight the program multiplies by a mask)",
         list, unknown.size() == 1 ? "is" : "are");
  }
  int forward = 0, gradient = 0, untiled = 0;
  std::vector<ir::Op*> ops;
  for (const auto& op : g.ops()) ops.push_back(op.get());
  for (ir::Op* op : ops) {
    const bool linear = op->is(ir::Opcode::linear);
    if (!linear && !op->is(ir::Opcode::matmul)) continue;
    if (op->inputs.size() < 2 || !weights.count(op->input(1))) continue;
    const ir::Value* w = op->input(1);
    if (w->shape()[0] % kBlock || w->shape()[1] % kBlock || w->dtype() != DType::kF32 ||
        op->input(0)->dtype() != DType::kF32) {
      ++untiled;
      continue;
    }
    ir::AttrMap attrs{{"block_rows", kBlock}, {"block_cols", kBlock}};
    std::vector<ir::Value*> inputs = op->inputs;
    if (linear) {
      const std::string& act = op->GetStr("activation");
      if (!op->GetStr("out_dtype").empty() || !ir::BlockSparseActivation(act) ||
          (op->input(2) && op->input(2)->dtype() != DType::kF32))
        continue;
      attrs.Set("activation", act);
      ++forward;
    } else {
      if (!PlainMatmul(*op)) continue;
      if (op->GetBool("transpose_b")) {
        attrs.Set("transpose_w", true);
        ++gradient;
      } else {
        ++forward;
      }
    }
    g.SetInsertionPoint(op);
    ir::Op* sparse = g.AddOp("linear_block_sparse", inputs, attrs, op->name);
    g.SetInsertionPoint(nullptr);
    g.ReplaceAllUses(op->output(0), sparse->output(0));
  }
  if (forward + gradient) g.RemoveDeadCode();
  *detail = fmt::format("{} weights: {} products, {} input gradients on their nonzero blocks",
                        weights.size(), forward, gradient);
  if (untiled) *detail += fmt::format("; {} left dense (not float32 16 x 16 tiles)", untiled);
  return forward + gradient;
}

}  // namespace tiller::passes
