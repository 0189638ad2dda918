#include "compile/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "compile/pipeline.h"
#include "compile/placement.h"
#include "core/error.h"
#include "core/memory_cap.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"
#include "ir/ops/optimizer.h"
#include "passes/pass.h"

namespace tiller::compile {
namespace {

enum class Kind { kWeights, kOptimizer, kGradients, kOther };

size_t& Slot(DevicePlan& d, Kind k) {
  switch (k) {
    case Kind::kWeights:
      return d.weights;
    case Kind::kOptimizer:
      return d.optimizer;
    case Kind::kGradients:
      return d.gradients;
    default:
      return d.other;
  }
}

// Whether a backward op reads `v`, or a view of it made in the forward.
// (A worklist: a chain of views may be as long as the graph.)
bool ReadInBackward(const ir::Value* v) {
  std::vector<const ir::Value*> pending = {v};
  while (!pending.empty()) {
    const ir::Value* w = pending.back();
    pending.pop_back();
    for (const ir::Op* u : w->users) {
      if (u->placement.phase == ir::Phase::kBackward) return true;
      if (u->schema->is_view) pending.push_back(u->outputs[0]);
    }
  }
  return false;
}

// The bytes an op moves: its operands', except where it reads and writes
// a table by rows (an embedding lookup, a row-sparse update): those rows.
double TouchedBytes(const ir::Op& op, size_t all) {
  if (op.is(ir::Opcode::embedding)) {
    // The looked-up rows (as many as the output holds), the ids, the output.
    return 2.0 * op.outputs[0]->bytes() + op.inputs[1]->bytes();
  }
  if (ir::IsRowOptimizerOp(op.type) && !(op.is(ir::Opcode::adam_rows) && !op.GetBool("lazy"))) {
    // Each table-shaped operand (param, state) read and written at the rows.
    const ir::Value* rows = op.inputs[1];
    double bytes = static_cast<double>(rows->bytes() + op.inputs.back()->bytes());
    for (const ir::Value* v : op.inputs) {
      if (v && v->shape() == op.inputs[0]->shape()) bytes += 2.0 * rows->bytes();
    }
    return bytes;
  }
  return static_cast<double>(all);
}

// Seconds of one op on `p`: compute + memory traffic, or link time for
// movement between devices (a ring's share for collectives).
double OpSeconds(const ir::Op& op, const DeviceProfile& p, const PlanShape& shape) {
  size_t in_bytes = 0, out_bytes = 0;
  for (const ir::Value* v : op.inputs) in_bytes += v ? v->bytes() : 0;
  for (const ir::Value* v : op.outputs) out_bytes += v->bytes();
  if (op.is(ir::Opcode::copy)) return static_cast<double>(in_bytes) / p.link;
  if (ir::IsCollective(op)) {
    const int r = shape.replicas;
    if (r <= 1) return 0;
    // A ring over every replica: its slowest hop sets the pace.
    const bool across = shape.ranks > 1;
    const double link = across && shape.rank_link > 0 ? std::min(p.link, shape.rank_link) : p.link;
    const double latency = across ? shape.rank_latency : 0;
    const double steps = r - 1.0, share = steps / r;
    // gather_rows moves the looked-up rows, not its operand tables.
    const double bytes = op.is(ir::Opcode::gather_rows)
                             ? static_cast<double>(out_bytes)
                             : static_cast<double>(std::max(in_bytes, out_bytes));
    const double one = share * bytes / link + steps * latency;
    return op.is(ir::Opcode::all_reduce) || op.is(ir::Opcode::all_reduce_start) ? 2 * one : one;
  }
  return passes::OpFlops(op) / p.flops + TouchedBytes(op, in_bytes + out_bytes) / p.bandwidth;
}

std::string Percent(double x) {
  return fmt::format("{:.0f}%", 100 * x);
}

std::string Seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:.1f} us", s * 1e6);
  return fmt::format("{:.0f} ns", s * 1e9);
}

// The state an optimizer operand is part of: replicated tensor sharding
// hands the optimizer a slice of the flattened weight (copied to the
// optimizer's device when the view of it lives elsewhere); an accumulator
// stored in float16 (accl*_type) reaches it widened by a cast.
const ir::Value* Root(const ir::Value* v) {
  while (v && v->producer &&
         (v->producer->is(ir::Opcode::reshape) || v->producer->is(ir::Opcode::slice) ||
          v->producer->is(ir::Opcode::copy) || v->producer->is(ir::Opcode::cast)))
    v = v->producer->inputs[0];
  return v;
}

