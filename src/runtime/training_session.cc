// TrainingSession: the program is analysed once; each set of feed shapes
// (and eval/train) compiles its own step, and all of them bind the same
// state buffers, which the session owns. Checkpoints go through the pickle
// code of the Paddle frontend (pickle.h) with the state roles and file split
// of state_roles.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <system_error>
#include <thread>

#include "backend/collective.h"
#include "compile/driver.h"
#include "compile/pipeline.h"
#include "compile/plan.h"
#include "compile/trace.h"
#include "core/aligned_buffer.h"
#include "core/atomic_file.h"
#include "core/content_hash.h"
#include "core/error.h"
#include "core/half.h"
#include "frontend/paddle/pickle.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/state_roles.h"
#include "frontend/paddle/training.h"
#include "frontend/paddle/translate.h"
#include "ir/op_schema.h"
#include "runtime/api_types.h"
#include "runtime/distribution.h"
#include "runtime/feeds.h"
#include "runtime/micro_batches.h"
#include "runtime/notes.h"
#include "runtime/paddle_steps.h"
#include "runtime/precision.h"
#include "runtime/replica_options.h"
#include "runtime/step_cache.h"
#include "tiller/training.h"

namespace tiller::runtime {

// Distribution: the job's replicas and this process's first, checked
// against what the options say (Paddle's global_replication_factor and
// global_replica_offset, which IPU scripts compute from the launcher's
// environment).
static void ResolveDistribution(training::SessionOptions& options, const std::string& program) {
  backend::ProcessGroup& job = MpiProcessGroup();
  const int replicas = std::max(options.replicas, 1);
  const int spread = options.processes_per_replica;
  // Stages on several processes: a replica per `spread` consecutive ranks.
  const int global = spread > 1 ? job.size() / spread : job.size() * replicas;
  const int offset = spread > 1 ? job.rank() / spread : job.rank() * replicas;
  std::string problem;
  if (spread > 1 && job.size() % spread != 0) {
    problem = fmt::format(
        "processes_per_replica {} does not divide the job's {} process(es): each replica "
        "takes that many; launch mpirun -np with a multiple of {}",
        spread, job.size(), spread);
  } else if (spread > 1 && replicas > 1) {
    problem = fmt::format(
        "processes_per_replica {} with replicated_graph_count {}: local replicas of a replica "
        "spread over processes are not supported yet",
        spread, replicas);
  } else if (spread > 1 && options.devices_per_replica % spread != 0) {
    problem = fmt::format(
        "processes_per_replica {} does not divide the replica's {} devices (num_ipus): each "
        "process runs the same number of them",
        spread, options.devices_per_replica);
  } else if (spread > 1 && options.global_replicas > 0 && options.global_replicas != global) {
    problem = fmt::format(
        "global_replication_factor {} but the job's {} processes run {} replica(s) of "
        "processes_per_replica {} processes each",
        options.global_replicas, job.size(), global, spread);
  } else if (spread > 1 && options.global_replica_offset >= 0 &&
             options.global_replica_offset != offset) {
    problem = fmt::format(
        "global_replica_offset {} but this process is rank {} of {}, in replica rank / "
        "processes_per_replica = {}",
        options.global_replica_offset, job.rank(), job.size(), offset);
  } else if (options.global_replicas > 0 && options.global_replicas != global) {
    problem = fmt::format(
        "global_replication_factor {} but the job has {} process(es) x {} replica(s) "
        "(replicated_graph_count) = {}: launch with mpirun -np {} or change the options",
        options.global_replicas, job.size(), replicas, global,
        options.global_replicas % replicas == 0 ? options.global_replicas / replicas : -1);
  } else if (options.global_replica_offset >= 0 && options.global_replica_offset != offset) {
    problem = fmt::format(
        "global_replica_offset {} but this process is rank {} of {}, whose first replica is "
        "rank x replicated_graph_count = {}",
        options.global_replica_offset, job.rank(), job.size(), offset);
  }
  // Every process learns whether any refused: all fail together, none waits
  // in a collective for a process that gave up.
  const int first = job.Min(problem.empty() ? job.size() : job.rank());
  if (!problem.empty()) Fail(ErrorKind::kInvalidArgument, "{}: {}", program, problem);
  if (first < job.size())
    Fail(ErrorKind::kInvalidArgument,
         "{}: rank {} of the job refused its distribution options (its message says why)", program,
         first);
  options.global_replicas = global;
  options.global_replica_offset = offset;
}

compile::CompileOptions ReplicaCompileOptions(const training::SessionOptions& options, int rank,
                                              const std::vector<backend::Collective*>& groups) {
  using training::SessionOptions;
  const int n_devices = options.replicas * options.devices_per_replica;
  compile::CompileOptions co;
  co.devices.assign(options.devices_per_replica,
                    compile::DeviceSpec{
                        "cpu",
                        ThreadsPerDevice(options.num_threads, n_devices,
                                         fmt::format("{} replica(s) x {} device(s), num_threads {}",
                                                     options.replicas, options.devices_per_replica,
                                                     options.num_threads)),
                        0});
  co.placement = compile::PlacementPolicy::kByShard;
  co.auto_split = options.auto_split || options.auto_split_sharded;
  co.auto_split_sharded = options.auto_split_sharded;
  co.stages_per_device = options.stages_per_device;
  co.auto_split_measured = options.auto_split_measured;
  co.accumulation_steps = options.accumulation_factor;
  co.batches_per_step = options.batches_per_step;
  co.updates_in_pipeline = options.continuous_pipelining;
  co.progress = options.compile_progress;
  co.progress_total = options.compile_progress_total;
  co.recompute = options.recompute;
  co.recompute_all = options.recompute_all;
  // Across processes the compiled step sees the job's replicas and its
  // global rank (the mean's divisor, sharding's parts, the group's ranks).
  co.replicas = options.distribution ? options.global_replicas : options.replicas;
  co.replica_groups = groups;
  co.overlap_all_reduce = options.overlap_all_reduce;
  co.all_reduce_bucket_bytes =
      static_cast<size_t>(std::max<int64_t>(options.all_reduce_bucket_bytes, 0));
  co.replica_rank = options.distribution ? options.global_replica_offset + rank : rank;
  if (options.distribution && options.processes_per_replica > 1) {
    // This process runs its share of the replica's devices; the others are
    // placeholders of one thread (compile/processes.h).
    backend::ProcessGroup& job = MpiProcessGroup();
    const int per_process = options.devices_per_replica / options.processes_per_replica;
    // The replica's processes: consecutive ranks from `first`.
    const int first = job.rank() / options.processes_per_replica * options.processes_per_replica;
    for (int d = 0; d < options.devices_per_replica; ++d) {
      const int process = first + d / per_process;
      co.device_process.push_back(process);
      co.devices[d].threads =
          process == job.rank()
              ? ThreadsPerDevice(options.num_threads, per_process,
                                 fmt::format("{} device(s) of this process, num_threads {}",
                                             per_process, options.num_threads))
              : 1;
    }
    co.process = job.rank();
    co.process_link = &job;
  }
  co.shard_optimizer_state = options.shard_optimizer_state;
  co.shard_min_elements = options.shard_min_elements;
  co.precision = runtime::ParsePrecision(options.precision, "precision");
  co.loss_scaling = options.loss_scaling;
  co.dynamic_loss_scaling = SteersLossScale(options);
  co.gradient_statistics = options.gradient_statistics || options.automatic_loss_scaling;
  co.bin_edge_location = options.bin_edge_location;
  co.stochastic_rounding = options.stochastic_rounding;
  // Its own stream: not the draws of dropout under the same random_seed.
  co.stochastic_rounding_seed = options.random_seed ^ 0x5352'5f73'6565'6421ULL;
  co.reduction = options.reduction == SessionOptions::Reduction::kSum
                     ? compile::CompileOptions::Reduction::kSum
                     : compile::CompileOptions::Reduction::kMean;
  return co;
}

std::map<std::string, ir::TensorType> StoredStateTypes(
    const paddle::Program& program, const std::vector<std::string>& state,
    const std::array<std::string, 3>& accl_types) {
  for (int k = 0; k < 3; ++k) {
    if (accl_types[k] != "FLOAT" && accl_types[k] != "FLOAT16")
      Fail(ErrorKind::kInvalidArgument, "accl{}_type must be 'FLOAT' or 'FLOAT16', got '{}'", k + 1,
           accl_types[k]);
  }
  const std::map<std::string, int> accumulators = paddle::OptimizerAccumulators(program);
  std::map<std::string, ir::TensorType> out;
  for (const std::string& name : state) {
    const paddle::VarInfo* v = program.FindVar(name);
    if (!v) Fail(ErrorKind::kDataLoss, "{}: persistable '{}' has no variable", program.path, name);
    ir::TensorType t{v->dtype, v->dims};
    auto acc = accumulators.find(name);
    if (acc != accumulators.end() && accl_types[acc->second - 1] == "FLOAT16" &&
        t.dtype == DType::kF32)
      t.dtype = DType::kF16;
    out[name] = t;
  }
  return out;
}

}  // namespace tiller::runtime

namespace tiller::training {

using runtime::FeedDecl;
using runtime::FeedSet;
using runtime::PaddleTrainingStep;
using runtime::StepCache;

using inference::FromApi;
using inference::ToApi;

struct TrainingSession::Impl {
  paddle::Program program;
  paddle::TrainingProgramInfo info;
  SessionOptions options;
  bool default_eval = false;  // what Run() without arguments does
  // Role and checkpoint file of every persistable variable, by name.
  std::map<std::string, paddle::StateVariable> roles;
  std::vector<std::string> feed_names, fetch_names;

