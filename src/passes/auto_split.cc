// Automatic pipeline stages: a forward graph no one sharded, split into
// `stages` contiguous runs of its ops (in topological order, so values only
// flow to the same or a later stage) of about equal cost:
//   op cost = 2 x multiply-adds for matmul / linear / conv (from the shapes),
//             120 x the elements written for every other op (memory-bound
//             work, weighed as the flops a CPU or GPU does meanwhile); for training,
//             x 3 for the gradients, plus the weights' elements (their
//             gradients' accumulation) and their update (once per
//             `micro_batches`)
// The split is on the cumulative cost, not on op counts (Paddle's even
// split by op count puts a vocabulary-wide decoder and a dozen elementwise
// ops on the same footing). Ops get stage = their stage index and shard =
// stage mod devices; autodiff and the update ops follow their forward ops.
// More stages than devices interleave them (device 0 runs stages 0 and 2 of
// 4 on 2 devices): a micro-batch reaches the last device after a quarter of
// the forward pass instead of half, so the pipeline fills and drains in
// half the time (Narayanan et al., 2021), for more copies between devices
// and more micro-batches in flight.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ir/op_schema.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

// What moving one element through a memory-bound op (read and written, 4
// bytes each) costs in matmul flops: CPUs and GPUs do 10-15 flops in the
// time their memory moves a byte. (On BERT-small's 2-stage pipeline, 100
// left the head's stage 9% busier, 200 the other stage 13%.)
constexpr double kFlopsPerElement = 120;
// An update's memory-bound work per weight element, in elements moved
// through a memory-bound op (see TrainingOpCost).
constexpr double kUpdateElements = 5;

double Elements(const ir::Value* v) {
  return v ? static_cast<double>(NumElements(v->shape())) : 0.0;
}

}  // namespace

double OpFlops(const ir::Op& op) {
  if ((op.is(ir::Opcode::matmul) || op.is(ir::Opcode::linear)) && op.inputs.size() >= 2) {
    // out [.., M, N]; the reduced dim K from the first input's last (or,
    // transposed, second-to-last) dim.
    const Shape& a = op.inputs[0]->shape();
    if (a.empty()) return 0;
    int64_t k = a.back();
    if (op.is(ir::Opcode::matmul) && op.GetBool("transpose_a") && a.size() >= 2)
      k = a[a.size() - 2];
    return 2.0 * Elements(op.outputs[0]) * static_cast<double>(k);
  }
  if (op.is(ir::Opcode::attention) && op.inputs.size() >= 3) {
    // Its two products per head: [Sq, d] x [d, Sk] and [Sq, Sk] x [Sk, dv].
    const Shape &q = op.inputs[0]->shape(), &k = op.inputs[1]->shape();
    const Shape& out = op.outputs[0]->shape();
    const int64_t heads = op.GetInt("heads");
    const int64_t d = op.GetInt("head_dim") ? op.GetInt("head_dim") : q.back() / heads;
    const int64_t dv = out.back() / heads;  // exact: the schema splits the heads evenly
    const double rows = Elements(op.outputs[0]) / static_cast<double>(dv);  // B * Sq * heads
    return 2.0 * rows * static_cast<double>(k[1]) * static_cast<double>(d + dv);
  }
  if ((op.is(ir::Opcode::conv2d) || op.is(ir::Opcode::conv2d_transpose)) && op.inputs.size() >= 2) {
    const Shape& w = op.inputs[1]->shape();  // [O, I/groups, kh, kw]
    double per_output = 1;
    for (size_t d = 1; d < w.size(); ++d) per_output *= static_cast<double>(w[d]);
    const ir::Value* out = op.is(ir::Opcode::conv2d) ? op.outputs[0] : op.inputs[0];
    return 2.0 * Elements(out) * per_output;
  }
  // conv2d's gradients: as many multiply-adds as the convolution.
  if (op.is(ir::Opcode::conv2d_grad_input) && op.inputs.size() == 2) {
    const Shape& w = op.inputs[1]->shape();
    double per_output = 1;
    for (size_t d = 1; d < w.size(); ++d) per_output *= static_cast<double>(w[d]);
    return 2.0 * Elements(op.inputs[0]) * per_output;
  }
  if (op.is(ir::Opcode::conv2d_grad_filter) && op.inputs.size() == 2) {
    const Shape& w = op.outputs[0]->shape();
    double per_output = 1;
    for (size_t d = 1; d < w.size(); ++d) per_output *= static_cast<double>(w[d]);
    return 2.0 * Elements(op.inputs[1]) * per_output;
  }
  return 0;
}

