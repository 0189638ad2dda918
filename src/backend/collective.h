// Collectives: a group of ranks (the replicas of a step) exchanging tensors.
// Gradients of replicated training are summed with AllReduceSum; replicated
// tensor sharding (passes/shard_optimizer_state.cc) sums them with
// ReduceScatterSum instead and reassembles the updated weights with
// AllGather. An MPI implementation across processes takes the same
// interface.
//
// Every rank of the group calls each collective, in the same order, from its
// own thread (its device's stream); a call returns when every rank's part
// is done. A rank that fails calls Abort, which wakes the others: their
// pending and later calls throw instead of waiting for it forever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/dtype.h"

namespace tiller::backend {

// One lookup of GatherRows: `n` ids (int64 or int32) into a table of
// `vocab` rows of `row_bytes` split by rows over the group (rank r holds
// rows PartOf(vocab, size(), r), this rank's in `part`); `out` gets n rows.
struct RowLookup {
  const void* part = nullptr;
  const void* ids = nullptr;
  bool ids64 = true;
  int64_t n = 0;
  int64_t vocab = 0;
  int64_t padding_row = -1;  // a whole-table row that reads as zeros; -1: none
  size_t row_bytes = 0;
  void* out = nullptr;
};

// Id i of a lookup's or row gradient's ids (int64 where ids64, else int32).
inline int64_t RowId(const void* ids, bool ids64, int64_t i) {
  return ids64 ? static_cast<const int64_t*>(ids)[i] : static_cast<const int32_t*>(ids)[i];
}

// One table's row gradient of ExchangeRows: this rank's `n` ids (int64 or
// int32) and their rows of `row_bytes` (float32), of a table of `vocab`
// rows split by rows over the group.
struct RowGradientPart {
  const void* ids = nullptr;
  const void* rows = nullptr;
  bool ids64 = true;
  int64_t n = 0;
  int64_t vocab = 0;
  size_t row_bytes = 0;
  float scale = 1.0f;        // the rows are delivered times this
  void* out_ids = nullptr;   // n x size() ids (ids64 as the input's)
  void* out_rows = nullptr;  // n x size() rows
};

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int size() const = 0;
  // out (on every rank) = scale x the elementwise sum of every rank's `in`,
  // added in rank order, so every rank gets the same bytes. in == out is
  // allowed. dtype: float32 or float64.
  virtual void AllReduceSum(int rank, const void* in, void* out, int64_t count, DType dtype,
                            double scale = 1.0) = 0;
  // The rank-order sum of every rank's `in` (count elements), scaled, but
  // each rank receives only its part: elements PartOf(count, size(), rank)
  // (core/shape.h) into `out`, which holds that many. The same bytes as
  // AllReduceSum's for those elements.
  virtual void ReduceScatterSum(int rank, const void* in, void* out, int64_t count, DType dtype,
                                double scale = 1.0) = 0;
  // Every rank's `in` (its part PartOf(count, size(), rank) of a count-element
  // tensor) concatenated into every rank's `out` (count elements). Any
  // dtype: the bytes are copied.
  virtual void AllGather(int rank, const void* in, void* out, int64_t count, DType dtype) = 0;
  // For each lookup: out[i] = row ids[i] of the table, whichever rank holds
  // it; zeros for the padding row and for an id outside [0, vocab) (which
  // the caller reports: nothing outside a part is read). Every rank passes
  // the same number of lookups with the same n, vocab and row_bytes each.
  // This default moves every rank's ids to every rank, which looks them up
  // in its part (zeros elsewhere), and reduce-scatters the float32 rows
  // back (workspace: GatherRowsWorkspace bytes); ranks that share memory
  // read each other's parts instead.
  virtual void GatherRows(int rank, std::span<const RowLookup> lookups, void* workspace);
  virtual size_t GatherRowsWorkspace(std::span<const RowLookup> lookups) const;
  // For each table: every rank's (id, row) pairs whose id lies in this
  // rank's rows PartOf(vocab, size(), rank), in rank order and then in
  // order, into out_ids / out_rows; the rest of out_ids is filled with an
  // id of another rank's rows (out_rows there zero), so a row update of
  // this rank's part skips it. The pairs a row update of the part would
  // keep from every rank's gathered ids and rows, in the same order, so
  // the same sums. This default gathers every rank's ids and rows
  // (workspace: ExchangeRowsWorkspace bytes); ranks that share memory
  // read each other's instead.
  virtual void ExchangeRows(int rank, std::span<const RowGradientPart> parts, void* workspace);
  virtual size_t ExchangeRowsWorkspace(std::span<const RowGradientPart> parts) const;
  // `bytes` bytes of rank `root`'s buffer into every other rank's `buffer`.
  virtual void Broadcast(int rank, int root, void* buffer, size_t bytes) = 0;
  // Ends every pending and later call of the group with kInternal "<why>"
  // until Reset.
  virtual void Abort(const std::string& why) = 0;
  // Makes an aborted group usable again; every rank must have returned.
  virtual void Reset() = 0;
};

