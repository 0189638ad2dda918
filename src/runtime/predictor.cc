// The Paddle-Inference-shaped predictor: loads a model once, compiles it per
// set of input shapes (cached), and copies feeds and fetches at the boundary.
#include "tiller/predictor.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <thread>

#include "compile/driver.h"
#include "compile/half_fallback.h"
#include "compile/pipeline.h"
#include "compile/placement.h"
#include "compile/trace.h"
#include "core/error.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/translate.h"
#include "runtime/api_types.h"
#include "runtime/configured_model.h"
#include "runtime/device_names.h"
#include "runtime/feeds.h"
#include "runtime/micro_batches.h"
#include "runtime/notes.h"
#include "runtime/paddle_steps.h"
#include "runtime/precision.h"
#include "runtime/serving_defaults.h"
#include "runtime/step_cache.h"

namespace tiller::inference {

using runtime::FeedDecl;
using runtime::FeedSet;
using runtime::LoadConfiguredModel;
using runtime::PaddleInferenceStep;
using runtime::StepCache;

namespace {

template <typename T>
DataType TypeOf();
template <>
DataType TypeOf<float>() {
  return DataType::FLOAT32;
}
template <>
DataType TypeOf<double>() {
  return DataType::FLOAT64;
}
template <>
DataType TypeOf<int8_t>() {
  return DataType::INT8;
}
template <>
DataType TypeOf<uint8_t>() {
  return DataType::UINT8;
}
template <>
DataType TypeOf<int16_t>() {
  return DataType::INT16;
}
template <>
DataType TypeOf<int32_t>() {
  return DataType::INT32;
}
template <>
DataType TypeOf<int64_t>() {
  return DataType::INT64;
}
template <>
DataType TypeOf<bool>() {
  return DataType::BOOL;
}

compile::CompileOptions ToCompileOptions(const Config& c) {
  compile::CompileOptions o;
  o.devices.clear();
  // CPU devices share the math-library thread setting. One device runs a
  // whole inference by itself: its team may shrink under contention, and
  // it serves requests that come after idle gaps, so its threads stay
  // awake for kServingKeepWarmMs after each (cpu_backend.h's keep-warm),
  // unless Config::SetCpuKeepWarmMs says otherwise.
  const bool alone = c.devices().size() == 1;
  const int keep_warm = c.cpu_keep_warm_ms() >= 0 ? c.cpu_keep_warm_ms()
                        : alone                   ? runtime::kServingKeepWarmMs
                                                  : 0;
  for (const std::string& name : c.devices()) {
    o.devices.push_back(runtime::DeviceSpecOf(name, c.cpu_math_library_num_threads(), alone));
    o.devices.back().keep_warm_ms = keep_warm;
  }
  o.placement = c.placement() == "first_supported" ? compile::PlacementPolicy::kFirstSupported
                                                   : compile::PlacementPolicy::kByShard;
  o.optimize = c.ir_optim();
  o.progress = c.compile_progress_logger();
  o.progress_total = c.compile_progress_total();
  o.conv_winograd = c.winograd();
  o.precision = runtime::ParsePrecision(c.precision(), "Config::SetPrecision");
  runtime::ReportSlowHalfPrecisionOnce(o.precision);
  if (c.ipu().enabled) {
    // One replica's devices: ipu_device_num CPU devices, placed by shard.
    const Config::IpuSettings& ipu = c.ipu();
    const int n_devices = ipu.device_num * ipu.replica_num;
    const int threads = runtime::ThreadsPerDevice(
        c.cpu_math_library_num_threads(), n_devices,
        fmt::format("EnableIpu: {} device(s) x {} replica(s), SetCpuMathLibraryNumThreads({})",
                    ipu.device_num, ipu.replica_num, c.cpu_math_library_num_threads()));
    o.devices.assign(ipu.device_num, runtime::IpuDeviceSpec(threads));
    o.placement = compile::PlacementPolicy::kByShard;
    o.split.auto_split = true;  // a model without ipu_index attributes
  }
  return o;
}

// Paddle Inference 3 refuses at Run an input that holds no elements. Tiller's
// kernels are not built for zero sizes either (such runs returned zeros, or
// crashed in a convolution), so the input is named here, before anything
// compiles.
void CheckInputsHoldElements(const FeedSet& feeds) {
  const std::vector<Shape> shapes = feeds.Shapes();
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (NumElements(shapes[i]) == 0)
      Fail(ErrorKind::kInvalidArgument,
           "input '{}' has shape {}: it holds no elements (a dimension is 0); Paddle Inference "
           "refuses empty inputs too",
           feeds.decl(i).name, ShapeToString(shapes[i]));
  }
}

}  // namespace

