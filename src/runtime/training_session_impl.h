// TrainingSession's insides, shared by the files that implement it: the
// program is analysed once; each set of feed shapes (and eval/train)
// compiles its own step, and all of them bind the same state buffers, which
// the session owns. By responsibility:
//   training_session.cc        construction, the state, fetches, summary
//   training_options_check.cc  the options' checks (training_options_check.h)
//   training_ipu_options.cc    SessionOptions from IpuOptions
//   training_replicas.cc       the replicas, their collectives and copies of
//                              the state, the processes of a job
//   training_step_compile.cc   compiling a replica's steps and pipelines
//   training_step_runner.cc    Run(): micro-batches through the steps
//   training_feeds_fetches.cc  synthetic feeds, non-finite feeds, anchors
//   training_loss_scale.cc     the loss scale's rules
//   training_checkpoint.cc     checkpoints
//   training_state.cc          the state tensors and their stored types
// Not a public interface.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/collective.h"
#include "compile/driver.h"
#include "compile/pipeline.h"
#include "compile/plan.h"
#include "compile/trace.h"
#include "core/aligned_buffer.h"
#include "frontend/paddle/program.h"
#include "frontend/paddle/state_roles.h"
#include "frontend/paddle/training.h"
#include "runtime/feeds.h"
#include "runtime/step_cache.h"
#include "runtime/training_loss_scale.h"
#include "runtime/training_state.h"
#include "tiller/training.h"

namespace tiller::runtime {
struct CheckpointFiles;
}

namespace tiller::training {

struct TrainingSession::Impl {
  paddle::Program program;
  paddle::TrainingProgramInfo info;
  SessionOptions options;
  bool default_eval = false;  // what Run() without arguments does
  // Role and checkpoint file of every persistable variable, by name.
  std::map<std::string, paddle::StateVariable> roles;
  std::vector<std::string> feed_names, fetch_names;

  runtime::StateMap states;
  std::map<std::string, ir::TensorType> state_types;
  std::unique_ptr<runtime::FeedSet> feeds;
  // Data-parallel replicas (SessionOptions::replicas): each has its own
  // device, compiled steps and copy of the state (replica 0's is `states`),
  // and they sum their gradients through `group`. One replica without
  // replication.
  struct Replica {
    std::unique_ptr<compile::Compiler> compiler;
    // One compiled step per (eval, feed shapes); variant 1: eval.
    runtime::StepCache cache;
    compile::StateStorage storage;
    std::map<std::string, AlignedBuffer> own_state;  // replicas after the first
    // Pipelining: per (eval, feed shapes), the runner over the step's copies.
    std::map<runtime::StepCache::Key, std::unique_ptr<compile::PipelineRunner>> runners;
    // Sharded states (shard_optimizer_state, shard_embedding_rows): the
    // bytes of the replica's part of each, which its steps keep in place in
    // the whole state in `states` (PartStorage). With several processes the
    // other processes' parts are in `states` only after GatherParts.
    std::map<std::string, size_t> parts;
    // Dynamic / automatic loss scaling and gradient statistics.
    runtime::LossScaling loss_scaling;
  };
  // Sharded states: each replica's elements of the flattened value, and
  // the elements per unit of the split (a table's width where it is split
  // by rows; passes::ShardedState::unit).
  struct Sharding {
    std::vector<PartRange> parts;
    int64_t unit = 1;
  };
  std::map<std::string, Sharding> sharded;
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
  std::vector<compile::CompiledStep*> last_by_replica;  // the last Run()'s, by replica
  bool last_eval = false;
  // The last Run()'s fetches, one value per micro-batch (FetchInfo's shapes).
  std::vector<ir::TensorType> fetch_types;
  std::vector<AlignedBuffer> fetched;
  int64_t steps = 0;
  // Per compiled step: whether the diagnostic re-run after a failed check is
  // safe (no state is written in place before the last checked value).
  std::map<const compile::Executable*, bool> rerun_safe;
  compile::PipelineStats pipeline_stats;  // replica 0's last window
  // Replica 0's executables of the last run (a pipeline's copies).
  std::vector<const compile::CompiledStep*> last_copies;
  // SessionOptions::device_profile, resolved once; the executables checked.
  std::optional<compile::DeviceProfile> profile;
  std::set<const compile::Executable*> fit_checked;
  int64_t runs = 0;  // Run() calls, for trace names

  // --- The state (training_session.cc).
  runtime::StateTensor& FindState(const std::string& name);
  // Fails naming the states nothing has set yet (before `what`).
  void RequireStateSet(const char* what) const;
  const paddle::StateVariable* Role(const std::string& name) const {
    auto it = roles.find(name);
    return it == roles.end() ? nullptr : &it->second;
  }

