// Tiller's training API: compiles a Paddle training program (forward + loss
// + optimizer.minimize, PIR .json or legacy .pdmodel) into one training step
// and runs it. Paddle's backward ops are dropped and rebuilt by Tiller's
// autodiff; the optimizer ops the program holds update the state in place.
//
//   tiller::training::IpuOptions options;                // Paddle's IpuStrategy names
//   options.Set("num_threads", int64_t{2});
//   tiller::training::TrainingSession s("train.json", {"x", "label"}, {"mean_0.tmp_0"},
//                                       options);
//   s.LoadCheckpoint("ckpt/init");        // .pdparams + .pdopt, as paddle.static.save wrote
//   for (int step = 0; step < n; ++step) {
//     s.SetLearningRate(schedule(step));  // every learning-rate variable of the program
//     s.SetFeed("x", x_data, DataType::FLOAT32, {8, 3, 16, 16});
//     s.SetFeed("label", y_data, DataType::INT64, {8, 1});
//     s.Run();                            // forward, backward, update
//     s.GetFetch(0, &loss, sizeof(float));
//   }
//   s.SaveCheckpoint("ckpt/step100");     // paddle.static.load reads it
//
// State is every persistable variable of the program: parameters, optimizer
// moments and beta powers, the learning-rate variable, batch-norm running
// statistics. It lives in the session across steps and across compilations
// for different feed shapes; set it from a checkpoint (LoadCheckpoint) or
// variable by variable (SetState). Errors throw tiller::Error naming the
// file, op or tensor.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tiller/checkpoint.h"
#include "tiller/error.h"
#include "tiller/ipu_options.h"
#include "tiller/option_groups.h"
#include "tiller/predictor.h"

namespace tiller::training {

using inference::DataType;

// The session's settings in Tiller's terms (IpuOptions gives them by
// Paddle's names).
struct SessionOptions {
  int num_threads = 1;
  // Seed of random ops (dropout masks, random init ops) whose own seed is 0.
  uint64_t random_seed = 0;
  // Check every op's output for NaN/Inf (Paddle's FLAGS_check_nan_inf); the
  // first one stops the step naming the step number and the op. Off, the
  // loss and every gradient are checked as they are computed, before any
  // update reads them; a non-finite one stops the step (parameters and
  // optimizer state untouched) and the step is re-run with the full check
  // to name the first op that went non-finite.
  bool check_nan_inf = false;
  // Adam, AdamW and Lamb without bias correction (the IPU option
  // use_no_bias_optimizer).
  bool no_bias_optimizer = false;
  // Lamb's trust ratio uses min(||w||, max_weight_norm), as PopART's Lamb
  // (the IPU option max_weight_norm; Paddle's IPU default 65504, which a
  // weight's norm rarely reaches); 0: ||w||, as Paddle's lamb op.
  double max_weight_norm = 0;
  // Trained weights the program keeps pruned in blocks (Paddle's ASP with a
  // block-pruning function): their products and their inputs' gradients
  // run on the nonzero 16 x 16 blocks, found at every step
  // (passes/block_sparse_weights.cc; results unchanged). Names, or
  // "masked": every weight the program multiplies by a mask after its
  // update (the Tiller option block_sparse_weights, comma-separated).
  std::vector<std::string> block_sparse_weights;
  // Mixed precision, the optimizer state's storage and stochastic rounding
  // (the IPU options enable_fp16 with Tiller's half_dtype, accl1_type ..
  // accl3_type, enable_stochastic_rounding; tiller/option_groups.h).
  PrecisionSettings precision;
  // Static, dynamic (Paddle AMP's rule) or automatic (Graphcore's rule)
  // loss scaling and the gradient statistics that steer it (the IPU options
  // loss_scaling, dynamic_loss_scaling_settings.*,
  // automatic_loss_scaling_settings.*, gradient_statistics;
  // tiller/option_groups.h).
  LossScalingSettings loss_scale;