struct Predictor::Impl {
  Config config;
  // Shared by a predictor and its clones: the program and the parameters'
  // bytes, read only after loading.
  std::shared_ptr<const paddle::Model> model;
  std::unique_ptr<FeedSet> feeds;
  std::unique_ptr<compile::Compiler> compiler;
  // One compiled step per set of input shapes.
  StepCache cache;
  compile::CompiledStep* current = nullptr;
  bool profiling = false;
  // Config::EnableTrace: every executable records into it (a predictor's
  // clones too); the file is rewritten after each Run().
  std::shared_ptr<compile::TraceRecorder> trace;
  int64_t runs = 0;

  // A clone's lanes are named "clone N ..." in the trace it shares.
  std::string lane_prefix;
  struct Clones {
    std::atomic<int> count{0};
  };
  std::shared_ptr<Clones> clones = std::make_shared<Clones>();

  void Trace(compile::Executable& exe, const std::string& lanes) {
    if (trace) exe.SetTrace(trace.get(), lane_prefix + lanes);
  }

  // Each predictor (and clone) has its own devices: their streams and
  // thread teams, and the arenas of what they compile.
  void CreateCompilers() {
    compiler = std::make_unique<compile::Compiler>(ToCompileOptions(config));
    if (config.ipu().enabled) {
      ipu_replicas.resize(config.ipu().replica_num);
      for (IpuReplica& r : ipu_replicas)
        r.compiler = std::make_unique<compile::Compiler>(ToCompileOptions(config));
    }
  }

  // EnableIpu: per replica, its devices (compiler), its compiled steps (the
  // cache's variant is the pipeline copy) and its pipeline runners.
  struct IpuReplica {
    std::unique_ptr<compile::Compiler> compiler;
    StepCache cache;
    std::map<StepCache::Key, std::unique_ptr<compile::PipelineRunner>> runners;
  };
  std::vector<IpuReplica> ipu_replicas;
  // The last IPU run's outputs, every micro-batch's in input order.
  std::vector<ir::TensorType> ipu_output_types;
  std::vector<AlignedBuffer> ipu_outputs;
  bool ipu_ran = false;

  compile::CompiledStep& CompileIpu(int replica, int copy, const std::vector<Shape>& shapes) {
    IpuReplica& rep = ipu_replicas[replica];
    return rep.cache.Get({copy, shapes}, [&] {
      PaddleInferenceStep source(*model, FeedTypes(shapes), TranslateOptions());
      compile::CompiledStep step = rep.compiler->Compile(source);
      step.exe->EnableProfiling(profiling);
      Trace(*step.exe, config.ipu().replica_num > 1 ? fmt::format("replica {} ", replica) : "");
      // Sharded over its devices means every device has work: a model
      // without ipu_index annotations would leave all but the first idle.
      const int n = static_cast<int>(rep.compiler->devices().size());
      std::vector<int> ops(n, 0);
      for (const auto& op : step.exe->graph().ops()) ++ops[op->device];
      for (int d = 0; d < n && n > 1; ++d) {
        if (ops[d] == 0)
          Fail(ErrorKind::kInvalidArgument,
               "{}: EnableIpu(ipu_device_num={}) but no op of the model is on device {}: its "
               "ipu_index attributes (ipu_shard_guard / set_ipu_shard) use fewer devices",
               model->program.path, n, d);
      }
      return step;
    });
  }

