// Compiling a training session's steps (training_session_impl.h): one per
// replica, (eval, feed shapes) and pipeline copy, each guarded against
// non-finite losses and gradients; the pipeline runners over the copies; the
// check that a step fits the device profile.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "ir/op_schema.h"
#include "runtime/paddle_steps.h"
#include "runtime/training_session_impl.h"

namespace tiller::training {
namespace {

// Whether `grad` is the rows of an exchange_rows (a table split by rows
// over the replicas, passes/shard_embedding_rows.cc) delivered times a
// scale of at most 1: every row there is a row of some replica's own
// gradient so scaled, or zeros, so it is finite wherever the replicas' own
// gradients are, which each replica guards before the exchange. Guarding
// the pairs as well read n x replicas rows on every replica each step (3.4
// MB in bench_sparse's two-device DLRM step, as much as one device's whole
// row gradient), the part of the step that did not shrink with replicas.
bool ExchangedRows(const ir::Value* grad) {
  // null: a gradient this process does not compute (another pipeline stage's).
  const ir::Op* op = grad ? grad->producer : nullptr;
  if (!op || !op->is(ir::Opcode::exchange_rows)) return false;
  for (size_t o = 1; o < op->outputs.size(); o += 2) {
    if (op->outputs[o] == grad) return std::fabs(op->GetFloats("scales")[o / 2]) <= 1.0;
  }
  return false;
}

}  // namespace

using runtime::PaddleTrainingStep;

compile::CompiledStep& TrainingSession::Impl::Compile(int replica, bool eval,
                                                      const std::vector<Shape>& shapes, int copy) {
  return replicas[replica].cache.Get({(eval ? 1 : 0) + 2 * copy, shapes},
                                     [&] { return CompileStep(replica, eval, shapes, copy); });
}

compile::CompiledStep TrainingSession::Impl::CompileStep(int replica, bool eval,
                                                         const std::vector<Shape>& shapes,
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
  int last_guard = options.loss_scale.dynamic || program_checks
                       ? -1
                       : exe.GuardFinite(loss, fmt::format("the loss '{}'", info.loss));
  // A replica's own gradients too, so the replica that went non-finite
  // fails first (before the all_reduce spreads it) and is the one named.
  const bool replicas_guarded =
      !step.replica_gradients.empty() && !options.loss_scale.dynamic && !program_checks;
  for (size_t k = 0; k < step.gradients.size() && !program_checks; ++k) {
    if (replicas_guarded && ExchangedRows(step.gradients[k])) continue;
    last_guard = std::max(
        last_guard,
        exe.GuardFinite(step.gradients[k], fmt::format("the gradient of '{}'", info.trained[k])));
  }
  for (size_t k = 0; k < step.replica_gradients.size() && replicas_guarded; ++k)
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

void TrainingSession::Impl::CheckWeightsStayOnTheirDevice(const ir::Graph& g) const {
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
        if (user->is(ir::Opcode::copy) || user->schema->is_view)
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

compile::PipelineRunner& TrainingSession::Impl::Runner(int replica, bool eval,
                                                       const std::vector<Shape>& shapes) {
  Replica& rep = replicas[replica];
  auto& runner = rep.runners[{eval ? 1 : 0, shapes}];
  if (runner) return *runner;
  const compile::PipelineSchedule schedule =
      options.pipeline.schedule == PipelineSettings::Schedule::kOneFOneB
          ? compile::PipelineSchedule::kOneForwardOneBackward
          : compile::PipelineSchedule::kFillDrain;
  const int stages = compile::PipelineStages(Compile(replica, eval, shapes, 0).exe->graph());
  const int least = compile::PipelineMinInFlight(options.devices_per_replica, stages);
  if (options.pipeline.in_flight > 0 && options.pipeline.in_flight < least)
    Fail(ErrorKind::kInvalidArgument,
         "pipeline_in_flight {} is fewer than the pipeline's {} stages over {} devices: 1F1B "
         "keeps a micro-batch in flight per stage; set it to {} or more (0: {})",
         options.pipeline.in_flight, stages, options.devices_per_replica, least, least + 1);
  const int n_copies =
      Continuous(eval)
          ? compile::ContinuousCopies(PipelineWindow(eval), options.devices_per_replica)
          : compile::PipelineCopies(schedule, PipelineWindow(eval), options.devices_per_replica,
                                    stages, options.pipeline.in_flight);
  if (Continuous(eval) && stages != options.devices_per_replica)
    Fail(ErrorKind::kUnimplemented,
         "pipelined training without gradient accumulation runs PopART's pipeline of one "
         "stage per device; the program has {} stages over {} devices",
         stages, options.devices_per_replica);
  std::vector<compile::Executable*> copies;
  for (int c = 0; c < n_copies; ++c) copies.push_back(Compile(replica, eval, shapes, c).exe.get());
  runner = std::make_unique<compile::PipelineRunner>(copies, rep.compiler->devices(), schedule,
                                                     Continuous(eval));
  return *runner;
}

compile::PlanShape TrainingSession::Impl::PlanShapeOf(bool eval) const {
  compile::PlanShape shape;
  shape.training = !eval;
  shape.replicas = options.replicas;
  shape.devices_per_replica = options.devices_per_replica;
  shape.accumulation = eval ? 1 : options.accumulation.factor;
  shape.micro_batches = options.batches_per_step * options.accumulation.factor;
  shape.pipelined = options.pipeline.enabled;
  shape.fill_drain = options.pipeline.schedule == PipelineSettings::Schedule::kFillDrain;
  shape.in_flight = options.pipeline.in_flight;
  return shape;
}

void TrainingSession::Impl::CheckFits(const compile::CompiledStep& step, bool eval) {
  if (options.device_profile.empty() || !fit_checked.insert(step.exe.get()).second) return;
  if (!profile)
    profile = compile::FindDeviceProfile(
        options.device_profile,
        options.num_threads / (options.replicas * options.devices_per_replica));
  compile::PlanShape shape = PlanShapeOf(eval);
  if (eval && options.pipeline.enabled) shape.accumulation = shape.micro_batches;
  try {
    compile::PlanStep(step, *profile, shape).CheckFits();
  } catch (const Error&) {
    fit_checked.erase(step.exe.get());
    throw;
  }
}

}  // namespace tiller::training
