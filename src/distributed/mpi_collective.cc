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
// forever for a peer that hangs (mpi_wait.h). Where the whole group shares
// a node, with one replica per process, the all-reduces and the sparse
// tables' row exchanges read each other's bytes in shared memory instead
// (node_memory.h).
#include <fmt/format.h>
#include <mpi.h>
#include <sched.h>

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
#include "distributed/mpi_wait.h"
#include "distributed/node_memory.h"

namespace tiller::distributed {
namespace {

using backend::CopyRow;
using backend::KeepPairsOf;
using backend::PadPairsOf;
using backend::RowGradientPart;
using backend::RowLookup;

using backend::Collective;

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
                         double timeout_s, const char* what, int64_t call,
                         std::chrono::microseconds spin = kShortSpin) {
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
  Wait(&request, timeout_s, what, call, static_cast<size_t>(count) * item, spin);
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
    const NodeSurvey node = SurveyNode(comm_, local_, timeout_s_);
    spin_ = node.fits ? kLongSpin : kShortSpin;
    // One replica per process: the all-reduces and the row exchanges read
    // each other's bytes in shared memory (node_memory.h), where the whole
    // group is on one node. (Several replicas per process: messages.)
    if (node.shared && local_ == 1) {
      node_ = std::make_unique<NodeMemory>(comm_, timeout_s_, spin_);
      if (!node_->ok()) node_.reset();
    }
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
    if (node_ && count > 0 && static_cast<size_t>(count) * Item(dtype) <= kSharedAllReduceBytes &&
        SharedAllReduce(in, out, count, dtype, scale))
      return;
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

  // With one replica per process: each rank asks the other owners for the
  // rows of its ids (their ids in one all-to-all, the rows back in
  // another), instead of the default's dense, zero-filled rows of every
  // rank's ids. Its own rows it copies from its part while the others' are
  // on their way. Positions are sorted by owner first (FindOwners,
  // SortByOwner), so that every pass after runs over one owner's list
  // without a branch on the owner: owners are as good as random per
  // position, and a mispredicted branch per position cost more than the
  // copies.
  void GatherRows(int rank, std::span<const RowLookup> lookups, void* workspace) override {
    if (local_ != 1) return Collective::GatherRows(rank, lookups, workspace);
    if (node_ && SharedGatherRows(lookups)) return;
    const size_t nt = lookups.size(), np = static_cast<size_t>(processes_);
    const auto self = static_cast<size_t>(process_);
    std::vector<int> counts((np + 1) * nt, 0);
    std::vector<size_t> slot_at;
    SortLookupsByOwner(lookups, &counts, &slot_at);
    // What this process asks of each process (nothing of itself), and what
    // each asks of it.
    std::vector<int> asks(counts.begin(), counts.begin() + static_cast<ptrdiff_t>(np * nt)),
        asked(np * nt, 0);
    std::fill_n(asks.begin() + static_cast<ptrdiff_t>(self * nt), nt, 0);
    ExchangeCounts(asks, &asked, "gather-rows counts");
    std::vector<int> send_n(np, 0), send_at(np, 0), recv_n(np, 0), recv_at(np, 0);
    for (size_t o = 0; o < np; ++o)
      send_at[o] = CountOrFail(static_cast<int64_t>(slot_at[o * nt]), "gather-rows ids");
    Totals(asks, lookups, false, &send_n, nullptr);
    Totals(asked, lookups, false, &recv_n, &recv_at);
    std::vector<int64_t> wanted(static_cast<size_t>(recv_at.back()) +
                                static_cast<size_t>(recv_n.back()));
    MPI_Request request = StartAllToAll(sorted_ids_.data(), send_n, send_at, wanted.data(), recv_n,
                                        recv_at, MPI_INT64_T);
    Wait(&request, timeout_s_, "gather-rows ids", ++calls_, 0, spin_);
    // The replies: each asked id's row, in the order asked.
    std::vector<int> reply_n(np, 0), reply_at(np, 0), back_n(np, 0), back_at(np, 0);
    Totals(asked, lookups, true, &reply_n, &reply_at);
    Totals(asks, lookups, true, &back_n, &back_at);
    send_.resize(static_cast<size_t>(reply_at.back()) + static_cast<size_t>(reply_n.back()));
    {
      size_t at = 0, k = 0;
      for (size_t q = 0; q < np; ++q)
        for (size_t t = 0; t < nt; ++t) {
          const RowLookup& l = lookups[t];
          const auto count = static_cast<size_t>(asked[q * nt + t]);
          CopyPartRows(l, wanted.data() + k, count, nullptr, send_.data() + at);
          k += count;
          at += count * l.row_bytes;
        }
    }
    recv_.resize(static_cast<size_t>(back_at.back()) + static_cast<size_t>(back_n.back()));
    request =
        StartAllToAll(send_.data(), reply_n, reply_at, recv_.data(), back_n, back_at, MPI_BYTE);
    // Meanwhile, this process's own rows and the zeros.
    CopyOwnRowsAndZeros(lookups, counts, slot_at);
    Wait(&request, timeout_s_, "gather-rows rows", ++calls_, 0, spin_);
    // The others' replies into place.
    const std::byte* reply = recv_.data();
    for (size_t q = 0; q < np; ++q)
      for (size_t t = 0; t < nt; ++t) {
        const RowLookup& l = lookups[t];
        auto* out = static_cast<std::byte*>(l.out);
        const size_t slot = q * nt + t;
        const size_t end = slot_at[slot] + static_cast<size_t>(asks[slot]);
        for (size_t j = slot_at[slot]; j < end; ++j, reply += l.row_bytes)
          CopyRow(out + sorted_at_[j] * l.row_bytes, reply, l.row_bytes);
      }
  }

  // With one replica per process: each rank sends each other owner the
  // pairs of its rows (counts in one all-to-all, ids and rows in one
  // message per process in another), instead of gathering every rank's
  // pairs. Its own pairs it keeps, at their place in rank order, while the
  // others' are on their way. Pairs are packed by owner without a branch
  // on the owner, its own and the dropped ones (ids out of range) into
  // messages that are not sent.
  void ExchangeRows(int rank, std::span<const RowGradientPart> parts, void* workspace) override {
    if (local_ != 1) return Collective::ExchangeRows(rank, parts, workspace);
    if (node_ && SharedExchangeRows(parts)) return;
    const size_t nt = parts.size(), np = static_cast<size_t>(processes_);
    const auto self = static_cast<size_t>(process_);
    std::vector<int> counts((np + 1) * nt, 0);
    FindOwners(
        parts, [](const RowGradientPart& p, int64_t id) { return (id >= 0) & (id < p.vocab); },
        &counts);
    std::vector<int> sends(counts.begin(), counts.begin() + static_cast<ptrdiff_t>(np * nt)),
        gets(np * nt, 0);
    std::fill_n(sends.begin() + static_cast<ptrdiff_t>(self * nt), nt, 0);
    ExchangeCounts(sends, &gets, "exchange-rows counts");
    // A message per owner (and one of the dropped pairs): its pairs' ids
    // (int64, table by table), then their rows (table by table), padded to
    // 8 bytes.
    std::vector<int> pack_n(np + 1, 0), pack_at(np + 1, 0);
    PairMessages(counts, parts, &pack_n, &pack_at);
    send_.resize(static_cast<size_t>(pack_at.back()) + static_cast<size_t>(pack_n.back()));
    std::vector<size_t> id_at, row_at;
    PairOffsets(counts, parts, pack_at, &id_at, &row_at);
    {
      // A table's cursors, one per owner, in local arrays the stores below
      // cannot alias.
      std::byte* const base = send_.data();
      std::vector<size_t> id_cursor(np + 1), row_cursor(np + 1);
      const int* owners = owners_.data();
      for (size_t t = 0; t < nt; ++t) {
        const RowGradientPart& p = parts[t];
        for (size_t o = 0; o <= np; ++o) {
          id_cursor[o] = id_at[o * nt + t];
          row_cursor[o] = row_at[o * nt + t];
        }
        size_t* __restrict ic = id_cursor.data();
        size_t* __restrict rc = row_cursor.data();
        const auto* rows = static_cast<const std::byte*>(p.rows);
        const size_t rb = p.row_bytes;
        auto pack = [&](const auto* __restrict ids) {
          for (int64_t i = 0; i < p.n; ++i) {
            const int o = owners[i];
            const auto id = static_cast<int64_t>(ids[i]);
            std::memcpy(base + ic[o], &id, sizeof id);
            ic[o] += sizeof id;
            std::byte* dst = base + rc[o];
            rc[o] += rb;
            CopyRow(dst, rows + static_cast<size_t>(i) * rb, rb);
          }
        };
        if (p.ids64)
          pack(static_cast<const int64_t*>(p.ids));
        else
          pack(static_cast<const int32_t*>(p.ids));
        owners += p.n;
      }
    }
    std::vector<int> send_n(pack_n.begin(), pack_n.end() - 1),
        send_at(pack_at.begin(), pack_at.end() - 1);
    send_n[self] = 0;
    std::vector<int> recv_n(np, 0), recv_at(np, 0);
    PairMessages(gets, parts, &recv_n, &recv_at);
    recv_.resize(static_cast<size_t>(recv_at.back()) + static_cast<size_t>(recv_n.back()));
    MPI_Request request =
        StartAllToAll(send_.data(), send_n, send_at, recv_.data(), recv_n, recv_at, MPI_BYTE);
    // Each table's pairs go in rank order: this process's own start after
    // those of the processes before it.
    for (size_t t = 0; t < nt; ++t) {
      const RowGradientPart& p = parts[t];
      int64_t count = 0;
      for (size_t q = 0; q < self; ++q) count += gets[q * nt + t];
      const size_t own = self * nt + t;
      KeepPairsOf(p, processes_, PartOf(p.vocab, processes_, process_),
                  reinterpret_cast<const int64_t*>(send_.data() + id_at[own]),
                  send_.data() + row_at[own], counts[own], &count);
    }
    Wait(&request, timeout_s_, "exchange-rows pairs", ++calls_, 0, spin_);
    std::vector<size_t> got_id_at, got_row_at;
    PairOffsets(gets, parts, recv_at, &got_id_at, &got_row_at);
    for (size_t t = 0; t < nt; ++t) {
      const RowGradientPart& p = parts[t];
      const PartRange own = PartOf(p.vocab, processes_, process_);
      int64_t count = 0;
      for (size_t q = 0; q < np; ++q) {
        const size_t slot = q * nt + t;
        if (q == self) {
          count += counts[slot];
          continue;
        }
        KeepPairsOf(p, processes_, own,
                    reinterpret_cast<const int64_t*>(recv_.data() + got_id_at[slot]),
                    recv_.data() + got_row_at[slot], gets[slot], &count);
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
    Wait(&request, timeout_s_, what, ++calls_, static_cast<size_t>(count) * item, spin_);
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
    GatherProcessRanges(comm_, whole, count, Item(dtype), local_, timeout_s_, what, ++calls_,
                        spin_);
  }

  // Waits until every local rank has arrived (threads of this process; one
  // needs no barrier).
  void LocalBarrier() {
    if (local_ > 1) barrier_.Wait();
  }

  static size_t Aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

  // AllReduceSum in shared memory (one replica per process, every process
  // on this node), for tensors of at most kSharedAllReduceBytes: each
  // process copies its input into its segment; each sums its part of the
  // elements over every segment in rank order and scales it (SumBlocks'
  // order: the in-process bytes) into its own segment; each copies every
  // part into its output. False where the segments could not grow.
  //
  // Only small tensors: measured with 2 processes on a 2-CPU Zen 4 VM
  // (tiller_mpi_bench sizes, 3 interleaved pairs of runs, this path for
  // every size), 1 KiB took 1.5 us against the messages' 3.1, 16 KiB 10.3
  // against 15; but 256 KiB 148 against 103, 1 MiB 563 against 377, 4 MiB
  // 2250 against 1560: the copy into the segment is memory traffic the
  // messages do not have (Open MPI's single-copy transport reads the other
  // process's input where it lies), and past the caches traffic is time.
  static constexpr size_t kSharedAllReduceBytes = size_t{32} << 10;
  bool SharedAllReduce(const void* in, void* out, int64_t count, DType dtype, double scale) {
    const size_t bytes = static_cast<size_t>(count) * Item(dtype);
    if (!node_->Begin(bytes, "all-reduce")) return false;
    std::memcpy(node_->segment(process_), in, bytes);
    node_->Barrier("all-reduce inputs");
    const PartRange part = PartOf(count, processes_, process_);
    if (dtype == DType::kF32)
      SumShared<float>(part, static_cast<float>(scale));
    else
      SumShared<double>(part, scale);
    node_->Barrier("all-reduce sums");
    for (int q = 0; q < processes_; ++q) {
      const PartRange theirs = PartOf(count, processes_, q);
      if (theirs.size())
        std::memcpy(static_cast<std::byte*>(out) + theirs.begin * Item(dtype),
                    node_->segment(q) + theirs.begin * Item(dtype),
                    static_cast<size_t>(theirs.size()) * Item(dtype));
    }
    return true;
  }
  // Elements `part` of every segment, summed in rank order and scaled,
  // into this process's segment: a block at a time on the stack, because
  // this process's own elements are among those summed (SumBlocks writes
  // its destination first; routing its large sums through a stack block
  // too made the message path's 4-16 MiB all-reduces 10-30% slower).
  template <typename T>
  void SumShared(PartRange part, T scale) {
    constexpr int64_t kBlock = 2048;
    alignas(64) T block[kBlock];
    auto elements = [&](int q) { return reinterpret_cast<T*>(node_->segment(q)); };
    for (int64_t at = part.begin; at < part.end; at += kBlock) {
      const int64_t n = std::min(kBlock, part.end - at);
      const T* __restrict first = elements(0) + at;
      for (int64_t i = 0; i < n; ++i) block[i] = first[i];
      for (int q = 1; q < processes_; ++q) {
        const T* __restrict next = elements(q) + at;
        for (int64_t i = 0; i < n; ++i) block[i] += next[i];
      }
      if (scale != T(1))
        for (int64_t i = 0; i < n; ++i) block[i] *= scale;
      std::memcpy(elements(process_) + at, block, static_cast<size_t>(n) * sizeof(T));
    }
  }

  // GatherRows in shared memory (one replica per process, every process on
  // this node): each process posts its ids sorted by owner in its segment;
  // each owner copies the rows asked of it straight into the asker's
  // segment; each process copies its rows from there into place. Two copies
  // of a row instead of the messages' three (reply, the kernel's copy
  // between processes, into place), and no all-to-alls. Segment layout:
  // where each (owner, lookup) slot starts in the sorted ids ((P + 1) x T
  // + 1 int64), the sorted ids (int64), then the replies, slot by slot.
  // False where the segments could not grow (the messages then).
  bool SharedGatherRows(std::span<const RowLookup> lookups) {
    const size_t nt = lookups.size(), np = static_cast<size_t>(processes_);
    const auto self = static_cast<size_t>(process_);
    const size_t slots = (np + 1) * nt;
    size_t total = 0, row_bytes = 0;
    for (const RowLookup& l : lookups) {
      total += static_cast<size_t>(l.n);
      row_bytes += static_cast<size_t>(l.n) * l.row_bytes;
    }
    const size_t ids_at = Aligned((slots + 1) * sizeof(int64_t));
    const size_t replies_at = ids_at + Aligned(total * sizeof(int64_t));
    if (!node_->Begin(replies_at + row_bytes, "gather-rows")) return false;
    std::vector<int> counts(slots, 0);
    std::vector<size_t> slot_at;
    SortLookupsByOwner(lookups, &counts, &slot_at);
    std::byte* mine = node_->segment(process_);
    auto* posted = reinterpret_cast<int64_t*>(mine);
    for (size_t slot = 0; slot < slots; ++slot) posted[slot] = static_cast<int64_t>(slot_at[slot]);
    posted[slots] = static_cast<int64_t>(total);
    if (total) std::memcpy(mine + ids_at, sorted_ids_.data(), total * sizeof(int64_t));
    node_->Barrier("gather-rows ids");
    // The rows each other process asks of this one, into its segment.
    std::vector<size_t> reply_at(slots);
    for (size_t q = 0; q < np; ++q) {
      if (q == self) continue;
      std::byte* theirs = node_->segment(static_cast<int>(q));
      const auto* their_at = reinterpret_cast<const int64_t*>(theirs);
      const auto* their_ids = reinterpret_cast<const int64_t*>(theirs + ids_at);
      ReplyOffsets(lookups, their_at, replies_at, &reply_at);
      for (size_t t = 0; t < nt; ++t) {
        const size_t slot = self * nt + t;
        const int64_t begin = their_at[slot];
        CopyPartRows(lookups[t], their_ids + begin, static_cast<size_t>(their_at[slot + 1] - begin),
                     nullptr, theirs + reply_at[slot]);
      }
    }
    CopyOwnRowsAndZeros(lookups, counts, slot_at);
    node_->Barrier("gather-rows rows");
    // The others' rows, from this process's segment into place.
    ReplyOffsets(lookups, posted, replies_at, &reply_at);
    for (size_t q = 0; q < np; ++q) {
      if (q == self) continue;
      for (size_t t = 0; t < nt; ++t) {
        const RowLookup& l = lookups[t];
        auto* out = static_cast<std::byte*>(l.out);
        const size_t slot = q * nt + t;
        const std::byte* reply = mine + reply_at[slot];
        const size_t end = slot_at[slot] + static_cast<size_t>(counts[slot]);
        for (size_t j = slot_at[slot]; j < end; ++j, reply += l.row_bytes)
          CopyRow(out + sorted_at_[j] * l.row_bytes, reply, l.row_bytes);
      }
    }
    return true;
  }
  // Where each slot's replies start in a segment whose slots start at
  // `slot_at` (a slot's rows are its lookup's row_bytes each).
  static void ReplyOffsets(std::span<const RowLookup> lookups, const int64_t* slot_at,
                           size_t replies_at, std::vector<size_t>* reply_at) {
    const size_t nt = lookups.size();
    size_t at = replies_at;
    for (size_t slot = 0; slot < reply_at->size(); ++slot) {
      (*reply_at)[slot] = at;
      at += static_cast<size_t>(slot_at[slot + 1] - slot_at[slot]) * lookups[slot % nt].row_bytes;
    }
  }
  // The rows of the ids this process holds, from its part, and zeros for
  // the ids no process holds, into place (sorted by SortByOwner).
  void CopyOwnRowsAndZeros(std::span<const RowLookup> lookups, const std::vector<int>& counts,
                           const std::vector<size_t>& slot_at) {
    const size_t nt = lookups.size(), np = static_cast<size_t>(processes_);
    for (size_t t = 0; t < nt; ++t) {
      const RowLookup& l = lookups[t];
      auto* out = static_cast<std::byte*>(l.out);
      const size_t own = static_cast<size_t>(process_) * nt + t, none = np * nt + t;
      CopyPartRows(l, sorted_ids_.data() + slot_at[own], static_cast<size_t>(counts[own]),
                   sorted_at_.data() + slot_at[own], out);
      for (size_t j = slot_at[none]; j < slot_at[none] + static_cast<size_t>(counts[none]); ++j)
        std::memset(out + sorted_at_[j] * l.row_bytes, 0, l.row_bytes);
    }
  }

  // ExchangeRows in shared memory (one replica per process, every process
  // on this node): each process copies its pairs into its segment as they
  // are, and each keeps its part's pairs straight out of every process's
  // (its own from its buffers): the in-process exchange, plus one
  // sequential copy of each process's pairs. Segment layout: table by
  // table, the ids (as the part has them) and then the rows, each 64-byte
  // aligned. False where the segments could not grow.
  static size_t IdBytes(const RowGradientPart& p) {
    return p.ids64 ? sizeof(int64_t) : sizeof(int32_t);
  }
  bool SharedExchangeRows(std::span<const RowGradientPart> parts) {
    const size_t nt = parts.size();
    std::vector<size_t> ids_at(nt), rows_at(nt);
    size_t bytes = 0;
    for (size_t t = 0; t < nt; ++t) {
      const RowGradientPart& p = parts[t];
      ids_at[t] = bytes;
      bytes += Aligned(static_cast<size_t>(p.n) * IdBytes(p));
      rows_at[t] = bytes;
      bytes += Aligned(static_cast<size_t>(p.n) * p.row_bytes);
    }
    if (!node_->Begin(bytes, "exchange-rows")) return false;
    std::byte* mine = node_->segment(process_);
    for (size_t t = 0; t < nt; ++t) {
      const RowGradientPart& p = parts[t];
      if (!p.n) continue;
      std::memcpy(mine + ids_at[t], p.ids, static_cast<size_t>(p.n) * IdBytes(p));
      std::memcpy(mine + rows_at[t], p.rows, static_cast<size_t>(p.n) * p.row_bytes);
    }
    node_->Barrier("exchange-rows pairs");
    for (size_t t = 0; t < nt; ++t) {
      const RowGradientPart& p = parts[t];
      const PartRange own = PartOf(p.vocab, processes_, process_);
      int64_t count = 0;
      for (int q = 0; q < processes_; ++q) {
        const std::byte* theirs = node_->segment(q);
        const void* ids = q == process_ ? p.ids : theirs + ids_at[t];
        const auto* rows =
            q == process_ ? static_cast<const std::byte*>(p.rows) : theirs + rows_at[t];
        if (p.ids64)
          KeepPairsOf(p, processes_, own, static_cast<const int64_t*>(ids), rows, p.n, &count);
        else
          KeepPairsOf(p, processes_, own, static_cast<const int32_t*>(ids), rows, p.n, &count);
      }
      PadPairsOf(p, processes_, own, count);
    }
    return true;
  }

  static constexpr int64_t kChunk = int64_t{1} << 18;
  // owners_[k]: the process holding the row of position k (tables in
  // order, then positions), or P (processes_: "none") where keep(table, id)
  // is false; and counts[o * T + t] (o up to P): how many of table t's
  // positions process o holds. A table's part bounds are found once; each
  // id's owner by counting the bounds at or below it, without a branch.
  template <typename Table, typename Keep>
  void FindOwners(std::span<const Table> tables, Keep keep, std::vector<int>* counts) {
    const size_t nt = tables.size();
    const int np = processes_;
    size_t total = 0;
    for (const Table& t : tables) total += static_cast<size_t>(t.n);
    owners_.resize(total);
    std::vector<int64_t> ends(static_cast<size_t>(np));
    std::vector<int> tally(static_cast<size_t>(np) + 1);
    size_t k = 0;
    for (size_t ti = 0; ti < nt; ++ti) {
      const Table& t = tables[ti];
      for (int p = 0; p < np; ++p) ends[static_cast<size_t>(p)] = PartOf(t.vocab, np, p).end;
      std::fill(tally.begin(), tally.end(), 0);
      int* owners = owners_.data() + k;
      auto scan = [&](const auto* ids) {
        if (np == 2) {
          // Two processes (the usual job on one host): the counts in
          // registers, not a chain of increments through memory.
          const int64_t end0 = ends[0];
          int64_t high = 0, none = 0;
          for (int64_t i = 0; i < t.n; ++i) {
            const auto id = static_cast<int64_t>(ids[i]);
            const bool kept = keep(t, id);
            const int o = kept ? static_cast<int>(id >= end0) : 2;
            owners[i] = o;
            high += o == 1;
            none += !kept;
          }
          tally[0] = static_cast<int>(t.n - high - none);
          tally[1] = static_cast<int>(high);
          tally[2] = static_cast<int>(none);
          return;
        }
        for (int64_t i = 0; i < t.n; ++i) {
          const auto id = static_cast<int64_t>(ids[i]);
          int o = 0;
          for (int p = 0; p + 1 < np; ++p)
            o += static_cast<int>(id >= ends[static_cast<size_t>(p)]);
          o = keep(t, id) ? o : np;
          owners[i] = o;
          ++tally[static_cast<size_t>(o)];
        }
      };
      if (t.ids64)
        scan(static_cast<const int64_t*>(t.ids));
      else
        scan(static_cast<const int32_t*>(t.ids));
      for (int o = 0; o <= np; ++o)
        (*counts)[static_cast<size_t>(o) * nt + ti] = tally[static_cast<size_t>(o)];
      k += static_cast<size_t>(t.n);
    }
  }
  // The positions of FindOwners sorted by (owner, table), stably: their
  // ids into sorted_ids_ and their positions in their table into
  // sorted_at_, slot (o, t) starting at (*slot_at)[o * T + t].
  void SortByOwner(std::span<const RowLookup> tables, const std::vector<int>& counts,
                   std::vector<size_t>* slot_at) {
    const size_t nt = tables.size();
    slot_at->assign(counts.size(), 0);
    size_t at = 0;
    for (size_t slot = 0; slot < counts.size(); ++slot) {
      (*slot_at)[slot] = at;
      at += static_cast<size_t>(counts[slot]);
    }
    sorted_ids_.resize(at);
    sorted_at_.resize(at);
    // A table's cursors, one per owner, in a local array the stores below
    // cannot alias (they would be reloaded every position otherwise).
    std::vector<size_t> cursor(static_cast<size_t>(processes_) + 1);
    int64_t* __restrict ids_out = sorted_ids_.data();
    uint32_t* __restrict at_out = sorted_at_.data();
    const int* owners = owners_.data();
    for (size_t ti = 0; ti < nt; ++ti) {
      const RowLookup& t = tables[ti];
      for (size_t o = 0; o < cursor.size(); ++o) cursor[o] = (*slot_at)[o * nt + ti];
      size_t* __restrict c = cursor.data();
      const int64_t n = t.n;
      auto sort = [&](const auto* __restrict ids) {
        for (int64_t i = 0; i < n; ++i) {
          const size_t at = c[owners[i]]++;
          ids_out[at] = static_cast<int64_t>(ids[i]);
          at_out[at] = static_cast<uint32_t>(i);
        }
      };
      if (t.ids64)
        sort(static_cast<const int64_t*>(t.ids));
      else
        sort(static_cast<const int32_t*>(t.ids));
      owners += n;
    }
  }
  // A lookup's positions by owner (FindOwners, then SortByOwner): ids out
  // of range and the padding row go to the extra owner P ("none"),
  // answered with zeros.
  void SortLookupsByOwner(std::span<const RowLookup> lookups, std::vector<int>* counts,
                          std::vector<size_t>* slot_at) {
    FindOwners(
        lookups,
        [](const RowLookup& l, int64_t id) {
          return (id >= 0) & (id < l.vocab) & (id != l.padding_row);
        },
        counts);
    SortByOwner(lookups, *counts, slot_at);
  }
  // counts[o * T + t] (to each process o) -> what each process sends here.
  void ExchangeCounts(const std::vector<int>& counts, std::vector<int>* recv, const char* what) {
    const int per = static_cast<int>(counts.size()) / processes_;
    MPI_Request request;
    Check(MPI_Ialltoall(counts.data(), per, MPI_INT, recv->data(), per, MPI_INT, comm_, &request),
          "MPI_Ialltoall");
    Wait(&request, timeout_s_, what, ++calls_, counts.size() * sizeof(int), spin_);
  }
  // Per process: what its T counts hold (elements, or where in_bytes the
  // rows' bytes: table t's are row_bytes each), and where that starts
  // (when `at` is given).
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
      if (at) (*at)[o] = CountOrFail(total, "row exchange");
      total += sum;
    }
  }
  // Starts an all-to-all of per-process counts and offsets (in `type`).
  MPI_Request StartAllToAll(const void* send, const std::vector<int>& send_n,
                            const std::vector<int>& send_at, void* recv,
                            const std::vector<int>& recv_n, const std::vector<int>& recv_at,
                            MPI_Datatype type) {
    MPI_Request request;
    Check(MPI_Ialltoallv(send, send_n.data(), send_at.data(), type, recv, recv_n.data(),
                         recv_at.data(), type, comm_, &request),
          "MPI_Ialltoallv");
    return request;
  }
  // Per process, the bytes of its pair message (counts[o * T + t] pairs of
  // table t: an int64 id and a row each), padded to 8 bytes so that the
  // next message's ids are aligned, and where it starts.
  static void PairMessages(const std::vector<int>& counts, std::span<const RowGradientPart> parts,
                           std::vector<int>* n, std::vector<int>* at) {
    const size_t nt = parts.size();
    int64_t total = 0;
    for (size_t o = 0; o < n->size(); ++o) {
      int64_t bytes = 0;
      for (size_t t = 0; t < nt; ++t)
        bytes += static_cast<int64_t>(counts[o * nt + t]) *
                 static_cast<int64_t>(sizeof(int64_t) + parts[t].row_bytes);
      bytes = (bytes + 7) / 8 * 8;
      (*n)[o] = CountOrFail(bytes, "row exchange");
      (*at)[o] = CountOrFail(total, "row exchange");
      total += bytes;
    }
  }
  // Where slot (o, t)'s ids and rows start in pair messages laid out by
  // PairMessages from message offsets `at`.
  static void PairOffsets(const std::vector<int>& counts, std::span<const RowGradientPart> parts,
                          const std::vector<int>& at, std::vector<size_t>* ids_at,
                          std::vector<size_t>* rows_at) {
    const size_t nt = parts.size();
    ids_at->assign(counts.size(), 0);
    rows_at->assign(counts.size(), 0);
    for (size_t o = 0; o < at.size(); ++o) {
      auto b = static_cast<size_t>(at[o]);
      for (size_t t = 0; t < nt; ++t) {
        (*ids_at)[o * nt + t] = b;
        b += static_cast<size_t>(counts[o * nt + t]) * sizeof(int64_t);
      }
      for (size_t t = 0; t < nt; ++t) {
        (*rows_at)[o * nt + t] = b;
        b += static_cast<size_t>(counts[o * nt + t]) * parts[t].row_bytes;
      }
    }
  }
  // The rows of `count` ids of l's table (all in this process's part) into
  // dest in order, or into rows at[c] of dest where `at` is given; the row
  // kAhead ids on is prefetched (they lie anywhere in the part: a miss to
  // memory apiece otherwise), and so is the line it goes to, for writing
  // (a message the other processes read last step, or anywhere in dest).
  void CopyPartRows(const RowLookup& l, const int64_t* ids, size_t count, const uint32_t* at,
                    std::byte* dest) const {
    constexpr size_t kAhead = 16;
    const auto* rows = static_cast<const std::byte*>(l.part);
    const int64_t begin = PartOf(l.vocab, processes_, process_).begin;
    for (size_t c = 0; c < count; ++c) {
      if (c + kAhead < count) {
        const std::byte* ahead = rows + static_cast<size_t>(ids[c + kAhead] - begin) * l.row_bytes;
        for (size_t j = 0; j < l.row_bytes; j += 64) {
          __builtin_prefetch(ahead + j);
          __builtin_prefetch(dest + (at ? at[c + kAhead] : c + kAhead) * l.row_bytes + j, 1);
        }
      }
      CopyRow(dest + (at ? at[c] : c) * l.row_bytes,
              rows + static_cast<size_t>(ids[c] - begin) * l.row_bytes, l.row_bytes);
    }
  }

  const int local_;
  const double timeout_s_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int process_ = 0, processes_ = 1;
  int64_t calls_ = 0;
  std::chrono::microseconds spin_ = kShortSpin;  // Wait's, by SurveyNode
  std::unique_ptr<NodeMemory> node_;             // null: messages only
  std::vector<const void*> in_;
  std::vector<void*> out_;
  std::vector<std::byte> send_, recv_, sum_;
  std::vector<int> owners_;          // FindOwners
  std::vector<int64_t> sorted_ids_;  // SortByOwner
  std::vector<uint32_t> sorted_at_;
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