  struct State {
    ir::TensorType type;  // as stored (float16 for accumulators accl*_type makes half)
    DType declared;       // as the program declares it: what reads and writes exchange
    AlignedBuffer data;
    bool set = false;
    ir::TensorType declared_type() const { return {declared, type.shape}; }
  };
  // Between the declared dtype and the stored one (float32 <-> float16).
  static void Store(State& st, const void* declared) {
    if (st.type.dtype == st.declared) {
      if (st.type.bytes()) std::memcpy(st.data.data(), declared, st.type.bytes());
      return;
    }
    const auto* in = static_cast<const float*>(declared);
    auto* out = reinterpret_cast<uint16_t*>(st.data.data());
    for (int64_t i = 0, n = NumElements(st.type.shape); i < n; ++i) out[i] = FloatToHalf(in[i]);
  }
  static void Load(const State& st, void* declared) {
    if (st.type.dtype == st.declared) {
      if (st.type.bytes()) std::memcpy(declared, st.data.data(), st.type.bytes());
      return;
    }
    const auto* in = reinterpret_cast<const uint16_t*>(st.data.data());
    auto* out = static_cast<float*>(declared);
    for (int64_t i = 0, n = NumElements(st.type.shape); i < n; ++i) out[i] = HalfToFloat(in[i]);
  }
  std::map<std::string, State> states;
  std::map<std::string, ir::TensorType> state_types;
  std::unique_ptr<FeedSet> feeds;
  // Data-parallel replicas (SessionOptions::replicas): each has its own
  // device, compiled steps and copy of the state (replica 0's is `states`),
  // and they sum their gradients through `group`. One replica without
  // replication.
  struct Replica {
    std::unique_ptr<compile::Compiler> compiler;
    // One compiled step per (eval, feed shapes); variant 1: eval.
    StepCache cache;
    compile::StateStorage storage;
    std::map<std::string, AlignedBuffer> own_state;  // replicas after the first
    // Pipelining: per (eval, feed shapes), the runner over the step's copies.
    std::map<StepCache::Key, std::unique_ptr<compile::PipelineRunner>> runners;
    // Shard_optimizer_state: the replica's part of each sharded state (its
    // steps' storage for it; the whole value is in `states` only after
    // GatherParts).
    std::map<std::string, AlignedBuffer> parts;
    // Dynamic loss scaling: every replica sees the same all-reduced
    // gradients, so each keeps its own copy of the rule's state and they
    // stay equal without talking.
    double loss_scale = 1.0;
    int good_updates = 0, bad_updates = 0;
    int64_t skipped = 0;
    // Gradient statistics of the last update, and automatic loss scaling's
    // sums over the current update period.
    std::array<double, 3> last_counts{}, period_counts{};
    int period_updates = 0;
  };
  // Sharded states: each replica's elements of the flattened value.
  std::map<std::string, std::vector<PartRange>> sharded;
  // Training ran since the parts were last gathered into `states`.
  bool parts_newer = false;
  // Stages on several processes (processes_per_replica): the rank whose
  // stage updates each state, and whether training ran since every
  // process last took those states from their ranks.
  std::map<std::string, int> state_owner;
  bool stage_states_newer = false;
  // Per device of a replica (shard), the group of that device in every
  // replica.
  std::vector<std::unique_ptr<backend::Collective>> groups;
  std::vector<Replica> replicas;
  // Distribution (SessionOptions::distribution): the MPI job, and whether
  // rank 0's state has been broadcast.
  backend::ProcessGroup* process_group = nullptr;
  bool state_broadcast = false;
  // The rank of local replica `replica` in its groups: global across the
  // job's processes.
  int GroupRank(int replica) const {
    return options.distribution ? options.global_replica_offset + replica : replica;
  }
  // Replicas summing gradients: the job's, across processes.
  int GroupSize() const {
    return options.distribution ? options.global_replicas : options.replicas;
  }
  // The state changed outside a step (SetState, a checkpoint, the learning
  // rate): the other replicas copy replica 0's before the next step.
  bool replicas_stale = true;
  bool profiling = false;
  std::unique_ptr<compile::TraceRecorder> trace;  // SessionOptions::trace_path
  compile::CompiledStep* last = nullptr;
  bool last_eval = false;
  // The last Run()'s fetches, one value per micro-batch (FetchInfo's shapes).
  std::vector<ir::TensorType> fetch_types;
  std::vector<AlignedBuffer> fetched;
  int64_t steps = 0;
  // Per compiled step: whether the diagnostic re-run after a failed check is
  // safe (no state is written in place before the last checked value).
  std::map<const compile::Executable*, bool> rerun_safe;

  State& FindState(const std::string& name) {
    auto it = states.find(name);
    if (it == states.end())
      Fail(ErrorKind::kNotFound, "{}: '{}' is not a persistable variable of the program",
           program.path, name);
    return it->second;
  }