  void RunIpu();

  // The inputs; with EnableIpu each holds ipu_batches_per_step x
  // ipu_replica_num micro-batches, a dynamic first dim being
  // ipu_micro_batch_size (what Paddle's IPU inference passes made of it).
  void MakeFeeds(std::vector<FeedDecl> decls) {
    feeds = std::make_unique<FeedSet>(std::move(decls), FeedSet::Words{"input", "model"});
    const Config::IpuSettings& ipu = config.ipu();
    if (!ipu.enabled) return;
    feeds->SetMicroBatching({ipu.batches_per_step * ipu.replica_num, ipu.micro_batch_size,
                             fmt::format("ipu_batches_per_step {} x ipu_replica_num {}",
                                         ipu.batches_per_step, ipu.replica_num),
                             "ipu_micro_batch_size"});
  }

  size_t OutputIndex(const std::string& name) const {
    const auto& outs = model->program.fetch_names;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] == name) return i;
    }
    std::string names;
    for (const auto& n : outs) names += (names.empty() ? "" : ", ") + n;
    Fail(ErrorKind::kNotFound, "model has no output named '{}' (outputs: {})", name, names);
  }

  std::vector<ir::TensorType> FeedTypes(const std::vector<Shape>& shapes) const {
    std::vector<ir::TensorType> types;
    for (size_t i = 0; i < feeds->size(); ++i) types.push_back({feeds->decl(i).dtype, shapes[i]});
    return types;
  }

  paddle::TranslateOptions TranslateOptions() const {
    paddle::TranslateOptions o;
    o.random_seed = config.random_seed();
    // RunIpu stacks micro-batches' outputs, which needs their shapes known.
    o.entry_counted_outputs = !config.ipu().enabled;
    return o;
  }

  // The executable for one set of input shapes, compiled on first use.
  compile::CompiledStep& CompileFor(const std::vector<Shape>& shapes) {
    return cache.Get({0, shapes}, [&] {
      PaddleInferenceStep source(*model, FeedTypes(shapes), TranslateOptions());
      compile::CompiledStep step = compiler->Compile(source);
      step.exe->EnableProfiling(profiling);
      Trace(*step.exe, "");
      return step;
    });
  }

  // Config::EnableWarmup: compiles for the warm-up shapes and runs on zeros
  // in the executable's own input buffers, so the caller's inputs (feeds)
  // stay as they were: unset until set.
  void WarmUp() {
    const int runs = config.warmup_runs();
    if (runs == 0) return;
    if (config.ipu().enabled)
      Fail(ErrorKind::kInvalidArgument,
           "EnableWarmup: not with EnableIpu (the IPU mode compiles per replica and micro-batch "
           "at its first Run)");
    const auto& given = config.warmup_shapes();
    // A name the model has no input of is refused, listing the inputs.
    for (const auto& entry : given) feeds->Index(entry.first, "EnableWarmup");
    std::vector<Shape> shapes;
    for (size_t i = 0; i < feeds->size(); ++i) {
      const FeedDecl& decl = feeds->decl(i);
      auto it = given.find(decl.name);
      if (it != given.end()) {
        const Shape& s = it->second;
        bool fits = decl.dims.empty() || s.size() == decl.dims.size();
        for (size_t k = 0; fits && k < decl.dims.size(); ++k)
          fits = decl.dims[k] < 0 || decl.dims[k] == s[k];
        if (!fits)
          Fail(ErrorKind::kInvalidArgument,
               "EnableWarmup: input '{}' is declared {}, the warm-up shape {} does not fit it",
               decl.name, ShapeToString(decl.dims), ShapeToString(s));
        shapes.push_back(s);
        continue;
      }
      if (decl.dims.empty())
        Fail(ErrorKind::kInvalidArgument,
             "EnableWarmup: input '{}' has no declared shape: give its warm-up shape", decl.name);
      Shape s = decl.dims;
      for (size_t k = 0; k < s.size(); ++k) {
        if (s[k] >= 0) continue;
        if (k > 0)
          Fail(ErrorKind::kInvalidArgument,
               "EnableWarmup: input '{}' is declared {}: give its warm-up shape (only a dynamic "
               "first dim defaults, to 1)",
               decl.name, ShapeToString(decl.dims));
        s[k] = 1;
      }
      shapes.push_back(std::move(s));
    }
    compile::Executable& exe = *CompileFor(shapes).exe;
    for (int r = 0; r < runs; ++r) {
      for (size_t i = 0; i < feeds->size(); ++i) {
        const auto& in = exe.inputs()[i];
        std::memset(in.data, 0, in.type.bytes());
      }
      exe.Run();
    }
  }

  // Translation runs per set of input shapes, but an op Tiller cannot run
  // (an attribute value, a dtype) must fail at creation, as Paddle Inference
  // does. So the model is translated once here with the declared shapes:
  // - all static: compiled and cached, so the first Run reuses it and every
  //   error is real (these are the only shapes the model accepts);
  // - dynamic dims: each replaced by 1, then every op checked against the
  //   devices' kernels (backend::Backend::Supports). kUnimplemented does not
  //   depend on sizes (attributes, dtypes, compile-time constness, ranks are
  //   all real), so it propagates; other errors can be artefacts of the
  //   placeholder (a reshape or broadcast that only fits the real sizes) and
  //   are left for Run to report with the real shapes.
  // A feed without declared dims (unknown rank) skips the check: a guessed
  // rank could make even kUnimplemented an artefact.
  void CheckAtLoad() {
    std::vector<Shape> shapes;
    bool placeholder = false;
    for (size_t i = 0; i < feeds->size(); ++i) {
      if (feeds->decl(i).dims.empty()) return;
      Shape s = feeds->decl(i).dims;
      for (int64_t& d : s) {
        if (d < 0) {
          d = 1;
          placeholder = true;
        }
      }
      shapes.push_back(std::move(s));
    }
    // With EnableIpu the runs compile per replica and micro-batch: a
    // whole-batch compile here would never be used, so only the check runs.
    if (!placeholder && !config.ipu().enabled) {
      CompileFor(shapes);
      return;
    }
    try {
      auto graph =
          paddle::Translate(*model, FeedTypes(shapes), compiler->folder(), TranslateOptions());
      compile::RunHalfOpsInFloat32(*graph, compiler->devices(), nullptr);
      compile::PlaceOps(*graph, compiler->devices(), compiler->options().placement);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kUnimplemented) throw;
    }
  }
};

