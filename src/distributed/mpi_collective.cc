// libtiller_mpi.so: the replicas' collectives across the processes of an MPI
// job (backend/collective.h, ProcessGroup). The runtime loads this library
// only when a session asks for distribution, so libtiller and its users do
// not depend on MPI.
//
// A process runs L replicas as threads; the job's P processes run G = P x L.
// One thread per process (local rank 0, "the leader") talks to MPI; the
// others publish their buffers and wait at a local barrier. Sums are done
// as a reduce-scatter followed by an all-gather, each process summing its
// own contiguous range of elements (the parts of its L ranks) over all G
// ranks' inputs in global rank order, then scaling: exactly what
// MakeInProcessCollective computes for G threads, so a job's parameters are
// bit for bit those of one process with the same global replicas. Every
// MPI call is non-blocking and polled against a timeout: MPI itself waits
// forever for a peer that hangs.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "backend/collective.h"
#include "backend/rank_barrier.h"
#include "backend/row_pairs.h"
#include "core/error.h"
#include "core/shape.h"

namespace tiller::distributed {
namespace {

using backend::CopyRow;
using backend::KeepPairsOf;
using backend::PadPairsOf;
using backend::RowGradientPart;
using backend::RowId;
using backend::RowLookup;

using backend::Collective;

// A failed MPI call ends the job with the call named (MPI's default error
// handler would too, with less said).
void Check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  Fail(ErrorKind::kInternal, "{} failed: {}", call, std::string(text, len));
}

int WorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Prints "tiller: rank R of P<what>; ending the job" and ends every process
// of the job: a wait for another process outlasted the timeout.
[[noreturn]] void EndJob(const std::string& what) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::fprintf(stderr, "tiller: rank %d of %d%s; ending the job\n", WorldRank(), size,
               what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

// Polls `request` until it completes; past `timeout_s` prints which rank
// waited in which operation and ends the whole job. Spins briefly (a
// completion usually follows within microseconds on shared memory), then
// sleeps between polls so that waiting does not take the CPU from the
// compute threads of other devices.
void Wait(MPI_Request* request, double timeout_s, const char* what, int64_t call, size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    Check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (polls < 2000) continue;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s)
      EndJob(
          fmt::format(" waited {:.0f} s in {} #{} ({} bytes) for the other ranks (timeout "
                      "{:.0f} s, TILLER_COLLECTIVE_TIMEOUT): a rank died or stopped answering",
                      waited, what, call, bytes, timeout_s));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

int CountOrFail(int64_t n, const char* what) {
  if (n > INT_MAX)
    Fail(ErrorKind::kUnimplemented, "{}: {} elements in one MPI message (at most {})", what, n,
         INT_MAX);
  return static_cast<int>(n);
}

// The elements process p of `processes` holds of a tensor of `count`
// elements sharded over processes x local ranks: its ranks' parts,
// contiguous.
PartRange ProcessRange(int64_t count, int processes, int local, int p) {
  const int ranks = processes * local;
  return {PartOf(count, ranks, p * local).begin, PartOf(count, ranks, p * local + local - 1).end};
}

// Every process's range of `whole` (its own in place) into every process's
// `whole`: one non-blocking all-gather, polled against the timeout.
void GatherProcessRanges(MPI_Comm comm, void* whole, int64_t count, size_t item, int local,
                         double timeout_s, const char* what, int64_t call) {
  int processes = 1;
  MPI_Comm_size(comm, &processes);
  std::vector<int> counts(processes), at(processes);
  for (int q = 0; q < processes; ++q) {
    const PartRange r = ProcessRange(count, processes, local, q);
    counts[q] = CountOrFail(r.size(), what);
    at[q] = CountOrFail(r.begin, what);
  }
  MPI_Datatype type;
  Check(MPI_Type_contiguous(static_cast<int>(item), MPI_BYTE, &type), "MPI_Type_contiguous");
  Check(MPI_Type_commit(&type), "MPI_Type_commit");
  MPI_Request request;
  Check(
      MPI_Iallgatherv(MPI_IN_PLACE, 0, type, whole, counts.data(), at.data(), type, comm, &request),
      "MPI_Iallgatherv");
  Wait(&request, timeout_s, what, call, static_cast<size_t>(count) * item);
  MPI_Type_free(&type);
}

class MpiCollective : public Collective {
 public:
  // Over the processes of `parent` (the job, or the processes of one
  // pipeline stage), local_ranks threads each.
  MpiCollective(int local_ranks, double timeout_s, MPI_Comm parent = MPI_COMM_WORLD)
      : local_(local_ranks),
        timeout_s_(timeout_s),
        barrier_(local_ranks, local_ranks <= backend::UsableCpus()) {
    MPI_Request request;
    Check(MPI_Comm_idup(parent, &comm_, &request), "MPI_Comm_idup");
    Wait(&request, timeout_s_, "creating a replica group", 0, 0);
    MPI_Comm_rank(comm_, &process_);
    MPI_Comm_size(comm_, &processes_);
    in_.resize(local_);
    out_.resize(local_);
  }
  ~MpiCollective() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int size() const override { return processes_ * local_; }

  void AllReduceSum(int rank, const void* in, void* out, int64_t count, DType dtype,
                    double scale) override {
    const int local = Local(rank);
    CheckSum(dtype, "all-reduce");
    Publish(local, in, out);
    if (local == 0) {
      // In chunks of kChunk elements, each a complete all-reduce of its
      // elements: what a rank sends, receives and sums stays in cache
      // (measured here: 2 processes, 1 MiB messages 4.5 GB/s bus bandwidth,
      // 16-64 MiB ones 1.6). Elements are summed as before.
      const size_t item = Item(dtype);
      const std::vector<const void*> inputs = in_;
      std::byte* const whole = static_cast<std::byte*>(out_[0]);
      int64_t at = 0;
      do {
        const int64_t n = std::min(kChunk, count - at);
        for (int l = 0; l < local_; ++l)
          in_[l] = static_cast<const std::byte*>(inputs[l]) + at * item;
        std::byte* chunk = whole + at * item;
        const PartRange mine = ProcessRange(n, process_);
        SumMyRange(n, dtype, scale, chunk + mine.begin * item, "all-reduce");
        GatherRanges(n, dtype, chunk, "all-reduce");
        at += n;
      } while (at < count);
      in_ = inputs;
    }
    LocalBarrier();
    if (local != 0 && out != out_[0] && count)
      std::memcpy(out, out_[0], static_cast<size_t>(count) * Item(dtype));
    LocalBarrier();  // out_[0] stays until every copy is done
  }

  void ReduceScatterSum(int rank, const void* in, void* out, int64_t count, DType dtype,
                        double scale) override {
    const int local = Local(rank);
    CheckSum(dtype, "reduce-scatter");
    Publish(local, in, out);
    const PartRange mine = ProcessRange(count, process_);
    const size_t item = Item(dtype);
    if (local == 0) {
      sum_.resize(static_cast<size_t>(mine.size()) * item);
      SumMyRange(count, dtype, scale, sum_.data(), "reduce-scatter");
    }
    LocalBarrier();
    const PartRange part = PartOf(count, size(), rank);
    if (part.size())
      std::memcpy(out, sum_.data() + (part.begin - mine.begin) * item,
                  static_cast<size_t>(part.size()) * item);
    LocalBarrier();
  }

  void AllGather(int rank, const void* in, void* out, int64_t count, DType dtype) override {
    const int local = Local(rank);
    Publish(local, in, out);
    if (local == 0) {
      const size_t item = Item(dtype);
      for (int l = 0; l < local_; ++l) {
        const PartRange part = PartOf(count, size(), process_ * local_ + l);
        if (part.size())
          std::memcpy(static_cast<std::byte*>(out_[0]) + part.begin * item, in_[l],
                      static_cast<size_t>(part.size()) * item);
      }
      GatherRanges(count, dtype, out_[0], "all-gather");
    }
    LocalBarrier();
    if (local != 0 && count) std::memcpy(out, out_[0], static_cast<size_t>(count) * Item(dtype));
    LocalBarrier();
  }

  // With one replica per process: each rank asks the owners for the rows
  // of its ids (their ids in one all-to-all, the rows back in another),
  // instead of the default's dense, zero-filled rows of every rank's ids.
  void GatherRows(int rank, std::span<const RowLookup> lookups, void* workspace) override {
    if (local_ != 1) return Collective::GatherRows(rank, lookups, workspace);
    const size_t nt = lookups.size(), np = static_cast<size_t>(processes_);
    // Requests by owner, then lookup, then position: counts[o * nt + t].
    // Each position's owner (-1: an id out of range or the padding row,
    // answered with zeros here) is found once, with the counts, for the
    // packing and placing passes.
    std::vector<int> counts(np * nt, 0), recv_counts(np * nt, 0);
    FindOwners(
        lookups,
        [](const RowLookup& l, int64_t id) {
          return id >= 0 && id < l.vocab && id != l.padding_row;
        },
        &counts);
    ExchangeCounts(counts, &recv_counts, "gather-rows counts");
    // The ids, packed by owner.
    std::vector<int64_t> asked;
    std::vector<int> send_n(np, 0), send_at(np, 0), recv_n(np, 0), recv_at(np, 0);
    Totals(counts, lookups, false, &send_n, &send_at);
    Totals(recv_counts, lookups, false, &recv_n, &recv_at);
    asked.resize(static_cast<size_t>(send_at.back()) + static_cast<size_t>(send_n.back()));
    // Where each (owner, lookup) slot starts: in the ids asked, and in the
    // rows that come back.
    std::vector<size_t> id_cursor, cursor;
    SlotOffsets(counts, lookups, &id_cursor, &cursor);
    {
      size_t k = 0;
      for (size_t t = 0; t < nt; ++t)
        for (int64_t i = 0; i < lookups[t].n; ++i, ++k)
          if (owners_[k] >= 0)
            asked[id_cursor[static_cast<size_t>(owners_[k]) * nt + t]++] =
                RowId(lookups[t].ids, lookups[t].ids64, i);
    }
    std::vector<int64_t> wanted(static_cast<size_t>(recv_at.back()) +
                                static_cast<size_t>(recv_n.back()));
    AllToAll(asked.data(), send_n, send_at, wanted.data(), recv_n, recv_at, MPI_INT64_T,
             "gather-rows ids");
    // The owner's replies: each asked id's row, in the order asked.
    std::vector<int> reply_n(np, 0), reply_at(np, 0), back_n(np, 0), back_at(np, 0);
    Totals(recv_counts, lookups, true, &reply_n, &reply_at);
    Totals(counts, lookups, true, &back_n, &back_at);
    send_.resize(static_cast<size_t>(reply_at.back()) + static_cast<size_t>(reply_n.back()));
    {
      // The rows asked lie anywhere in this part: each is prefetched
      // kAhead rows before its copy (a miss to memory apiece otherwise).
      constexpr int kAhead = 8;
      size_t at = 0, k = 0;
      for (size_t q = 0; q < np; ++q)
        for (size_t t = 0; t < nt; ++t) {
          const RowLookup& l = lookups[t];
          const auto* rows = static_cast<const std::byte*>(l.part);
          const int64_t begin = PartOf(l.vocab, processes_, process_).begin;
          const int count = recv_counts[q * nt + t];
          for (int c = 0; c < count; ++c, ++k, at += l.row_bytes) {
            if (c + kAhead < count) {
              const std::byte* ahead =
                  rows + static_cast<size_t>(wanted[k + kAhead] - begin) * l.row_bytes;
              for (size_t j = 0; j < l.row_bytes; j += 64) __builtin_prefetch(ahead + j);
            }
            CopyRow(send_.data() + at, rows + static_cast<size_t>(wanted[k] - begin) * l.row_bytes,
                    l.row_bytes);
          }
        }
    }
    recv_.resize(static_cast<size_t>(back_at.back()) + static_cast<size_t>(back_n.back()));
    AllToAll(send_.data(), reply_n, reply_at, recv_.data(), back_n, back_at, MPI_BYTE,
             "gather-rows rows");
    // Into place: each owner's replies in the order this rank asked.
    size_t k = 0;
    for (size_t t = 0; t < nt; ++t) {
      const RowLookup& l = lookups[t];
      auto* out = static_cast<std::byte*>(l.out);
      for (int64_t i = 0; i < l.n; ++i, ++k, out += l.row_bytes) {
        const int o = owners_[k];
        if (o < 0) {
          std::memset(out, 0, l.row_bytes);
          continue;
        }
        size_t& at = cursor[static_cast<size_t>(o) * nt + t];
        CopyRow(out, recv_.data() + at, l.row_bytes);
        at += l.row_bytes;
      }
    }
  }

  // With one replica per process: each rank sends each owner the pairs of
  // its rows (counts in one all-to-all, ids and rows in two more), instead
  // of gathering every rank's pairs.
  void ExchangeRows(int rank, std::span<const RowGradientPart> parts, void* workspace) override {
    if (local_ != 1) return Collective::ExchangeRows(rank, parts, workspace);
    const size_t nt = parts.size(), np = static_cast<size_t>(processes_);
    std::vector<int> counts(np * nt, 0), recv_counts(np * nt, 0);
    FindOwners(
        parts, [](const RowGradientPart& p, int64_t id) { return id >= 0 && id < p.vocab; },
        &counts);
    ExchangeCounts(counts, &recv_counts, "exchange-rows counts");
    std::vector<int> send_n(np, 0), send_at(np, 0), recv_n(np, 0), recv_at(np, 0);
    Totals(counts, parts, false, &send_n, &send_at);
    Totals(recv_counts, parts, false, &recv_n, &recv_at);
    std::vector<int> bytes_n(np, 0), bytes_at(np, 0), rbytes_n(np, 0), rbytes_at(np, 0);
    Totals(counts, parts, true, &bytes_n, &bytes_at);
    Totals(recv_counts, parts, true, &rbytes_n, &rbytes_at);
    std::vector<int64_t> ids(static_cast<size_t>(send_at.back()) +
                             static_cast<size_t>(send_n.back()));
    send_.resize(static_cast<size_t>(bytes_at.back()) + static_cast<size_t>(bytes_n.back()));
    {
      std::vector<size_t> id_cursor, byte_cursor;
      SlotOffsets(counts, parts, &id_cursor, &byte_cursor);
      size_t k = 0;
      for (size_t t = 0; t < nt; ++t) {
        const RowGradientPart& p = parts[t];
        for (int64_t i = 0; i < p.n; ++i, ++k) {
          if (owners_[k] < 0) continue;
          const size_t slot = static_cast<size_t>(owners_[k]) * nt + t;
          ids[id_cursor[slot]++] = RowId(p.ids, p.ids64, i);
          CopyRow(send_.data() + byte_cursor[slot],
                  static_cast<const std::byte*>(p.rows) + static_cast<size_t>(i) * p.row_bytes,
                  p.row_bytes);
          byte_cursor[slot] += p.row_bytes;
        }
      }
    }
    std::vector<int64_t> got(static_cast<size_t>(recv_at.back()) +
                             static_cast<size_t>(recv_n.back()));
    AllToAll(ids.data(), send_n, send_at, got.data(), recv_n, recv_at, MPI_INT64_T,
             "exchange-rows ids");
    recv_.resize(static_cast<size_t>(rbytes_at.back()) + static_cast<size_t>(rbytes_n.back()));
    AllToAll(send_.data(), bytes_n, bytes_at, recv_.data(), rbytes_n, rbytes_at, MPI_BYTE,
             "exchange-rows rows");
    // Each table's pairs in rank order, then in order; the rest padded.
    std::vector<size_t> id_at, byte_at;
    SlotOffsets(recv_counts, parts, &id_at, &byte_at);
    for (size_t t = 0; t < nt; ++t) {
      const RowGradientPart& p = parts[t];
      const PartRange own = PartOf(p.vocab, processes_, process_);
      int64_t count = 0;
      for (size_t q = 0; q < np; ++q) {
        const size_t slot = q * nt + t;
        KeepPairsOf(p, own, got.data() + id_at[slot], recv_.data() + byte_at[slot],
                    recv_counts[slot], &count);
      }
      PadPairsOf(p, processes_, own, count);
    }
  }

  void Broadcast(int rank, int root, void* buffer, size_t bytes) override {
    const int local = Local(rank);
    TILLER_CHECK(root >= 0 && root < size(), "root {} of {}", root, size());
    Publish(local, buffer, buffer);
    if (local == 0) {
      const int root_process = root / local_, root_local = root % local_;
      if (root_process == process_ && root_local != 0 && bytes)
        std::memcpy(out_[0], out_[root_local], bytes);
      BroadcastBytes(comm_, root_process, out_[0], bytes, timeout_s_, ++calls_);
    }
    LocalBarrier();
    if (local != 0 && bytes) std::memcpy(buffer, out_[0], bytes);
    LocalBarrier();
  }

  void Abort(const std::string& why) override { barrier_.Abort(why); }
  void Reset() override { barrier_.Reset(); }

  static void BroadcastBytes(MPI_Comm comm, int root, void* buffer, size_t bytes, double timeout_s,
                             int64_t call) {
    // MPI counts are ints: large buffers go in pieces.
    constexpr size_t kPiece = size_t{1} << 30;
    for (size_t at = 0; at < bytes; at += kPiece) {
      MPI_Request request;
      Check(MPI_Ibcast(static_cast<std::byte*>(buffer) + at,
                       static_cast<int>(std::min(kPiece, bytes - at)), MPI_BYTE, root, comm,
                       &request),
            "MPI_Ibcast");
      Wait(&request, timeout_s, "broadcast", call, bytes);
    }
  }

 private:
  int Local(int rank) const {
    const int local = rank - process_ * local_;
    TILLER_CHECK(local >= 0 && local < local_, "rank {} is not one of process {}'s {} ranks", rank,
                 process_, local_);
    return local;
  }

  static void CheckSum(DType dtype, const char* what) {
    TILLER_CHECK(dtype == DType::kF32 || dtype == DType::kF64, "{} of {}", what, DTypeName(dtype));
  }
  static size_t Item(DType dtype) { return DTypeSize(dtype); }

  // The elements process p sums: the parts of its local ranks, contiguous.
  PartRange ProcessRange(int64_t count, int p) const {
    return distributed::ProcessRange(count, processes_, local_, p);
  }

  void Publish(int local, const void* in, void* out) {
    in_[local] = in;
    out_[local] = out;
    LocalBarrier();  // every local rank's buffers published
  }

  // Every rank's input over this process's range, summed in global rank
  // order and scaled, into `dest`. One all-to-all moves, to each process,
  // its range of every local rank's input.
  void SumMyRange(int64_t count, DType dtype, double scale, void* dest, const char* what) {
    const size_t item = Item(dtype);
    const PartRange mine = ProcessRange(count, process_);
    std::vector<int> send_counts(processes_), send_at(processes_), recv_counts(processes_),
        recv_at(processes_);
    // Sent: for each process q, its range of each local input, in local
    // rank order (one local rank: the input itself, in place).
    const void* send = in_[0];
    if (local_ > 1) {
      send_.resize(static_cast<size_t>(count) * local_ * item);
      int64_t at = 0;
      for (int q = 0; q < processes_; ++q) {
        const PartRange r = ProcessRange(count, q);
        for (int l = 0; l < local_; ++l, at += r.size())
          if (r.size())
            std::memcpy(send_.data() + at * item,
                        static_cast<const std::byte*>(in_[l]) + r.begin * item,
                        static_cast<size_t>(r.size()) * item);
      }
      send = send_.data();
    }
    int64_t at = 0;
    for (int q = 0; q < processes_; ++q) {
      const PartRange r = ProcessRange(count, q);
      send_counts[q] = CountOrFail(r.size() * local_, what);
      send_at[q] = CountOrFail(at, what);
      at += r.size() * local_;
      recv_counts[q] = CountOrFail(mine.size() * local_, what);
      recv_at[q] = CountOrFail(mine.size() * local_ * q, what);
    }
    recv_.resize(static_cast<size_t>(mine.size()) * local_ * processes_ * item);
    MPI_Datatype type = dtype == DType::kF32 ? MPI_FLOAT : MPI_DOUBLE;
    MPI_Request request;
    Check(MPI_Ialltoallv(send, send_counts.data(), send_at.data(), type, recv_.data(),
                         recv_counts.data(), recv_at.data(), type, comm_, &request),
          "MPI_Ialltoallv");
    Wait(&request, timeout_s_, what, ++calls_, static_cast<size_t>(count) * item);
    // recv_ holds G blocks of mine.size() elements, in global rank order.
    const int ranks = size();
    if (dtype == DType::kF32)
      SumBlocks<float>(reinterpret_cast<const float*>(recv_.data()), ranks, mine.size(),
                       static_cast<float>(scale), static_cast<float*>(dest));
    else
      SumBlocks<double>(reinterpret_cast<const double*>(recv_.data()), ranks, mine.size(), scale,
                        static_cast<double*>(dest));
  }

  // dest[i] = (blocks[0][i] + blocks[1][i] + ...) * scale, each element
  // added in block order then scaled, as MakeInProcessCollective adds.
  template <typename T>
  static void SumBlocks(const T* blocks, int n_blocks, int64_t n, T scale, T* dest) {
    for (int64_t i = 0; i < n; ++i) dest[i] = blocks[i];
    for (int b = 1; b < n_blocks; ++b) {
      const T* __restrict next = blocks + b * n;
      for (int64_t i = 0; i < n; ++i) dest[i] += next[i];
    }
    if (scale != T(1))
      for (int64_t i = 0; i < n; ++i) dest[i] *= scale;
  }

  // Every process's range of `whole` (its own already in place) into every
  // process's `whole`.
  void GatherRanges(int64_t count, DType dtype, void* whole, const char* what) {
    GatherProcessRanges(comm_, whole, count, Item(dtype), local_, timeout_s_, what, ++calls_);
  }

  // Waits until every local rank has arrived (threads of this process; one
  // needs no barrier).
  void LocalBarrier() {
    if (local_ > 1) barrier_.Wait();
  }

  static constexpr int64_t kChunk = int64_t{1} << 18;
  // Where each (process, table) slot of a message packed by process, then
  // table starts: in ids (*ids_at) and in bytes (*bytes_at, table t's rows
  // row_bytes each), from counts[o * T + t].
  template <typename Table>
  static void SlotOffsets(const std::vector<int>& counts, std::span<const Table> tables,
                          std::vector<size_t>* ids_at, std::vector<size_t>* bytes_at) {
    const size_t nt = tables.size();
    ids_at->assign(counts.size(), 0);
    bytes_at->assign(counts.size(), 0);
    size_t at = 0, b = 0;
    for (size_t slot = 0; slot < counts.size(); ++slot) {
      (*ids_at)[slot] = at;
      (*bytes_at)[slot] = b;
      at += static_cast<size_t>(counts[slot]);
      b += static_cast<size_t>(counts[slot]) * tables[slot % nt].row_bytes;
    }
  }
  // owners_[k]: the process holding the row of position k (tables in
  // order, then positions), or -1 where keep(table, id) is false; and
  // counts[o * T + t]: how many of table t's positions process o holds. A
  // table's part bounds are found once; each id's owner by a scan over
  // them.
  template <typename Table, typename Keep>
  void FindOwners(std::span<const Table> tables, Keep keep, std::vector<int>* counts) {
    const size_t nt = tables.size();
    size_t total = 0;
    for (const Table& t : tables) total += static_cast<size_t>(t.n);
    owners_.resize(total);
    std::vector<int64_t> ends(static_cast<size_t>(processes_));
    size_t k = 0;
    for (size_t ti = 0; ti < nt; ++ti) {
      const Table& t = tables[ti];
      for (int p = 0; p < processes_; ++p)
        ends[static_cast<size_t>(p)] = PartOf(t.vocab, processes_, p).end;
      for (int64_t i = 0; i < t.n; ++i, ++k) {
        const int64_t id = RowId(t.ids, t.ids64, i);
        int o = -1;
        if (keep(t, id)) {
          for (o = 0; id >= ends[static_cast<size_t>(o)];) ++o;
          ++(*counts)[static_cast<size_t>(o) * nt + ti];
        }
        owners_[k] = o;
      }
    }
  }
  // counts[o * T + t] (to each process o) -> what each process sends here.
  void ExchangeCounts(const std::vector<int>& counts, std::vector<int>* recv, const char* what) {
    const int per = static_cast<int>(counts.size()) / processes_;
    MPI_Request request;
    Check(MPI_Ialltoall(counts.data(), per, MPI_INT, recv->data(), per, MPI_INT, comm_, &request),
          "MPI_Ialltoall");
    Wait(&request, timeout_s_, what, ++calls_, counts.size() * sizeof(int));
  }
  // Per process: what its T counts hold (elements, or where in_bytes the
  // rows' bytes: table t's are row_bytes each), and where that starts.
  template <typename Table>
  void Totals(const std::vector<int>& counts, std::span<const Table> tables, bool in_bytes,
              std::vector<int>* n, std::vector<int>* at) const {
    const size_t nt = tables.size();
    int64_t total = 0;
    for (size_t o = 0; o < static_cast<size_t>(processes_); ++o) {
      int64_t sum = 0;
      for (size_t t = 0; t < nt; ++t)
        sum += static_cast<int64_t>(counts[o * nt + t]) *
               (in_bytes ? static_cast<int64_t>(tables[t].row_bytes) : 1);
      (*n)[o] = CountOrFail(sum, "row exchange");
      (*at)[o] = CountOrFail(total, "row exchange");
      total += sum;
    }
  }
  void AllToAll(const void* send, const std::vector<int>& send_n, const std::vector<int>& send_at,
                void* recv, const std::vector<int>& recv_n, const std::vector<int>& recv_at,
                MPI_Datatype type, const char* what) {
    MPI_Request request;
    Check(MPI_Ialltoallv(send, send_n.data(), send_at.data(), type, recv, recv_n.data(),
                         recv_at.data(), type, comm_, &request),
          "MPI_Ialltoallv");
    Wait(&request, timeout_s_, what, ++calls_, 0);
  }

  const int local_;
  const double timeout_s_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int process_ = 0, processes_ = 1;
  int64_t calls_ = 0;
  std::vector<const void*> in_;
  std::vector<void*> out_;
  std::vector<std::byte> send_, recv_, sum_;
  std::vector<int> owners_;  // FindOwners
  backend::RankBarrier barrier_;
};

class MpiProcessGroup : public backend::ProcessGroup {
 public:
  MpiProcessGroup() {
    Check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    Check(MPI_Comm_dup(MPI_COMM_WORLD, &p2p_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    void* ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    if (found && ub) tag_ub_ = *static_cast<int*>(ub);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void Broadcast(int root, void* buffer, size_t bytes) override {
    TILLER_CHECK(root >= 0 && root < size_, "root {} of {} processes", root, size_);
    MpiCollective::BroadcastBytes(comm_, root, buffer, bytes, Timeout(), ++calls_);
  }
  int Min(int value) override {
    int least = value;
    MPI_Request request;
    Check(MPI_Iallreduce(&value, &least, 1, MPI_INT, MPI_MIN, comm_, &request), "MPI_Iallreduce");
    Wait(&request, Timeout(), "agreeing on options", ++calls_, sizeof value);
    return least;
  }
  void GatherParts(void* whole, int64_t count, size_t item, int local_ranks) override {
    TILLER_CHECK(local_ranks >= 1, "{} local ranks", local_ranks);
    GatherProcessRanges(comm_, whole, count, item, local_ranks, Timeout(),
                        "gathering a sharded state (every process must read the state)", ++calls_);
  }
  std::unique_ptr<Collective> MakeCollective(int local_ranks) override {
    TILLER_CHECK(local_ranks >= 1, "{} local ranks", local_ranks);
    return std::make_unique<MpiCollective>(local_ranks, Timeout());
  }

  std::unique_ptr<Collective> MakeCollectiveOf(int color) override {
    TILLER_CHECK(color >= 0, "color {}", color);
    MPI_Comm sub = MPI_COMM_NULL;
    Check(MPI_Comm_split(comm_, color, rank_, &sub), "MPI_Comm_split");
    auto group = std::make_unique<MpiCollective>(1, Timeout(), sub);
    MPI_Comm_free(&sub);
    return group;
  }

  // Sends go out of staging buffers (the caller's bytes may be overwritten
  // as soon as Send returns), kept and reused once MPI is done with them:
  // a pipeline's steady state sends the same messages every step, so the
  // buffers stop growing after the first.
  void Send(int to, int64_t tag, const void* data, size_t bytes) override {
    TILLER_CHECK(to >= 0 && to < size_ && to != rank_, "send to rank {} from {} of {}", to, rank_,
                 size_);
    const int count = CountOrFail(static_cast<int64_t>(bytes), "a pipeline message");
    std::lock_guard<std::mutex> lock(send_mu_);
    Outbox* box = nullptr;
    for (Outbox& b : outboxes_) {
      if (b.request != MPI_REQUEST_NULL) {
        int done = 0;
        Check(MPI_Test(&b.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (!done) continue;
      }
      if (b.bytes.size() >= bytes && (!box || b.bytes.size() < box->bytes.size())) box = &b;
    }
    if (!box) {
      outboxes_.emplace_back();
      box = &outboxes_.back();
      box->bytes.resize(bytes);
    }
    if (bytes) std::memcpy(box->bytes.data(), data, bytes);
    Check(MPI_Isend(box->bytes.data(), count, MPI_BYTE, to, Tag(tag), p2p_, &box->request),
          "MPI_Isend");
  }
  bool Arrived(int from, int64_t tag) override {
    int flag = 0;
    Check(MPI_Iprobe(from, Tag(tag), p2p_, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe");
    return flag != 0;
  }
  void Recv(int from, int64_t tag, void* data, size_t bytes) override {
    TILLER_CHECK(from >= 0 && from < size_ && from != rank_, "receive from rank {} at {} of {}",
                 from, rank_, size_);
    MPI_Request request;
    Check(MPI_Irecv(data, CountOrFail(static_cast<int64_t>(bytes), "a pipeline message"), MPI_BYTE,
                    from, Tag(tag), p2p_, &request),
          "MPI_Irecv");
    Wait(&request, Timeout(), "a pipeline receive", tag, bytes);
  }
  double timeout_seconds() const override { return Timeout(); }
  [[noreturn]] void AbortJob(const std::string& why) override { EndJob(": " + why); }

  // TILLER_COLLECTIVE_TIMEOUT seconds, 300 by default.
  static double Timeout() {
    const char* env = std::getenv("TILLER_COLLECTIVE_TIMEOUT");
    if (!env || !*env) return 300;
    char* end = nullptr;
    const double s = std::strtod(env, &end);
    if (*end || !(s > 0))
      Fail(ErrorKind::kInvalidArgument,
           "TILLER_COLLECTIVE_TIMEOUT='{}': expected a number of seconds > 0", env);
    return s;
  }

 private:
  // MPI tags are ints up to MPI_TAG_UB (at least 32767): the caller's tags
  // wrap around it. Messages of the same tag from one sender still arrive
  // in order, and a pipeline has far fewer in flight.
  int Tag(int64_t tag) const {
    TILLER_CHECK(tag >= 0, "message tag {}", tag);
    return static_cast<int>(tag % (static_cast<int64_t>(tag_ub_) + 1));
  }
  struct Outbox {
    std::vector<std::byte> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  MPI_Comm comm_ = MPI_COMM_NULL;
  // Point to point apart from the collectives: their messages never match.
  MPI_Comm p2p_ = MPI_COMM_NULL;
  int tag_ub_ = 32767;
  int rank_ = 0, size_ = 1;
  int64_t calls_ = 0;
  std::mutex send_mu_;
  std::deque<Outbox> outboxes_;  // stable addresses: MPI holds them
};

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace
}  // namespace tiller::distributed

// The library's one entry point (resolved with dlsym by the runtime):
// initializes MPI once (threads: every device's stream may call it) and
// returns the job's process group, owned by the library. Failures throw
// tiller::Error.
extern "C" __attribute__((visibility("default"))) tiller::backend::ProcessGroup*
TillerMpiProcessGroup() {
  using namespace tiller;
  static std::once_flag once;
  static std::unique_ptr<distributed::MpiProcessGroup> group;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      distributed::Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
                         "MPI_Init_thread");
      std::atexit(distributed::FinalizeAtExit);
      if (provided < MPI_THREAD_MULTIPLE)
        Fail(ErrorKind::kUnimplemented,
             "the MPI library provides thread level {} (needs MPI_THREAD_MULTIPLE: each device's "
             "stream runs its own collectives)",
             provided);
    } else {
      int provided = 0;
      MPI_Query_thread(&provided);
      if (provided < MPI_THREAD_MULTIPLE)
        Fail(ErrorKind::kUnimplemented,
             "MPI was initialized before Tiller with thread level {}: initialize it with "
             "MPI_THREAD_MULTIPLE (mpi4py: mpi4py.rc.thread_level = 'multiple')",
             provided);
    }
    group = std::make_unique<distributed::MpiProcessGroup>();
  });
  return group.get();
}