  // Fails naming the states nothing has set yet (before `what`).
  void RequireStateSet(const char* what) const {
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

  const paddle::StateVariable* Role(const std::string& name) const {
    auto it = roles.find(name);
    return it == roles.end() ? nullptr : &it->second;
  }

  int MicroBatchesPerRun() const {
    return options.batches_per_step * options.accumulation_factor * options.replicas;
  }

  // The feeds' shapes divided into the micro-batches of one Run().
  std::vector<Shape> MicroBatchShapes() const { return feeds->MicroBatchShapes(); }

  // A fetch's shape for the caller: the micro-batch's, with the
  // accumulation factor and batches per step prepended as Paddle's IPU
  // backend did.
  Shape FetchShape(const Shape& micro) const {
    Shape shape = micro;
    if (options.batches_per_step > 1) shape.insert(shape.begin(), options.batches_per_step);
    if (options.gradient_accumulation) shape.insert(shape.begin(), options.accumulation_factor);
    if (options.replicated_graphs) shape.insert(shape.begin(), options.replicas);
    return shape;
  }

  compile::CompiledStep& Compile(int replica, bool eval, const std::vector<Shape>& shapes,
                                 int copy = 0) {
    return replicas[replica].cache.Get({(eval ? 1 : 0) + 2 * copy, shapes},
                                       [&] { return CompileStep(replica, eval, shapes, copy); });
  }

  // The micro-batches one pipeline window runs: an update's, or a whole
  // eval run's.
  int PipelineWindow(bool eval) const {
    if (eval) return options.batches_per_step * options.accumulation_factor;
    return Continuous(eval) ? options.batches_per_step : options.accumulation_factor;
  }
  // PopART's continuous pipelining: a training run's micro-batches flow
  // through the pipeline with an update each, applied as its backward ends.
  bool Continuous(bool eval) const { return options.continuous_pipelining && !eval; }

  // The pipeline runner of a replica for (eval, shapes), compiling the copies
  // of the step it needs (copy 0 is Compile's).
  compile::PipelineRunner& Runner(int replica, bool eval, const std::vector<Shape>& shapes) {
    Replica& rep = replicas[replica];
    auto& runner = rep.runners[{eval ? 1 : 0, shapes}];
    if (runner) return *runner;
    const compile::PipelineSchedule schedule =
        options.pipeline_schedule == SessionOptions::Schedule::kOneFOneB
            ? compile::PipelineSchedule::kOneForwardOneBackward
            : compile::PipelineSchedule::kFillDrain;
    const int stages = compile::PipelineStages(Compile(replica, eval, shapes, 0).exe->graph());
    const int least = compile::PipelineMinInFlight(options.devices_per_replica, stages);
    if (options.pipeline_in_flight > 0 && options.pipeline_in_flight < least)
      Fail(ErrorKind::kInvalidArgument,
           "pipeline_in_flight {} is fewer than the pipeline's {} stages over {} devices: 1F1B "
           "keeps a micro-batch in flight per stage; set it to {} or more (0: {})",
           options.pipeline_in_flight, stages, options.devices_per_replica, least, least + 1);
    const int n_copies =
        Continuous(eval)
            ? compile::ContinuousCopies(PipelineWindow(eval), options.devices_per_replica)
            : compile::PipelineCopies(schedule, PipelineWindow(eval), options.devices_per_replica,
                                      stages, options.pipeline_in_flight);
    if (Continuous(eval) && stages != options.devices_per_replica)
      Fail(ErrorKind::kUnimplemented,
           "pipelined training without gradient accumulation runs PopART's pipeline of one "
           "stage per device; the program has {} stages over {} devices",
           stages, options.devices_per_replica);
    std::vector<compile::Executable*> copies;
    for (int c = 0; c < n_copies; ++c)
      copies.push_back(Compile(replica, eval, shapes, c).exe.get());
    runner = std::make_unique<compile::PipelineRunner>(copies, rep.compiler->devices(), schedule,
                                                       Continuous(eval));
    return *runner;
  }

  // Distribution: every process takes rank 0's state (states: a sorted map,
  // so every process broadcasts them in the same order). `loaded`: rank 0
  // set every state from a checkpoint, so every process's state is set.
  void BroadcastStates(bool loaded = false) {
    for (auto& [name, st] : states) {
      process_group->Broadcast(0, st.data.data(), st.data.size());
      if (loaded) st.set = true;
    }
    state_broadcast = true;
    replicas_stale = true;
  }

  // A checkpoint's files, read and checked against the program and their
  // manifest (when they have one) without changing the session.
  struct CheckpointFiles {
    std::map<std::string, paddle::PickledArray> values;
    std::optional<nlohmann::json> manifest;
  };
  CheckpointFiles ReadCheckpoint(const std::string& path_prefix) const;
  // ReadCheckpoint of files a save of Tiller's wrote, which must include
  // the manifest (after an interrupted save, the test of a whole set).
  CheckpointFiles ReadSavedCheckpoint(const std::string& path_prefix) const;
  // Sets the state (and the manifest's counters) from checked files.
  void ApplyCheckpoint(const CheckpointFiles& files);
  // SaveCheckpoint's writing (rank 0), crash-safe.
  void SaveCheckpointFiles(const std::string& prefix, const std::vector<paddle::ArrayView>& params,
                           const std::vector<paddle::ArrayView>& opts) const;
  // SaveCheckpoint's manifest of what it writes (ManifestPath).
  std::string ManifestText(const std::vector<paddle::ArrayView>& params,
                           const std::vector<paddle::ArrayView>& opts) const;

  // Distribution: runs `work` on rank 0 only and lets every process know
  // whether it succeeded (rank 0 rethrows its error, the others say that
  // rank 0 failed). Without distribution: runs it.
  void OnRankZero(const std::string& what, const std::function<void()>& work) const {
    if (!process_group) return work();
    // Rank 0 tells the others its error's kind (kOk: none) through Min.
    constexpr int kOk = 1 << 20;
    std::exception_ptr failure;
    int outcome = kOk;
    if (process_group->rank() == 0) {
      try {
        work();
      } catch (const Error& e) {
        failure = std::current_exception();
        outcome = static_cast<int>(e.kind());
      } catch (...) {
        failure = std::current_exception();
        outcome = static_cast<int>(ErrorKind::kInternal);
      }
    }
    outcome = process_group->Min(outcome);
    if (failure) std::rethrow_exception(failure);
    if (outcome != kOk)
      Fail(static_cast<ErrorKind>(outcome), "{}: rank 0 of the job failed (its message says why)",
           what);
  }

  // Copies replica 0's state into the others' when it changed outside a step
  // (and every replica's part of the sharded states).
  void SyncReplicas() {
    if (process_group && !state_broadcast) BroadcastStates();
    if (!replicas_stale) return;
    for (size_t r = 1; r < replicas.size(); ++r) {
      for (auto& [name, buffer] : replicas[r].own_state) {
        const State& st = states.at(name);
        if (buffer.size()) std::memcpy(buffer.data(), st.data.data(), buffer.size());
      }
    }
    ForEachPart(
        [](std::byte* part, std::byte* whole, size_t bytes) { std::memcpy(part, whole, bytes); });
    replicas_stale = false;
  }

  // fn(part, where the part sits in the whole state, its bytes) for every
  // replica's part of every sharded state.
  template <typename Fn>
  void ForEachPart(Fn fn) {
    for (size_t r = 0; r < replicas.size(); ++r) {
      for (auto& [name, buffer] : replicas[r].parts) {
        State& st = states.at(name);
        const size_t offset = sharded.at(name)[r].begin * DTypeSize(st.type.dtype);
        fn(buffer.data(), st.data.data() + offset, buffer.size());
      }
    }
  }

  // Makes `states` whole again after training updated the replicas' parts:
  // before any read of the state, and before any write (which marks the
  // replicas stale, so SyncReplicas hands every state out again).
  void GatherParts() {
    if (stage_states_newer) {
      // Every process holds every state, current where its own stages
      // update it: each takes the others' from them (every process reads,
      // in the sorted order of the names).
      for (const auto& [name, owner] : state_owner) {
        auto it = states.find(name);
        if (it != states.end())
          process_group->Broadcast(owner, it->second.data.data(), it->second.data.size());
      }
      stage_states_newer = false;
    }
    if (!parts_newer) return;
    ForEachPart(
        [](std::byte* part, std::byte* whole, size_t bytes) { std::memcpy(whole, part, bytes); });
    if (process_group && GroupSize() > options.replicas) {
      // The other processes' replicas hold the rest of each sharded state
      // (every process gathers, in the sorted order of the names).
      for (const auto& [name, parts] : sharded) {
        State& st = states.at(name);
        process_group->GatherParts(st.data.data(), NumElements(st.type.shape),
                                   DTypeSize(st.type.dtype), options.replicas);
      }
    }
    parts_newer = false;
  }

  // Storage of replica `replica`'s part of a state its step shards: made
  // the first time, from the whole state (current: parts are made at the
  // first compile, before training, and kept).
  void* PartStorage(int replica, const passes::ShardedState& s) {
    Replica& rep = replicas[replica];
    AlignedBuffer& buffer = rep.parts[s.name];
    const State& st = states.at(s.name);
    const size_t item = DTypeSize(st.type.dtype);
    std::vector<PartRange>& parts = sharded[s.name];
    parts.resize(replicas.size());
    if (!buffer.size()) {
      TILLER_CHECK(s.whole == st.type && !parts_newer, "sharding state '{}' ({})", s.name,
                   st.type.ToString());
      buffer.Resize(s.part.size() * item);
      std::memcpy(buffer.data(), st.data.data() + s.part.begin * item, buffer.size());
      parts[replica] = s.part;
      // The replica's whole copy is no longer used.
      rep.own_state.erase(s.name);
      rep.storage.erase(s.name);
    }
    TILLER_CHECK(parts[replica].begin == s.part.begin && parts[replica].end == s.part.end,
                 "state '{}': replica {} sharded it two ways", s.name, replica);
    return buffer.data();
  }

  void RunReplica(int replica, bool eval, compile::CompiledStep& compiled, int* updates_done);

  // After an update window (its update applied, or skipped on overflow):
  // the gradient statistics summed over the replicas, the accumulators
  // zeroed, the loss scale steered.
  void EndWindow(int replica, compile::CompiledStep& compiled, bool overflow) {
    Replica& rep = replicas[replica];
    if (std::array<double, 3> counts{}; compiled.GradientHistogram(counts.data())) {
      // Every replica sums every replica's counts (the device streams are
      // idle: this window's collectives are done), so all decide alike.
      if (GroupSize() > 1)
        groups[0]->AllReduceSum(GroupRank(replica), counts.data(), counts.data(), 3, DType::kF64);
      rep.last_counts = counts;
    }
    compiled.ResetAccumulators();
    if (options.automatic_loss_scaling)
      UpdateLossScaleAutomatically(rep, overflow);
    else if (options.dynamic_loss_scaling)
      UpdateLossScale(rep, overflow);
  }

  // Whether every replica's accumulated gradients are finite (host memory:
  // CPU devices), agreed through the replicas' collective group.
  bool AllReplicasFinite(int replica, const compile::CompiledStep& compiled) {
    double bad = 0;
    for (const compile::Accumulator& a : compiled.accumulators) {
      if (compile::IsGradientHistogram(a) || !a.data.size()) continue;
      // float32 bits: an all-ones exponent is Inf or NaN.
      const uint32_t* v = a.data.as<uint32_t>();
      const size_t n = a.data.size() / sizeof(uint32_t);
      uint32_t any = 0;
      for (size_t i = 0; i < n; ++i) any |= (v[i] & 0x7f800000u) == 0x7f800000u;
      if (any) bad = 1;
    }
    if (GroupSize() > 1) groups[0]->AllReduceSum(GroupRank(replica), &bad, &bad, 1, DType::kF64);
    return bad == 0;
  }

  // Graphcore's automatic loss scaling, after an update window: every
  // update_period updates, halve the scale when the counts at or above the
  // edge (u) exceed threshold_upper_count_proportion of all (u / (u + l) >
  // t), else double it. A skipped update (non-finite gradients) halves it
  // at once and starts a new period.
  void UpdateLossScaleAutomatically(Replica& rep, bool overflow) const {
    auto scale_by = [&](double f) {
      const double next = rep.loss_scale * f;
      // The seed is float32: stay a normal, finite float32.
      if (std::isfinite(static_cast<float>(next)) && next >= std::ldexp(1.0, -126))
        rep.loss_scale = next;
    };
    if (overflow) {
      ++rep.skipped;
      scale_by(0.5);
      rep.period_counts = {};
      rep.period_updates = 0;
      return;
    }
    for (int i = 0; i < 3; ++i) rep.period_counts[i] += rep.last_counts[i];
    if (++rep.period_updates < options.update_period) return;
    const double upper = rep.period_counts[2];
    const double lower = rep.period_counts[0] + rep.period_counts[1];
    const double t = options.threshold_upper_count_proportion;
    scale_by(upper > lower * (t / (1 - t)) ? 0.5 : 2.0);
    rep.period_counts = {};
    rep.period_updates = 0;
  }

  // Paddle's update_loss_scaling rule, after an update window: a skipped
  // update (overflow) counts towards lowering the scale, a clean one towards
  // raising it.
  void UpdateLossScale(Replica& rep, bool overflow) const {
    if (overflow) {
      ++rep.skipped;
      rep.good_updates = 0;
      if (++rep.bad_updates == options.decr_every_n_nan_or_inf) {
        rep.loss_scale = std::max(1.0, rep.loss_scale * options.decr_ratio);
        rep.bad_updates = 0;
      }
      return;
    }
    rep.bad_updates = 0;
    if (++rep.good_updates == options.incr_every_n_steps) {
      const double up = rep.loss_scale * options.incr_ratio;
      // The seed is float32: stay where it is finite.
      if (std::isfinite(static_cast<float>(up))) rep.loss_scale = up;
      rep.good_updates = 0;
    }
  }
  void RunReplicaPipelined(int replica, bool eval, const std::vector<Shape>& shapes,
                           int* updates_done);
  // Micro-batch m of a replica's run (m = b * accumulation_factor + g, batch
  // outermost) is micro-batch k = FeedIndex(m, replica) of the feeds: the
  // replicas interleave.
  int FeedIndex(int m, int replica) const { return m * options.replicas + replica; }
  // Writes micro-batch k (in feed order) of every feed into exe's inputs,
  // and the random ops' step number: steps so far x micro-batches per update
  // + k, so masks change every micro-batch and repeat for the same seed.
  void PrepareMicroBatch(compile::Executable& exe, int k);
  // SessionOptions::synthetic_data_mode: writes exe's feed inputs (zeros,
  // or normal draws for float feeds) instead of the fed values.
  void FillSynthetic(compile::Executable& exe, int64_t step_index) const;
  // "; feed 'x' holds nan at element e [of micro-batch k]" for the first
  // non-finite float in micro-batch k of the feeds, or "".
  std::string NonFiniteFeed(int k) const;
  // Copies exe's outputs to micro-batch k's place in the fetches.
  void FetchMicroBatch(const compile::Executable& exe, int k);
  // Reduces every micro-batch's fetches (micro-batch order) to what
  // options.anchor returns, with its shape.
  void ApplyAnchors(const compile::Executable& exe);
  compile::PipelineStats pipeline_stats;  // replica 0's last window
  // Replica 0's executables of the last run (a pipeline's copies).
  std::vector<const compile::CompiledStep*> last_copies;
  // SessionOptions::device_profile, resolved once; the executables checked.
  std::optional<compile::DeviceProfile> profile;
  std::set<const compile::Executable*> fit_checked;

  compile::PlanShape PlanShapeOf(bool eval) const {
    compile::PlanShape shape;
    shape.training = !eval;
    shape.replicas = options.replicas;
    shape.devices_per_replica = options.devices_per_replica;
    shape.accumulation = eval ? 1 : options.accumulation_factor;
    shape.micro_batches = options.batches_per_step * options.accumulation_factor;
    shape.pipelined = options.pipelining;
    shape.fill_drain = options.pipeline_schedule == SessionOptions::Schedule::kFillDrain;
    shape.in_flight = options.pipeline_in_flight;
    return shape;
  }

  // Fails with the planner's report when replica 0's step (all replicas
  // hold the same, within an element per sharded tensor) does not fit the
  // device profile; before it ever runs.
  void CheckFits(const compile::CompiledStep& step, bool eval) {
    if (options.device_profile.empty() || !fit_checked.insert(step.exe.get()).second) return;
    if (!profile)
      profile = compile::FindDeviceProfile(
          options.device_profile,
          options.num_threads / (options.replicas * options.devices_per_replica));
    compile::PlanShape shape = PlanShapeOf(eval);
    if (eval && options.pipelining) shape.accumulation = shape.micro_batches;
    try {
      compile::PlanStep(step, *profile, shape).CheckFits();
    } catch (const Error&) {
      fit_checked.erase(step.exe.get());
      throw;
    }
  }
  int64_t runs = 0;  // Run() calls, for trace names

  compile::CompiledStep CompileStep(int replica, bool eval, const std::vector<Shape>& shapes,
                                    int copy) {
    PaddleTrainingStep::Args args{&program, &info, &state_types, feed_names, {}, fetch_names, {}};
    for (size_t i = 0; i < feeds->size(); ++i)
      args.feed_types.push_back({feeds->decl(i).dtype, shapes[i]});
    args.options.eval = eval;
    args.options.random_seed = options.random_seed;
    args.options.no_bias_optimizer = options.no_bias_optimizer;
    args.options.max_weight_norm = options.max_weight_norm;
    PaddleTrainingStep source(std::move(args));
    Replica& rep = replicas[replica];
    compile::StateStorage storage = rep.storage;
    if (copy > 0) {
      // Pipeline copies accumulate into copy 0's accumulators.
      for (compile::Accumulator& a : Compile(replica, eval, shapes, 0).accumulators)
        storage[a.name] = a.data.data();
    }
    compile::CompiledStep step = rep.compiler->Compile(
        source, storage,
        [this, replica](const passes::ShardedState& st) { return PartStorage(replica, st); });
    if (!rep.compiler->options().device_process.empty()) {
      // Every process numbered the messages of the same whole step: a
      // process that compiled another step would wait for messages that
      // never come.
      const int n = step.transfers;
      if (process_group->Min(n) != n || process_group->Min(-n) != -n)
        Fail(ErrorKind::kInternal,
             "{}: the job's processes compiled different steps ({} values cross processes "
             "here, another number elsewhere); every process must run the same program with "
             "the same options and feed shapes",
             program.path, n);
      // By place in the replica: every replica's states are equal, so the
      // first replica's processes hand them to the job.
      for (const auto& [name, owner] : step.state_owner)
        state_owner[name] = owner % options.processes_per_replica;
    }
    compile::Executable& exe = *step.exe;
    exe.EnableNanInfCheck(options.check_nan_inf);
    exe.EnableProfiling(profiling);
    if (trace)
      exe.SetTrace(trace.get(), options.replicas > 1 ? fmt::format("replica {} ", replica) : "");
    // The loss (the step's last output) and every gradient are checked right
    // after they are computed, before any update reads them.
    const ir::Value* loss = exe.graph().outputs().back().second;
    // Dynamic loss scaling: only the gradients the update reads (equal on
    // every replica) are checked; a non-finite one skips the update.
    // A program that checks its gradients itself (Paddle AMP) is not
    // guarded: its loss and gradients may overflow, and it skips the update.
    const bool program_checks = !info.checks_finite_op.empty();
    int last_guard = options.dynamic_loss_scaling || program_checks
                         ? -1
                         : exe.GuardFinite(loss, fmt::format("the loss '{}'", info.loss));
    for (size_t k = 0; k < step.gradients.size() && !program_checks; ++k)
      last_guard = std::max(
          last_guard,
          exe.GuardFinite(step.gradients[k], fmt::format("the gradient of '{}'", info.trained[k])));
    // A replica's own gradients too, so the replica that went non-finite
    // fails first (before the all_reduce spreads it) and is the one named.
    for (size_t k = 0;
         k < step.replica_gradients.size() && !options.dynamic_loss_scaling && !program_checks; ++k)
      exe.GuardFinite(step.replica_gradients[k],
                      fmt::format("replica {}'s gradient of '{}'", replica, info.trained[k]));
    // Gradient accumulators the step owns are zeroed before the re-run
    // (ResetAccumulators), so only other states written in place (batch
    // norm's running statistics, ...) make it unsafe.
    std::set<std::string> zeroed;
    for (const compile::Accumulator& a : step.accumulators) {
      if (a.data.size()) zeroed.insert(a.name);
    }
    std::set<const ir::Op*> in_place_writers;
    for (const auto& [value, state] : exe.plan().in_state) {
      if (!zeroed.count(state->name)) in_place_writers.insert(value->producer);
    }
    const auto& ops = exe.graph().ops();
    bool safe = true;
    for (int i = 0; i <= last_guard && i < static_cast<int>(ops.size()); ++i) {
      if (in_place_writers.count(ops[i].get())) safe = false;
    }
    rerun_safe[&exe] = safe;
    if (Continuous(eval)) CheckWeightsStayOnTheirDevice(exe.graph());
    return step;
  }

  // Continuous pipelining updates a weight on its device between other
  // micro-batches' segments there: a weight read on another device too
  // would be read while it is written (PopART refused copying a weight
  // between IPUs while pipelining).
  void CheckWeightsStayOnTheirDevice(const ir::Graph& g) const {
    for (const auto& [state, update] : g.state_updates()) {
      if (!update->producer || update->producer->placement.phase != ir::Phase::kUpdate) continue;
      std::set<int> devices;
      std::vector<const ir::Value*> reads = {state};
      while (!reads.empty()) {
        const ir::Value* v = reads.back();
        reads.pop_back();
        for (const ir::Op* user : v->users) {
          if (user->placement.phase == ir::Phase::kUpdate) continue;
          devices.insert(user->device);
          // Through copies and views, to the devices that read it.
          if (user->type == "copy" || user->schema->is_view)
            reads.insert(reads.end(), user->outputs.begin(), user->outputs.end());
        }
      }
      if (devices.size() > 1)
        Fail(ErrorKind::kInvalidArgument,
             "{}: pipelined training without gradient accumulation updates each weight on its "
             "device inside the pipeline, but '{}' is read on devices {}: share no weight "
             "between pipeline stages (a tied embedding), or enable_gradient_accumulation",
             program.path, state->name, fmt::join(devices, ", "));
    }
  }
};

TrainingSession::TrainingSession(const std::string& program_path,
                                 std::vector<std::string> feed_names,
                                 std::vector<std::string> fetch_names,
                                 const SessionOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.program = paddle::ReadProgramFile(program_path);
  s.info = paddle::AnalyzeTrainingProgram(s.program);
  s.options = options;
  if (options.processes_per_replica < 1)
    Fail(ErrorKind::kInvalidArgument, "processes_per_replica must be >= 1, got {}",
         options.processes_per_replica);
  if (options.processes_per_replica > 1) {
    if (!options.distribution)
      Fail(ErrorKind::kInvalidArgument,
           "processes_per_replica {} spreads a replica's devices over the processes of an MPI "
           "job: it needs enable_distribution (and mpirun -np {})",
           options.processes_per_replica, options.processes_per_replica);
    if (runtime::SteersLossScale(options) || options.gradient_statistics)
      Fail(ErrorKind::kUnimplemented,
           "processes_per_replica {}: dynamic / automatic loss scaling and gradient statistics "
           "decide from every stage's gradients, which sit on different processes; not "
           "supported yet",
           options.processes_per_replica);
    if (options.auto_split_measured)
      Fail(ErrorKind::kUnimplemented,
           "processes_per_replica {}: the split by measured costs (auto_split_cost = measured) "
           "can differ between processes, whose steps must be the same; use the estimated "
           "costs or ipu_shard_guard",
           options.processes_per_replica);
  }
  if (options.distribution) runtime::ResolveDistribution(s.options, s.program.path);
  if (s.options.processes_per_replica > 1 && s.options.global_replicas > 1 &&
      s.options.shard_optimizer_state)
    Fail(ErrorKind::kUnimplemented,
         "processes_per_replica {}: replicated tensor sharding of the optimizer state over "
         "replicas whose stages are on several processes is not supported yet (set "
         "location_optimizer.use_replicated_tensor_sharding False)",
         s.options.processes_per_replica);
  if (options.accumulation_factor < 1)
    Fail(ErrorKind::kInvalidArgument, "accumulation_factor must be >= 1, got {}",
         options.accumulation_factor);
  if (options.accumulation_factor > 1 && !options.gradient_accumulation)
    Fail(ErrorKind::kInvalidArgument,
         "accumulation_factor {} needs gradient accumulation on "
         "(enable_gradient_accumulation=True)",
         options.accumulation_factor);
  if (options.batches_per_step < 1)
    Fail(ErrorKind::kInvalidArgument, "batches_per_step must be >= 1, got {}",
         options.batches_per_step);
  if (options.replicas < 1)
    Fail(ErrorKind::kInvalidArgument, "replicas must be >= 1, got {}", options.replicas);
  if (options.micro_batch_size < 0)
    Fail(ErrorKind::kInvalidArgument,
         "micro_batch_size must be >= 1 (0: taken from the feeds), got {}",
         options.micro_batch_size);
  if (options.anchor == SessionOptions::Anchor::kEveryN &&
      (options.anchor_period < 1 || options.batches_per_step % options.anchor_period != 0))
    Fail(ErrorKind::kInvalidArgument,
         "anchor_return_period {} does not divide batches_per_step {} (every_n returns every "
         "that many batches of a run)",
         options.anchor_period, options.batches_per_step);
  if (options.replicas > 1 && !options.replicated_graphs)
    Fail(ErrorKind::kInvalidArgument,
         "replicated_graph_count {} needs replication on (enable_replicated_graphs=True)",
         options.replicas);
  if (options.devices_per_replica < 1)
    Fail(ErrorKind::kInvalidArgument, "devices per replica must be >= 1, got {}",
         options.devices_per_replica);
  if (options.continuous_pipelining) {
    if (!options.pipelining || options.gradient_accumulation || options.accumulation_factor > 1)
      Fail(ErrorKind::kInvalidArgument,
           "continuous pipelining needs pipelining without gradient accumulation");
    if (options.batches_per_step < options.devices_per_replica)
      Fail(ErrorKind::kInvalidArgument,
           "continuous pipelining: batches_per_step {} is less than the {} pipeline stages",
           options.batches_per_step, options.devices_per_replica);
    if (options.pipeline_schedule != SessionOptions::Schedule::kOneFOneB ||
        options.pipeline_in_flight > 0 || options.stages_per_device > 1)
      Fail(ErrorKind::kInvalidArgument,
           "pipelined training without gradient accumulation runs PopART's schedule (each "
           "device one forward and one backward per cycle): pipeline_schedule, "
           "pipeline_in_flight and stages_per_device do not apply to it");
    if (options.processes_per_replica > 1)
      Fail(ErrorKind::kUnimplemented,
           "pipelined training without gradient accumulation with stages on several processes "
           "(processes_per_replica {}) is not supported yet; enable_gradient_accumulation",
           options.processes_per_replica);
    if (runtime::SteersLossScale(options) || options.gradient_statistics)
      Fail(ErrorKind::kUnimplemented,
           "pipelined training without gradient accumulation updates inside the pipeline: "
           "dynamic / automatic loss scaling and gradient statistics decide per accumulated "
           "update (PopART refused them too); enable_gradient_accumulation");
  }
  if (options.pipelining && options.devices_per_replica < 2)
    Fail(ErrorKind::kInvalidArgument,
         "pipelining needs the program sharded over more than one device per replica "
         "(enable_manual_shard, num_ipus = replicas x stages)");
  if (options.pipeline_in_flight < 0)
    Fail(ErrorKind::kInvalidArgument, "pipeline_in_flight must be >= 0, got {}",
         options.pipeline_in_flight);
  if (options.pipeline_in_flight > 0 &&
      !(options.pipelining && options.pipeline_schedule == SessionOptions::Schedule::kOneFOneB))
    Fail(ErrorKind::kInvalidArgument,
         "pipeline_in_flight {} sets the micro-batches in flight of a 1F1B pipeline: it needs "
         "enable_pipelining and pipeline_schedule '1f1b' (fill_drain keeps the whole window in "
         "flight)",
         options.pipeline_in_flight);
  if (options.stages_per_device < 1)
    Fail(ErrorKind::kInvalidArgument, "stages_per_device must be >= 1, got {}",
         options.stages_per_device);
  if (options.stages_per_device > 1 &&
      !(options.pipelining && (options.auto_split || options.auto_split_sharded)))
    Fail(ErrorKind::kInvalidArgument,
         "stages_per_device {} interleaves the stages of Tiller's split by cost over a "
         "pipeline's devices: it needs enable_pipelining and need_avg_shard; a program sharded "
         "by ipu_shard_guard alone interleaves through its own ipu_stage",
         options.stages_per_device);
  // Each device (devices_per_replica per replica) gets its share of the
  // threads; with fewer threads than devices, one each, taking turns on the
  // cores (ReplicaCompileOptions notes it).
  if (options.num_threads < 1)
    Fail(ErrorKind::kInvalidArgument, "num_threads must be >= 1, got {}", options.num_threads);
  if (!options.trace_path.empty()) s.trace = std::make_unique<compile::TraceRecorder>();
  // Per device of a replica, the group summing its gradients (with several
  // replicas); a device of another process gets a placeholder (its steps
  // are that process's).
  std::vector<backend::Collective*> groups;
  if (s.options.distribution) s.process_group = &runtime::MpiProcessGroup();
  if (s.options.distribution && options.processes_per_replica > 1) {
    if (s.options.global_replicas > 1) {
      // The same device of every replica: the processes at the same place
      // in their replicas (every process asks, for each of its devices).
      const int per_process = options.devices_per_replica / options.processes_per_replica;
      const int place = s.process_group->rank() % options.processes_per_replica;
      for (int j = 0; j < per_process; ++j)
        s.groups.push_back(s.process_group->MakeCollectiveOf(place * per_process + j));
      for (int d = 0; d < options.devices_per_replica; ++d)
        groups.push_back(d / per_process == place ? s.groups[d % per_process].get()
                                                  : s.groups[0].get());
    }
  } else if (s.options.distribution) {
    for (int d = 0; d < options.devices_per_replica; ++d)
      s.groups.push_back(s.process_group->MakeCollective(options.replicas));
  } else if (options.replicas > 1) {
    for (int d = 0; d < options.devices_per_replica; ++d)
      s.groups.push_back(backend::MakeInProcessCollective(options.replicas));
  }
  s.replicas.resize(options.replicas);
  for (Impl::Replica& r : s.replicas) r.loss_scale = options.loss_scaling;
  runtime::ReportSlowHalfPrecisionOnce(runtime::ParsePrecision(options.precision, "precision"));
  if (options.dynamic_loss_scaling && options.automatic_loss_scaling)
    Fail(ErrorKind::kInvalidArgument,
         "dynamic_loss_scaling and automatic_loss_scaling_settings.enabled both steer the loss "
         "scale: choose one");
  if (options.automatic_loss_scaling &&
      (options.update_period < 1 || !(options.threshold_upper_count_proportion >= 0 &&
                                      options.threshold_upper_count_proportion < 1)))
    Fail(ErrorKind::kInvalidArgument,
         "automatic loss scaling needs update_period >= 1 ({}) and 0 <= "
         "threshold_upper_count_proportion < 1 ({})",
         options.update_period, options.threshold_upper_count_proportion);
  if (!s.info.checks_finite_op.empty()) {
    // Paddle AMP's loss-scaling ops are in the program: they scale the loss,
    // check the gradients and skip updates themselves.
    if (runtime::SteersLossScale(options) || options.loss_scaling != 1.0)
      Fail(ErrorKind::kInvalidArgument,
           "{}: the program scales its loss itself ({}, from paddle.static.amp.decorate): "
           "Tiller's loss_scaling / dynamic_loss_scaling / automatic_loss_scaling_settings would "
           "scale it again; leave them off",
           s.program.path, s.info.checks_finite_op);
    // The check reads every gradient: on several devices per replica, or
    // with each replica updating its own shard, it would see only part.
    if (options.devices_per_replica > 1)
      Fail(ErrorKind::kUnimplemented,
           "{}: the program's own gradient check ({}) needs every gradient on one device; "
           "{} devices per replica are not supported with it yet",
           s.program.path, s.info.checks_finite_op, options.devices_per_replica);
    if (options.replicas > 1 && options.shard_optimizer_state)
      Fail(ErrorKind::kUnimplemented,
           "{}: the program's own gradient check ({}) needs every gradient on each replica; "
           "replicated tensor sharding of the optimizer state is not supported with it yet "
           "(set location_optimizer.use_replicated_tensor_sharding False)",
           s.program.path, s.info.checks_finite_op);
  }
  if (runtime::SteersLossScale(options)) {
    // Without pipelining the update's own check decides, which needs the
    // update on one device and whole gradients on every replica; a pipeline
    // checks its window's accumulators before any stage updates.
    if (!options.pipelining && options.devices_per_replica > 1)
      Fail(ErrorKind::kUnimplemented,
           "dynamic / automatic loss scaling over several devices per replica needs pipelining "
           "(enable_pipelining) for now");
    if (!options.pipelining && options.replicas > 1 && options.shard_optimizer_state)
      Fail(ErrorKind::kUnimplemented,
           "dynamic / automatic loss scaling with replicated tensor sharding of the optimizer "
           "state needs pipelining for now (or set "
           "location_optimizer.use_replicated_tensor_sharding False)");
    if (options.incr_every_n_steps < 1 || options.decr_every_n_nan_or_inf < 1 ||
        !(options.incr_ratio > 1) || !(options.decr_ratio > 0 && options.decr_ratio < 1))
      Fail(ErrorKind::kInvalidArgument,
           "dynamic loss scaling needs incr_every_n_steps >= 1 ({}), decr_every_n_nan_or_inf >= 1 "
           "({}), incr_ratio > 1 ({}) and 0 < decr_ratio < 1 ({})",
           options.incr_every_n_steps, options.decr_every_n_nan_or_inf, options.incr_ratio,
           options.decr_ratio);
  }
  if (groups.empty()) {
    for (auto& group : s.groups) groups.push_back(group.get());
  }
  for (int r = 0; r < options.replicas; ++r) {
    s.replicas[r].compiler =
        std::make_unique<compile::Compiler>(runtime::ReplicaCompileOptions(s.options, r, groups));
  }
  s.feed_names = std::move(feed_names);
  s.fetch_names = std::move(fetch_names);
  const std::map<std::string, ir::TensorType> stored =
      runtime::StoredStateTypes(s.program, s.info.state, options.accl_types);
  for (const std::string& name : s.info.state) {
    const paddle::VarInfo* v = s.program.FindVar(name);
    for (int64_t d : v->dims) {
      if (d < 0)
        Fail(ErrorKind::kInvalidArgument, "{}: persistable '{}' has a dynamic shape {}",
             s.program.path, name, ShapeToString(v->dims));
    }
    Impl::State st;
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
                                 options.batches_per_step, options.accumulation_factor);
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

SessionOptions FromIpuOptions(const IpuOptions& o) {
  SessionOptions out;
  out.num_threads = o.NumThreads();
  out.random_seed = static_cast<uint64_t>(o.GetInt("random_seed"));
  out.check_nan_inf = o.GetBool("enable_floating_point_checks");
  out.no_bias_optimizer = o.GetBool("use_no_bias_optimizer");
  out.max_weight_norm = o.GetDouble("max_weight_norm");
  out.loss_scaling = o.GetDouble("loss_scaling");
  out.dynamic_loss_scaling = o.GetBool("dynamic_loss_scaling");
  out.incr_every_n_steps =
      static_cast<int>(o.GetInt("dynamic_loss_scaling_settings.incr_every_n_steps"));
  out.decr_every_n_nan_or_inf =
      static_cast<int>(o.GetInt("dynamic_loss_scaling_settings.decr_every_n_nan_or_inf"));
  out.incr_ratio = o.GetDouble("dynamic_loss_scaling_settings.incr_ratio");
  out.decr_ratio = o.GetDouble("dynamic_loss_scaling_settings.decr_ratio");
  out.gradient_statistics = o.GetBool("gradient_statistics");
  out.automatic_loss_scaling = o.GetBool("automatic_loss_scaling_settings.enabled");
  out.bin_edge_location = o.GetDouble("automatic_loss_scaling_settings.bin_edge_location");
  out.threshold_upper_count_proportion =
      o.GetDouble("automatic_loss_scaling_settings.threshold_upper_count_proportion");
  out.update_period = static_cast<int>(o.GetInt("automatic_loss_scaling_settings.update_period"));
  for (int k = 0; k < 3; ++k) out.accl_types[k] = o.GetStr(fmt::format("accl{}_type", k + 1));
  out.stochastic_rounding = o.GetBool("enable_stochastic_rounding");
  if (o.GetBool("enable_fp16")) {
    const std::string half = o.GetStr("half_dtype");
    out.precision = half == "auto" ? "half" : half;
  }
  out.micro_batch_size = o.GetInt("micro_batch_size");
  out.synthetic_data_mode =
      static_cast<SessionOptions::SyntheticData>(o.GetInt("synthetic_data_mode"));
  out.compile_progress = o.CompilationProgressLogger();
  out.compile_progress_total = static_cast<int>(o.GetInt("compilation_progress_total"));
  out.gradient_accumulation = o.GetBool("enable_gradient_accumulation");
  out.accumulation_factor = static_cast<int>(o.GetInt("accumulation_factor"));
  out.batches_per_step = static_cast<int>(o.GetInt("batches_per_step"));
  // popart::ReductionType: only Mean (1) averages; Sum (0) and NoReduction
  // (2) sum.
  out.reduction = o.GetInt("accumulation_and_replication_reduction_type") == 1
                      ? SessionOptions::Reduction::kMean
                      : SessionOptions::Reduction::kSum;
  out.replicated_graphs = o.GetBool("enable_replicated_graphs");
  out.replicas = static_cast<int>(o.GetInt("replicated_graph_count"));
  // num_ipus counts the devices of every replica (Paddle's rule).
  const int64_t devices = o.GetInt("num_ipus");
  const int64_t replicas = out.replicated_graphs ? out.replicas : 1;
  if (devices % replicas != 0)
    Fail(ErrorKind::kInvalidArgument,
         "num_ipus {} is not a multiple of replicated_graph_count {} (num_ipus counts the devices "
         "of every replica)",
         devices, replicas);
  const bool manual_shard = o.GetBool("enable_manual_shard");
  // More devices than replicas without manual sharding: an automatic split.
  out.auto_split = devices / replicas > 1 && !manual_shard;
  // need_avg_shard: the split replaces the program's ipu_index.
  out.auto_split_sharded = manual_shard && o.GetBool("need_avg_shard");
  out.stages_per_device = static_cast<int>(o.GetInt("stages_per_device"));
  out.auto_split_measured = o.GetStr("auto_split_cost") == "measured";
  if (manual_shard && devices / replicas < 2)
    Fail(ErrorKind::kInvalidArgument,
         "enable_manual_shard needs more than one device per replica: num_ipus {} with {} "
         "replica(s)",
         devices, replicas);
  out.devices_per_replica = static_cast<int>(devices / replicas);
  out.pipelining = o.GetBool("enable_pipelining");
  // Pipelined training without gradient accumulation: PopART's continuous
  // pipelining, each micro-batch its own update inside the pipeline.
  out.continuous_pipelining = out.pipelining && !out.gradient_accumulation && !o.EvalOnly();
  out.trace_path = o.GetStr("trace_path");
  out.recompute = o.GetInt("auto_recomputation") != 0;
  out.recompute_all = o.GetInt("auto_recomputation") >= 3;
  out.shard_optimizer_state = o.GetBool("location_optimizer.use_replicated_tensor_sharding");
  out.distribution = o.GetBool("enable_distribution");
  if (out.distribution) {
    out.global_replicas = static_cast<int>(o.GetInt("global_replication_factor"));
    out.global_replica_offset = static_cast<int>(o.GetInt("global_replica_offset"));
  }
  out.shard_min_elements =
      o.GetInt("location_optimizer.min_elements_for_replicated_tensor_sharding");
  out.device_profile = o.GetStr("device_profile");
  const std::string anchor = o.GetStr("anchor_return_type");
  out.anchor = anchor == "final"     ? SessionOptions::Anchor::kFinal
               : anchor == "every_n" ? SessionOptions::Anchor::kEveryN
               : anchor == "sum"     ? SessionOptions::Anchor::kSum
                                     : SessionOptions::Anchor::kAll;
  out.anchor_period = static_cast<int>(o.GetInt("anchor_return_period"));
  out.pipeline_schedule = o.GetStr("pipeline_schedule") == "fill_drain"
                              ? SessionOptions::Schedule::kFillDrain
                              : SessionOptions::Schedule::kOneFOneB;
  out.pipeline_in_flight = static_cast<int>(o.GetInt("pipeline_in_flight"));
  out.all_reduce_bucket_bytes = o.GetInt("all_reduce_bucket_bytes");
  out.processes_per_replica = static_cast<int>(o.GetInt("processes_per_replica"));
  out.overlap_all_reduce = o.GetBool("overlap_all_reduce");
  // The pipeline's depth (PopART's rule): each update's micro-batches, or
  // without accumulation the run's, must fill the stages.
  if (out.pipelining && !o.EvalOnly() && out.gradient_accumulation &&
      out.accumulation_factor < out.devices_per_replica)
    Fail(ErrorKind::kInvalidArgument,
         "accumulation_factor {} is less than the {} pipeline stages: every update needs at least "
         "one micro-batch per stage (set_pipelining_config(enable_gradient_accumulation=True, "
         "accumulation_factor=N) with N >= {})",
         out.accumulation_factor, out.devices_per_replica, out.devices_per_replica);
  if (out.continuous_pipelining && out.batches_per_step < out.devices_per_replica)
    Fail(ErrorKind::kInvalidArgument,
         "pipelined training without gradient accumulation runs each micro-batch as its own "
         "update inside the pipeline (PopART's continuous pipelining), so a run's micro-batches "
         "must fill it: batches_per_step {} is less than the {} pipeline stages (set "
         "batches_per_step >= {}, or enable_gradient_accumulation with accumulation_factor >= "
         "{})",
         out.batches_per_step, out.devices_per_replica, out.devices_per_replica,
         out.devices_per_replica);
  // num_threads 0 (the default: every hardware thread) still gives each
  // device a thread: a script written for more IPUs than this machine has
  // cores runs, its devices sharing the cores. A number below the devices
  // gives each one thread too (ReplicaCompileOptions says so once).
  if (o.GetInt("num_threads") == 0)
    out.num_threads =
        std::max(out.num_threads, static_cast<int>(replicas) * out.devices_per_replica);
  return out;
}

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
                      FromIpuOptions(options)) {
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
  Impl::State& st = impl_->FindState(name);
  impl_->GatherParts();
  const ir::TensorType declared = st.declared_type();
  if (FromApi(dtype) != st.declared)
    Fail(ErrorKind::kInvalidArgument, "state '{}' is {}, got {}", name, declared.ToString(),
         inference::DataTypeName(dtype));
  if (bytes != declared.bytes())
    Fail(ErrorKind::kInvalidArgument, "state '{}' ({}) needs {} bytes, got {}", name,
         declared.ToString(), declared.bytes(), bytes);
  Impl::Store(st, data);
  st.set = true;
  impl_->replicas_stale = true;
}

void TrainingSession::GetState(const std::string& name, void* data, size_t bytes) const {
  Impl::State& st = impl_->FindState(name);
  impl_->GatherParts();
  const ir::TensorType declared = st.declared_type();
  if (bytes != declared.bytes())
    Fail(ErrorKind::kInvalidArgument, "state '{}' ({}) has {} bytes, buffer has {}", name,
         declared.ToString(), declared.bytes(), bytes);
  Impl::Load(st, data);
}

void TrainingSession::SetLearningRate(double lr) {
  Impl& s = *impl_;
  s.GatherParts();
  std::vector<Impl::State*> targets;
  for (const std::string& name : s.info.state) {
    const paddle::StateVariable* v = s.Role(name);
    if (!v || v->role != paddle::StateRole::kLearningRate) continue;
    Impl::State& st = s.FindState(name);
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
  for (Impl::State* st : targets) {
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

void TrainingSession::SaveCheckpoint(const std::string& path_prefix) const {
  impl_->GatherParts();
  const Impl& s = *impl_;
  s.RequireStateSet("SaveCheckpoint()");
  std::vector<paddle::ArrayView> params, opts;
  std::list<AlignedBuffer> widened;  // float16-stored accumulators, as declared
  for (const std::string& name : s.info.state) {
    const paddle::StateVariable* v = s.Role(name);
    if (!v || v->file == paddle::SaveFile::kNone) continue;
    const Impl::State& st = s.states.at(name);
    const std::byte* bytes = reinterpret_cast<const std::byte*>(st.data.data());
    if (st.declared != st.type.dtype) {
      widened.emplace_back().Resize(st.declared_type().bytes());
      Impl::Load(st, widened.back().data());
      bytes = reinterpret_cast<const std::byte*>(widened.back().data());
    }
    paddle::ArrayView view{
        name, paddle::NumpyNameOf(st.declared), st.type.shape, {bytes, st.declared_type().bytes()}};
    (v->file == paddle::SaveFile::kPdparams ? params : opts).push_back(view);
  }
  // Across processes every process holds the same state (gathered above):
  // rank 0 alone writes.
  s.OnRankZero(fmt::format("checkpoint '{}'", path_prefix), [&] {
    std::filesystem::path dir = std::filesystem::path(path_prefix).parent_path();
    if (!dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec)
        Fail(ErrorKind::kNotFound, "checkpoint '{}': cannot create directory '{}': {}", path_prefix,
             dir.string(), ec.message());
    }
    s.SaveCheckpointFiles(path_prefix, params, opts);
  });
}

namespace {

// <prefix>.tiller.json: what Paddle's pickles do not hold (the step count,
// which draws dropout masks and tells where the data was; loss scaling's
// state) and each tensor's hash, so a torn or bit-flipped checkpoint is
// refused naming the tensor. Paddle's own checkpoints have none.
std::string ManifestPath(const std::string& prefix) {
  return prefix + ".tiller.json";
}

// Whether `path` exists; an error looking (a directory the process may not
// read) counts as absent, and the read or write that follows names it.
bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// Names of a checkpoint's files: the main set (what Paddle reads: .pdparams,
// .pdopt; and Tiller's manifest), the previous complete set, and the mark
// of a save under way.
constexpr std::array<const char*, 3> kCheckpointSuffixes = {".pdparams", ".pdopt", ".tiller.json"};
std::string PreviousPrefix(const std::string& prefix) {
  return prefix + ".prev";
}
std::string SavingMark(const std::string& prefix) {
  return prefix + ".tiller.saving";
}

// TILLER_CHECKPOINT_CRASH_AT=<point>: the process kills itself (SIGKILL) at
// that point of a save (written, kept, marked, params, opt, manifest,
// done), for the tests that show no point loses the checkpoint; unset in
// normal runs. Read at every point: a test sets it before the save to kill.
void CrashPoint(const char* point) {
  const char* at = std::getenv("TILLER_CHECKPOINT_CRASH_AT");
  if (at && std::strcmp(at, point) == 0) std::raise(SIGKILL);
}

// The temporary files of saves killed part way (AtomicFile's
// "<file>.tmp-<pid>-<n>", a link's "<file>.tmp-link-<pid>"): once a save
// completed, nothing reads them.
void RemoveStaleTemporaries(const std::string& prefix) {
  const std::filesystem::path base(prefix);
  std::error_code ec;
  const std::filesystem::path dir = base.has_parent_path() ? base.parent_path() : ".";
  std::vector<std::string> stems;
  for (const std::string& p : {prefix, PreviousPrefix(prefix)}) {
    for (const char* suffix : kCheckpointSuffixes)
      stems.push_back(std::filesystem::path(p + suffix).filename().string() + ".tmp-");
  }
  stems.push_back(std::filesystem::path(SavingMark(prefix)).filename().string() + ".tmp-");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& stem : stems) {
      if (name.rfind(stem, 0) == 0) std::filesystem::remove(entry.path(), ec);
    }
  }
}

}  // namespace

// A save never leaves the checkpoint unloadable (issue 14): the new files
// are written whole under temporary names first; then, unless the main set
// is not complete (a save interrupted before), the main files become the
// previous set (hard links, each renamed into place); the mark says a save
// is under way; the new files are renamed over the main ones, the manifest
// last; the mark goes. A load that finds the mark checks the main set and
// falls back on the previous one. Killed at any point, either the main set
// is complete or the previous set is, and the mark tells which to check.
void TrainingSession::Impl::SaveCheckpointFiles(const std::string& prefix,
                                                const std::vector<paddle::ArrayView>& params,
                                                const std::vector<paddle::ArrayView>& opts) const {
  const Impl& s = *this;
  AtomicFile params_file(prefix + ".pdparams", "checkpoint");
  AtomicFile opts_file(prefix + ".pdopt", "checkpoint");
  AtomicFile manifest_file(ManifestPath(prefix), "checkpoint manifest");
  paddle::WriteArrayPickle(params_file, params);
  paddle::WriteArrayPickle(opts_file, opts);
  const std::string text = s.ManifestText(params, opts);
  manifest_file.Write(text.data(), text.size());
  CrashPoint("written");
  const std::string mark = SavingMark(prefix);
  bool main_complete = !Exists(mark);
  if (!main_complete) {
    // The last save stopped part way: its files are kept as the previous
    // set only if they are whole (it stopped after its manifest).
    try {
      s.ReadSavedCheckpoint(prefix);
      main_complete = true;
    } catch (const Error&) {
    }
  }
  if (main_complete && Exists(prefix + ".pdparams")) {
    const std::string previous = PreviousPrefix(prefix);
    for (const char* suffix : kCheckpointSuffixes) {
      if (Exists(prefix + suffix))
        ReplaceWithLink(prefix + suffix, previous + suffix, "checkpoint");
      else
        RemoveFile(previous + suffix, "checkpoint");
    }
    SyncDirectory(previous, "checkpoint");
    CrashPoint("kept");
  }
  AtomicFile mark_file(mark, "checkpoint mark");
  mark_file.Commit();
  CrashPoint("marked");
  params_file.Commit();
  CrashPoint("params");
  opts_file.Commit();
  CrashPoint("opt");
  manifest_file.Commit();
  CrashPoint("manifest");
  RemoveFile(mark, "checkpoint mark");
  SyncDirectory(mark, "checkpoint mark");
  CrashPoint("done");
  RemoveStaleTemporaries(prefix);
}

std::string TrainingSession::Impl::ManifestText(const std::vector<paddle::ArrayView>& params,
                                                const std::vector<paddle::ArrayView>& opts) const {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& [file, views] : {std::pair{".pdparams", &params}, {".pdopt", &opts}}) {
    for (const paddle::ArrayView& v : *views)
      tensors.push_back({{"name", v.name},
                         {"file", file},
                         {"dtype", v.dtype},
                         {"shape", std::vector<int64_t>(v.shape.begin(), v.shape.end())},
                         {"hash", ContentHashHex(v.data)}});
  }
  const Replica& r = replicas[0];
  const nlohmann::json manifest = {
      {"format", "tiller-checkpoint 1"},
      {"step", steps},
      // The global micro-batches the steps consumed: where the data is.
      {"micro_batches", steps * options.accumulation_factor * GroupSize()},
      {"replicas", GroupSize()},
      {"accumulation_factor", options.accumulation_factor},
      {"random_seed", options.random_seed},
      {"loss_scaling",
       {{"scale", r.loss_scale},
        {"good_updates", r.good_updates},
        {"bad_updates", r.bad_updates},
        {"skipped", r.skipped}}},
      {"tensors", tensors}};
  return manifest.dump(1);
}

void TrainingSession::LoadCheckpoint(const std::string& path_prefix) {
  Impl& s = *impl_;
  s.GatherParts();  // a refused checkpoint leaves the state as it was
  // Across processes rank 0 reads it (the files need only be on its disk)
  // and every process takes rank 0's state.
  s.OnRankZero(fmt::format("checkpoint '{}'", path_prefix), [&] {
    if (!Exists(SavingMark(path_prefix))) return s.ApplyCheckpoint(s.ReadCheckpoint(path_prefix));
    // A save was interrupted: the main files are whole only if it stopped
    // after its manifest; else the previous checkpoint is.
    std::optional<Impl::CheckpointFiles> files;
    try {
      files = s.ReadSavedCheckpoint(path_prefix);
    } catch (const Error& e) {
      const std::string previous = PreviousPrefix(path_prefix);
      if (!Exists(previous + ".pdparams")) throw;
      files = s.ReadCheckpoint(previous);
      std::fprintf(stderr,
                   "tiller: checkpoint '%s': the last save to it was interrupted (%s); loaded "
                   "the checkpoint before it ('%s.*')\n",
                   path_prefix.c_str(), e.what(), previous.c_str());
    }
    s.ApplyCheckpoint(*files);
  });
  if (s.process_group) {
    s.BroadcastStates(/*loaded=*/true);
    // The manifest's counters, as rank 0 read them.
    s.process_group->Broadcast(0, &s.steps, sizeof s.steps);
    for (Impl::Replica& r : s.replicas) {
      s.process_group->Broadcast(0, &r.loss_scale, sizeof r.loss_scale);
      s.process_group->Broadcast(0, &r.good_updates, sizeof r.good_updates);
      s.process_group->Broadcast(0, &r.bad_updates, sizeof r.bad_updates);
      s.process_group->Broadcast(0, &r.skipped, sizeof r.skipped);
    }
  }
  s.replicas_stale = true;
}

TrainingSession::Impl::CheckpointFiles TrainingSession::Impl::ReadCheckpoint(
    const std::string& path_prefix) const {
  const Impl& s = *this;
  // Both files into one dict (a variable in both: .pdopt's value), so a
  // checkpoint of either program form loads into the other (the learning
  // rate is in .pdparams for PIR, in .pdopt for legacy programs).
  std::map<std::string, paddle::PickledArray> values;
  std::string absent;
  for (const auto& [suffix, required] : {std::pair{".pdparams", true}, {".pdopt", false}}) {
    const std::string path = path_prefix + suffix;
    if (!Exists(path)) {
      if (required) Fail(ErrorKind::kNotFound, "checkpoint file '{}' not found", path);
      absent = path;
      continue;
    }
    std::vector<paddle::PickledArray> arrays;
    try {
      arrays = paddle::ReadArrayPickle(path);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kDataLoss)
        Fail(ErrorKind::kDataLoss, "checkpoint file '{}' is corrupt: {}", path, e.what());
      if (e.kind() == ErrorKind::kUnimplemented)
        Fail(ErrorKind::kUnimplemented, "checkpoint file '{}' does not hold a dict of arrays: {}",
             path, e.what());
      throw;
    }
    for (paddle::PickledArray& a : arrays) {
      std::string name = a.name;
      values.insert_or_assign(std::move(name), std::move(a));
    }
  }
  std::vector<std::string> missing;
  for (const std::string& name : s.info.state) {
    if (!values.count(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
    Fail(ErrorKind::kNotFound, "checkpoint '{}' lacks {} variable(s) of the program: {}{}{}",
         path_prefix, missing.size(), list, missing.size() > 8 ? " ..." : "",
         absent.empty() ? "" : fmt::format(" ('{}' not found)", absent));
  }
  // Check everything before setting anything: a refused checkpoint leaves
  // the state as it was.
  for (const std::string& name : s.info.state) {
    const paddle::PickledArray& a = values.at(name);
    const Impl::State& st = s.states.at(name);
    if (NumElements(a.shape) != NumElements(st.type.shape))
      Fail(ErrorKind::kInvalidArgument,
           "checkpoint '{}': '{}' has shape {}, the program declares {}", path_prefix, name,
           ShapeToString(a.shape), ShapeToString(st.type.shape));
    const char* declared = paddle::NumpyNameOf(st.declared);
    if (a.dtype != declared)
      Fail(ErrorKind::kInvalidArgument, "checkpoint '{}': '{}' is {}, the program declares {}",
           path_prefix, name, a.dtype, declared);
    TILLER_CHECK(a.data->size() == st.declared_type().bytes(), "'{}': {} bytes for {}", name,
                 a.data->size(), st.type.ToString());
  }
  // Tiller's manifest, when the checkpoint has one: every tensor as saved.
  std::optional<nlohmann::json> manifest;
  const std::string manifest_path = ManifestPath(path_prefix);
  if (Exists(manifest_path)) {
    std::ifstream in(manifest_path);
    try {
      manifest = nlohmann::json::parse(in);
      for (const nlohmann::json& t : manifest->at("tensors")) {
        const std::string name = t.at("name").get<std::string>();
        auto it = values.find(name);
        if (it == values.end())
          Fail(ErrorKind::kDataLoss,
               "checkpoint '{}': tensor '{}' of its manifest is in neither file (a torn or mixed "
               "checkpoint)",
               path_prefix, name);
        const paddle::PickledArray& a = it->second;
        const std::string hash =
            ContentHashHex({reinterpret_cast<const std::byte*>(a.data->data()), a.data->size()});
        // The bytes and their dtype (a reshaped copy of the same array
        // loads, as Paddle's checkpoints do).
        if (a.dtype != t.at("dtype").get<std::string>() || hash != t.at("hash").get<std::string>())
          Fail(ErrorKind::kDataLoss,
               "checkpoint '{}': tensor '{}' does not match the manifest ({} hash {}, recorded "
               "{} hash {}): the file is corrupt, torn or from another save",
               path_prefix, name, a.dtype, hash, t.at("dtype").get<std::string>(),
               t.at("hash").get<std::string>());
      }
      manifest->at("step").get<int64_t>();
    } catch (const nlohmann::json::exception& e) {
      Fail(ErrorKind::kDataLoss, "checkpoint manifest '{}' is corrupt: {}", manifest_path,
           e.what());
    }
  }
  return {std::move(values), std::move(manifest)};
}

TrainingSession::Impl::CheckpointFiles TrainingSession::Impl::ReadSavedCheckpoint(
    const std::string& path_prefix) const {
  CheckpointFiles files = ReadCheckpoint(path_prefix);
  // A save writes its manifest last: a set without one is torn.
  if (!files.manifest)
    Fail(ErrorKind::kDataLoss,
         "checkpoint '{}': a save to it stopped before writing its manifest; its files are not "
         "a complete checkpoint",
         path_prefix);
  return files;
}

void TrainingSession::Impl::ApplyCheckpoint(const CheckpointFiles& files) {
  Impl& s = *this;
  const std::optional<nlohmann::json>& manifest = files.manifest;
  for (const std::string& name : s.info.state) {
    const paddle::PickledArray& a = files.values.at(name);
    Impl::State& st = s.states.at(name);
    Impl::Store(st, a.data->data());
    st.set = true;
  }
  if (manifest) {
    // The run goes on where it was: dropout masks, loss scaling.
    s.steps = manifest->at("step").get<int64_t>();
    const nlohmann::json& ls = manifest->at("loss_scaling");
    for (Replica& r : s.replicas) {
      r.loss_scale = ls.at("scale").get<double>();
      r.good_updates = ls.at("good_updates").get<int>();
      r.bad_updates = ls.at("bad_updates").get<int>();
      r.skipped = ls.at("skipped").get<int64_t>();
    }
  }
  s.replicas_stale = true;
}

void TrainingSession::SetFeed(const std::string& name, const void* data, DataType dtype,
                              const std::vector<int64_t>& shape) {
  FeedSet& feeds = *impl_->feeds;
  feeds.Set(feeds.Index(name), FromApi(dtype), shape, data);
}

void TrainingSession::Run() {
  Run(impl_->default_eval);
}

void TrainingSession::Impl::PrepareMicroBatch(compile::Executable& exe, int k) {
  if (trace) exe.SetTraceTag(fmt::format("run {} micro-batch {}", runs, k));
  // Random ops draw by the micro-batch's place in the job's global batch, so
  // a job of several processes draws what one process would.
  const int64_t global_k = options.distribution
                               ? k / options.replicas * options.global_replicas +
                                     options.global_replica_offset + k % options.replicas
                               : k;
  const int64_t step_index =
      steps * options.accumulation_factor * GroupSize() + static_cast<int64_t>(global_k);
  if (options.synthetic_data_mode == SessionOptions::SyntheticData::kOff)
    runtime::CopyMicroBatchIn(*feeds, k, MicroBatchesPerRun(), exe);
  else
    FillSynthetic(exe, step_index);
  for (size_t i = feeds->size(); i < exe.inputs().size(); ++i) {
    compile::TensorSlot& slot = exe.inputs()[i];
    TILLER_CHECK(slot.name == paddle::TranslateContext::kStepInput, "unexpected graph input '{}'",
                 slot.name);
    std::memcpy(slot.data, &step_index, sizeof(step_index));
  }
}

void TrainingSession::Impl::FillSynthetic(compile::Executable& exe, int64_t step_index) const {
  using Mode = SessionOptions::SyntheticData;
  for (size_t i = 0; i < feeds->size(); ++i) {
    compile::TensorSlot& slot = exe.inputs()[i];
    const size_t bytes = slot.type.bytes();
    if (!bytes) continue;
    const bool draw = options.synthetic_data_mode == Mode::kRandomNormal &&
                      (slot.type.dtype == DType::kF32 || slot.type.dtype == DType::kF64);
    if (!draw) {
      std::memset(slot.data, 0, bytes);
      continue;
    }
    // A stream per (seed, micro-batch, feed): runs repeat, and micro-batches
    // differ.
    std::mt19937_64 rng(options.random_seed ^ (static_cast<uint64_t>(step_index) << 16) ^ i);
    std::normal_distribution<double> normal(0.0, 1.0);
    const size_t n = static_cast<size_t>(NumElements(slot.type.shape));
    if (slot.type.dtype == DType::kF32) {
      float* p = static_cast<float*>(slot.data);
      for (size_t e = 0; e < n; ++e) p[e] = static_cast<float>(normal(rng));
    } else {
      double* p = static_cast<double*>(slot.data);
      for (size_t e = 0; e < n; ++e) p[e] = normal(rng);
    }
  }
}

std::string TrainingSession::Impl::NonFiniteFeed(int k) const {
  const int n = MicroBatchesPerRun();
  for (size_t i = 0; i < feeds->size(); ++i) {
    const DType t = feeds->decl(i).dtype;
    if (t != DType::kF32 && t != DType::kF64) continue;
    const AlignedBuffer& data = feeds->data(i);
    const size_t size = DTypeSize(t), count = data.size() / size / static_cast<size_t>(n);
    const std::byte* at = data.data() + static_cast<size_t>(k) * count * size;
    for (size_t e = 0; e < count; ++e) {
      const double v = t == DType::kF32 ? double{reinterpret_cast<const float*>(at)[e]}
                                        : reinterpret_cast<const double*>(at)[e];
      if (!std::isfinite(v))
        return fmt::format("; feed '{}' holds {} at element {}{}", feeds->decl(i).name, v, e,
                           n > 1 ? fmt::format(" of micro-batch {}", k + 1) : std::string());
    }
  }
  return "";
}

void TrainingSession::Impl::FetchMicroBatch(const compile::Executable& exe, int k) {
  runtime::CopyMicroBatchOut(exe, k, fetched);
}

namespace {

template <typename T>
void AddInto(std::byte* sum, const std::byte* value, size_t bytes) {
  T* s = reinterpret_cast<T*>(sum);
  const T* v = reinterpret_cast<const T*>(value);
  for (size_t e = 0; e < bytes / sizeof(T); ++e) s[e] += v[e];
}

}  // namespace

void TrainingSession::Impl::ApplyAnchors(const compile::Executable& exe) {
  using Anchor = SessionOptions::Anchor;
  if (options.anchor == Anchor::kAll) return;
  const int batches = options.batches_per_step, accumulate = options.accumulation_factor,
            n_replicas = options.replicas;
  // Micro-batch (b, g, r) sits at ((b * G) + g) * R + r.
  auto index = [&](int b, int g, int r) { return (b * accumulate + g) * n_replicas + r; };
  for (size_t i = 0; i < fetched.size(); ++i) {
    const ir::TensorType& micro = exe.outputs()[i].type;
    const size_t bytes = micro.bytes();
    const std::byte* all = fetched[i].data();
    AlignedBuffer out;
    Shape shape = micro.shape;
    if (options.anchor == Anchor::kEveryN) {
      const int n = options.anchor_period, kept = batches / n;
      out.Resize(bytes * kept * accumulate * n_replicas);
      std::byte* dst = out.data();
      for (int b = n - 1; b < batches; b += n) {
        const size_t run = bytes * accumulate * n_replicas;
        std::memcpy(dst, all + bytes * index(b, 0, 0), run);
        dst += run;
      }
      if (options.batches_per_step > 1) shape.insert(shape.begin(), kept);
      if (options.gradient_accumulation) shape.insert(shape.begin(), accumulate);
    } else {
      out.Resize(bytes * n_replicas);
      for (int r = 0; r < n_replicas; ++r) {
        std::byte* dst = out.data() + bytes * r;
        if (options.anchor == Anchor::kFinal) {
          std::memcpy(dst, all + bytes * index(batches - 1, accumulate - 1, r), bytes);
          continue;
        }
        for (int b = 0; b < batches; ++b) {
          for (int g = 0; g < accumulate; ++g) {
            const std::byte* v = all + bytes * index(b, g, r);
            switch (micro.dtype) {
              case DType::kF32:
                AddInto<float>(dst, v, bytes);
                break;
              case DType::kF64:
                AddInto<double>(dst, v, bytes);
                break;
              case DType::kI32:
                AddInto<int32_t>(dst, v, bytes);
                break;
              case DType::kI64:
                AddInto<int64_t>(dst, v, bytes);
                break;
              default:
                Fail(ErrorKind::kInvalidArgument,
                     "anchor_return_type 'sum' of fetch '{}' ({}): only numeric fetches sum",
                     fetch_names[i], micro.ToString());
            }
          }
        }
      }
    }
    if (options.replicated_graphs) shape.insert(shape.begin(), n_replicas);
    fetched[i] = std::move(out);
    fetch_types[i] = {micro.dtype, shape};
  }
}

void TrainingSession::Impl::RunReplicaPipelined(int replica, bool eval,
                                                const std::vector<Shape>& shapes,
                                                int* updates_done) {
  compile::PipelineRunner& runner = Runner(replica, eval, shapes);
  const int n_replicas = options.replicas;
  const int window = PipelineWindow(eval);
  const bool continuous = Continuous(eval);
  const int windows = eval || continuous ? 1 : options.batches_per_step;
  const bool dynamic = runtime::SteersLossScale(options) && !eval;
  for (int w = 0; w < windows; ++w) {
    if (dynamic) {
      // Every copy has its own seed and unscale states.
      for (int c = 0; c < static_cast<int>(runner.copies()); ++c)
        Compile(replica, eval, shapes, c).SetLossScale(replicas[replica].loss_scale);
    }
    // Micro-batch i of window w is micro-batch w * window + i of the run's
    // (batch, accumulation) order; the feeds interleave the replicas.
    auto feed_index = [&](int i) { return FeedIndex(w * window + i, replica); };
    auto prepare = [&](int i, compile::Executable& exe) { PrepareMicroBatch(exe, feed_index(i)); };
    auto finish = [&](int i, compile::Executable& exe) {
      FetchMicroBatch(exe, feed_index(i));
      // Continuous: the micro-batch's update ran with its last segments.
      if (continuous) ++*updates_done;
    };
    try {
      compile::PipelineStats stats = runner.Run(window, prepare, finish);
      if (replica == 0) pipeline_stats = stats;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNonFinite) throw;
      Fail(ErrorKind::kNonFinite, "{}: {} step {} (pipelined){}: {}", program.path,
           eval ? "eval" : "training", steps + w + 1,
           n_replicas > 1 ? fmt::format(" on replica {}", replica) : std::string(), e.what());
    }
    if (eval) continue;
    compile::CompiledStep& first = Compile(replica, eval, shapes, 0);
    if (continuous) {
      // Each micro-batch was an update (no accumulators, no loss scale to
      // steer: refused with continuous pipelining).
      for (int u = 0; u < window; ++u) EndWindow(replica, first, false);
      continue;
    }
    // Dynamic / automatic loss scaling: the update's stages run on their
    // own devices, so one stage's check cannot stop another's update; the
    // window's accumulated gradients are checked here first, and every
    // replica takes the same decision.
    const bool overflow = dynamic && !AllReplicasFinite(replica, first);
    // The update, once per window, on the copy that ran its last micro-batch.
    if (!overflow)
      Compile(replica, eval, shapes, static_cast<int>((window - 1) % runner.copies()))
          .exe->Run(compile::Executable::RunPart::kUpdateOnly);
    EndWindow(replica, first, overflow);
    *updates_done = w + 1;
  }
}

void TrainingSession::Impl::RunReplica(int replica, bool eval, compile::CompiledStep& compiled,
                                       int* updates_done) {
  const int accumulate = options.accumulation_factor, batches = options.batches_per_step;
  const int n_replicas = options.replicas;
  const int micro_batches = MicroBatchesPerRun();
  compile::Executable& exe = *compiled.exe;
  Replica& rep = replicas[replica];
  const bool dynamic = runtime::SteersLossScale(options) && !eval;
  for (int b = 0; b < batches; ++b) {
    if (dynamic) compiled.SetLossScale(rep.loss_scale);
    bool overflow = false;
    for (int g = 0; g < accumulate; ++g) {
      // The micro-batch, in feed order: batch, then accumulation, then replica.
      const int k = FeedIndex(b * accumulate + g, replica);
      PrepareMicroBatch(exe, k);
      // An update applies after the last micro-batch of its window.
      const auto part = eval || g == accumulate - 1 ? compile::Executable::RunPart::kAll
                                                    : compile::Executable::RunPart::kBeforeUpdate;
      const int64_t step = steps + b + 1;
      try {
        exe.Run(part);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kNonFinite) throw;
        if (dynamic && !options.check_nan_inf) {
          // A gradient the update reads is not finite: the run stopped
          // before the update. The window's update is skipped.
          overflow = true;
          FetchMicroBatch(exe, k);
          continue;
        }
        std::string where = e.what();
        if (!options.check_nan_inf && rerun_safe.at(&exe) && n_replicas == 1) {
          // Only the loss and the gradients were checked and nothing was
          // updated: run the micro-batch again checking every op, to name
          // the first one that went non-finite.
          compiled.ResetAccumulators();
          exe.EnableNanInfCheck(true);
          // The first run's ops may have written over the inputs' storage
          // (the memory plan reuses it after their last reader): feed them
          // again, or the re-run reads stale values (labels out of range).
          PrepareMicroBatch(exe, k);
          try {
            exe.Run(part);
          } catch (const Error& detail) {
            if (detail.kind() != ErrorKind::kNonFinite) throw;
            where = fmt::format("{}; the first op that went non-finite: {}", where, detail.what());
          }
          exe.EnableNanInfCheck(false);
        }
        // A non-finite feed is the usual cause: say which.
        if (options.synthetic_data_mode == SessionOptions::SyntheticData::kOff)
          where += NonFiniteFeed(k);
        std::string at;
        if (micro_batches > 1) at = fmt::format(" (micro-batch {} of {})", k + 1, micro_batches);
        if (n_replicas > 1) at += fmt::format(" on replica {}", replica);
        Fail(ErrorKind::kNonFinite, "{}: {} step {}{}: {}", program.path,
             eval ? "eval" : "training", step, at, where);
      }
      FetchMicroBatch(exe, k);
    }
    if (!eval) {
      EndWindow(replica, compiled, overflow);
      *updates_done = b + 1;
    }
  }
}

