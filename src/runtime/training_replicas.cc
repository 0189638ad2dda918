// A training session's replicas (training_session_impl.h): their compile
// options and collective groups, their copies and parts of the state, and
// the processes of a distributed job.
#include <fmt/format.h>

#include <cstring>
#include <exception>

#include "core/error.h"
#include "runtime/distribution.h"
#include "runtime/notes.h"
#include "runtime/precision.h"
#include "runtime/replica_options.h"
#include "runtime/training_session_impl.h"

namespace tiller::runtime {

compile::CompileOptions ReplicaCompileOptions(const training::SessionOptions& options, int rank,
                                              const std::vector<backend::Collective*>& groups) {
  using training::SessionOptions;
  const int n_devices = options.replicas * options.devices_per_replica;
  compile::CompileOptions co;
  co.devices.assign(
      options.devices_per_replica,
      IpuDeviceSpec(ThreadsPerDevice(
          options.num_threads, n_devices,
          fmt::format("{} replica(s) x {} device(s), num_threads {}", options.replicas,
                      options.devices_per_replica, options.num_threads))));
  co.placement = compile::PlacementPolicy::kByShard;
  co.split = options.split;
  co.accumulation = options.accumulation;
  co.batches_per_step = options.batches_per_step;
  co.updates_in_pipeline = options.pipeline.continuous;
  co.progress = options.compile_progress;
  co.progress_total = options.compile_progress_total;
  co.recompute = options.recompute;
  // Across processes the compiled step sees the job's replicas and its
  // global rank (the mean's divisor, sharding's parts, the group's ranks).
  co.replicas = options.distribution ? options.global_replicas : options.replicas;
  co.replica_groups = groups;
  co.collectives = options.collectives;
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
  co.precision = runtime::ParsePrecision(options.precision.compute, "precision");
  co.loss_scale = options.loss_scale;
  co.stochastic_rounding = options.precision.stochastic_rounding;
  co.block_sparse_weights = options.block_sparse_weights;
  // Its own stream: not the draws of dropout under the same random_seed.
  co.stochastic_rounding_seed = options.random_seed ^ 0x5352'5f73'6565'6421ULL;
  return co;
}

}  // namespace tiller::runtime

namespace tiller::training {

std::vector<backend::Collective*> TrainingSession::Impl::MakeGroups() {
  std::vector<backend::Collective*> per_device;
  if (options.distribution) process_group = &runtime::MpiProcessGroup();
  if (options.distribution && options.processes_per_replica > 1) {
    if (options.global_replicas > 1) {
      // The same device of every replica: the processes at the same place
      // in their replicas (every process asks, for each of its devices).
      const int per_process = options.devices_per_replica / options.processes_per_replica;
      const int place = process_group->rank() % options.processes_per_replica;
      for (int j = 0; j < per_process; ++j)
        groups.push_back(process_group->MakeCollectiveOf(place * per_process + j));
      for (int d = 0; d < options.devices_per_replica; ++d)
        per_device.push_back(d / per_process == place ? groups[d % per_process].get()
                                                      : groups[0].get());
    }
  } else if (options.distribution) {
    for (int d = 0; d < options.devices_per_replica; ++d)
      groups.push_back(process_group->MakeCollective(options.replicas));
  } else if (options.replicas > 1) {
    for (int d = 0; d < options.devices_per_replica; ++d)
      groups.push_back(backend::MakeInProcessCollective(options.replicas));
  }
  if (per_device.empty()) {
    for (auto& group : groups) per_device.push_back(group.get());
  }
  return per_device;
}

void TrainingSession::Impl::BroadcastStates(bool loaded) {
  for (auto& [name, st] : states) {
    process_group->Broadcast(0, st.data.data(), st.data.size());
    if (loaded) st.set = true;
  }
  state_broadcast = true;
  replicas_stale = true;
}

void TrainingSession::Impl::OnRankZero(const std::string& what,
                                       const std::function<void()>& work) const {
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

void TrainingSession::Impl::SyncReplicas() {
  if (process_group && !state_broadcast) BroadcastStates();
  if (!replicas_stale) return;
  for (size_t r = 1; r < replicas.size(); ++r) {
    for (auto& [name, buffer] : replicas[r].own_state) {
      const runtime::StateTensor& st = states.at(name);
      if (buffer.size()) std::memcpy(buffer.data(), st.data.data(), buffer.size());
    }
  }
  // (The parts of sharded states are the whole states' own bytes.)
  replicas_stale = false;
}

void TrainingSession::Impl::GatherParts() {
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
  // This process's parts are in place (PartStorage); the other processes'
  // are gathered.
  if (process_group && GroupSize() > options.replicas) {
    // The other processes' replicas hold the rest of each sharded state
    // (every process gathers, in the sorted order of the names).
    for (const auto& [name, sharding] : sharded) {
      runtime::StateTensor& st = states.at(name);
      const int64_t unit = sharding.unit;
      process_group->GatherParts(st.data.data(), NumElements(st.type.shape) / unit,
                                 DTypeSize(st.type.dtype) * unit, options.replicas);
    }
  }
  parts_newer = false;
}

void* TrainingSession::Impl::PartStorage(int replica, const passes::ShardedState& s) {
  Replica& rep = replicas[replica];
  runtime::StateTensor& st = states.at(s.name);
  const size_t item = DTypeSize(st.type.dtype);
  Sharding& sharding = sharded[s.name];
  std::vector<PartRange>& parts = sharding.parts;
  parts.resize(replicas.size());
  if (!rep.parts.count(s.name)) {
    TILLER_CHECK(s.whole == st.type && !parts_newer, "sharding state '{}' ({})", s.name,
                 st.type.ToString());
    rep.parts[s.name] = s.part.size() * item;
    parts[replica] = s.part;
    sharding.unit = s.unit;
    // The replica's whole copy is no longer used.
    rep.own_state.erase(s.name);
    rep.storage.erase(s.name);
  }
  TILLER_CHECK(parts[replica].begin == s.part.begin && parts[replica].end == s.part.end,
               "state '{}': replica {} sharded it two ways", s.name, replica);
  // The parts are disjoint ranges of the whole value: each replica updates
  // its own in the whole state's storage, which is thus current for this
  // process's parts without a copy (and costs no memory beside it).
  return st.data.data() + s.part.begin * item;
}

}  // namespace tiller::training