  // The IPU execution model's step shape. One Run() takes feeds whose
  // leading dimension is batches_per_step x accumulation.factor micro-batches
  // (in that order, outermost first: micro-batch k = b * accumulation.factor
  // + g is rows [k * m, (k + 1) * m) of every feed) and runs batches_per_step
  // updates, each applying the gradients of accumulation.factor micro-batches
  // reduced as accumulation.reduction says. Eval steps run every micro-batch
  // forward.
  //
  // Gradient accumulation (enable_gradient_accumulation, accumulation_factor,
  // accumulation_and_replication_reduction_type; tiller/option_groups.h).
  AccumulationSettings accumulation;
  int batches_per_step = 1;
  // Rows of a micro-batch in a feed whose first dim is dynamic (-1): the
  // IPU option micro_batch_size, which Paddle's IPU compiler wrote there,
  // so such a feed holds micro-batches x micro_batch_size rows. 0: the
  // rows / micro-batches per run of each feed. A feed of fixed dims holds
  // micro-batches x its elements, in any shape (Paddle's IPU executor
  // checked the element count only). int32 and int64 feeds are converted
  // to the program's of the two (values that do not fit fail).
  int64_t micro_batch_size = 0;
  // Paddle's compilation_progress_logger: called on the thread that
  // compiles (the first Run() for a shape, or a replica's or pipeline
  // copy's step) with (progress, compile_progress_total), from 0 to the
  // total once per compiled step.
  std::function<void(int progress, int total)> compile_progress;
  // PopART's synthetic data (the IPU option synthetic_data_mode): the fed
  // values are not used; each micro-batch's feeds are zeros (kZeros), or
  // draws of a standard normal for float feeds and zeros for the others
  // (kRandomNormal; repeatable: by random_seed and the micro-batch). For
  // measuring a step without its data. Feeds still give the shapes.
  enum class SyntheticData { kOff = 0, kZeros = 1, kRandomNormal = 2 };
  SyntheticData synthetic_data_mode = SyntheticData::kOff;
  int compile_progress_total = 100;
  // Data-parallel replicas (enable_replicated_graphs +
  // replicated_graph_count): each micro-batch of the feeds goes to a replica
  // in turn (micro-batch k = (b * accumulation.factor + g) * replicas + r),
  // each replica a device with num_threads / replicas threads (num_threads
  // must be >= replicas); their gradients are summed before every update.
  bool replicated_graphs = false;
  int replicas = 1;
  // Replicas across the processes of an MPI job (enable_distribution; the
  // job started by `mpirun -np P`, every process running the same program):
  // each process runs `replicas` replicas on its share of the data, the job
  // P x replicas. A process's feeds hold its own replicas' micro-batches,
  // in the order above with `replicas` of them (python:
  // tiller.distributed.local_batch picks them from the global batch); the
  // job then trains the model one process with P x replicas replicas would,
  // bit for bit. Rank 0's state is broadcast before the first step.
  // global_replicas (global_replication_factor) and global_replica_offset,
  // when set (> 0 / >= 0), must agree with the job: P x replicas and
  // rank x replicas. collectives.shard_optimizer_state shards over the job's
  // replicas;
  // a read of the state gathers the other processes' parts, so every process
  // reads it (an MPI collective). Needs libtiller_mpi.so (built with Open
  // MPI).
  bool distribution = false;
  // How the replicas exchange gradients and optimizer state: gradient
  // buckets, their overlap with the backward pass, replicated tensor
  // sharding (tiller/option_groups.h).
  CollectiveSettings collectives;
  int global_replicas = 0;
  int global_replica_offset = -1;
  // With distribution: a replica's devices_per_replica devices (its
  // pipeline stages) spread over this many processes (Tiller's option
  // processes_per_replica), each running devices_per_replica /
  // processes_per_replica of them with num_threads threads between them;
  // activations, gradients and fetches cross as MPI messages, and the job
  // trains what one process with all the devices (and all the replicas)
  // would. The job of P processes runs P / processes_per_replica replicas
  // (consecutive ranks form one); every process of a replica is fed its
  // micro-batches (python: tiller.distributed.local_batch with
  // processes_per_replica). Not yet with local replicas, replicated tensor
  // sharding or loss scaling steered by the gradients.
  int processes_per_replica = 1;
  // Manual sharding (enable_manual_shard, num_ipus = replicas x devices per
  // replica): each op runs on the device of its ipu_index (ops outside any
  // ipu_shard_guard on device 0); values cross devices through copies; each
  // device gets num_threads / (replicas x devices_per_replica) threads.
  int devices_per_replica = 1;
  // With devices_per_replica > 1 and a program nobody sharded (no
  // ipu_index: enable_manual_shard off), or with need_avg_shard, the forward
  // ops are split into stages of about equal cost (the split is in the
  // summary's compile report; tiller/option_groups.h).
  StageSplitSettings split;
  // Pipelining (enable_pipelining) over a replica's devices (its stages, in
  // ipu_index order): the micro-batches of each update (of an eval run) flow
  // through the devices, which work on different micro-batches at once.
  // Training needs accumulation.factor >= devices_per_replica, unless
  // pipeline.continuous (tiller/option_groups.h).
  PipelineSettings pipeline;
  // Recomputation (auto_recomputation 1, 3 or 4; tiller/option_groups.h).
  RecomputeSettings recompute;
  // Which fetched values a run returns (Tiller's options anchor_return_type
  // and anchor_return_period; PopART's anchor return types, which Paddle
  // fixed at All): every micro-batch's (kAll, the shapes above); the last
  // micro-batch's of each replica (kFinal: [replicas, ...] when
  // replicated, else the micro-batch's shape); every anchor_period-th
  // batch's micro-batches (kEveryN: [replicas, accumulation,
  // batches_per_step / anchor_period, ...], each dim as for kAll; the period
  // must divide batches_per_step); or each replica's sum over its
  // micro-batches (kSum, shaped as kFinal; numeric fetches only).
  enum class Anchor { kAll, kFinal, kEveryN, kSum } anchor = Anchor::kAll;
  int anchor_period = 1;
  // A device profile (Tiller's option device_profile: cpu, ipu-mk2,
  // ipu-bow, h200, or NAME:CAPACITY; see include/tiller/planner.h): every
  // compiled step is checked against it before it runs, and one that does
  // not fit fails with the planner's report. "": no check.
  std::string device_profile;
  // When set (Tiller's option trace_path): every step's work is recorded, per
  // device (forward / backward / update segments, with the micro-batch), and
  // its copies and all-reduces, and after each Run() the file is rewritten
  // as a Chrome / Perfetto trace of everything so far (ui.perfetto.dev).
  std::string trace_path;
};

struct TensorInfo {
  std::string name;
  DataType dtype = DataType::FLOAT32;
  std::vector<int64_t> shape;
};

// A persistable variable of the program, with what it holds and the file of
// a checkpoint it goes to (paddle.static.save's split for the program's
// form; see checkpoint::PaddleStateRoles).
struct StateTensorInfo : TensorInfo {
  checkpoint::StateRole role = checkpoint::StateRole::kOther;
  checkpoint::SaveFile file = checkpoint::SaveFile::kNone;
};

class TrainingSession {
 public:
  // program_path: a training program saved by paddle.static.save (.json or
  // .pdmodel) or serialized from a live program. feed_names: the variables
  // fed each step (the program's data ops, in the order SetFeed expects);
  // fetch_names: variables returned by each step (usually the loss).
  TrainingSession(const std::string& program_path, std::vector<std::string> feed_names,
                  std::vector<std::string> fetch_names, const SessionOptions& options = {});
  // The same with Paddle's IPU options (validated when they were set):
  // num_threads (0: every hardware thread), random_seed,
  // enable_floating_point_checks, use_no_bias_optimizer,
  // enable_gradient_accumulation, accumulation_factor, batches_per_step,
  // accumulation_and_replication_reduction_type; Run() runs eval
  // steps when is_training is false or runtime_options.enable_eval is true.
  TrainingSession(const std::string& program_path, std::vector<std::string> feed_names,
                  std::vector<std::string> fetch_names, const IpuOptions& options);
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Persistable variables the step reads or writes, with their types, roles
  // and checkpoint files, in the order StateNames() lists them.
  std::vector<StateTensorInfo> StateInfo() const;
  std::vector<std::string> StateNames() const;
  // The variable the program minimizes, and the variables it trains.
  const std::string& LossName() const;
  std::vector<std::string> TrainedNames() const;
  // Training steps run so far (eval steps not counted).
  int64_t StepCount() const;
  // The loss scale the next update uses (SessionOptions::loss_scale.scale, or
  // where dynamic loss scaling has taken it), and the updates dynamic loss
  // scaling skipped so far.
  double LossScale() const;
  int64_t SkippedUpdates() const;
  // SessionOptions::gradient_statistics: the last update's counts.
  struct GradientStatistics {
    double flushed_to_zero = 0, below_edge = 0, above_edge = 0;
  };
  GradientStatistics LastGradientStatistics() const;

