#include "compile/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <set>
#include <utility>

#include "backend/collective.h"
#include "core/error.h"
#include "ir/op_schema.h"

namespace tiller::compile {

double PipelineStats::BubbleFraction() const {
  if (busy_ms.empty() || wall_ms <= 0) return 0;
  double busy = 0;
  for (double b : busy_ms) busy += b;
  return std::max(0.0, 1.0 - busy / (wall_ms * static_cast<double>(busy_ms.size())));
}

namespace {

// Copies and views carry whatever placement they were inserted under: the
// stage order is the program's ops'.
bool IsPlacedByCompiler(const ir::Op& op) {
  return op.is(ir::Opcode::copy) || op.schema->is_view;
}

// The program op computing `v`, looking through copies and views.
const ir::Op* Source(const ir::Value* v) {
  while (v->producer && IsPlacedByCompiler(*v->producer) && !v->producer->inputs.empty() &&
         v->producer->inputs[0])
    v = v->producer->inputs[0];
  return v->producer;
}

}  // namespace

int PipelineStages(const ir::Graph& g) {
  std::set<std::pair<int, int>> stages;
  for (const auto& op : g.ops()) {
    if (op->placement.phase == ir::Phase::kForward && !IsPlacedByCompiler(*op))
      stages.insert(ir::PipelineOrder(op->placement));
  }
  return std::max<int>(1, static_cast<int>(stages.size()));
}

int PipelineMinInFlight(int devices, int stages) {
  return std::max({1, devices, stages});
}

int ContinuousCopies(int window, int devices) {
  return std::max(1, std::min(window, 2 * devices - 1));
}

int PipelineCopies(PipelineSchedule schedule, int window, int devices, int stages, int in_flight) {
  if (schedule == PipelineSchedule::kFillDrain) return std::max(1, window);
  const int want = in_flight > 0 ? in_flight : PipelineMinInFlight(devices, stages) + 1;
  return std::max(1, std::min(window, want));
}

PipelineRunner::PipelineRunner(std::vector<Executable*> copies,
                               std::vector<backend::Device*> devices, PipelineSchedule schedule,
                               bool updates_in_pipeline)
    : copies_(std::move(copies)),
      devices_(std::move(devices)),
      schedule_(schedule),
      updates_in_pipeline_(updates_in_pipeline) {
  TILLER_CHECK(!copies_.empty(), "a pipeline needs an executable");
  const Executable& exe = *copies_[0];
  const auto& segs = exe.segments();
  for (const Executable* c : copies_)
    TILLER_CHECK(c->segments().size() == segs.size(), "pipeline copies differ in segments");
  for (size_t j = 0; j < segs.size(); ++j) {
    if (segs[j].phase != ir::Phase::kUpdate || updates_in_pipeline_) segments_.push_back(j);
  }
  for (const auto& op : exe.graph().ops()) {
    if (op->placement.phase != ir::Phase::kForward || IsPlacedByCompiler(*op)) continue;
    for (const ir::Value* in : op->inputs) {
      const ir::Op* from = in ? Source(in) : nullptr;
      if (!from || from->placement.phase != ir::Phase::kForward ||
          ir::PipelineOrder(from->placement) <= ir::PipelineOrder(op->placement))
        continue;
      Fail(ErrorKind::kInvalidArgument,
           "the pipeline's stage order runs backwards: {} ({}) on device {} (ipu_stage {}) reads "
           "a value computed later in the forward pass, by {} on device {} (ipu_stage {}); give "
           "later layers higher ipu_index / ipu_stage",
           op->type, op->name, op->placement.shard, op->placement.stage, from->type,
           from->placement.shard, from->placement.stage);
    }
  }
}

bool PipelineRunner::Better(const std::pair<int, size_t>& a,
                            const std::pair<int, size_t>& b) const {
  const auto& segs = copies_[0]->segments();
  // 1F1B: backward, then update (continuous pipelining applies a
  // micro-batch's update as soon as its backward is done), then forward;
  // fill-drain: forward first.
  auto rank = [&](const std::pair<int, size_t>& x) {
    switch (segs[segments_[x.second]].phase) {
      case ir::Phase::kBackward:
        return schedule_ == PipelineSchedule::kOneForwardOneBackward ? 0 : 2;
      case ir::Phase::kUpdate:
        return 1;
      default:
        return schedule_ == PipelineSchedule::kOneForwardOneBackward ? 2 : 0;
    }
  };
  if (rank(a) != rank(b)) return rank(a) < rank(b);
  if (a.first != b.first) return a.first < b.first;
  return a.second < b.second;
}

PipelineRunner::Order PipelineRunner::StaticOrder(int n) const {
  // PopART's pipeline in cycles: in each, every device runs one
  // micro-batch's forward segments, then one micro-batch's backward and
  // update segments; a segment starts once the micro-batch's segment
  // before it ended in an earlier cycle, or earlier in this one on the same
  // device (the last stage runs a micro-batch's forward and backward in one
  // cycle). So device k (of N, one stage each) runs the forward of
  // micro-batch j in cycle j + k and its backward and update in cycle
  // j + 2(N - 1) - k: a forward sees the updates of micro-batches up to
  // j - 1 - 2(N - 1 - k), its backward those up to j - 1, as on the IPU.
  const auto& segs = copies_[0]->segments();
  const int k = static_cast<int>(copies_.size());
  const size_t n_segs = segments_.size();
  Order order(devices_.size());
  std::vector<size_t> done(n, 0);          // the next segment position per micro-batch
  std::vector<int> ended(n, -1);           // the cycle its segment before ended in
  std::vector<int> ended_on(n, -1);        // and on which device
  std::vector<int> next_micro(n_segs, 0);  // a segment runs its micro-batches in order
  std::vector<int> copy_owner(k, -1);
  int started = 0, finished = 0;
  auto is_forward = [&](size_t p) { return segs[segments_[p]].phase == ir::Phase::kForward; };
  for (int cycle = 0; finished < n; ++cycle) {
    while (started < n && copy_owner[started % k] < 0) {
      copy_owner[started % k] = started;
      ++started;
    }
    bool any = false;
    for (size_t d = 0; d < devices_.size(); ++d) {
      for (const bool forward : {true, false}) {
        // The first micro-batch whose next segment is one of these on d.
        auto ready = [&](int i) {
          if (done[i] == n_segs) return false;
          const size_t p = done[i];
          return segs[segments_[p]].device == static_cast<int>(d) && is_forward(p) == forward &&
                 next_micro[p] == i &&
                 (ended[i] < cycle || (ended[i] == cycle && ended_on[i] == static_cast<int>(d)));
        };
        int i = finished;
        while (i < started && !ready(i)) ++i;
        if (i == started) continue;
        // Its consecutive segments of this kind on d (a backward's
        // updates included) run now.
        while (ready(i)) {
          const size_t p = done[i]++;
          order[d].emplace_back(i, p);
          next_micro[p] = i + 1;
          ended[i] = cycle;
          ended_on[i] = static_cast<int>(d);
          any = true;
        }
      }
    }
    TILLER_CHECK(any, "pipeline schedule stalled");
    for (int i = finished; i < started; ++i) {
      if (done[i] == n_segs) copy_owner[i % k] = -1;
    }
    while (finished < n && done[finished] == n_segs) ++finished;
  }
  return order;
}

PipelineStats PipelineRunner::Run(int n, const MicroBatchFn& prepare, const MicroBatchFn& finish) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto& segs = copies_[0]->segments();
  const int k = static_cast<int>(copies_.size());
  const size_t n_segs = segments_.size();
  // A micro-batch's segments run in program order, one after another: each
  // device's memory plan reuses a buffer once the last op reading it (on
  // any device) has run in that order, so a segment may not overtake an
  // earlier one even where it reads nothing from it. The overlap is between
  // micro-batches, on their own copies.
  std::vector<std::vector<size_t>> users(n_segs);
  std::vector<int> n_deps(n_segs, 0);
  for (size_t p = 1; p < n_segs; ++p) {
    users[p - 1].push_back(p);
    n_deps[p] = 1;
  }