// An embedding table the planner can keep in host memory: only lookups
// read it and row updates that touch only the looked-up rows (not
// non-lazy adam_rows, which moves every row) write it, all on one device.
struct StreamableTable {
  const ir::Value* table = nullptr;
  int device = -1;
  size_t weights = 0, optimizer = 0;  // the table; its update's per-element state
  double lookup_bytes = 0;            // rows moved in per micro-batch
  double update_bytes = 0;            // rows moved in and out per update
  size_t bytes() const { return weights + optimizer; }
};

std::vector<StreamableTable> StreamableTables(const ir::Graph& g) {
  std::map<const ir::Value*, StreamableTable> found;
  std::set<const ir::Value*> refused;
  auto refuse = [&](const ir::Value* v) {
    refused.insert(v);
    found.erase(v);
  };
  for (const auto& op : g.ops()) {
    const bool lookup = op->is(ir::Opcode::embedding);
    const bool row_update = ir::IsRowOptimizerOp(op->type);
    const ir::Value* table = (lookup || row_update) ? Root(op->inputs[0]) : nullptr;
    // Any other reader of a table keeps it on the device.
    for (size_t i = 0; i < op->inputs.size(); ++i) {
      const ir::Value* in = Root(op->inputs[i]);
      if (!in || in->shape().size() != 2 || in == table) continue;
      const bool update_state = row_update && i >= 3 && in->shape() == table->shape();
      if (!update_state) refuse(in);
    }
    if (!table || refused.count(table) || table->shape().size() != 2 ||
        !(table->kind == ir::ValueKind::kState || table->is_weight()))
      continue;
    StreamableTable& t = found[table];
    if (t.table && t.device != op->device) {
      refuse(table);
      continue;
    }
    t.table = table;
    t.device = op->device;
    if (lookup) {
      t.lookup_bytes += static_cast<double>(op->outputs[0]->bytes());
      continue;
    }
    if (op->is(ir::Opcode::adam_rows) && !op->GetBool("lazy")) {
      refuse(table);
      continue;
    }
    // The gradient's rows and ids come in; each table-shaped operand's
    // touched rows go in and out.
    const double rows = static_cast<double>(op->inputs[1]->bytes());
    t.update_bytes += rows + static_cast<double>(op->inputs.back()->bytes());
    t.weights = table->bytes();
    for (size_t i = 0; i < op->inputs.size(); ++i) {
      const ir::Value* in = Root(op->inputs[i]);
      if (in && in->shape() == table->shape()) {
        t.update_bytes += 2 * rows;
        if (i >= 3) t.optimizer += in->bytes();
      }
    }
  }
  std::vector<StreamableTable> out;  // (refuse took the refused out of `found`)
  for (auto& [v, t] : found) {
    if (!t.weights) t.weights = v->bytes();  // read only (inference, or frozen)
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const StreamableTable& a, const StreamableTable& b) {
    return a.bytes() > b.bytes();
  });
  return out;
}

// Keeps tables of devices that do not fit in host memory (StepPlan's
// comment), largest first, until each fits; prices the rows they move.
void StreamTables(StepPlan& plan, const ir::Graph& g) {
  const DeviceProfile& p = plan.profile;
  if (!p.memory_bytes || p.host_link <= 0) return;
  for (const StreamableTable& t : StreamableTables(g)) {
    DevicePlan& d = plan.devices.at(t.device);
    if (d.peak() <= p.memory_bytes) continue;
    d.weights -= std::min(d.weights, t.weights);
    d.optimizer -= std::min(d.optimizer, t.optimizer);
    d.streamed += t.bytes();
    d.streamed_tables.emplace_back(t.table->name, t.bytes());
    d.streamed_bytes += t.lookup_bytes + t.update_bytes / std::max(plan.shape.accumulation, 1);
    d.forward_s += t.lookup_bytes / p.host_link;
    d.update_s += t.update_bytes / p.host_link;
    d.streamed_s += t.lookup_bytes / p.host_link + t.update_bytes / p.host_link;
    // What a device that still does not fit names: what it kept.
    std::erase_if(d.largest, [&](const auto& l) { return l.first == t.table->name; });
  }
}

// "'a' 1.00 GB, 'b' 20.0 MB": the first `limit` of (name, bytes), and
// " and N more" for the rest.
std::string NamedBytes(const std::vector<std::pair<std::string, size_t>>& items, size_t limit) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i)
    out += fmt::format("{}'{}' {}", i ? ", " : "", items[i].first, FormatBytes(items[i].second));
  if (items.size() > limit) out += fmt::format(" and {} more", items.size() - limit);
  return out;
}

}  // namespace