  // --- Replicas and processes (training_replicas.cc).
  // Per device of a replica, the group summing its gradients (with several
  // replicas), made into `groups`; a device of another process gets a
  // placeholder (its steps are that process's). Empty: none.
  std::vector<backend::Collective*> MakeGroups();
  // Distribution: every process takes rank 0's state (states: a sorted map,
  // so every process broadcasts them in the same order). `loaded`: rank 0
  // set every state from a checkpoint, so every process's state is set.
  void BroadcastStates(bool loaded = false);
  // Distribution: runs `work` on rank 0 only and lets every process know
  // whether it succeeded (rank 0 rethrows its error, the others say that
  // rank 0 failed). Without distribution: runs it.
  void OnRankZero(const std::string& what, const std::function<void()>& work) const;
  // Copies replica 0's state into the others' when it changed outside a step
  // (the parts of sharded states are the whole state's bytes already).
  void SyncReplicas();
  // Makes `states` whole again after training updated the replicas' parts
  // (with several processes: the other processes' parts): before any read
  // of the state, and before any write (which marks the replicas stale, so
  // SyncReplicas hands every state out again).
  void GatherParts();
  // Storage of replica `replica`'s part of a state its step shards: its
  // range of the whole state's own bytes (parts are disjoint), recorded the
  // first time.
  void* PartStorage(int replica, const passes::ShardedState& s);

  // --- Compiling (training_step_compile.cc).
  compile::CompiledStep& Compile(int replica, bool eval, const std::vector<Shape>& shapes,
                                 int copy = 0);
  compile::CompiledStep CompileStep(int replica, bool eval, const std::vector<Shape>& shapes,
                                    int copy);
  // The micro-batches one pipeline window runs: an update's, or a whole
  // eval run's.
  int PipelineWindow(bool eval) const {
    if (eval) return options.batches_per_step * options.accumulation.factor;
    return Continuous(eval) ? options.batches_per_step : options.accumulation.factor;
  }
  // PopART's continuous pipelining: a training run's micro-batches flow
  // through the pipeline with an update each, applied as its backward ends.
  bool Continuous(bool eval) const { return options.pipeline.continuous && !eval; }
  // The pipeline runner of a replica for (eval, shapes), compiling the copies
  // of the step it needs (copy 0 is Compile's).
  compile::PipelineRunner& Runner(int replica, bool eval, const std::vector<Shape>& shapes);
  // Continuous pipelining updates a weight on its device between other
  // micro-batches' segments there: a weight read on another device too
  // would be read while it is written (PopART refused copying a weight
  // between IPUs while pipelining).
  void CheckWeightsStayOnTheirDevice(const ir::Graph& g) const;
  compile::PlanShape PlanShapeOf(bool eval) const;
  // Fails with the planner's report when replica 0's step (all replicas
  // hold the same, within an element per sharded tensor) does not fit the
  // device profile; before it ever runs.
  void CheckFits(const compile::CompiledStep& step, bool eval);

  // --- Running (training_step_runner.cc).
  int MicroBatchesPerRun() const {
    return options.batches_per_step * options.accumulation.factor * options.replicas;
  }
  // The feeds' shapes divided into the micro-batches of one Run().
  std::vector<Shape> MicroBatchShapes() const { return feeds->MicroBatchShapes(); }
  // A fetch's shape for the caller: the micro-batch's, with the
  // accumulation factor and batches per step prepended as Paddle's IPU
  // backend did.
  Shape FetchShape(const Shape& micro) const {
    Shape shape = micro;
    if (options.batches_per_step > 1) shape.insert(shape.begin(), options.batches_per_step);
    if (options.accumulation.enabled) shape.insert(shape.begin(), options.accumulation.factor);
    if (options.replicated_graphs) shape.insert(shape.begin(), options.replicas);
    return shape;
  }
  void RunReplica(int replica, bool eval, compile::CompiledStep& compiled, int* updates_done);
  void RunReplicaPipelined(int replica, bool eval, const std::vector<Shape>& shapes,
                           int* updates_done);
  // After an update window (its update applied, or skipped on overflow):
  // the gradient statistics summed over the replicas, the accumulators
  // zeroed, the loss scale steered.
  void EndWindow(int replica, compile::CompiledStep& compiled, bool overflow);
  // Whether every replica's accumulated gradients are finite (host memory:
  // CPU devices), agreed through the replicas' collective group.
  bool AllReplicasFinite(int replica, const compile::CompiledStep& compiled);
  // Micro-batch m of a replica's run (m = b * accumulation_factor + g, batch
  // outermost) is micro-batch k = FeedIndex(m, replica) of the feeds: the
  // replicas interleave.
  int FeedIndex(int m, int replica) const { return m * options.replicas + replica; }
  // Writes micro-batch k (in feed order) of every feed into exe's inputs,
  // and the random ops' step number: steps so far x micro-batches per update
  // + k, so masks change every micro-batch and repeat for the same seed.
  void PrepareMicroBatch(compile::Executable& exe, int k);
  // Copies exe's outputs to micro-batch k's place in the fetches.
  void FetchMicroBatch(const compile::Executable& exe, int k);

  // --- Checkpoints (training_checkpoint.cc).
  // Sets the state (and the manifest's counters) from checked files.
  void ApplyCheckpoint(const runtime::CheckpointFiles& files);
};

}  // namespace tiller::training