  // Copies `bytes` of host data into a state; dtype and element count must
  // match the program's declaration.
  void SetState(const std::string& name, const void* data, DataType dtype, size_t bytes);
  void GetState(const std::string& name, void* data, size_t bytes) const;

  // Sets every learning-rate state (the LearningRate input of the program's
  // optimizer ops; a program may have several) to `lr`, rounded to the
  // state's dtype as numpy rounds (Paddle's executor writes its scheduler's
  // value the same way before each step). Throws kNotFound when the program
  // has no learning-rate variable.
  void SetLearningRate(double lr);

  // Writes a checkpoint of the state as paddle.static.save does:
  // <prefix>.pdparams and <prefix>.pdopt, pickles of {name: numpy array}
  // split by StateTensorInfo::file, so paddle.static.load and LoadCheckpoint
  // read it, and <prefix>.tiller.json, the manifest (see LoadCheckpoint).
  // The directory of the prefix is created if needed. A save killed at any
  // point leaves a checkpoint that loads: the new files are written whole
  // under temporary names before any replaces its target; the current set
  // is kept as <prefix>.prev.* and <prefix>.tiller.saving marks the save
  // while the new files are renamed into place (the manifest last).
  // Distribution: every process calls it; rank 0 alone writes, and every
  // process throws if rank 0 failed.
  void SaveCheckpoint(const std::string& path_prefix) const;
  // Sets the state from a checkpoint written by SaveCheckpoint or by
  // paddle.static.save (either program form): <prefix>.pdparams and, when
  // it exists, <prefix>.pdopt (a program whose state is all in .pdparams
  // needs none). Every state must be in one of them with the program's
  // element count and dtype; everything is checked before anything is set,
  // so a refused checkpoint leaves the state as it was.
  // Throws kNotFound (.pdparams or variables missing), kDataLoss (a file is
  // corrupt), kUnimplemented (a pickle of something else), kInvalidArgument
  // (an element count or dtype that differs from the program's). The step
  // counter (StepCount, which seeds dropout masks) and loss scaling's state
  // are not part of Paddle's format: SaveCheckpoint writes them, with a hash
  // of every tensor, into <prefix>.tiller.json, and LoadCheckpoint restores
  // them (a resumed run with dropout repeats the uninterrupted one) and
  // refuses (kDataLoss) a tensor whose bytes do not match, naming it. A
  // checkpoint without that file (Paddle's) counts from 0. After an
  // interrupted save (its mark is there) the main set loads only if it has
  // its manifest and matches it; else the previous set (<prefix>.prev.*)
  // loads, and a line on stderr says so.
  // Distribution: every process calls it; rank 0 reads the files and every
  // process takes rank 0's state.
  void LoadCheckpoint(const std::string& path_prefix);