std::vector<DevicePlan> StateByDevice(const CompiledStep& step) {
  const Executable& exe = *step.exe;
  const ir::Graph& g = exe.graph();
  std::vector<DevicePlan> out(exe.num_devices());
  for (size_t d = 0; d < out.size(); ++d) out[d].device = exe.device(d).name();
  std::set<std::string> acc;
  for (const Accumulator& a : step.accumulators) acc.insert(a.name);
  // Owner: the optimizer op updating the state, else its first reader.
  std::map<const ir::Value*, std::pair<int, Kind>> owner;
  for (const auto& op : g.ops()) {
    if (!ir::IsOptimizerOp(op->type) && !ir::IsRowOptimizerOp(op->type)) continue;
    for (size_t i = 0; i < op->inputs.size(); ++i) {
      const ir::Value* in = Root(op->inputs[i]);
      if (!in || in->kind != ir::ValueKind::kState) continue;
      const Kind k = i == 0 ? Kind::kWeights : i >= 3 ? Kind::kOptimizer : Kind::kOther;
      owner.try_emplace(in, op->device, k);
    }
  }
  for (const auto& op : g.ops()) {
    for (const ir::Value* in : op->inputs) {
      if (in && in->kind == ir::ValueKind::kState)
        owner.try_emplace(in, op->device, acc.count(in->name) ? Kind::kGradients : Kind::kOther);
    }
  }
  for (const ir::Value* s : g.states()) {
    auto it = owner.find(s);
    // A state nothing reads lives with the host.
    const int d = it == owner.end() ? exe.host_device() : it->second.first;
    const Kind k = it == owner.end() ? Kind::kOther : it->second.second;
    Slot(out.at(d), k) += s->bytes();
    out.at(d).largest.emplace_back(s->name, s->bytes());
  }
  for (DevicePlan& d : out) {
    auto by_size = [](const auto& a, const auto& b) { return a.second > b.second; };
    const size_t keep = std::min<size_t>(3, d.largest.size());
    std::partial_sort(d.largest.begin(), d.largest.begin() + keep, d.largest.end(), by_size);
    d.largest.resize(keep);
  }
  // Weights as constants (inference): on every device reading them (their
  // data may be gone: kernels that packed them hold the bytes).
  std::set<std::pair<const ir::Value*, int>> counted;
  for (const auto& op : g.ops()) {
    for (const ir::Value* in : op->inputs) {
      if (in && in->is_weight() && counted.insert({in, op->device}).second)
        out.at(op->device).weights += in->bytes();
    }
  }
  return out;
}

