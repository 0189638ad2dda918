// Running a training session (training_session_impl.h): Run() feeds each
// replica's micro-batches through its compiled step or pipeline, the
// replicas at once, with an update (or a skipped one) after every window;
// a non-finite loss or gradient stops the run naming the micro-batch, the
// replica, the first op that went non-finite and the feed that holds one.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "frontend/paddle/translate.h"
#include "runtime/micro_batches.h"
#include "runtime/replica_options.h"
#include "runtime/training_feeds_fetches.h"
#include "runtime/training_session_impl.h"

namespace tiller::training {

void TrainingSession::Impl::PrepareMicroBatch(compile::Executable& exe, int k) {
  if (trace) exe.SetTraceTag(fmt::format("run {} micro-batch {}", runs, k));
  // Random ops draw by the micro-batch's place in the job's global batch, so
  // a job of several processes draws what one process would.
  const int64_t global_k = options.distribution
                               ? k / options.replicas * options.global_replicas +
                                     options.global_replica_offset + k % options.replicas
                               : k;
  const int64_t step_index =
      steps * options.accumulation.factor * GroupSize() + static_cast<int64_t>(global_k);
  if (options.synthetic_data_mode == SessionOptions::SyntheticData::kOff)
    runtime::CopyMicroBatchIn(*feeds, k, MicroBatchesPerRun(), exe);
  else
    runtime::FillSyntheticFeeds(*feeds, options, exe, step_index);
  for (size_t i = feeds->size(); i < exe.inputs().size(); ++i) {
    compile::TensorSlot& slot = exe.inputs()[i];
    TILLER_CHECK(slot.name == paddle::TranslateContext::kStepInput, "unexpected graph input '{}'",
                 slot.name);
    std::memcpy(slot.data, &step_index, sizeof(step_index));
  }
}

void TrainingSession::Impl::FetchMicroBatch(const compile::Executable& exe, int k) {
  runtime::CopyMicroBatchOut(exe, k, fetched);
}

void TrainingSession::Impl::EndWindow(int replica, compile::CompiledStep& compiled, bool overflow) {
  Replica& rep = replicas[replica];
  if (std::array<double, 3> counts{}; compiled.GradientHistogram(counts.data())) {
    // Every replica sums every replica's counts (the device streams are
    // idle: this window's collectives are done), so all decide alike.
    if (GroupSize() > 1)
      groups[0]->AllReduceSum(GroupRank(replica), counts.data(), counts.data(), 3, DType::kF64);
    rep.loss_scaling.last_counts = counts;
  }
  compiled.ResetAccumulators();
  rep.loss_scaling.EndWindow(overflow, options);
}

bool TrainingSession::Impl::AllReplicasFinite(int replica, const compile::CompiledStep& compiled) {
  double bad = runtime::AccumulatedGradientsFinite(compiled) ? 0 : 1;
  if (GroupSize() > 1) groups[0]->AllReduceSum(GroupRank(replica), &bad, &bad, 1, DType::kF64);
  return bad == 0;
}

void TrainingSession::Impl::RunReplicaPipelined(int replica, bool eval,
                                                const std::vector<Shape>& shapes,
                                                int* updates_done) {
  compile::PipelineRunner& runner = Runner(replica, eval, shapes);
  const int n_replicas = options.replicas;
  const int window = PipelineWindow(eval);
  const bool continuous = Continuous(eval);
  const int windows = eval || continuous ? 1 : options.batches_per_step;
  const bool dynamic = options.loss_scale.steers() && !eval;
  for (int w = 0; w < windows; ++w) {
    if (dynamic) {
      // Every copy has its own seed and unscale states.
      for (int c = 0; c < static_cast<int>(runner.copies()); ++c)
        Compile(replica, eval, shapes, c).SetLossScale(replicas[replica].loss_scaling.scale);
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
  const int accumulate = options.accumulation.factor, batches = options.batches_per_step;
  const int n_replicas = options.replicas;
  const int micro_batches = MicroBatchesPerRun();
  compile::Executable& exe = *compiled.exe;
  Replica& rep = replicas[replica];
  const bool dynamic = options.loss_scale.steers() && !eval;
  for (int b = 0; b < batches; ++b) {
    if (dynamic) compiled.SetLossScale(rep.loss_scaling.scale);
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
          where += runtime::NonFiniteFeed(*feeds, micro_batches, k);
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

void TrainingSession::Run() {
  Run(impl_->default_eval);
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
    if (s.options.pipeline.enabled) s.Runner(r, eval, shapes);
  }
  s.last_copies = {compiled[0]};
  if (s.options.pipeline.enabled) {
    for (int c = 1; c < static_cast<int>(s.Runner(0, eval, shapes).copies()); ++c)
      s.last_copies.push_back(&s.Compile(0, eval, shapes, c));
  }
  s.CheckFits(*compiled[0], eval);
  s.SyncReplicas();
  const compile::Executable& exe = *compiled[0]->exe;
  const size_t n_fetch = s.fetch_names.size();
  const size_t micro_batches = static_cast<size_t>(s.MicroBatchesPerRun());
  s.last = nullptr;
  s.last_by_replica.clear();
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
    if (s.options.pipeline.enabled)
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
  runtime::ApplyAnchors(s.options, exe, s.fetch_names, s.fetched, s.fetch_types);
  s.last = compiled[0];
  s.last_by_replica = compiled;
  s.last_eval = eval;
}

}  // namespace tiller::training
