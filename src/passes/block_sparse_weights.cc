// Trained weights the program keeps pruned, multiplied by their nonzero
// blocks (training; the block_sparse_weights option names them):
//
//   matmul|linear(x, W)                 ==> linear_block_sparse(x, W){bk x bn}
//   matmul(g, W){transpose_b} (x's      ==> linear_block_sparse(g, W){bn x bk,
//     gradient)                                                  transpose_w}
//
// A program that trains a pruned weight keeps its pruned entries at zero
// (Paddle's ASP: paddle.incubate.asp.decorate multiplies each weight by
// its mask after the optimizer: W' = opt(W) * M). The kernel finds W's zero
// blocks at every run, so the products are x W whatever W holds: the
// option changes the speed, never the results. The weight's gradient
// (x^T g) stays dense: the optimizer's state moves for every entry, as in
// Paddle. Blocks are 16 x 16, or 1 x 8 where an entry says so
// ("name:1x8"); the input gradient multiplies W^T, whose blocks are W's
// transposed (8 x 1).
//
// "masked" names every weight whose new value the program multiplies by a
// constant mask of the same shape (a state nothing updates).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "core/error.h"
#include "ir/ops/op_helpers.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

// A weight's block shape (rows x columns of W).
struct Blocks {
  int64_t rows = 16, cols = 16;
};

// "name" or "name:RxC" (16x16 or 1x8) -> name and blocks. (A suffix that
// is no RxC is part of the name.)
std::pair<std::string, Blocks> ParseEntry(const std::string& entry) {
  const size_t colon = entry.rfind(':');
  if (colon == std::string::npos) return {entry, {}};
  const std::string shape = entry.substr(colon + 1);
  const size_t x = shape.find('x');
  auto digits = [](const std::string& d) {
    return !d.empty() &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (x == std::string::npos || !digits(shape.substr(0, x)) || !digits(shape.substr(x + 1)))
    return {entry, {}};
  if (shape == "16x16") return {entry.substr(0, colon), {16, 16}};
  if (shape == "1x8") return {entry.substr(0, colon), {1, 8}};
  Fail(ErrorKind::kInvalidArgument,
       "block_sparse_weights: '{}' asks for {} blocks; the block-sparse kernels train 16x16 "
       "and 1x8 (\"name\" for 16x16, \"name:1x8\")",
       entry, shape);
}

bool Tiles(const ir::Value* w, Blocks b) {
  return w->shape().size() == 2 && w->shape()[0] % b.rows == 0 && w->shape()[1] % b.cols == 0;
}

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
  std::map<const ir::Value*, Blocks> weights;
  std::vector<std::string> unknown;
  for (const std::string& entry : names) {
    // (Not a structured binding: clang before 16 lets no lambda capture one.)
    const std::pair<std::string, Blocks> parsed = ParseEntry(entry);
    const std::string& name = parsed.first;
    const Blocks blocks = parsed.second;
    if (name == "masked") {
      for (const ir::Value* w : MaskedWeights(g)) weights.emplace(w, blocks);
      continue;
    }
    const auto& states = g.states();
    auto it = std::find_if(states.begin(), states.end(),
                           [&](const ir::Value* s) { return s->name == name; });
    if (it == states.end()) {
      unknown.push_back(name);
      continue;
    }
    const ir::Value* w = *it;
    if (w->dtype() != DType::kF32 || !Tiles(w, blocks))
      Fail(ErrorKind::kInvalidArgument,
           "block_sparse_weights: '{}' is {}; the block-sparse kernels take float32 matrices "
           "tiled by their {}x{} blocks",
           name, w->type.ToString(), blocks.rows, blocks.cols);
    weights[w] = blocks;  // a name overrides "masked"
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
    if (op->inputs.size() < 2) continue;
    auto found = weights.find(op->input(1));
    if (found == weights.end()) continue;
    const ir::Value* w = op->input(1);
    const Blocks blocks = found->second;
    if (!Tiles(w, blocks) || w->dtype() != DType::kF32 || op->input(0)->dtype() != DType::kF32) {
      ++untiled;
      continue;
    }
    // The blocks of the matrix multiplied: W's, or W^T's (transposed).
    ir::AttrMap attrs{{"block_rows", blocks.rows}, {"block_cols", blocks.cols}};
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
        attrs.Set("block_rows", blocks.cols);
        attrs.Set("block_cols", blocks.rows);
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
  if (untiled) *detail += fmt::format("; {} left dense (not float32, or not tiled)", untiled);
  return forward + gradient;
}

}  // namespace tiller::passes
