// include/tiller/planner.h: one replica's step compiled for its memory plans
// (CompileOptions::plan_only) on CPU devices standing in for the profile's,
// then compile/plan.h's accounting.
#include "tiller/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/collective.h"
#include "compile/driver.h"
#include "compile/plan.h"
#include "core/error.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/training.h"
#include "runtime/paddle_steps.h"
#include "runtime/replica_options.h"

namespace tiller::planning {
namespace {

// A feed's shape: given, else its declared dims with the micro-batch and
// the sequence length for dynamic dims.
Shape FeedShape(const PlanRequest& r, const paddle::Program& program, const std::string& name,
                DType* dtype) {
  const paddle::VarInfo* v = program.FindVar(name);
  if (!v) Fail(ErrorKind::kNotFound, "{}: feed '{}' is not a variable", program.path, name);
  *dtype = v->dtype;
  auto it = r.shapes.find(name);
  if (it != r.shapes.end()) return it->second;
  Shape dims = v->dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) continue;
    if (i > 1)
      Fail(ErrorKind::kInvalidArgument, "{}: feed '{}' has dynamic dim {}: give its shape",
           program.path, name, i);
    dims[i] = i == 0 ? r.micro_batch : r.seq_len;
  }
  return dims;
}

// Reads a cluster file (PlanRequest::cluster) into the request; returns the
// line the plan prints about it.
std::string ApplyCluster(PlanRequest& r) {
  std::ifstream in(r.cluster);
  if (!in) Fail(ErrorKind::kNotFound, "cluster file '{}' not found", r.cluster);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    const int per_rank_replicas = r.replicas;
    const int devices_per_replica = r.devices / std::max(r.replicas, 1);
    if (j.contains("profile")) r.profile = j.at("profile").get<std::string>();
    if (j.contains("ranks")) r.ranks = j.at("ranks").get<int>();
    if (j.contains("devices_per_rank")) {
      r.devices = j.at("devices_per_rank").get<int>();
      // Every device of a rank holds a replica's share: as many replicas as
      // fit devices_per_replica devices each.
      r.replicas = std::max(1, r.devices / std::max(devices_per_replica, 1));
      r.devices = r.replicas * devices_per_replica;
    } else {
      r.replicas = per_rank_replicas;
    }
    if (j.contains("link")) {
      const nlohmann::json& link = j.at("link");
      r.rank_link = link.at("bandwidth_GBps").get<double>() * 1e9;
      r.rank_latency = link.value("latency_us", 0.0) * 1e-6;
    }
  } catch (const std::exception& e) {
    Fail(ErrorKind::kInvalidArgument,
         "cluster file '{}': {} (expected {{\"profile\", \"ranks\", \"devices_per_rank\", "
         "\"link\": {{\"bandwidth_GBps\", \"latency_us\"}}}})",
         r.cluster, e.what());
  }
  return fmt::format(
      "cluster: {} ({}): {} process(es) x {} device(s), link {:.1f} GB/s, {:.1f} us\n",
      j.value("name", r.cluster), j.value("note", std::string("-")), r.ranks, r.devices,
      r.rank_link / 1e9, r.rank_latency * 1e6);
}

std::vector<std::string> DataVariables(const paddle::Program& p) {
  if (!p.feed_names.empty()) return p.feed_names;
  std::vector<std::string> names;
  for (const auto& [name, v] : p.vars) {
    if (v.need_check_feed && !v.persistable) names.push_back(name);
  }
  return names;
}

// A shape given for a name that is not fed would be ignored: refused,
// listing the feeds.
void CheckShapeNames(const PlanRequest& r, const std::vector<std::string>& feeds,
                     const std::string& path) {
  for (const auto& [name, dims] : r.shapes) {
    if (std::find(feeds.begin(), feeds.end(), name) != feeds.end()) continue;
    std::string list;
    for (const std::string& f : feeds) list += (list.empty() ? "" : ", ") + f;
    Fail(ErrorKind::kInvalidArgument, "{}: a shape is given for '{}', which is not fed (feeds: {})",
         path, name, list.empty() ? "none" : list);
  }
}

}  // namespace