double ForwardOpCost(const ir::Op& op) {
  if (op.schema->is_view) return 0;
  if (const double flops = OpFlops(op); flops > 0) return flops;
  double written = 0;
  for (const ir::Value* out : op.outputs) written += Elements(out);
  return kFlopsPerElement * written;
}

double TrainingOpCost(const ir::Op& op, int micro_batches) {
  // A gradient costs about twice its forward op (a matmul's two gradient
  // matmuls; elementwise ops read and write the same tensors again) ...
  double cost = 3 * ForwardOpCost(op);
  for (const ir::Value* in : op.inputs) {
    if (!in || in->kind != ir::ValueKind::kState) continue;
    // ... each weight's gradient is added to its accumulator every
    // micro-batch (an embedding's is scattered into it row by row: the
    // tokens' rows only, already counted) ...
    if (!op.is(ir::Opcode::embedding)) cost += kFlopsPerElement * Elements(in);
    // ... and the stage of the weight's first reader updates it once per
    // update: the optimizer (Adam reads the weight, its gradient and two
    // moments and writes three) and the mean's scale move about 5 elements'
    // worth of a memory-bound op, spread over the micro-batches.
    if (!in->users.empty() && in->users.front() == &op)
      cost += kUpdateElements * kFlopsPerElement * Elements(in) / std::max(1, micro_batches);
  }
  return cost;
}

SplitResult AutoSplitStages(ir::Graph& g, int stages, bool training, int micro_batches,
                            int devices) {
  std::vector<double> costs;
  for (const auto& op : g.ops()) {
    if (op->placement.phase != ir::Phase::kForward) continue;
    costs.push_back(training ? TrainingOpCost(*op, micro_batches) : ForwardOpCost(*op));
  }
  return SplitStagesByCost(g, stages, costs, devices, micro_batches);
}

