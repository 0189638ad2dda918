#include "compile/driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "backend/collective.h"
#include "compile/compile_pipeline.h"
#include "compile/fold.h"
#include "compile/half_fallback.h"
#include "compile/measured_cost.h"
#include "compile/placement.h"
#include "compile/processes.h"
#include "core/error.h"
#include "core/memory_cap.h"
#include "ir/row_gradient.h"
#include "passes/autodiff.h"
#include "passes/pattern_utils.h"

namespace tiller::compile {
namespace {}  // namespace

namespace {

// The contributions a gradient sums: the leaves of its tree of backward
// adds, each add read by the next only (a weight read on several shards,
// such as an embedding table tied to the output projection).
// `tree` gets the adds, which the per-shard sums replace.
// (A worklist, leaves in the left-to-right order of the tree: a weight read
// by every op of a long graph has an add per read.)
void Contributions(ir::Value* root, std::vector<ir::Value*>* out, std::set<const ir::Op*>* tree) {
  std::vector<ir::Value*> pending = {root};
  while (!pending.empty()) {
    ir::Value* v = pending.back();
    pending.pop_back();
    const ir::Op* p = v->producer;
    if (p && p->is(ir::Opcode::add) && p->placement.phase == ir::Phase::kBackward &&
        (v == root || v->users.size() == 1) && p->inputs[0]->type == v->type &&
        p->inputs[1]->type == v->type) {
      tree->insert(p);
      pending.push_back(p->inputs[1]);
      pending.push_back(p->inputs[0]);
      continue;
    }
    out->push_back(v);
  }
}

// Whether the op computing `contribution` can add it into an accumulator
// itself: an embedding's table gradient (scattered in: embedding_grad_add)
// or a 2-D matmul (the GEMM adds its product in: matmul_accumulate), read by
// nothing but the ops going away (`replaced`).
bool AddsItselfIn(const ir::Value* contribution, const std::set<const ir::Op*>& replaced) {
  const ir::Op* p = contribution->producer;
  if (!p || !std::all_of(contribution->users.begin(), contribution->users.end(),
                         [&](const ir::Op* u) { return replaced.count(u) > 0; }))
    return false;
  if (p->is(ir::Opcode::embedding_grad)) return true;
  return p->is(ir::Opcode::matmul) && p->inputs[0]->shape().size() == 2 &&
         p->inputs[1]->shape().size() == 2 && contribution->dtype() == DType::kF32;
}

// acc + contribution, in the accumulator's storage; a contribution that
// AddsItselfIn is added by the op computing it (no gradient-sized
// temporary).
ir::Value* AddInto(ir::Graph& g, ir::Value* acc, ir::Value* contribution, const std::string& name,
                   const std::set<const ir::Op*>& replaced) {
  const ir::Op* p = contribution->producer;
  if (AddsItselfIn(contribution, replaced)) {
    if (p->is(ir::Opcode::embedding_grad))
      return g.Add1("embedding_grad_add", {acc, p->inputs[0], p->inputs[1]},
                    {{"padding_idx", p->GetInt("padding_idx")}}, "accumulate " + name);
    return g.Add1("matmul_accumulate", {acc, p->inputs[0], p->inputs[1]},
                  {{"transpose_a", p->GetBool("transpose_a")},
                   {"transpose_b", p->GetBool("transpose_b")},
                   {"alpha", p->GetFloat("alpha")}},
                  "accumulate " + name);
  }
  return g.Add1("accumulate", {acc, contribution}, {}, "accumulate " + name);
}

// A row gradient summed over the replicas: every replica's ids and rows
// gathered (the sum of their dense values, as all_reduce would give it,
// without a table-sized message), the rows scaled by `scale`.
ir::Value* GatherRowGradient(ir::Graph& g, ir::Value* grad, double scale, const CompileOptions& o) {
  ir::RowGradient r = *ir::AsRowGradient(grad);
  const int64_t n = NumElements(r.ids->shape()), width = r.rows->shape().back();
  // Collectives take one-dimensional parts: rows go flat.
  auto gather = [&](ir::Value* v) {
    return passes::AllGatherFlat(g, v, o.replicas, o.replica_rank);
  };
  r.ids = gather(r.ids);
  // Scaled before the gather: each replica scales its own rows (the same
  // products, 1 / replicas of the work).
  ir::Value* mine =
      scale == 1.0 ? r.rows : g.Add1("scale", {r.rows}, {{"scale", scale}, {"bias", 0.0}});
  r.rows = g.Add1("reshape", {gather(mine)}, {{"shape", Shape{n * o.replicas, width}}});
  return ir::RowGradientValue(g, r);
}

}  // namespace

std::vector<ir::Value*> AddGradientAccumulators(ir::Graph& g, const std::vector<ir::Value*>& wrt,
                                                const std::vector<ir::Value*>& gradients,
                                                std::vector<Accumulator>* accumulators,
                                                bool allocate) {
  TILLER_CHECK(wrt.size() == gradients.size(), "{} trained values, {} gradients", wrt.size(),
               gradients.size());
  std::vector<ir::Value*> sums;
  for (size_t k = 0; k < gradients.size(); ++k) {
    ir::Value* grad = gradients[k];
    // The contributions by shard: each shard accumulates its own (on its
    // device, every micro-batch), and the update adds the shards' sums once
    // per window, instead of moving a gradient between devices per
    // micro-batch.
    std::vector<ir::Value*> leaves;
    std::set<const ir::Op*> tree;
    Contributions(grad, &leaves, &tree);
    std::vector<std::pair<int, std::vector<ir::Value*>>> by_shard;
    for (ir::Value* leaf : leaves) {
      const int shard = leaf->producer ? leaf->producer->placement.shard : -1;
      auto it = std::find_if(by_shard.begin(), by_shard.end(),
                             [&](const auto& s) { return s.first == shard; });
      if (it == by_shard.end())
        by_shard.push_back({shard, {leaf}});
      else
        it->second.push_back(leaf);
    }
    // The weight's own shard first: the update adds the others' sums into
    // it there, where the optimizer runs (passes/place_updates.cc).
    int home = -1;
    for (const ir::Op* user : wrt[k]->users) {
      if (user->placement.phase == ir::Phase::kForward) {
        home = user->placement.shard;
        break;
      }
    }
    std::stable_partition(by_shard.begin(), by_shard.end(),
                          [&](const auto& s) { return s.first == home; });
    // One shard: the gradient as it is, unless some of its contributions
    // add themselves in (a tied embedding table: its lookup's gradient and
    // the output projection's matmul, each into the accumulator).
    if (by_shard.size() == 1 && std::none_of(leaves.begin(), leaves.end(), [&](const ir::Value* v) {
          return AddsItselfIn(v, tree);
        })) {
      by_shard = {{0, {grad}}};
      tree.clear();
    }
    std::vector<ir::Value*> parts;
    for (size_t s = 0; s < by_shard.size(); ++s) {
      std::vector<ir::Value*>& group = by_shard[s].second;
      // The sum goes where its contributions are computed: same shard and stage.
      ir::Placement p = group[0]->producer ? group[0]->producer->placement : g.placement_scope();
      p.phase = ir::Phase::kBackward;
      ir::ScopedPlacement scope(g, p);
      Accumulator a;
      a.name = s == 0 ? fmt::format("{}@GRAD@ACCUMULATED", wrt[k]->name)
                      : fmt::format("{}@GRAD@ACCUMULATED@{}", wrt[k]->name, s);
      if (allocate) a.data.Resize(grad->bytes());  // zeroed
      ir::Value* acc = g.AddState(a.name, grad->type);
      // The others summed and added first, then those that add themselves
      // in, one after another (a chain the memory plan keeps in the
      // accumulator's storage).
      ir::Value* rest = nullptr;
      std::vector<ir::Value*> own;
      for (ir::Value* v : group) {
        if (AddsItselfIn(v, tree))
          own.push_back(v);
        else
          rest = rest ? g.Add1("add", {rest, v}) : v;
      }
      ir::Value* sum = rest ? AddInto(g, acc, rest, a.name, tree) : acc;
      for (ir::Value* v : own) sum = AddInto(g, sum, v, a.name, tree);
      g.SetStateUpdate(acc, sum);
      accumulators->push_back(std::move(a));
      parts.push_back(sum);
    }
    ir::Value* total = parts[0];
    if (parts.size() > 1) {
      ir::Placement p = g.placement_scope();
      p.phase = ir::Phase::kUpdate;
      ir::ScopedPlacement scope(g, p);
      for (size_t i = 1; i < parts.size(); ++i) total = g.Add1("add", {total, parts[i]});
    }
    sums.push_back(total);
  }
  return sums;
}

void CompiledStep::SetLossScale(double scale) {
  TILLER_CHECK(loss_scale_seed.size() && loss_scale_unscale.size(),
               "SetLossScale on a step compiled without dynamic loss scaling");
  float* seed = loss_scale_seed.as<float>();
  for (size_t i = 0; i < loss_scale_seed.size() / sizeof(float); ++i)
    seed[i] = static_cast<float>(scale);
  *loss_scale_unscale.as<float>() = static_cast<float>(gradient_mean / scale);
}

bool CompiledStep::GradientHistogram(double counts[3]) const {
  bool any = false;
  counts[0] = counts[1] = counts[2] = 0;
  for (const Accumulator& a : accumulators) {
    if (!IsGradientHistogram(a) || !a.data.size()) continue;
    for (int i = 0; i < 3; ++i) counts[i] += a.data.as<double>()[i];
    any = true;
  }
  return any;
}

void CompiledStep::ResetAccumulators() {
  for (Accumulator& a : accumulators) {
    if (a.data.size()) std::memset(a.data.data(), 0, a.data.size());
  }
}

void Validate(const CompileOptions& o) {
  if (o.devices.empty()) Fail(ErrorKind::kInvalidArgument, "compile options name no devices");
  o.split.Validate();
  o.collectives.Validate();
  for (size_t i = 0; i < o.devices.size(); ++i) {
    const DeviceSpec& d = o.devices[i];
    if (!backend::FindBackend(d.backend)) {
      std::string known;
      for (const std::string& n : backend::BackendNames()) known += (known.empty() ? "" : ", ") + n;
      Fail(ErrorKind::kInvalidArgument, "device {}: no backend named '{}' (registered: {})", i,
           d.backend, known);
    }
    if (d.threads < 1)
      Fail(ErrorKind::kInvalidArgument, "device {} ({}): threads must be >= 1, got {}", i,
           d.backend, d.threads);
  }

  if (o.replicas < 1)
    Fail(ErrorKind::kInvalidArgument, "replicas must be >= 1, got {}", o.replicas);
  if (o.replicas > 1) {
    if (o.replica_groups.size() != o.devices.size())
      Fail(ErrorKind::kInvalidArgument, "{} replicas need a replica group per device ({} for {})",
           o.replicas, o.replica_groups.size(), o.devices.size());
    for (const backend::Collective* group : o.replica_groups) {
      if (!group || group->size() != o.replicas)
        Fail(ErrorKind::kInvalidArgument, "{} replicas need replica groups of that size",
             o.replicas);
    }
    if (o.replica_rank < 0 || o.replica_rank >= o.replicas)
      Fail(ErrorKind::kInvalidArgument, "replica rank {} of {}", o.replica_rank, o.replicas);
  }
  if (!o.device_process.empty()) {
    if (o.device_process.size() != o.devices.size())
      Fail(ErrorKind::kInvalidArgument, "device_process names {} processes for {} devices",
           o.device_process.size(), o.devices.size());
    if (!o.process_link)
      Fail(ErrorKind::kInvalidArgument, "devices on other processes need a process link");
    if (std::find(o.device_process.begin(), o.device_process.end(), o.process) ==
        o.device_process.end())
      Fail(ErrorKind::kInvalidArgument, "process {} runs none of the devices", o.process);
  }
  o.accumulation.Validate();
  if (o.batches_per_step < 1)
    Fail(ErrorKind::kInvalidArgument, "batches per step must be >= 1, got {}", o.batches_per_step);
  if (o.loss_scale.counts_gradients() && o.precision == Precision::kFloat32)
    Fail(ErrorKind::kInvalidArgument,
         "gradient statistics (and automatic loss scaling) count what a half type rounds: they "
         "need half precision (enable_fp16)");
  o.loss_scale.Validate();
  if (o.conv_channel_block != -1 && o.conv_channel_block != 0 && o.conv_channel_block != 8)
    Fail(ErrorKind::kInvalidArgument, "conv_channel_block must be -1, 0 or 8, got {}",
         o.conv_channel_block);
}

std::string FormatOpCounts(const std::map<std::string, int>& m) {
  std::string s;
  for (const auto& [type, n] : m) s += fmt::format("{}{} x{}", s.empty() ? "" : ", ", type, n);
  return s;
}

std::string CompileReport::Format() const {
  std::string out = "devices:";
  for (const std::string& d : devices) out += " " + d;
  out += "\n";
  for (const passes::PassRecord& r : stages) {
    out += fmt::format("  {:<16} {:>5} rewrites  ops {:>5} -> {:<5}", r.name, r.rewrites,
                       r.ops_before, r.ops_after);
    if (!r.added.empty()) out += "  + " + FormatOpCounts(r.added);
    if (!r.removed.empty()) out += "  - " + FormatOpCounts(r.removed);
    out += "\n";
    if (!r.detail.empty()) out += "      " + r.detail + "\n";
  }
  out += fmt::format("  arenas: {:.2f} MiB\n", static_cast<double>(arena_bytes) / 1048576.0);
  return out;
}

backend::DeviceOptions DeviceOptionsOf(const DeviceSpec& spec) {
  return {spec.threads, spec.memory_bytes, spec.adapt_to_contention, spec.unit, spec.keep_warm_ms};
}

Compiler::Compiler(CompileOptions options) : options_(std::move(options)) {
  Validate(options_);
  for (size_t i = 0; i < options_.devices.size(); ++i) {
    const DeviceSpec& spec = options_.devices[i];
    const backend::Backend* b = backend::FindBackend(spec.backend);
    int ordinal = 0;
    for (size_t j = 0; j < i; ++j) ordinal += options_.devices[j].backend == spec.backend;
    owned_.push_back(b->CreateDevice(ordinal, DeviceOptionsOf(spec)));
    if (options_.replicas > 1)
      owned_.back()->JoinReplicaGroup(options_.replica_groups[i], options_.replica_rank);
    devices_.push_back(owned_.back().get());
  }
  host_ = HostDevice(devices_);
}

Compiler::~Compiler() = default;

ir::Graph::Folder Compiler::folder() {
  return MakeFolder(*devices_[host_]);
}

CompiledStep Compiler::Compile(StepSource& source, const StateStorage& states,
                               const ShardStorage& shards) {
  HostMemoryScope budget("");
  // The freed mappings this compile left for reuse (packed weights took the
  // pages of the loaded ones they replaced) go back when it ends.
  struct ReleaseKeptMappings {
    ~ReleaseKeptMappings() { AlignedBuffer::ReleaseCachedMappings(); }
  } release_kept_mappings;
  CompiledStep step;
  CompileReport& report = step.report;
  passes::PassContext ctx = PipelineContext(devices_, false);
  std::optional<size_t> loss_pin;
  std::vector<size_t> grad_pins, local_grad_pins;
  // Progress in percent of the work, from where the time goes: reading and
  // folding the program, then the rewrites, then making the kernels.
  int reported = -1;
  auto progress = [&](int percent) {
    if (!options_.progress) return;
    const int done = static_cast<int>(int64_t{percent} * options_.progress_total / 100);
    if (done > reported) options_.progress(done, options_.progress_total);
    reported = std::max(reported, done);
  };
  progress(0);
  StepSource::Forward fwd = source.BuildForward(folder());
  progress(20);
  TILLER_CHECK(fwd.graph, "the step source built no graph");
  if (options_.split.enabled() && devices_.size() > 1 &&
      (options_.split.sharded || !passes::IsSharded(*fwd.graph))) {
    passes::LambdaPass split(
        "auto_split",
        options_.split.sharded
            ? "forward ops -> stages of about equal cost (need_avg_shard: ipu_index "
              "replaced)"
            : "forward ops -> stages of about equal cost (no ipu_index set)",
        [&](ir::Graph& g, const passes::PassContext&, std::string* detail) {
          const int devices = static_cast<int>(devices_.size());
          const int stages = devices * options_.split.stages_per_device;
          std::string measured_failed;
          if (options_.split.measured) {
            // A graph the timing run cannot take (a kernel that
            // refuses zeroed inputs) is split by the estimate,
            // and the report says why.
            try {
              // The copy is timed after the rewrites this compile runs.
              MeasureOptions mo;
              mo.compile = options_;
              const MeasuredCosts m = MeasureForwardOpCosts(g, fwd.loss, fwd.wrt, states, mo);
              *detail =
                  passes::SplitStagesByCost(g, stages, m.ms, devices, options_.accumulation.steps())
                      .detail;
              *detail += fmt::format(
                  " (measured: {:.1f} ms per micro-batch{} on one device, mean of {} "
                  "runs{}{}{})",
                  m.total_ms, fwd.loss ? " forward + backward" : "", m.runs,
                  m.rewrites.empty() ? "" : ", after ", fmt::join(m.rewrites, ", "),
                  m.cached ? ", measured earlier in this process" : "");
              return static_cast<int>(g.ops().size());
            } catch (const Error& e) {
              measured_failed = e.what();
            }
          }
          *detail = passes::AutoSplitStages(g, stages, fwd.loss != nullptr,
                                            options_.accumulation.steps(), devices)
                        .detail;
          if (!measured_failed.empty())
            *detail += fmt::format(" (estimated: measuring failed: {})", measured_failed);
          return static_cast<int>(g.ops().size());
        });
    report.stages.push_back(passes::RunPass(split, *fwd.graph, ctx));
  }
  if (fwd.loss) {
    ctx.training = true;
    std::vector<ir::Value*> grads;
    const bool dynamic = options_.loss_scale.steers();
    ir::Value* seed = nullptr;
    if (dynamic) {
      TILLER_CHECK(fwd.loss->dtype() == DType::kF32, "dynamic loss scaling of a {} loss",
                   DTypeName(fwd.loss->dtype()));
      seed = fwd.graph->AddState(kLossScaleSeed, fwd.loss->type);
      step.loss_scale_seed = AlignedBuffer(fwd.loss->bytes());
    }
    passes::LambdaPass autodiff("autodiff", "d loss / d trained values (backward phase)",
                                [&](ir::Graph& g, const passes::PassContext&, std::string*) {
                                  size_t before = g.ops().size();
                                  auto by_value = passes::BuildBackward(
                                      g, fwd.loss, fwd.wrt,
                                      static_cast<float>(options_.loss_scale.scale), seed);
                                  for (ir::Value* v : fwd.wrt) grads.push_back(by_value.at(v));
                                  // A table looked up sparsely several times: one
                                  // row gradient of all its lookups. (Accumulated
                                  // gradients are dense: the accumulators below add
                                  // each micro-batch's rows into a table.)
                                  if (options_.accumulation.steps() == 1) {
                                    for (ir::Value*& v : grads) v = ir::MergeRowGradients(g, v);
                                  }
                                  return static_cast<int>(g.ops().size() - before);
                                });
    report.stages.push_back(passes::RunPass(autodiff, *fwd.graph, ctx));
    loss_pin = fwd.graph->Pin(fwd.loss);
    const int micro_batches = options_.accumulation.steps() * options_.replicas;
    if (options_.accumulation.steps() > 1) {
      passes::LambdaPass accumulate(
          "accumulate", "gradients summed over micro-batches in accumulators (backward phase)",
          [&](ir::Graph& g, const passes::PassContext&, std::string*) {
            const size_t before = g.ops().size();
            grads =
                AddGradientAccumulators(g, fwd.wrt, grads, &step.accumulators, !options_.plan_only);
            return static_cast<int>(g.ops().size() - before);
          });
      report.stages.push_back(passes::RunPass(accumulate, *fwd.graph, ctx));
    }
    {
      ir::Placement p = fwd.graph->placement_scope();
      p.phase = ir::Phase::kUpdate;
      ir::ScopedPlacement update(*fwd.graph, p);
      // The gradients as the update part reads them, pinned so the session
      // finds them after the passes.
      // Paddle's mean reduction, applied after the sum, and the loss
      // scale divided out again (static loss scaling), in one factor.
      step.gradient_mean = options_.accumulation.reduction == AccumulationSettings::Reduction::kMean
                               ? 1.0 / micro_batches
                               : 1.0;
      // Dynamic: the factor is a state (mean / the current scale).
      const double mean = dynamic ? 1.0 : step.gradient_mean / options_.loss_scale.scale;
      if (options_.replicas > 1) {
        // Every replica's (accumulated) gradients summed over the group
        // before the update reads them, the mean's scale in the same pass.
        for (ir::Value*& g : grads) {
          local_grad_pins.push_back(fwd.graph->Pin(ir::GradientToCheck(g)));
          g = ir::AsRowGradient(g)
                  ? GatherRowGradient(*fwd.graph, g, mean, options_)
                  : fwd.graph->Add1("all_reduce", {g}, {{"reduction", "sum"}, {"scale", mean}});
        }
      } else if (mean != 1.0) {
        for (ir::Value*& g : grads) {
          g = ir::MapGradient(*fwd.graph, g, [&](ir::Value* x) {
            return fwd.graph->Add1("scale", {x}, {{"scale", mean}, {"bias", 0.0}});
          });
        }
      }
      if (dynamic) {
        ir::Value* unscale = fwd.graph->AddState(kLossScaleUnscale, {DType::kF32, {1}});
        step.loss_scale_unscale = AlignedBuffer(sizeof(float));
        for (ir::Value*& g : grads) {
          g = ir::MapGradient(*fwd.graph, g, [&](ir::Value* x) {
            return fwd.graph->Add1("mul", {x, unscale});
          });
        }
      }
      for (ir::Value* v : source.BuildUpdate(grads)) grad_pins.push_back(fwd.graph->Pin(v));
    }
  }
  std::unique_ptr<ir::Graph> graph = source.Finish();
  progress(35);
  auto rewrites = RewritePipeline(options_, devices_, &step);
  auto placement = PlacementPipeline(options_, devices_, host_, &step);
  report.pipeline =
      fmt::format("{}:\n{}{}:\n{}", rewrites->name(), rewrites->Describe(ctx, 2, false),
                  placement->name(), placement->Describe(ctx, 2, false));
  for (passes::PassRecord& r : rewrites->RunRecorded(*graph, ctx))
    report.stages.push_back(std::move(r));
  progress(55);
  for (passes::PassRecord& r : placement->RunRecorded(*graph, ctx))
    report.stages.push_back(std::move(r));

  // Passes move pins along with the values they replace.
  if (loss_pin) step.loss = graph->pin(*loss_pin);
  for (size_t pin : grad_pins) step.gradients.push_back(graph->pin(pin));
  for (size_t pin : local_grad_pins) step.replica_gradients.push_back(graph->pin(pin));
  for (const backend::Device* d : devices_)
    report.devices.push_back(
        fmt::format("{} ({} thread{})", d->name(), d->threads(), d->threads() == 1 ? "" : "s"));
  StateStorage storage = states;
  if (step.loss_scale_seed.size()) {
    storage[kLossScaleSeed] = step.loss_scale_seed.data();
    storage[kLossScaleUnscale] = step.loss_scale_unscale.data();
    step.SetLossScale(options_.loss_scale.scale);
  }
  // The caller may hand in accumulators (executables that share them: the
  // copies of a pipeline).
  for (Accumulator& a : step.accumulators) {
    if (!storage.try_emplace(a.name, a.data.data()).second) a.data = AlignedBuffer();
  }
  for (const passes::ShardedState& s : step.sharded_states) {
    if (options_.plan_only) break;
    TILLER_CHECK(shards, "state '{}' is sharded but the compile got no ShardStorage", s.name);
    storage[s.name] = shards(s);
  }
  progress(60);
  step.exe = Executable::BuildPlaced(std::move(graph), devices_, storage, options_.plan_only);
  step.exe->SetProcessLink(options_.process_link);
  if (!options_.device_process.empty()) {
    std::vector<bool> local;
    for (int p : options_.device_process) local.push_back(p == options_.process);
    step.exe->SetLenders(local);
  }
  report.arena_bytes = step.exe->arena_bytes();
  progress(100);
  return step;
}

}  // namespace tiller::compile