  PipelineStats stats;
  stats.micro_batches = n;
  stats.busy_ms.assign(devices_.size(), 0.0);
  struct Micro {
    std::vector<int> waiting;  // unmet deps per segment
    size_t done = 0;
  };
  std::vector<Micro> micro(n);
  std::vector<int> copy_owner(k, -1);      // the micro-batch using each copy
  std::vector<int> next_micro(n_segs, 0);  // per segment: the micro-batch it runs next
  std::vector<bool> device_busy(devices_.size(), false);
  // ready[d]: (micro-batch, segment position) runnable on device d
  std::vector<std::vector<std::pair<int, size_t>>> ready(devices_.size());

  std::mutex mu;
  std::condition_variable cv;
  struct Done {
    int micro;
    size_t seg;
    int device;
    double ms;
    std::exception_ptr error;
  };
  std::deque<Done> completed;
  std::exception_ptr first_error;
  int running = 0, started = 0, finished = 0, in_flight = 0;
  // Stages on other processes: segments that receive wait for their
  // messages, polled (SegmentArrived) while nothing else finishes.
  backend::ProcessGroup* link = copies_[0]->process_link();
  auto poll = std::chrono::microseconds(20);
  auto progress = Clock::now();

  auto make_ready = [&](int i, size_t p) { ready[segs[segments_[p]].device].emplace_back(i, p); };
  // Updates in the pipeline: each device follows its fixed order.
  const Order order = updates_in_pipeline_ ? StaticOrder(n) : Order();
  std::vector<size_t> order_pos(devices_.size(), 0);

