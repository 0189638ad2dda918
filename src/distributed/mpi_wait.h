// How libtiller_mpi.so calls MPI: a failed call ends in tiller::Error naming
// it, and every wait for another process is polled against a timeout that
// ends the whole job (MPI itself waits forever for a peer that hangs).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tiller::distributed {

// Throws kInternal "<call> failed: <MPI's text>" unless rc is MPI_SUCCESS
// (MPI's default error handler would end the job with less said).
void Check(int rc, const char* call);

// Prints "tiller: rank R of P<what>; ending the job" and ends every process
// of the job: a wait for another process outlasted the timeout.
[[noreturn]] void EndJob(const std::string& what);

// The message EndJob prints for a wait of `waited` seconds in `what` (its
// call number and bytes) past `timeout_s`.
std::string TimedOut(double waited, const char* what, int64_t call, size_t bytes, double timeout_s);

// How long a wait spins before it sleeps between polls (20 us plus the
// timer's slack, about 70 us on the project's VMs, per sleep). Short: about
// the cost of one wake-up, for ranks that share CPUs with others (a
// spinner would hold the CPU the rank it waits for needs). Long: for the
// ranks of a node that fit its CPUs (NodeSurvey's fits), where a spinner
// takes no one's CPU and the waits that outlast a short spin are one
// rank's share of a step running ahead of another's: in a DLRM step over
// two processes (bench_sparse tiller-mpi2-rows, 9 waits a step) 29% of the
// waits took 100-500 us, and spinning through them instead of sleeping made
// the step's median 4.70 ms instead of 5.11 over 8 interleaved pairs of
// runs (faster in 7 of the 8).
constexpr std::chrono::microseconds kShortSpin{80};
constexpr std::chrono::microseconds kLongSpin{2000};
// The sleep between polls once the spin is over.
constexpr std::chrono::microseconds kPollSleep{20};

// Polls `request` until it completes; past `timeout_s` prints which rank
// waited in which operation and ends the whole job. Polls without a pause
// for `spin` (a completion usually follows within microseconds on shared
// memory), then sleeps between polls.
void Wait(MPI_Request* request, double timeout_s, const char* what, int64_t call, size_t bytes,
          std::chrono::microseconds spin = kShortSpin);

// What the processes of a communicator that share this node found out
// about it together (one MPI_Comm_split_type and one all-gather, at a
// group's creation).
struct NodeSurvey {
  // The ranks of the node's processes (local_ranks threads each) fit the
  // CPUs those processes may run on: the union of their affinity masks
  // (disjoint single cores where mpirun binds each process to one, all of
  // the node's where none is bound).
  bool fits = false;
  // Every process of the communicator runs on this node, and none of them
  // turned shared memory off (TILLER_MPI_SHARED_MEMORY=0): the group can
  // share memory (distributed/node_memory.h). Every process gets the same
  // answer.
  bool shared = false;
};
NodeSurvey SurveyNode(MPI_Comm comm, int local_ranks, double timeout_s);

}  // namespace tiller::distributed