Predictor::Predictor(const Config& config) : impl_(std::make_unique<Impl>()) {
  for (const auto& entry : config.ipu().custom_ops_info) {
    // SetIpuCustomInfo / LoadIpuConfig checked the entry's size.
    if (!paddle::FindTranslator(entry[0]))
      Fail(ErrorKind::kUnimplemented,
           "IPU custom op '{}' (-> {}): Tiller runs custom ops from custom-op libraries; load the "
           "one that defines '{}' first (Config::LoadCustomOpLibrary)",
           entry[0], entry[1], entry[0]);
  }
  impl_->config = config;
  impl_->profiling = config.profile_enabled();
  if (!config.trace_path().empty()) impl_->trace = std::make_shared<compile::TraceRecorder>();
  impl_->CreateCompilers();
  impl_->model = std::make_shared<const paddle::Model>(LoadConfiguredModel(config));
  const paddle::Program& p = impl_->model->program;
  // Like Paddle Inference, refuse a model with unsupported ops at creation.
  paddle::CheckSupported(p);
  std::vector<FeedDecl> decls;
  for (const std::string& name : p.feed_names) {
    const paddle::VarInfo* v = p.FindVar(name);
    if (!v) Fail(ErrorKind::kDataLoss, "{}: feed target '{}' has no variable", p.path, name);
    decls.push_back({name, v->dtype, v->dims});
  }
  impl_->MakeFeeds(std::move(decls));
  impl_->CheckAtLoad();
  impl_->WarmUp();
}

