// Memory the processes of an MPI group share when all of them run on one
// node, so that a collective reads the others' bytes where they lie instead
// of sending them through MPI: each process has a segment (POSIX shared
// memory, mapped by every process of the group) that it writes and the
// others read, and the group meets at a barrier of counters in the
// segments. MPI still carries the few messages that set the segments up.
//
// Measured with two processes of a DLRM step (bench_sparse
// tiller-mpi2-rows): the row exchanges over MPI cost 479 and 526 us a step
// against 219 and 381 us for the same exchanges between threads of one
// process, which read each other's buffers; MPI's part was the counts
// all-to-all, packing, the kernel's copy between processes and unpacking.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tiller::distributed {

class NodeMemory {
 public:
  // Over `comm`, every process of which runs on this node (SurveyNode's
  // `shared`): every process calls it. `spin`: how long a barrier spins
  // before it sleeps between looks; a wait past `timeout_s` ends the job.
  NodeMemory(MPI_Comm comm, double timeout_s, std::chrono::microseconds spin);
  ~NodeMemory();
  NodeMemory(const NodeMemory&) = delete;
  NodeMemory& operator=(const NodeMemory&) = delete;

  // Whether every process's segment exists and is mapped by every process
  // (the same answer on every process). Not so where /dev/shm is too small
  // for them: the caller then sends messages instead.
  bool ok() const { return ok_; }

  // Starts an operation that lays out `bytes` of each process's segment:
  // waits until every process has finished with the segments (its
  // previous operation's reads are done, so its own segment may be
  // rewritten), then grows the segments where they are smaller. Every
  // process lays out the same bytes (each computes the others' layouts from
  // its own); one that differs fails every process's call. Returns ok():
  // false where growing failed.
  bool Begin(size_t bytes, const char* what);

  // Process p's segment (begin's bytes of it): this process's own to write
  // before a barrier, the others' to read after it.
  std::byte* segment(int p) const { return mapped_[static_cast<size_t>(p)] + kData; }

  // Returns once every process has called it as often as this one has
  // (spinning first, then sleeping between looks; past the timeout the job
  // ends naming `what`). Writes to the segments before it are seen by
  // every process after it.
  void Barrier(const char* what);

 private:
  // Each mapping: a header line (arrival counter, the bytes the current
  // operation lays out), then the data, page aligned.
  static constexpr size_t kData = 4096;
  struct Header {
    uint64_t arrived;
    uint64_t bytes;
  };
  Header* header(int p) const { return reinterpret_cast<Header*>(mapped_[static_cast<size_t>(p)]); }
  // Makes every process's segment hold `capacity` bytes: each creates its
  // own, the names go round, each maps the others'; false (on every
  // process) where any process failed, leaving the old segments.
  bool Map(size_t capacity);
  void Unmap();

  MPI_Comm comm_ = MPI_COMM_NULL;
  const double timeout_s_;
  const std::chrono::microseconds spin_;
  int process_ = 0, processes_ = 1;
  bool ok_ = false;
  size_t capacity_ = 0;      // each segment's data bytes
  uint64_t generation_ = 0;  // barriers passed on the current mappings
  int64_t barriers_ = 0;     // in all, for the timeout's message
  std::vector<std::byte*> mapped_;
};

}  // namespace tiller::distributed