  while (finished < n) {
    // Start micro-batches while a copy is free.
    while (!first_error && started < n && copy_owner[started % k] < 0) {
      const int i = started++;
      copy_owner[i % k] = i;
      copies_[i % k]->SetMessageRound(i);
      // An error on this thread must not leave before the devices' running
      // work (which refers to this frame) ends: it is kept like theirs.
      try {
        prepare(i, *copies_[i % k]);
      } catch (...) {
        first_error = std::current_exception();
        break;
      }
      micro[i].waiting = n_deps;
      for (size_t p = 0; p < n_segs; ++p) {
        if (n_deps[p] == 0) make_ready(i, p);
      }
      stats.max_in_flight = std::max(stats.max_in_flight, ++in_flight);
    }
    // Give each idle device its best ready segment, among those whose
    // messages from other processes have arrived.
    bool waiting = false;
    for (size_t d = 0; d < devices_.size() && !first_error; ++d) {
      if (device_busy[d] || ready[d].empty()) continue;
      auto best = ready[d].end();
      for (auto it = ready[d].begin(); it != ready[d].end(); ++it) {
        // Each segment runs the micro-batches in order (a gradient
        // accumulator adds them in a sequential run's order): one whose
        // messages came sooner than an earlier micro-batch's waits.
        if (it->first != next_micro[it->second]) {
          waiting = waiting || link;
          continue;
        }
        if (!order.empty() && (order_pos[d] >= order[d].size() || *it != order[d][order_pos[d]]))
          continue;
        if (best != ready[d].end() && !Better(*it, *best)) continue;
        if (link && !copies_[it->first % k]->SegmentArrived(segments_[it->second])) {
          waiting = true;
          continue;
        }
        best = it;
      }
      if (best == ready[d].end()) continue;
      const int i = best->first;
      const size_t p = best->second;
      ready[d].erase(best);
      next_micro[p] = i + 1;
      if (!order.empty()) ++order_pos[d];
      device_busy[d] = true;
      ++running;
      Executable* exe = copies_[i % k];
      const size_t seg = segments_[p];
      devices_[d]->stream().Submit([&, exe, i, p, seg, d] {
        Done done{i, p, static_cast<int>(d), 0, nullptr};
        const auto t0 = Clock::now();
        try {
          exe->RunSegmentHere(seg);
        } catch (...) {
          done.error = std::current_exception();
        }
        done.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        std::lock_guard<std::mutex> lock(mu);
        completed.push_back(done);
        cv.notify_one();
      });
    }
    if (running == 0 && (first_error || !waiting)) {
      if (first_error) break;
      TILLER_CHECK(finished == n, "pipeline stalled: {} of {} micro-batches finished", finished, n);
      break;
    }
    Done done;
    {
      std::unique_lock<std::mutex> lock(mu);
      auto any = [&] { return !completed.empty(); };
      if (!waiting) {
        cv.wait(lock, any);
      } else if (!cv.wait_for(lock, poll, any)) {
        // Nothing finished: look for arrived messages again, a little later
        // each time (up to a millisecond), and not forever.
        lock.unlock();
        poll = std::min(poll * 2, std::chrono::microseconds(1000));
        const double idle = std::chrono::duration<double>(Clock::now() - progress).count();
        if (running == 0 && idle > link->timeout_seconds())
          link->AbortJob(
              fmt::format("the pipeline waited {:.0f} s for a message from another process's stage "
                          "(TILLER_COLLECTIVE_TIMEOUT): a rank died or stopped answering",
                          idle));
        continue;
      }
      done = completed.front();
      completed.pop_front();
    }
    poll = std::chrono::microseconds(20);
    progress = Clock::now();
    --running;
    device_busy[done.device] = false;
    stats.busy_ms[done.device] += done.ms;
    if (done.error) {
      if (!first_error) first_error = done.error;
      continue;
    }
    if (first_error) continue;
    Micro& m = micro[done.micro];
    for (size_t u : users[done.seg]) {
      if (--m.waiting[u] == 0) make_ready(done.micro, u);
    }
    if (++m.done == n_segs) {
      try {
        finish(done.micro, *copies_[done.micro % k]);
      } catch (...) {
        first_error = std::current_exception();
      }
      copy_owner[done.micro % k] = -1;
      --in_flight;
      ++finished;
    }
  }
  for (backend::Device* d : devices_) d->stream().Synchronize();
  stats.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (first_error) std::rethrow_exception(first_error);
  return stats;
}

}  // namespace tiller::compile