Predictor::Predictor(const Predictor& original, CloneTag) : impl_(std::make_unique<Impl>()) {
  const Impl& o = *original.impl_;
  impl_->config = o.config;
  impl_->model = o.model;
  impl_->trace = o.trace;
  impl_->lane_prefix = fmt::format("clone {} ", ++o.clones->count);
  impl_->clones = o.clones;
  impl_->profiling = o.profiling;
  impl_->CreateCompilers();
  std::vector<FeedDecl> decls;
  for (size_t i = 0; i < o.feeds->size(); ++i) decls.push_back(o.feeds->decl(i));
  impl_->MakeFeeds(std::move(decls));
  impl_->CheckAtLoad();
  impl_->WarmUp();
}

std::unique_ptr<Predictor> Predictor::Clone() const {
  return std::unique_ptr<Predictor>(new Predictor(*this, CloneTag{}));
}

Predictor::~Predictor() {
  // Config::EnableProfile: Paddle's report at the predictor's end.
  if (!impl_ || !impl_->config.profile_enabled() || !impl_->current) return;
  try {
    std::string report = "Tiller profile (per op type: total ms, calls)\n";
    for (const auto& [op, ms, calls] : GetProfile())
      report += fmt::format("  {:<32} {:>10.3f} {:>8}\n", op, ms, calls);
    std::fputs(report.c_str(), stderr);
  } catch (...) {  // a report is not worth a terminate() in a destructor
  }
}

std::vector<std::string> Predictor::GetInputNames() const {
  return impl_->model->program.feed_names;
}
std::vector<std::string> Predictor::GetOutputNames() const {
  return impl_->model->program.fetch_names;
}

std::unique_ptr<Tensor> Predictor::GetInputHandle(const std::string& name) {
  size_t i = impl_->feeds->Index(name);
  return std::unique_ptr<Tensor>(new Tensor(this, name, true, i));
}

std::unique_ptr<Tensor> Predictor::GetOutputHandle(const std::string& name) {
  size_t i = impl_->OutputIndex(name);
  return std::unique_ptr<Tensor>(new Tensor(this, name, false, i));
}

void Predictor::Impl::RunIpu() {
  const Config::IpuSettings& ipu = config.ipu();
  const int replicas = ipu.replica_num, batches = ipu.batches_per_step;
  const int micro_batches = replicas * batches;
  // SetMicroBatching (MakeFeeds) checked every input holds the micro-batches.
  const std::vector<Shape> shapes = feeds->MicroBatchShapes();
  const int copies =
      ipu.pipeline.enabled
          ? compile::PipelineCopies(compile::PipelineSchedule::kOneForwardOneBackward, batches,
                                    ipu.device_num,
                                    compile::PipelineStages(CompileIpu(0, 0, shapes).exe->graph()))
          : 1;
  for (int r = 0; r < replicas; ++r) {
    for (int c = 0; c < copies; ++c) CompileIpu(r, c, shapes);
  }
  compile::CompiledStep& first = CompileIpu(0, 0, shapes);
  const size_t n_out = first.exe->outputs().size();
  ipu_output_types.resize(n_out);
  ipu_outputs.resize(n_out);
  for (size_t o = 0; o < n_out; ++o) {
    const ir::TensorType& t = first.exe->outputs()[o].type;
    Shape shape = t.shape;
    // One micro-batch a run keeps the model's shape (a scalar stays one).
    if (shape.empty() && micro_batches > 1)
      shape = {micro_batches};
    else if (!shape.empty())
      shape[0] *= micro_batches;
    ipu_output_types[o] = {t.dtype, shape};
    if (ipu_outputs[o].size() != t.bytes() * micro_batches)
      ipu_outputs[o].Resize(t.bytes() * micro_batches);
  }
  auto prepare = [&](int k, compile::Executable& exe) {
    TILLER_CHECK(exe.inputs().size() == feeds->size(), "{} graph inputs for {} feeds",
                 exe.inputs().size(), feeds->size());
    if (trace) exe.SetTraceTag(fmt::format("run {} micro-batch {}", runs, k));
    runtime::CopyMicroBatchIn(*feeds, k, micro_batches, exe);
  };
  auto fetch = [&](int k, const compile::Executable& exe) {
    runtime::CopyMicroBatchOut(exe, k, ipu_outputs);
  };
  // Replica r runs micro-batches b * replicas + r, b = 0..batches-1.
  auto run_replica = [&](int r) {
    IpuReplica& rep = ipu_replicas[r];
    if (!ipu.pipeline.enabled) {
      compile::Executable& exe = *CompileIpu(r, 0, shapes).exe;
      for (int b = 0; b < batches; ++b) {
        prepare(b * replicas + r, exe);
        exe.Run();
        fetch(b * replicas + r, exe);
      }
      return;
    }
    auto& runner = rep.runners[{0, shapes}];
    if (!runner) {
      std::vector<compile::Executable*> execs;
      for (int c = 0; c < copies; ++c) execs.push_back(CompileIpu(r, c, shapes).exe.get());
      runner = std::make_unique<compile::PipelineRunner>(
          execs, rep.compiler->devices(), compile::PipelineSchedule::kOneForwardOneBackward);
    }
    runner->Run(
        batches, [&](int b, compile::Executable& exe) { prepare(b * replicas + r, exe); },
        [&](int b, compile::Executable& exe) { fetch(b * replicas + r, exe); });
  };
  ipu_ran = false;
  runtime::ReplicaFailure failure = runtime::RunReplicas(replicas, run_replica);
  if (failure.error) std::rethrow_exception(failure.error);
  current = &first;
  ipu_ran = true;
}