SplitResult SplitStagesByCost(ir::Graph& g, int stages, const std::vector<double>& costs,
                              int devices, int micro_batches) {
  if (devices <= 0) devices = stages;
  SplitResult r;
  std::vector<ir::Op*> forward;
  // prefix[i]: the cost of forward[0, i).
  std::vector<double> prefix{0.0};
  for (const auto& op : g.ops()) {
    if (op->placement.phase != ir::Phase::kForward) continue;
    TILLER_CHECK(forward.size() < costs.size(), "{} costs for more forward ops", costs.size());
    prefix.push_back(prefix.back() + costs[forward.size()]);
    forward.push_back(op.get());
  }
  TILLER_CHECK(forward.size() == costs.size(), "{} costs for {} forward ops", costs.size(),
               forward.size());
  const size_t n = forward.size();
  const double total = prefix[n];
  // Stage s holds forward[bound[s], bound[s + 1]). Start from the stage
  // whose share of the total holds each op's midpoint, ...
  std::vector<size_t> bound(stages + 1, n);
  bound[0] = 0;
  for (int s = 1; s < stages; ++s) {
    size_t i = bound[s - 1];
    while (i < n && (prefix[i] + prefix[i + 1]) / 2 < total * s / stages) ++i;
    bound[s] = i;
  }
  // ... with at least one op per stage when there are enough ops (an empty
  // stage is a pipeline hop that does nothing: the small CNN of the
  // equivalence tests, whose first convolution is heavy, got 4 interleaved
  // stages of 49.6, 50.0, 0.3 and 0% of its cost) ...
  const bool every_stage_busy = n >= static_cast<size_t>(stages);
  if (every_stage_busy) {
    for (int s = 1; s < stages; ++s) bound[s] = std::max(bound[s], bound[s - 1] + 1);
    for (int s = stages - 1; s >= 1; --s) bound[s] = std::min(bound[s], bound[s + 1] - 1);
  }
  // ... then move one bound at a time to where it lowers the pipeline's
  // time per micro-batch (then the largest stage): the busiest device's
  // cost, paced for all `micro_batches`, plus the fill and drain, in which
  // a micro-batch crosses devices - 1 stages before (after) the others
  // start (finish): about (devices - 1) x the largest stage over the
  // micro-batches. With a stage per device that is (1 + (devices - 1) /
  // micro_batches) x the largest stage, so the split balances the stages;
  // with interleaved stages it balances the devices and keeps the stages
  // small (balancing the devices alone settled on a 3% and a 50% stage on
  // device 0 and a 50% and an empty one on device 1 for BERT-small: a
  // two-stage pipeline with extra copies). An op is indivisible, so a heavy
  // last stage (a vocabulary-wide head) is balanced by a lighter stage on
  // the same device, not by the next stage.
  const double fill_drain =
      static_cast<double>(devices - 1) / static_cast<double>(std::max(1, micro_batches));
  std::vector<double> device(devices);  // score's, reused: it runs O(ops^2) times
  constexpr double kNever = std::numeric_limits<double>::infinity();
  auto score = [&](const std::vector<size_t>& b) {
    std::fill(device.begin(), device.end(), 0.0);
    double largest = 0;
    for (int s = 0; s < stages; ++s) {
      if (every_stage_busy && b[s + 1] == b[s]) return std::pair{kNever, kNever};
      const double c = prefix[b[s + 1]] - prefix[b[s]];
      device[s % devices] += c;
      largest = std::max(largest, c);
    }
    return std::pair{*std::max_element(device.begin(), device.end()) + fill_drain * largest,
                     largest};
  };
  const double tolerance = 1e-9 * total;
  auto better = [tolerance](std::pair<double, double> a, std::pair<double, double> b) {
    if (a.first < b.first - tolerance) return true;
    return a.first <= b.first + tolerance && a.second < b.second - tolerance;
  };
  // Moves of one bound, and when none helps, of two neighbouring bounds at
  // once (with interleaved stages, shifting work from a stage to the next
  // moves it to another device, and a pair move keeps a third stage fixed).
  // Each move strictly improves the score; the cap only guards against the
  // tolerance's ties.
  auto move_one = [&](int s) {
    const size_t was = bound[s];
    std::pair<double, double> best = score(bound);
    size_t best_at = was;
    for (size_t at = bound[s - 1]; at <= bound[s + 1]; ++at) {
      bound[s] = at;
      if (const auto e = score(bound); better(e, best)) {
        best = e;
        best_at = at;
      }
    }
    bound[s] = best_at;
    return best_at != was;
  };
  auto move_two = [&](int s) {
    const size_t was_a = bound[s], was_b = bound[s + 1];
    std::pair<double, double> best = score(bound);
    size_t best_a = was_a, best_b = was_b;
    for (size_t a = bound[s - 1]; a <= bound[s + 2]; ++a) {
      bound[s] = a;
      for (size_t b = a; b <= bound[s + 2]; ++b) {
        bound[s + 1] = b;
        if (const auto e = score(bound); better(e, best)) {
          best = e;
          best_a = a;
          best_b = b;
        }
      }
    }
    bound[s] = best_a;
    bound[s + 1] = best_b;
    return best_a != was_a || best_b != was_b;
  };
  for (int sweep = 0; sweep < 64; ++sweep) {
    bool moved = false;
    for (int s = 1; s < stages; ++s) moved |= move_one(s);
    for (int s = 1; !moved && s + 1 < stages; ++s) moved |= move_two(s);
    if (!moved) break;
  }
  r.cost.assign(stages, 0.0);
  r.ops.assign(stages, 0);
  std::vector<const ir::Op*> first(stages, nullptr);
  for (int s = 0; s < stages; ++s) {
    for (size_t i = bound[s]; i < bound[s + 1]; ++i) {
      ir::Op* op = forward[i];
      op->placement.stage = s;
      op->placement.shard = s % devices;
      if (!first[s]) first[s] = op;
      r.cost[s] += prefix[i + 1] - prefix[i];
      ++r.ops[s];
    }
  }
  // Forward ops added later (none yet) take the scope's placement: keep the
  // scope on the last stage, where the loss is.
  ir::Placement p = g.placement_scope();
  p.stage = stages - 1;
  p.shard = (stages - 1) % devices;
  g.set_placement_scope(p);
  for (int s = 0; s < stages; ++s) {
    r.detail += fmt::format("{}stage {}{}: {} ops, {:.1f}% of the cost", s ? "; " : "", s,
                            devices < stages ? fmt::format(" (device {})", s % devices) : "",
                            r.ops[s], total > 0 ? 100.0 * r.cost[s] / total : 0.0);
    if (s > 0 && first[s])
      r.detail += fmt::format(", from {} ({})", first[s]->type, first[s]->name);
  }
  return r;
}

bool IsSharded(const ir::Graph& g) {
  for (const auto& op : g.ops()) {
    if (op->placement.shard != 0 || op->placement.stage != 0) return true;
  }
  return false;
}

}  // namespace tiller::passes