StepPlan PlanStep(const CompiledStep& step, const DeviceProfile& profile, const PlanShape& shape) {
  const Executable& exe = *step.exe;
  TILLER_CHECK(profile.flops > 0 && profile.bandwidth > 0 && profile.link > 0,
               "profile '{}' has no rates", profile.name);
  StepPlan plan;
  plan.profile = profile;
  plan.shape = shape;
  plan.devices = StateByDevice(step);
  const ir::Graph& g = exe.graph();
  const int host = exe.host_device();
  const int n = static_cast<int>(plan.devices.size());
  const int window = shape.training ? shape.accumulation : shape.micro_batches;
  int in_flight = 1;
  if (shape.pipelined)
    in_flight = PipelineCopies(
        shape.fill_drain ? PipelineSchedule::kFillDrain : PipelineSchedule::kOneForwardOneBackward,
        window, n, PipelineStages(g), shape.in_flight);
  for (int d = 0; d < n; ++d) {
    DevicePlan& dp = plan.devices[d];
    dp.arena = exe.plan(d).arena_bytes();
    dp.in_flight = in_flight;
  }
  for (const auto& op : g.ops()) {
    DevicePlan& dp = plan.devices.at(op->device);
    for (const ir::Value* v : op->outputs) {
      if (!IsHalf(v->dtype())) continue;
      const ir::Value* in = op->inputs.empty() ? nullptr : op->inputs[0];
      if (op->is(ir::Opcode::cast) && in && in->kind == ir::ValueKind::kState)
        dp.half_weight_copies += v->bytes();
      else if (!op->schema->is_view)
        dp.half_values += v->bytes();
    }
    if (op->schema->is_view) continue;
    const double s = OpSeconds(*op, profile, shape);
    if (ir::IsCollective(*op) && shape.replicas > 1) {
      ++dp.collective_messages;
      if (op->is(ir::Opcode::gather_rows))
        for (const ir::Value* v : op->outputs) dp.collective_bytes += v->bytes();
      else
        for (const ir::Value* v : op->inputs) dp.collective_bytes += v ? v->bytes() : 0;
      dp.collective_s += s;
    }
    switch (op->placement.phase) {
      case ir::Phase::kForward:
        dp.forward_s += s;
        dp.flops += passes::OpFlops(*op);
        // Forward results a backward op reads (directly or through forward
        // views: a matmul reading attention's heads by strides) stay until
        // that backward.
        for (const ir::Value* v : op->outputs) {
          if (ReadInBackward(v) && HomeDevice(v, host) == op->device) dp.stash += v->bytes();
        }
        break;
      case ir::Phase::kBackward:
        dp.backward_s += s;
        dp.flops += passes::OpFlops(*op);
        break;
      case ir::Phase::kUpdate:
        dp.update_s += s;
        break;
    }
  }
  StreamTables(plan, g);
  double sum_fb = 0, max_fb = 0, sum_u = 0;
  for (const DevicePlan& dp : plan.devices) {
    sum_fb += dp.forward_s + dp.backward_s;
    max_fb = std::max(max_fb, dp.forward_s + dp.backward_s);
    sum_u += dp.update_s;
  }
  const double flow = shape.pipelined ? sum_fb + (window - 1) * max_fb : window * sum_fb;
  plan.window_s = flow + sum_u;
  plan.bubble = n > 1 && flow > 0 ? 1.0 - window * sum_fb / (n * flow) : 0.0;
  const int windows = std::max(1, shape.micro_batches / std::max(window, 1));
  plan.run_s = windows * plan.window_s;
  return plan;
}

size_t StepPlan::HostBytes() const {
  size_t bytes = 0;
  for (const DevicePlan& d : devices) bytes += d.streamed;
  return bytes * static_cast<size_t>(std::max(shape.replicas / std::max(shape.ranks, 1), 1));
}

bool StepPlan::Fits() const {
  return std::all_of(devices.begin(), devices.end(),
                     [&](const DevicePlan& d) { return d.peak() <= profile.memory_bytes; }) &&
         HostBytes() <= profile.host_memory_bytes;
}