bool Predictor::Run() {
  ++impl_->runs;
  // The trace file is rewritten after every run, failed ones included.
  compile::TraceFileGuard write_trace(impl_->trace.get(), impl_->config.trace_path());
  CheckInputsHoldElements(*impl_->feeds);
  if (impl_->config.ipu().enabled) {
    impl_->RunIpu();
    return true;
  }
  FeedSet& feeds = *impl_->feeds;
  compile::CompiledStep& step = impl_->CompileFor(feeds.Shapes());
  compile::Executable& exe = *step.exe;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const AlignedBuffer& data = feeds.data(i);
    if (data.size()) std::memcpy(exe.inputs()[i].data, data.data(), data.size());
  }
  if (impl_->trace) exe.SetTraceTag(fmt::format("run {}", impl_->runs));
  exe.Run();
  impl_->current = &step;
  return true;
}

std::vector<int64_t> Predictor::GetInputShape(const std::string& name) const {
  return impl_->feeds->decl(impl_->feeds->Index(name)).dims;
}
DataType Predictor::GetInputType(const std::string& name) const {
  return ToApi(impl_->feeds->decl(impl_->feeds->Index(name)).dtype);
}

Predictor::Summary Predictor::GetSummary() const {
  Summary s;
  if (!impl_->current) Fail(ErrorKind::kInvalidArgument, "GetSummary() needs a Run() first");
  const compile::Executable* exe = impl_->current->exe.get();
  for (const auto& op : exe->graph().ops()) s.num_kernels += !op->is(ir::Opcode::reshape);
  s.arena_bytes = exe->arena_bytes();
  for (size_t d = 0; d < exe->num_devices(); ++d) s.naive_bytes += exe->plan(d).naive_bytes;
  for (const auto& [name, p] : impl_->model->params)
    s.weight_bytes += static_cast<size_t>(NumElements(p.dims)) * DTypeSize(p.dtype);
  s.graph = exe->graph().ToString();
  s.compile_report = impl_->current->report.Format();
  s.compile_pipeline = impl_->current->report.pipeline;
  return s;
}

void Predictor::EnableProfiling(bool on) {
  impl_->profiling = on;
  impl_->cache.ForEach([on](compile::CompiledStep& step) { step.exe->EnableProfiling(on); });
}