// Ranks that are threads of this process; buffers are host memory.
std::unique_ptr<Collective> MakeInProcessCollective(int ranks);

// The processes of a job started by an MPI launcher (`mpirun -np N`), each
// running the same program. Implemented by libtiller_mpi.so
// (src/distributed/), which the runtime loads only when a session asks for
// distribution, so libtiller itself does not depend on MPI.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;  // this process, 0 .. size() - 1
  virtual int size() const = 0;  // processes in the job
  // `bytes` bytes of process `root`'s buffer into every other process's
  // buffer. Every process calls it, from one thread, in the same order.
  virtual void Broadcast(int root, void* buffer, size_t bytes) = 0;
  // The least of every process's `value` (every process calls it): lets
  // the processes agree, e.g. on the first rank that refused its options,
  // so that all fail together instead of some waiting for the others.
  virtual int Min(int value) = 0;
  // `whole` holds `count` elements of `item` bytes of a tensor sharded over
  // size() x local_ranks ranks (rank g owns PartOf(count, size() x
  // local_ranks, g)), this process's ranks' parts in place; fills in every
  // other process's parts. Every process calls it, from one thread.
  virtual void GatherParts(void* whole, int64_t count, size_t item, int local_ranks) = 0;
  // A collective over size() x local_ranks ranks: this process's threads
  // are ranks rank() x local_ranks ... + local_ranks - 1 (the rank argument
  // of its calls is that global rank). Sums run in global rank order, so a
  // job of P processes x L threads gets the bytes one process of P x L
  // threads (MakeInProcessCollective) gets. Every process creates its
  // groups in the same order. A call that waits longer than
  // TILLER_COLLECTIVE_TIMEOUT seconds (300 by default) for the other
  // processes ends the job (MPI_Abort) after printing which rank waited in
  // which operation: MPI alone would wait forever for a rank that hangs.
  virtual std::unique_ptr<Collective> MakeCollective(int local_ranks) = 0;
  // A collective of the processes that pass the same `color`, one rank
  // each, ranked in job order (the same pipeline stage of every replica,
  // when a replica's stages are on several processes). Every process calls
  // it, in the same order.
  virtual std::unique_ptr<Collective> MakeCollectiveOf(int color) = 0;

  // Point to point, between pipeline stages on different processes
  // (compile/processes.h). A message is matched by its sender and its tag;
  // two messages with the same sender and tag arrive in the order sent.
  // Send copies `bytes` out of `data` and returns without waiting for the
  // receiver (the copy is sent in the background); any thread may call it.
  virtual void Send(int to, int64_t tag, const void* data, size_t bytes) = 0;
  // Whether the message (from, tag) has arrived, so that Recv returns at
  // once; never waits.
  virtual bool Arrived(int from, int64_t tag) = 0;
  // Receives exactly `bytes` bytes of the message (from, tag) into `data`,
  // waiting for it as long as the timeout allows (then ends the job, as a
  // collective does).
  virtual void Recv(int from, int64_t tag, void* data, size_t bytes) = 0;
  // TILLER_COLLECTIVE_TIMEOUT: how long any wait for another process lasts.
  virtual double timeout_seconds() const = 0;
  // Prints `why` (naming this rank) and ends the whole job: a wait for
  // another process outlasted the timeout.
  [[noreturn]] virtual void AbortJob(const std::string& why) = 0;
};

}  // namespace tiller::backend
