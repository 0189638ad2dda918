#include "compile/measured_cost.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "compile/compile_pipeline.h"
#include "compile/driver.h"
#include "compile/half_fallback.h"
#include "compile/placement.h"
#include "core/aligned_buffer.h"
#include "core/error.h"
#include "passes/autodiff.h"
#include "passes/pass.h"

namespace tiller::compile {
namespace {

// The copy of a forward graph to time: every op keeps the forward graph's
// placement, its forward index as its origin (ir::Placement::origin),
// which autodiff's gradient ops and the rewrites' replacements inherit, so
// each kernel can be traced back to its forward op while the passes see
// the places the compile will.
struct Copy {
  std::unique_ptr<ir::Graph> graph;
  size_t forward_ops = 0;
  std::vector<Accumulator> accumulators;          // their storage
  std::vector<std::string> rewrites;              // the passes that changed the copy
  std::unordered_map<const ir::Op*, int> origin;  // op -> forward index
};

Copy CopyForTiming(const ir::Graph& g, const ir::Value* loss, const std::vector<ir::Value*>& wrt,
                   const MeasureOptions& o, backend::Device* device) {
  Copy c;
  c.graph = std::make_unique<ir::Graph>();
  ir::Graph& out = *c.graph;
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (const auto& v : g.values()) {
    switch (v->kind) {
      case ir::ValueKind::kInput:
        map[v.get()] = out.AddInput(v->name, v->type);
        break;
      case ir::ValueKind::kState:
        map[v.get()] = out.AddState(v->name, v->type);
        break;
      case ir::ValueKind::kParam:
      case ir::ValueKind::kConstant:
        map[v.get()] = out.AddData(v->name, v->type, v->kind, v->data);
        break;
      case ir::ValueKind::kIntermediate:
        break;  // an op's output: mapped when its op is copied
    }
  }
  auto mapped = [&](const ir::Value* v) -> ir::Value* {
    if (!v) return nullptr;
    auto it = map.find(v);
    TILLER_CHECK(it != map.end(), "value '{}' read before it is produced", v->name);
    return it->second;
  };
  for (const auto& op : g.ops()) {
    TILLER_CHECK(op->placement.phase == ir::Phase::kForward,
                 "measuring costs of a graph that has {} ops already",
                 PhaseName(op->placement.phase));
    std::vector<ir::Value*> inputs;
    for (const ir::Value* in : op->inputs) inputs.push_back(mapped(in));
    ir::Placement at = op->placement;
    at.origin = static_cast<int>(c.forward_ops);
    out.set_placement_scope(at);
    ir::Op* copy = out.AddOp(op->type, std::move(inputs), op->attrs, op->name);
    TILLER_CHECK(copy->outputs.size() == op->outputs.size(), "copy of {} has {} outputs, not {}",
                 op->name, copy->outputs.size(), op->outputs.size());
    for (size_t i = 0; i < op->outputs.size(); ++i) map[op->outputs[i]] = copy->outputs[i];
    ++c.forward_ops;
  }
  out.set_placement_scope({});
  int n = 0;
  auto keep = [&](ir::Value* v) {
    if (v && !v->is_constant()) out.AddOutput(fmt::format("tiller.measured.{}", n++), v);
  };
  if (loss) {
    std::vector<ir::Value*> targets;
    for (const ir::Value* v : wrt) targets.push_back(mapped(v));
    auto by_value = passes::BuildBackward(out, mapped(loss), targets);
    std::vector<ir::Value*> grads;
    for (ir::Value* t : targets) grads.push_back(by_value.at(t));
    // As the step will run them: weight gradients added into accumulators
    // (matmul_accumulate reads and writes a vocabulary-sized one per
    // micro-batch) ...
    if (o.compile.accumulation.steps() > 1)
      grads = AddGradientAccumulators(out, targets, grads, &c.accumulators);
    keep(mapped(loss));
    for (ir::Value* v : grads) keep(v);
  } else {
    // Inference: whatever nobody reads is what the step computes.
    for (const auto& op : out.ops()) {
      for (ir::Value* v : op->outputs) {
        if (v->users.empty()) keep(v);
      }
    }
  }
  // ... and rewritten as the compile will (fusions, recomputation, mixed
  // precision, ...), the replacements taking the origin of the ops they
  // replace. One device runs the copy: no replicas, no processes.
  CompileOptions one = o.compile;
  one.replicas = 1;
  one.collectives.shard_optimizer_state = false;
  one.device_process.clear();
  one.updates_in_pipeline = false;
  one.plan_only = false;
  const std::vector<backend::Device*> devices{device};
  CompiledStep results;  // gradient statistics' accumulators: zeros here
  const passes::PassContext ctx = PipelineContext(devices, loss != nullptr);
  for (const passes::PassRecord& r : RewritePipeline(one, devices, &results)->RunRecorded(out, ctx))
    if (r.rewrites) c.rewrites.push_back(r.name);
  for (auto& op : out.ops()) {
    c.origin[op.get()] = op->placement.origin;
    op->placement = {};  // one device runs it all
  }
  return c;
}

MeasuredCosts Measure(const ir::Graph& g, const ir::Value* loss, const std::vector<ir::Value*>& wrt,
                      const StateStorage& states, const MeasureOptions& o) {
  // One device of the compile's first device's spec runs the copy; its
  // capabilities decide the rewrites, as that device's do in the compile.
  const DeviceSpec spec = o.compile.devices.empty() ? DeviceSpec{} : o.compile.devices[0];
  backend::Backend* b = backend::FindBackend(spec.backend);
  TILLER_CHECK(b, "no backend '{}'", spec.backend);
  std::unique_ptr<backend::Device> device =
      b->CreateDevice(0, {spec.threads, spec.memory_bytes, false, spec.unit});
  Copy c = CopyForTiming(g, loss, wrt, o, device.get());
  // States the caller has no storage for (none in a training session's
  // forward graph) read zeros.
  StateStorage storage;
  std::vector<AlignedBuffer> zeros;
  zeros.reserve(c.graph->states().size());
  for (Accumulator& a : c.accumulators) storage[a.name] = a.data.data();
  for (const ir::Value* s : c.graph->states()) {
    if (storage.count(s->name)) continue;
    if (auto it = states.find(s->name); it != states.end()) {
      storage[s->name] = it->second;
      continue;
    }
    zeros.emplace_back(s->bytes());
    storage[s->name] = zeros.back().data();
  }
  const size_t forward_ops = c.forward_ops;
  auto origin = std::move(c.origin);
  const std::vector<backend::Device*> one{device.get()};
  PlaceOps(*c.graph, one, CompileOptions{}.placement);
  InsertCopies(*c.graph, HostDevice(one), HostMemoryDevices(one));
  auto exe = Executable::BuildPlaced(std::move(c.graph), one, storage);
  // Zeros are valid indices, labels and lengths for every op that reads
  // them, and time like any other data. Written before every run: the
  // memory plan reuses an input's bytes once its last reader ran.
  auto run = [&exe] {
    for (TensorSlot& in : exe->inputs()) std::memset(in.data, 0, in.type.bytes());
    exe->Run();
  };
  run();
  exe->EnableProfiling(true);
  for (int r = 0; r < o.runs; ++r) run();
  MeasuredCosts m;
  m.ms.assign(forward_ops, 0.0);
  m.runs = o.runs;
  m.rewrites = std::move(c.rewrites);
  for (const auto& [op, ms] : exe->StepTimes()) {
    auto it = origin.find(op);
    if (it == origin.end() || it->second < 0 || static_cast<size_t>(it->second) >= forward_ops)
      continue;  // copies placement inserted: none on one device
    m.ms[static_cast<size_t>(it->second)] += ms;
    m.total_ms += ms;
  }
  return m;
}

}  // namespace

MeasuredCosts MeasureForwardOpCosts(const ir::Graph& g, const ir::Value* loss,
                                    const std::vector<ir::Value*>& wrt, const StateStorage& states,
                                    const MeasureOptions& o) {
  TILLER_CHECK(o.runs >= 1, "measuring costs over {} runs", o.runs);
  static std::mutex mu;
  static std::map<std::string, MeasuredCosts> cache;
  const CompileOptions& c = o.compile;
  const DeviceSpec d = c.devices.empty() ? DeviceSpec{} : c.devices[0];
  // Everything that changes the copy's rewrites or kernels.
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}\n", d.backend, d.threads,
                                d.memory_bytes, o.runs, c.accumulation.steps() > 1, c.optimize,
                                static_cast<int>(c.precision), c.recompute.enabled, c.recompute.all,
                                c.stochastic_rounding, c.loss_scale.counts_gradients(),
                                c.conv_winograd, c.conv_channel_block, loss ? loss->id : -1);
  for (const ir::Value* v : wrt) key += fmt::format("{} ", v->id);
  key += g.ToString();
  // Held while measuring: replicas compiled on several threads wait for the
  // first measurement instead of timing against each other.
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) {
    MeasuredCosts m = it->second;
    m.cached = true;
    return m;
  }
  MeasuredCosts m = Measure(g, loss, wrt, states, o);
  cache.emplace(std::move(key), m);
  return m;
}

}  // namespace tiller::compile