std::vector<std::tuple<std::string, double, int64_t>> Predictor::GetProfile(bool by_shape) const {
  std::vector<std::tuple<std::string, double, int64_t>> out;
  if (!impl_->current) return out;
  for (const auto& e : impl_->current->exe->Profile(by_shape))
    out.emplace_back(e.op_type, e.total_ms, e.calls);
  return out;
}

std::map<std::string, int> Predictor::OpHistogram() const {
  std::map<std::string, int> h;
  for (const auto& op : impl_->model->program.ops) ++h[op.type];
  return h;
}

std::shared_ptr<Predictor> CreatePredictor(const Config& config) {
  return std::make_shared<Predictor>(config);
}

namespace services {

PredictorPool::PredictorPool(const Config& config, size_t size) {
  if (size == 0) Fail(ErrorKind::kInvalidArgument, "PredictorPool: size must be >= 1, got 0");
  predictors_.push_back(std::make_unique<Predictor>(config));
  for (size_t i = 1; i < size; ++i) predictors_.push_back(predictors_.front()->Clone());
}

Predictor* PredictorPool::Retrive(size_t idx) {
  if (idx >= predictors_.size())
    Fail(ErrorKind::kInvalidArgument, "PredictorPool::Retrive({}): the pool holds {} predictor(s)",
         idx, predictors_.size());
  return predictors_[idx].get();
}

}  // namespace services

// ---- Tensor ----

void Tensor::Reshape(const std::vector<int64_t>& shape) {
  if (!is_input_) Fail(ErrorKind::kInvalidArgument, "output '{}' cannot be reshaped", name_);
  owner_->impl_->feeds->SetShape(index_, shape);
}

void Tensor::SetLoD(const std::vector<std::vector<size_t>>& lod) {
  if (!lod.empty())
    Fail(ErrorKind::kUnimplemented,
         "'{}': LoD (sequence offsets) is not supported: Tiller's tensors are dense, and a "
         "model that needs LoD has sequence ops Tiller refuses at load",
         name_);
}

void Tensor::CopyFromCpuBytes(const void* data, DataType type, size_t bytes) {
  if (!is_input_)
    Fail(ErrorKind::kInvalidArgument, "'{}' is an output; copy into inputs only", name_);
  owner_->impl_->feeds->SetData(index_, FromApi(type), data, bytes);
}

namespace {
const compile::Executable& RunExecutable(const Predictor::Impl& impl, const std::string& output,
                                         const char* what) {
  if (!impl.current) Fail(ErrorKind::kInvalidArgument, "output '{}' {} before Run()", output, what);
  return *impl.current->exe;
}

// How many of output `index`'s slices along which dim hold data, when the
// model gave it an entry count (TranslateOptions::entry_counted_outputs:
// values() or indices() of a sparse result whose entry count depends on
// the data); count -1 for an output whose shape is its compiled one.
struct Entries {
  int64_t count = -1;
  size_t dim = 0;
};
Entries EntriesOf(const compile::Executable& exe, size_t index) {
  const std::vector<compile::TensorSlot>& outs = exe.outputs();
  const std::string name = paddle::EntriesOutputName(outs[index].name);
  for (const compile::TensorSlot& slot : outs) {
    if (slot.name != name) continue;
    const auto* e = static_cast<const int64_t*>(slot.data);
    return {e[0], static_cast<size_t>(e[1])};
  }
  return {};
}

}  // namespace