void TrainingSession::Run(bool eval) {
  Impl& s = *impl_;
  s.RequireStateSet("Run()");
  ++s.runs;
  // The trace file is rewritten after every run, failed ones included.
  compile::TraceFileGuard write_trace(s.trace.get(), s.options.trace_path);
  const int n_replicas = s.options.replicas;
  const std::vector<Shape> shapes = s.MicroBatchShapes();
  std::vector<compile::CompiledStep*> compiled;
  for (int r = 0; r < n_replicas; ++r) {
    compiled.push_back(&s.Compile(r, eval, shapes));
    // Every compilation happens here, before the replicas' threads start:
    // compiling touches the session's shared bookkeeping.
    if (s.options.pipelining) s.Runner(r, eval, shapes);
  }
  s.last_copies = {compiled[0]};
  if (s.options.pipelining) {
    for (int c = 1; c < static_cast<int>(s.Runner(0, eval, shapes).copies()); ++c)
      s.last_copies.push_back(&s.Compile(0, eval, shapes, c));
  }
  s.CheckFits(*compiled[0], eval);
  s.SyncReplicas();
  const compile::Executable& exe = *compiled[0]->exe;
  const size_t n_fetch = s.fetch_names.size();
  const size_t micro_batches = static_cast<size_t>(s.MicroBatchesPerRun());
  s.last = nullptr;
  s.fetch_types.resize(n_fetch);
  s.fetched.resize(n_fetch);
  for (size_t i = 0; i < n_fetch; ++i) {
    const compile::TensorSlot& slot = exe.outputs()[i];
    s.fetch_types[i] = {slot.type.dtype, s.FetchShape(slot.type.shape)};
    if (s.fetched[i].size() != slot.type.bytes() * micro_batches)
      s.fetched[i].Resize(slot.type.bytes() * micro_batches);
  }
  std::vector<int> updates(n_replicas, 0);
  auto run_replica = [&](int r) {
    if (s.options.pipelining)
      s.RunReplicaPipelined(r, eval, shapes, &updates[r]);
    else
      s.RunReplica(r, eval, *compiled[r], &updates[r]);
  };
  // The replicas run concurrently, each driving its own devices; they meet
  // in the gradients' all_reduce. A replica that fails aborts the groups,
  // so the others stop instead of waiting for it.
  runtime::ReplicaFailure failure = runtime::RunReplicas(n_replicas, run_replica, [&](int r) {
    for (auto& group : s.groups) group->Abort(fmt::format("replica {} failed", r));
  });
  if (failure.error) {
    for (compile::CompiledStep* c : compiled) c->ResetAccumulators();
    for (auto& group : s.groups) group->Reset();
    // Replica 0's state (with every replica's part of the sharded states)
    // is the session's; the others copy it again.
    s.parts_newer = !s.sharded.empty();
    s.stage_states_newer = !s.state_owner.empty();
    s.GatherParts();
    s.replicas_stale = true;
    if (!eval) s.steps += *std::min_element(updates.begin(), updates.end());
    std::rethrow_exception(failure.error);
  }
  if (!eval) s.steps += s.options.batches_per_step;
  if (!eval && !s.sharded.empty()) s.parts_newer = true;
  if (!eval && !s.state_owner.empty()) s.stage_states_newer = true;
  s.ApplyAnchors(exe);
  s.last = compiled[0];
  s.last_eval = eval;
}

