// TrainingSession (include/tiller/training.h): construction, the state,
// fetches and summaries. Its insides are training_session_impl.h, which
// lists the files that implement the rest.
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/state_roles.h"
#include "frontend/paddle/training.h"
#include "runtime/api_types.h"
#include "runtime/precision.h"
#include "runtime/replica_options.h"
#include "runtime/training_ipu_options.h"
#include "runtime/training_options_check.h"
#include "runtime/training_session_impl.h"

namespace tiller::training {

using runtime::FeedDecl;
using runtime::FeedSet;

using inference::FromApi;
using inference::ToApi;

runtime::StateTensor& TrainingSession::Impl::FindState(const std::string& name) {
  auto it = states.find(name);
  if (it == states.end())
    Fail(ErrorKind::kNotFound, "{}: '{}' is not a persistable variable of the program",
         program.path, name);
  return it->second;
}

void TrainingSession::Impl::RequireStateSet(const char* what) const {
  std::vector<std::string> unset;
  for (const auto& [name, st] : states) {
    if (!st.set) unset.push_back(name);
  }
  if (unset.empty()) return;
  std::string list;
  for (size_t i = 0; i < unset.size() && i < 8; ++i) list += (i ? ", " : "") + unset[i];
  if (unset.size() > 8) list += fmt::format(", ... ({} in all)", unset.size());
  Fail(ErrorKind::kInvalidArgument, "{}: state not set before {}: {}", program.path, what, list);
}

TrainingSession::TrainingSession(const std::string& program_path,
                                 std::vector<std::string> feed_names,
                                 std::vector<std::string> fetch_names,
                                 const SessionOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.program = paddle::ReadProgramFile(program_path);
  s.info = paddle::AnalyzeTrainingProgram(s.program);
  s.options = options;
  runtime::ResolveSessionOptions(s.options, s.program.path);
  if (!options.trace_path.empty()) s.trace = std::make_unique<compile::TraceRecorder>();
  const std::vector<backend::Collective*> groups = s.MakeGroups();
  s.replicas.resize(options.replicas);
  for (Impl::Replica& r : s.replicas) r.loss_scaling.scale = options.loss_scale.scale;
  runtime::ReportSlowHalfPrecisionOnce(
      runtime::ParsePrecision(options.precision.compute, "precision"));
  runtime::CheckLossScalingOptions(s.options, s.info, s.program.path);
  for (int r = 0; r < options.replicas; ++r) {
    s.replicas[r].compiler =
        std::make_unique<compile::Compiler>(runtime::ReplicaCompileOptions(s.options, r, groups));
  }
  s.feed_names = std::move(feed_names);
  s.fetch_names = std::move(fetch_names);
  const std::map<std::string, ir::TensorType> stored =
      runtime::StoredStateTypes(s.program, s.info.state, options.precision.accl_types);
  for (const std::string& name : s.info.state) {
    const paddle::VarInfo* v = s.program.FindVar(name);
    for (int64_t d : v->dims) {
      if (d < 0)
        Fail(ErrorKind::kInvalidArgument, "{}: persistable '{}' has a dynamic shape {}",
             s.program.path, name, ShapeToString(v->dims));
    }
    runtime::StateTensor st;
    st.type = stored.at(name);
    st.declared = v->dtype;
    st.data.Resize(st.type.bytes());
    auto [it, fresh] = s.states.emplace(name, std::move(st));
    s.state_types[name] = it->second.type;
    s.replicas[0].storage[name] = it->second.data.data();
    for (int r = 1; r < options.replicas; ++r) {
      AlignedBuffer& copy = s.replicas[r].own_state[name];
      copy.Resize(it->second.type.bytes());
      s.replicas[r].storage[name] = copy.data();
    }
  }
  std::vector<FeedDecl> decls;
  for (const std::string& name : s.feed_names) {
    const paddle::VarInfo* v = s.program.FindVar(name);
    if (!v)
      Fail(ErrorKind::kNotFound, "{}: feed '{}' is not a variable of the program", s.program.path,
           name);
    decls.push_back({name, v->dtype, v->dims});
  }
  s.feeds = std::make_unique<FeedSet>(std::move(decls), FeedSet::Words{"feed", "program"});
  // A run's feeds hold its micro-batches, batch outermost, replica innermost.
  std::string loop = fmt::format("batches_per_step {} x accumulation_factor {}",
                                 options.batches_per_step, options.accumulation.factor);
  if (options.replicas > 1) loop += fmt::format(" x replicas {}", options.replicas);
  s.feeds->SetMicroBatching({s.MicroBatchesPerRun(), options.micro_batch_size, std::move(loop)});
  for (const std::string& name : s.fetch_names) {
    if (!s.program.FindVar(name))
      Fail(ErrorKind::kNotFound, "{}: fetch '{}' is not a variable of the program", s.program.path,
           name);
  }
  for (paddle::StateVariable& v : paddle::ClassifyState(s.program)) {
    std::string name = v.name;
    s.roles.emplace(std::move(name), std::move(v));
  }
}

namespace {

// The public enums list the frontend's values in the same order
// (checkpoint_api.cc asserts it).
checkpoint::StateRole ApiRole(paddle::StateRole r) {
  return static_cast<checkpoint::StateRole>(r);
}
checkpoint::SaveFile ApiFile(paddle::SaveFile f) {
  return static_cast<checkpoint::SaveFile>(f);
}

}  // namespace

TrainingSession::TrainingSession(const std::string& program_path,
                                 std::vector<std::string> feed_names,
                                 std::vector<std::string> fetch_names, const IpuOptions& options)
    : TrainingSession(program_path, std::move(feed_names), std::move(fetch_names),
                      runtime::FromIpuOptions(options)) {
  impl_->default_eval = options.EvalOnly();
}

TrainingSession::~TrainingSession() = default;

std::vector<StateTensorInfo> TrainingSession::StateInfo() const {
  std::vector<StateTensorInfo> out;
  for (const std::string& name : impl_->info.state) {
    const auto& st = impl_->states.at(name);
    StateTensorInfo info;
    info.name = name;
    info.dtype = ToApi(st.declared);
    info.shape = st.type.shape;
    if (const paddle::StateVariable* v = impl_->Role(name)) {
      info.role = ApiRole(v->role);
      info.file = ApiFile(v->file);
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<std::string> TrainingSession::StateNames() const {
  return impl_->info.state;
}
const std::string& TrainingSession::LossName() const {
  return impl_->info.loss;
}
std::vector<std::string> TrainingSession::TrainedNames() const {
  return impl_->info.trained;
}
const std::vector<std::string>& TrainingSession::FetchNames() const {
  return impl_->fetch_names;
}
const std::vector<std::string>& TrainingSession::FeedNames() const {
  return impl_->feed_names;
}

void TrainingSession::SetState(const std::string& name, const void* data, DataType dtype,
                               size_t bytes) {
  runtime::StateTensor& st = impl_->FindState(name);
  impl_->GatherParts();
  const ir::TensorType declared = st.declared_type();
  if (FromApi(dtype) != st.declared)
    Fail(ErrorKind::kInvalidArgument, "state '{}' is {}, got {}", name, declared.ToString(),
         inference::DataTypeName(dtype));
  if (bytes != declared.bytes())
    Fail(ErrorKind::kInvalidArgument, "state '{}' ({}) needs {} bytes, got {}", name,
         declared.ToString(), declared.bytes(), bytes);
  st.Store(data);
  st.set = true;
  impl_->replicas_stale = true;
}

void TrainingSession::GetState(const std::string& name, void* data, size_t bytes) const {
  runtime::StateTensor& st = impl_->FindState(name);
  impl_->GatherParts();
  const ir::TensorType declared = st.declared_type();
  if (bytes != declared.bytes())
    Fail(ErrorKind::kInvalidArgument, "state '{}' ({}) has {} bytes, buffer has {}", name,
         declared.ToString(), declared.bytes(), bytes);
  st.Load(data);
}

void TrainingSession::SetLearningRate(double lr) {
  Impl& s = *impl_;
  s.GatherParts();
  std::vector<runtime::StateTensor*> targets;
  for (const std::string& name : s.info.state) {
    const paddle::StateVariable* v = s.Role(name);
    if (!v || v->role != paddle::StateRole::kLearningRate) continue;
    runtime::StateTensor& st = s.FindState(name);
    if (st.type.dtype != DType::kF32 && st.type.dtype != DType::kF64)
      Fail(ErrorKind::kUnimplemented,
           "{}: learning rate '{}' is {}; SetLearningRate sets float32 and float64 variables",
           s.program.path, name, st.type.ToString());
    targets.push_back(&st);
  }
  if (targets.empty())
    Fail(ErrorKind::kNotFound,
         "{}: the program has no learning-rate variable (the LearningRate input of an optimizer "
         "op) to set",
         s.program.path);
  for (runtime::StateTensor* st : targets) {
    const int64_t n = NumElements(st->type.shape);
    if (st->type.dtype == DType::kF32) {
      // Rounded to nearest, as numpy's float64 -> float32 cast.
      const float v = static_cast<float>(lr);
      float* p = reinterpret_cast<float*>(st->data.data());
      for (int64_t i = 0; i < n; ++i) p[i] = v;
    } else {
      double* p = reinterpret_cast<double*>(st->data.data());
      for (int64_t i = 0; i < n; ++i) p[i] = lr;
    }
    st->set = true;
  }
  s.replicas_stale = true;
}

void TrainingSession::SetFeed(const std::string& name, const void* data, DataType dtype,
                              const std::vector<int64_t>& shape) {
  FeedSet& feeds = *impl_->feeds;
  feeds.Set(feeds.Index(name), FromApi(dtype), shape, data);
}

int64_t TrainingSession::StepCount() const {
  return impl_->steps;
}

double TrainingSession::LossScale() const {
  // Starts at SessionOptions::loss_scaling; only a steered scale moves.
  return impl_->replicas[0].loss_scaling.scale;
}

int64_t TrainingSession::SkippedUpdates() const {
  return impl_->replicas[0].loss_scaling.skipped;
}

TrainingSession::GradientStatistics TrainingSession::LastGradientStatistics() const {
  const auto& c = impl_->replicas[0].loss_scaling.last_counts;
  return {c[0], c[1], c[2]};
}

TensorInfo TrainingSession::FetchInfo(size_t i) const {
  if (!impl_->last) Fail(ErrorKind::kInvalidArgument, "fetches read before Run()");
  if (i >= impl_->fetch_names.size())
    Fail(ErrorKind::kInvalidArgument, "fetch {} of {}", i, impl_->fetch_names.size());
  const ir::TensorType& type = impl_->fetch_types[i];
  return {impl_->last->exe->outputs()[i].name, ToApi(type.dtype), type.shape};
}

void TrainingSession::GetFetch(size_t i, void* data, size_t bytes) const {
  TensorInfo info = FetchInfo(i);
  const AlignedBuffer& value = impl_->fetched[i];
  if (bytes != value.size())
    Fail(ErrorKind::kInvalidArgument, "fetch '{}' has {} bytes, buffer has {}", info.name,
         value.size(), bytes);
  if (bytes) std::memcpy(data, value.data(), bytes);
}

TrainingSession::Summary TrainingSession::GetSummary() const {
  if (!impl_->last) Fail(ErrorKind::kInvalidArgument, "GetSummary() needs a Run() first");
  const compile::Executable* exe = impl_->last->exe.get();
  Summary s;
  s.arena_bytes = exe->arena_bytes();
  for (const auto& [name, st] : impl_->states) s.state_bytes += st.type.bytes();
  s.in_place_updates = exe->plan().in_state.size();
  s.copied_updates = exe->plan().copy_back.size();
  s.graph = exe->graph().ToString();
  s.compile_report = impl_->last->report.Format();
  s.compile_pipeline = impl_->last->report.pipeline;
  s.pipeline_max_in_flight = impl_->pipeline_stats.max_in_flight;
  s.pipeline_bubble_fraction = impl_->pipeline_stats.BubbleFraction();
  s.pipeline_device_busy_ms = impl_->pipeline_stats.busy_ms;
  for (size_t r = 0; r < impl_->replicas.size(); ++r) {
    size_t bytes = 0;
    for (const auto& [name, st] : impl_->states) {
      const paddle::StateVariable* v = impl_->Role(name);
      if (!v || v->role != paddle::StateRole::kOptimizerState) continue;
      auto part = impl_->replicas[r].parts.find(name);
      bytes += part != impl_->replicas[r].parts.end() ? part->second : st.type.bytes();
    }
    s.replica_optimizer_state_bytes.push_back(bytes);
  }
  for (const compile::DevicePlan& d : compile::StateByDevice(*impl_->last_copies.at(0))) {
    s.device_memory_bytes.push_back(d.state());
  }
  for (const compile::CompiledStep* copy : impl_->last_copies) {
    for (size_t d = 0; d < s.device_memory_bytes.size(); ++d)
      s.device_memory_bytes[d] += copy->exe->arena_allocated(d);
  }
  return s;
}

void TrainingSession::EnableProfiling(bool on) {
  impl_->profiling = on;
  for (Impl::Replica& r : impl_->replicas)
    r.cache.ForEach([on](compile::CompiledStep& step) { step.exe->EnableProfiling(on); });
}

std::vector<std::tuple<std::string, double, int64_t>> TrainingSession::GetProfile(
    bool by_shape, int replica) const {
  if (replica < 0 || replica >= impl_->options.replicas)
    Fail(ErrorKind::kInvalidArgument, "profile of replica {}: the session has replicas 0 .. {}",
         replica, impl_->options.replicas - 1);
  std::vector<std::tuple<std::string, double, int64_t>> out;
  if (impl_->last_by_replica.size() <= static_cast<size_t>(replica)) return out;
  for (const auto& e : impl_->last_by_replica[static_cast<size_t>(replica)]->exe->Profile(by_shape))
    out.emplace_back(e.op_type, e.total_ms, e.calls);
  return out;
}

}  // namespace tiller::training