void Tensor::CopyToCpuBytes(void* data, size_t bytes) const {
  if (is_input_) {
    const AlignedBuffer& in = owner_->impl_->feeds->data(index_);
    if (bytes != in.size()) Fail(ErrorKind::kInvalidArgument, "size mismatch for '{}'", name_);
    if (bytes) std::memcpy(data, in.data(), bytes);
    return;
  }
  const Predictor::Impl& impl = *owner_->impl_;
  RunExecutable(impl, name_, "read");
  if (impl.ipu_ran) {
    const AlignedBuffer& out = impl.ipu_outputs[index_];
    if (bytes != out.size())
      Fail(ErrorKind::kInvalidArgument, "output '{}' has {} bytes, buffer has {}", name_,
           out.size(), bytes);
    if (bytes) std::memcpy(data, out.data(), bytes);
    return;
  }
  const compile::Executable& exe = RunExecutable(impl, name_, "read");
  const compile::TensorSlot& slot = exe.outputs()[index_];
  const Entries entries = EntriesOf(exe, index_);
  if (entries.count < 0) {
    if (bytes != slot.type.bytes())
      Fail(ErrorKind::kInvalidArgument, "output '{}' has {} bytes, buffer has {}", name_,
           slot.type.bytes(), bytes);
    if (bytes) std::memcpy(data, slot.data, bytes);
    return;
  }
  // The first `count` slices along dim of each outer index.
  const Shape& shape = slot.type.shape;
  const auto dim = static_cast<int64_t>(entries.dim);
  const auto outer = static_cast<size_t>(NumElements(Shape(shape.begin(), shape.begin() + dim)));
  const size_t slice =
      DTypeSize(slot.type.dtype) *
      static_cast<size_t>(NumElements(Shape(shape.begin() + dim + 1, shape.end())));
  const size_t room = static_cast<size_t>(shape[entries.dim]) * slice,
               taken = static_cast<size_t>(entries.count) * slice;
  if (bytes != outer * taken)
    Fail(ErrorKind::kInvalidArgument, "output '{}' has {} bytes, buffer has {}", name_,
         outer * taken, bytes);
  for (size_t o = 0; o < outer && taken; ++o)
    std::memcpy(static_cast<char*>(data) + o * taken,
                static_cast<const char*>(slot.data) + o * room, taken);
}

template <typename T>
void Tensor::CopyFromCpu(const T* data) {
  Shape shape = owner_->impl_->feeds->shape(index_);
  CopyFromCpuBytes(data, TypeOf<T>(),
                   static_cast<size_t>(std::max<int64_t>(NumElements(shape), 0)) * sizeof(T));
}

template <typename T>
void Tensor::CopyToCpu(T* data) const {
  if (TypeOf<T>() != type())
    Fail(ErrorKind::kInvalidArgument, "'{}' is {}, not {}", name_, DataTypeName(type()),
         DataTypeName(TypeOf<T>()));
  CopyToCpuBytes(data, static_cast<size_t>(numel()) * sizeof(T));
}

std::vector<int64_t> Tensor::shape() const {
  if (is_input_) return owner_->impl_->feeds->shape(index_);
  const compile::Executable& exe = RunExecutable(*owner_->impl_, name_, "has no shape");
  if (owner_->impl_->ipu_ran) return owner_->impl_->ipu_output_types[index_].shape;
  Shape shape = exe.outputs()[index_].type.shape;
  if (const Entries entries = EntriesOf(exe, index_); entries.count >= 0)
    shape[entries.dim] = entries.count;
  return shape;
}

int64_t Tensor::numel() const {
  return NumElements(shape());
}

DataType Tensor::type() const {
  if (is_input_) return ToApi(owner_->impl_->feeds->decl(index_).dtype);
  return ToApi(RunExecutable(*owner_->impl_, name_, "has no type").outputs()[index_].type.dtype);
}

#define TILLER_INSTANTIATE(T)                          \
  template void Tensor::CopyFromCpu<T>(const T* data); \
  template void Tensor::CopyToCpu<T>(T * data) const;
TILLER_INSTANTIATE(float)
TILLER_INSTANTIATE(double)
TILLER_INSTANTIATE(int8_t)
TILLER_INSTANTIATE(uint8_t)
TILLER_INSTANTIATE(int16_t)
TILLER_INSTANTIATE(int32_t)
TILLER_INSTANTIATE(int64_t)
TILLER_INSTANTIATE(bool)
#undef TILLER_INSTANTIATE

}  // namespace tiller::inference