PlanReport Plan(const PlanRequest& request) {
  PlanRequest r = request;
  std::string cluster_line;
  if (!r.cluster.empty()) cluster_line = ApplyCluster(r);
  if (r.ranks < 1 || r.rank_link < 0 || r.rank_latency < 0 ||
      r.collectives.all_reduce_bucket_bytes < 0)
    Fail(ErrorKind::kInvalidArgument,
         "ranks {} must be >= 1, the link's bandwidth {} and latency {} and the bucket {} >= 0",
         r.ranks, r.rank_link, r.rank_latency, r.collectives.all_reduce_bucket_bytes);
  if (r.ranks > 1 && !r.train)
    Fail(ErrorKind::kInvalidArgument,
         "ranks {}: processes share gradients in training (--train); inference runs each "
         "process alone",
         r.ranks);
  if (r.devices < 1 || r.replicas < 1 || r.devices % r.replicas != 0)
    Fail(ErrorKind::kInvalidArgument,
         "devices {} is not a positive multiple of replicas {} (devices counts every replica's)",
         r.devices, r.replicas);
  if (r.micro_batch < 1 || r.accumulation.factor < 1 || r.batches_per_step < 1)
    Fail(ErrorKind::kInvalidArgument,
         "micro-batch, accumulation and batches per step must be >= 1 (got {}, {}, {})",
         r.micro_batch, r.accumulation.factor, r.batches_per_step);
  const int per_replica = r.devices / r.replicas;
  const bool pipelined = r.pipeline.enabled && per_replica > 1;
  if (r.train && pipelined && r.accumulation.factor < per_replica)
    Fail(ErrorKind::kInvalidArgument,
         "accumulation {} is less than the {} pipeline stages: every update needs a micro-batch "
         "per stage",
         r.accumulation.factor, per_replica);
  if (r.split.stages_per_device < 1 || (r.split.stages_per_device > 1 && !pipelined))
    Fail(ErrorKind::kInvalidArgument,
         "stages per device {}: interleaved stages need a pipeline (more than one device per "
         "replica, pipelining on) and a value >= 1",
         r.split.stages_per_device);
  // Each group's own checks (tiller/option_groups.h).
  r.accumulation.Validate();
  r.pipeline.Validate();
  r.split.Validate();
  r.collectives.Validate();
  r.precision.Validate();
  const compile::DeviceProfile profile = compile::FindDeviceProfile(r.profile, r.threads);

  // The session's options for this configuration (replica 0 of the group:
  // the others hold the same, within an element per sharded tensor), one
  // thread per device; compiled for the memory plans only.
  training::SessionOptions so;
  so.num_threads = r.devices;
  so.devices_per_replica = per_replica;
  so.split.auto_split = per_replica > 1;  // where nobody sharded the program
  so.split.sharded = r.split.stages_per_device > 1;
  so.split.stages_per_device = r.split.stages_per_device;
  so.recompute = r.recompute;
  so.precision = r.precision;
  std::vector<std::unique_ptr<backend::Collective>> groups;
  std::vector<backend::Collective*> group_ptrs;
  if (r.train) {
    so.accumulation = r.accumulation;
    so.batches_per_step = r.batches_per_step;
    so.replicated_graphs = r.replicas > 1;
    so.replicas = r.replicas;
    so.collectives = r.collectives;
    // Across processes the step is compiled as process 0's (the job's
    // replica count, global ranks), as a session with distribution does.
    const int global = r.replicas * r.ranks;
    if (r.ranks > 1) {
      so.distribution = true;
      so.global_replicas = global;
      so.global_replica_offset = 0;
    }
    // Collectives are planned, never run.
    for (int d = 0; d < per_replica && global > 1; ++d) {
      groups.push_back(backend::MakeInProcessCollective(global));
      group_ptrs.push_back(groups.back().get());
    }
  } else {
    so.num_threads = per_replica;  // inference replicas compile alike, without collectives
  }
  compile::CompileOptions co = runtime::ReplicaCompileOptions(so, 0, group_ptrs);
  co.plan_only = true;
  compile::Compiler compiler(co);
  compile::CompiledStep step;
  compile::PlanShape shape;
  shape.training = r.train;
  shape.replicas = r.train ? r.replicas * r.ranks : r.replicas;
  shape.ranks = r.ranks;
  shape.rank_link = r.rank_link;
  shape.rank_latency = r.rank_latency;
  shape.devices_per_replica = per_replica;
  shape.pipelined = pipelined;
  shape.fill_drain = r.pipeline.schedule == PipelineSettings::Schedule::kFillDrain;
  if (r.train) {
    paddle::Program program = paddle::ReadProgramFile(r.model);
    paddle::TrainingProgramInfo info = paddle::AnalyzeTrainingProgram(program);
    std::map<std::string, ir::TensorType> state_types =
        runtime::StoredStateTypes(program, info.state, r.precision.accl_types);
    runtime::PaddleTrainingStep::Args args{&program, &info, &state_types, {}, {}, {}, {}};
    args.feed_names = r.feeds.empty() ? DataVariables(program) : r.feeds;
    CheckShapeNames(r, args.feed_names, program.path);
    for (const std::string& name : args.feed_names) {
      DType dtype;
      Shape dims = FeedShape(r, program, name, &dtype);
      args.feed_types.push_back({dtype, dims});
    }
    runtime::PaddleTrainingStep source(std::move(args));
    step = compiler.Compile(source);
    shape.accumulation = r.accumulation.factor;
    shape.micro_batches = r.accumulation.factor * r.batches_per_step;
  } else {
    paddle::Model model = paddle::LoadModel(r.model, r.params);
    std::vector<ir::TensorType> feeds;
    CheckShapeNames(r, model.program.feed_names, model.program.path);
    for (const std::string& name : model.program.feed_names) {
      DType dtype;
      Shape dims = FeedShape(r, model.program, name, &dtype);
      feeds.push_back({dtype, dims});
    }
    runtime::PaddleInferenceStep source(model, feeds, {});
    step = compiler.Compile(source);
    shape.accumulation = 1;
    shape.micro_batches = r.batches_per_step;
  }
  const compile::StepPlan plan = compile::PlanStep(step, profile, shape);

  PlanReport out;
  out.text = fmt::format("model: {}\n", r.model) + cluster_line + plan.Format();
  for (const compile::DevicePlan& d : plan.devices) {
    DeviceMemory m;
    m.weights = d.weights;
    m.optimizer = d.optimizer;
    m.gradients = d.gradients;
    m.other = d.other;
    m.stash = d.stash;
    m.arena = d.arena;
    m.half_weight_copies = d.half_weight_copies;
    m.in_flight = d.in_flight;
    m.peak = d.peak();
    m.forward_seconds = d.forward_s;
    m.backward_seconds = d.backward_s;
    m.update_seconds = d.update_s;
    out.devices.push_back(m);
  }
  out.window_seconds = plan.window_s;
  out.run_seconds = plan.run_s;
  out.bubble = plan.bubble;
  for (const compile::DevicePlan& d : plan.devices) {
    out.collective_seconds += d.collective_s;
    out.collective_messages += d.collective_messages;
  }
  out.profile_memory_bytes = profile.memory_bytes;
  out.fits = plan.Fits();
  return out;
}

}  // namespace tiller::planning