int64_t TrainingSession::StepCount() const {
  return impl_->steps;
}

double TrainingSession::LossScale() const {
  // Starts at SessionOptions::loss_scaling; only a steered scale moves.
  return impl_->replicas[0].loss_scale;
}

int64_t TrainingSession::SkippedUpdates() const {
  return impl_->replicas[0].skipped;
}

TrainingSession::GradientStatistics TrainingSession::LastGradientStatistics() const {
  const auto& c = impl_->replicas[0].last_counts;
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
  s.pipeline_max_in_flight = impl_->pipeline_stats.max_in_flight;
  s.pipeline_bubble_fraction = impl_->pipeline_stats.BubbleFraction();
  s.pipeline_device_busy_ms = impl_->pipeline_stats.busy_ms;
  for (size_t r = 0; r < impl_->replicas.size(); ++r) {
    size_t bytes = 0;
    for (const auto& [name, st] : impl_->states) {
      const paddle::StateVariable* v = impl_->Role(name);
      if (!v || v->role != paddle::StateRole::kOptimizerState) continue;
      auto part = impl_->replicas[r].parts.find(name);
      bytes += part != impl_->replicas[r].parts.end() ? part->second.size() : st.type.bytes();
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

}  // namespace tiller::training

namespace tiller::training {

void TrainingSession::EnableProfiling(bool on) {
  impl_->profiling = on;
  for (Impl::Replica& r : impl_->replicas)
    r.cache.ForEach([on](compile::CompiledStep& step) { step.exe->EnableProfiling(on); });
}

std::vector<std::tuple<std::string, double, int64_t>> TrainingSession::GetProfile(
    bool by_shape) const {
  std::vector<std::tuple<std::string, double, int64_t>> out;
  if (!impl_->last) return out;
  for (const auto& e : impl_->last->exe->Profile(by_shape))
    out.emplace_back(e.op_type, e.total_ms, e.calls);
  return out;
}

}  // namespace tiller::training