  // Feeds for the next step, by position in feed_names or by name.
  void SetFeed(const std::string& name, const void* data, DataType dtype,
               const std::vector<int64_t>& shape);
  // One step. eval = true runs the forward part only, in test mode (dropout
  // off, running statistics), without gradients or updates. Run() decides by
  // the options (IpuOptions::EvalOnly; a training step for SessionOptions).
  void Run();
  void Run(bool eval);
  // Fetch i of the last step: one value per micro-batch, as Paddle's IPU
  // backend returned them: the micro-batch's shape with batches_per_step
  // prepended when it is > 1, then accumulation_factor when gradient
  // accumulation is on, then replicas when replication is on
  // ([R, G, B, ...shape]); the values in micro-batch order (batch outermost,
  // replica innermost, as the feeds).
  TensorInfo FetchInfo(size_t i) const;
  void GetFetch(size_t i, void* data, size_t bytes) const;
  const std::vector<std::string>& FetchNames() const;
  const std::vector<std::string>& FeedNames() const;

  struct Summary {
    size_t arena_bytes = 0;  // activations, gradients, workspace of the step
    size_t state_bytes = 0;  // parameters and optimizer state
    size_t in_place_updates = 0, copied_updates = 0;
    std::string graph;           // the compiled step, one op per line
    std::string compile_report;  // what each compile stage changed
    // The pass pipelines as they ran (Predictor's
    // Summary::compile_pipeline).
    std::string compile_pipeline;
    // Pipelining, replica 0's last window: the most micro-batches in flight
    // (so sets of stashed activations), the share of device time idle, and
    // each device's busy milliseconds.
    int pipeline_max_in_flight = 0;
    double pipeline_bubble_fraction = 0;
    std::vector<double> pipeline_device_busy_ms;
    // Per replica: the bytes of optimizer state (the optimizer ops'
    // per-element and scalar state, not weights or learning rates) its
    // steps hold; divided by the replicas with shard_optimizer_state.
    std::vector<size_t> replica_optimizer_state_bytes;
    // Per device of replica 0, the bytes the step holds there: the state
    // whose optimizer (or first reader) runs there, and the arenas actually
    // allocated on it by every copy of the step in use (a pipeline's
    // micro-batches in flight). What the planner predicts as "peak".
    std::vector<size_t> device_memory_bytes;
  };
  Summary GetSummary() const;  // of the step run last

  // Per-op-type wall time of the steps run while profiling is on (every
  // replica's; GetProfile reads one): (op type, total ms, calls), largest
  // first. Each op is timed on its own, with its device synchronized
  // around it; a collective's time includes its wait for the others.
  void EnableProfiling(bool on);
  // by_shape: one entry per op type and input shapes. replica: whose
  // (0 .. replicas - 1; another is kInvalidArgument).
  std::vector<std::tuple<std::string, double, int64_t>> GetProfile(bool by_shape = false,
                                                                   int replica = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tiller::training