std::string StepPlan::Format() const {
  const PlanShape& s = shape;
  std::string out = fmt::format(
      "plan: {}, {} replica{}{} x {} device{}{}, {} micro-batch{} per run{}\n",
      s.training ? "training" : "inference", s.replicas, s.replicas == 1 ? "" : "s",
      s.ranks > 1 ? fmt::format(" ({} processes x {})", s.ranks, s.replicas / s.ranks) : "",
      s.devices_per_replica, s.devices_per_replica == 1 ? "" : "s",
      s.pipelined ? (s.fill_drain ? " pipelined (fill-drain)" : " pipelined (1F1B)") : "",
      s.micro_batches, s.micro_batches == 1 ? "" : "es",
      s.training ? fmt::format(", accumulation {}", s.accumulation) : "");
  out +=
      fmt::format("profile: {} ({}): {} per device, {:.1f} TFLOP/s, {}/s memory, {}/s links\n",
                  profile.name, profile.description, FormatBytes(profile.memory_bytes),
                  profile.flops / 1e12, FormatBytes(profile.bandwidth), FormatBytes(profile.link));
  out += fmt::format("{:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>6}\n",
                     "device", "weights", "optimizer", "gradients", "other", "stash/mb",
                     "in flight", "arena/mb", "peak", "used");
  for (size_t d = 0; d < devices.size(); ++d) {
    const DevicePlan& p = devices[d];
    out += fmt::format(
        "{:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>6}\n", d,
        FormatBytes(p.weights), FormatBytes(p.optimizer), FormatBytes(p.gradients),
        FormatBytes(p.other), FormatBytes(p.stash), p.in_flight, FormatBytes(p.arena),
        FormatBytes(p.peak()),
        profile.memory_bytes ? Percent(static_cast<double>(p.peak()) / profile.memory_bytes) : "-");
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    const DevicePlan& p = devices[d];
    if (p.half_weight_copies || p.half_values)
      out += fmt::format(
          "  device {} half precision: {} half copies of the float32 (master) weights per run, "
          "{} half activations / gradients written per micro-batch (both in the arena)\n",
          d, FormatBytes(p.half_weight_copies), FormatBytes(p.half_values));
  }
  out += s.training ? "predicted per micro-batch (forward + backward) and per update:\n"
                    : "predicted per micro-batch:\n";
  for (size_t d = 0; d < devices.size(); ++d) {
    const DevicePlan& p = devices[d];
    if (s.training)
      out += fmt::format("  device {}: {:.3f} GFLOP, forward {}, backward {}, update {}\n", d,
                         p.flops / 1e9, Seconds(p.forward_s), Seconds(p.backward_s),
                         Seconds(p.update_s));
    else
      out += fmt::format("  device {}: {:.3f} GFLOP, forward {}\n", d, p.flops / 1e9,
                         Seconds(p.forward_s));
  }
  int messages = 0;
  size_t bytes = 0;
  double collective_s = 0;
  for (const DevicePlan& p : devices) {
    messages += p.collective_messages;
    bytes += p.collective_bytes;
    collective_s += p.collective_s;
  }
  if (messages) {
    const bool across = s.ranks > 1 && s.rank_link > 0;
    out += fmt::format(
        "collectives over {} replicas: {} message{} of {} per update, {} ({} of the update); "
        "ring over {}/s{}\n",
        s.replicas, messages, messages == 1 ? "" : "s", FormatBytes(bytes), Seconds(collective_s),
        window_s > 0 ? Percent(collective_s / window_s) : std::string("-"),
        FormatBytes(across ? std::min(profile.link, s.rank_link) : profile.link),
        across ? fmt::format(", {:.1f} us per step between processes", s.rank_latency * 1e6)
               : std::string());
    out += fmt::format(
        "scaling: {} replicas train {:.2f}x the samples per second of one ({} efficiency)\n",
        s.replicas, s.replicas * (window_s - collective_s) / window_s,
        Percent((window_s - collective_s) / window_s));
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    const DevicePlan& p = devices[d];
    if (p.streamed_tables.empty()) continue;
    const std::string names = NamedBytes(p.streamed_tables, 3);
    out += fmt::format(
        "  device {} keeps {} table{} in host memory ({} with optimizer state: {}); it moves "
        "{} of rows per micro-batch over the {}/s host link, {}\n",
        d, p.streamed_tables.size(), p.streamed_tables.size() == 1 ? "" : "s",
        FormatBytes(p.streamed), names, FormatBytes(p.streamed_bytes),
        FormatBytes(profile.host_link), Seconds(p.streamed_s));
  }
  out += fmt::format("predicted step time: {} per {}, {} per run; pipeline bubble {}\n",
                     Seconds(window_s), s.training ? "update" : "window", Seconds(run_s),
                     devices.size() > 1 ? Percent(bubble) : std::string("- (one device)"));
  for (size_t d = 0; d < devices.size(); ++d) {
    const DevicePlan& p = devices[d];
    if (p.peak() <= profile.memory_bytes) continue;
    const std::string largest = NamedBytes(p.largest, p.largest.size());
    out += fmt::format(
        "device {} does not fit: it needs {}, a {} device holds {}; its largest state: {} "
        "(more devices per replica, replicated tensor sharding, recomputation or a smaller "
        "micro-batch lower it)\n",
        d, FormatBytes(p.peak()), profile.name, FormatBytes(profile.memory_bytes),
        largest.empty() ? "none" : largest);
  }
  if (HostBytes() > profile.host_memory_bytes) {
    std::vector<std::pair<std::string, size_t>> tables;
    for (const DevicePlan& p : devices)
      tables.insert(tables.end(), p.streamed_tables.begin(), p.streamed_tables.end());
    std::sort(tables.begin(), tables.end(),
              [](const auto& a, const auto& b) { return a.second > b.second; });
    tables.resize(std::min<size_t>(tables.size(), 3));
    const std::string largest = NamedBytes(tables, 3);
    out += fmt::format(
        "host memory does not fit: the tables kept there need {}, the {} host holds {}; the "
        "largest (with optimizer state): {} (smaller tables, or more processes with "
        "shard_embedding_rows, lower it)\n",
        FormatBytes(HostBytes()), profile.name, FormatBytes(profile.host_memory_bytes), largest);
  }
  return out;
}

void StepPlan::CheckFits() const {
  if (!Fits())
    Fail(ErrorKind::kInvalidArgument, "the step does not fit its device profile:\n{}", Format());
}

}  // namespace tiller::compile
