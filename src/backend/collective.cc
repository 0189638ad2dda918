#include "backend/collective.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backend/rank_barrier.h"
#include "backend/row_pairs.h"
#include "core/error.h"
#include "core/shape.h"

namespace tiller::backend {
namespace {

// Ranks meet at a barrier, publish their buffers, and each sums one slice
// of the tensor over all ranks and writes it into every rank's output: the
// work is split R ways and every output gets identical bytes. A slice is
// read and written by one rank only, so in-place buffers are safe.
class InProcessCollective : public Collective {
 public:
  explicit InProcessCollective(int ranks)
      : ranks_(ranks),
        barrier_(ranks, ranks <= UsableCpus()),
        in_(ranks),
        out_(ranks),
        lookups_(static_cast<size_t>(ranks)),
        grads_(static_cast<size_t>(ranks)) {}
  int size() const override { return ranks_; }

  void AllReduceSum(int rank, const void* in, void* out, int64_t count, DType dtype,
                    double scale) override {
    CheckSum(rank, dtype, "all-reduce");
    in_[rank] = in;
    out_[rank] = out;
    Barrier();  // every rank's buffers published
    const int64_t begin = count * rank / ranks_, end = count * (rank + 1) / ranks_;
    if (dtype == DType::kF32)
      SumSlice<float>(begin, end, static_cast<float>(scale));
    else
      SumSlice<double>(begin, end, scale);
    Barrier();  // every slice written before any rank reads its output
  }

  void ReduceScatterSum(int rank, const void* in, void* out, int64_t count, DType dtype,
                        double scale) override {
    CheckSum(rank, dtype, "reduce-scatter");
    in_[rank] = in;
    out_[rank] = out;
    Barrier();  // every rank's input published
    // Rank r sums its own part and writes it into its own output only.
    const PartRange part = PartOf(count, ranks_, rank);
    if (dtype == DType::kF32)
      SumPart<float>(rank, part, static_cast<float>(scale));
    else
      SumPart<double>(rank, part, scale);
    Barrier();  // no rank's input is reused before every rank read it
  }

  void AllGather(int rank, const void* in, void* out, int64_t count, DType dtype) override {
    TILLER_CHECK(rank >= 0 && rank < ranks_, "rank {} of {}", rank, ranks_);
    in_[rank] = in;
    out_[rank] = out;
    Barrier();
    // Rank r copies every rank's part into its own output.
    const size_t item = DTypeSize(dtype);
    for (int r = 0; r < ranks_; ++r) {
      const PartRange part = PartOf(count, ranks_, r);
      if (part.size())
        std::memcpy(static_cast<char*>(out) + part.begin * item, in_[r], part.size() * item);
    }
    Barrier();
  }

  // Each rank copies its own ids' rows straight out of the owners' parts:
  // no ids or rows travel, and no rank looks up another's ids. The parts
  // stay as they are until every rank has read them (the second meeting).
  void GatherRows(int rank, std::span<const RowLookup> lookups, void* /*workspace*/) override {
    TILLER_CHECK(rank >= 0 && rank < ranks_, "rank {} of {}", rank, ranks_);
    lookups_[rank] = lookups.data();
    Barrier();
    for (size_t t = 0; t < lookups.size(); ++t) {
      const RowLookup& mine = lookups[t];
      if (mine.ids64)
        CopyRowsOf(t, mine, static_cast<const int64_t*>(mine.ids));
      else
        CopyRowsOf(t, mine, static_cast<const int32_t*>(mine.ids));
    }
    Barrier();
  }
  // Each rank takes its part's pairs straight out of every rank's row
  // gradients: only those rows are copied, and no rank receives the
  // others'.
  void ExchangeRows(int rank, std::span<const RowGradientPart> parts,
                    void* /*workspace*/) override {
    TILLER_CHECK(rank >= 0 && rank < ranks_, "rank {} of {}", rank, ranks_);
    grads_[static_cast<size_t>(rank)] = parts.data();
    Barrier();
    for (size_t t = 0; t < parts.size(); ++t) {
      const RowGradientPart& mine = parts[t];
      const PartRange own = PartOf(mine.vocab, ranks_, rank);
      int64_t count = 0;
      for (int r = 0; r < ranks_; ++r) {
        const RowGradientPart& from = grads_[static_cast<size_t>(r)][t];
        const auto* rows = static_cast<const std::byte*>(from.rows);
        if (from.ids64)
          KeepPairsOf(mine, ranks_, own, static_cast<const int64_t*>(from.ids), rows, from.n,
                      &count);
        else
          KeepPairsOf(mine, ranks_, own, static_cast<const int32_t*>(from.ids), rows, from.n,
                      &count);
      }
      PadPairsOf(mine, ranks_, own, count);
    }
    Barrier();
  }
  void Broadcast(int rank, int root, void* buffer, size_t bytes) override {
    TILLER_CHECK(rank >= 0 && rank < ranks_ && root >= 0 && root < ranks_, "rank {} root {} of {}",
                 rank, root, ranks_);
    out_[rank] = buffer;
    Barrier();
    if (rank != root && bytes) std::memcpy(buffer, out_[root], bytes);
    Barrier();
  }

  void Abort(const std::string& why) override { barrier_.Abort(why); }
  void Reset() override { barrier_.Reset(); }

 private:
  void CheckSum(int rank, DType dtype, const char* what) const {
    TILLER_CHECK(rank >= 0 && rank < ranks_, "rank {} of {}", rank, ranks_);
    TILLER_CHECK(dtype == DType::kF32 || dtype == DType::kF64, "{} of {}", what, DTypeName(dtype));
  }

  // Elements [begin, end) of the rank-order sum of every rank's input,
  // scaled, passed to `emit(offset, values, n)` a block at a time. The block
  // (on the stack, a few pages) is summed in whole passes of one input each,
  // which the compiler vectorizes; an element loop over the ranks is not
  // (measured: 2-3x this VM's memory rate). Every element is added in rank
  // order and then scaled, as before, so the bytes do not change. The whole
  // block is read before `emit` writes, so in-place buffers stay safe.
  template <typename T, typename Emit>
  void SumRange(int64_t begin, int64_t end, T scale, Emit emit) {
    constexpr int64_t kBlock = 4096 / sizeof(T) * 4;
    alignas(64) T block[kBlock];
    for (int64_t at = begin; at < end; at += kBlock) {
      const int64_t n = std::min(kBlock, end - at);
      const T* __restrict first = static_cast<const T*>(in_[0]) + at;
      for (int64_t i = 0; i < n; ++i) block[i] = first[i];
      for (int r = 1; r < ranks_; ++r) {
        const T* __restrict next = static_cast<const T*>(in_[r]) + at;
        for (int64_t i = 0; i < n; ++i) block[i] += next[i];
      }
      if (scale != T(1))
        for (int64_t i = 0; i < n; ++i) block[i] *= scale;
      emit(at, block, n);
    }
  }

  // `rank`'s own part of the sum, into its own output.
  template <typename T>
  void SumPart(int rank, PartRange part, T scale) {
    T* out = static_cast<T*>(out_[rank]);
    SumRange<T>(part.begin, part.end, scale, [&](int64_t at, const T* values, int64_t n) {
      std::memcpy(out + (at - part.begin), values, n * sizeof(T));
    });
  }

  // A slice of the sum, into every rank's output.
  template <typename T>
  void SumSlice(int64_t begin, int64_t end, T scale) {
    SumRange<T>(begin, end, scale, [&](int64_t at, const T* values, int64_t n) {
      for (int r = 0; r < ranks_; ++r)
        std::memcpy(static_cast<T*>(out_[r]) + at, values, n * sizeof(T));
    });
  }

  // Lookup t's rows out of every rank's part of its table. An id's owner
  // is the last part that begins at or before it: with two ranks one
  // compare, else a search of the parts' first rows (a division per id
  // cost as much as the row's copy).
  // kRowBytes: the rows' bytes where known at compile time (the copy then
  // inlines), 0 where l.row_bytes says.
  template <int64_t kRowBytes, typename I>
  void CopyRows(size_t t, const RowLookup& l, const I* ids) {
    constexpr int64_t kAhead = 16;  // rows between a prefetch and its copy
    constexpr int kMaxRanks = 64;
    int64_t begins[kMaxRanks + 1];
    const std::byte* parts[kMaxRanks];
    TILLER_CHECK(ranks_ <= kMaxRanks, "{} ranks in one process", ranks_);
    const int64_t rb = kRowBytes ? kRowBytes : static_cast<int64_t>(l.row_bytes);
    for (int r = 0; r < ranks_; ++r) {
      begins[r] = PartOf(l.vocab, ranks_, r).begin;
      parts[r] = static_cast<const std::byte*>(lookups_[static_cast<size_t>(r)][t].part);
    }
    begins[ranks_] = l.vocab;
    // The owner without a branch: owners are as good as random per id, and
    // a mispredict per id cost as much as its row's copy.
    auto locate = [&](int64_t id) {
      int r = 0;
      for (int p = 1; p < ranks_; ++p) r += static_cast<int>(id >= begins[p]);
      return parts[r] + (id - begins[r]) * rb;
    };
    auto* out = static_cast<std::byte*>(l.out);
    for (int64_t i = 0; i < l.n; ++i) {
      if (i + kAhead < l.n) {
        const auto ahead = static_cast<int64_t>(ids[i + kAhead]);
        if (static_cast<uint64_t>(ahead) < static_cast<uint64_t>(l.vocab)) {
          const std::byte* row = locate(ahead);
          for (int64_t j = 0; j < rb; j += 64) __builtin_prefetch(row + j);
        }
      }
      const auto id = static_cast<int64_t>(ids[i]);
      std::byte* dst = out + i * rb;
      if (static_cast<uint64_t>(id) >= static_cast<uint64_t>(l.vocab) || id == l.padding_row)
        std::memset(dst, 0, rb);
      else
        std::memcpy(dst, locate(id), rb);
    }
  }

  template <typename I>
  void CopyRowsOf(size_t t, const RowLookup& l, const I* ids) {
    switch (l.row_bytes) {  // float32 rows of 16, 32 and 64 (the usual widths)
      case 64:
        return CopyRows<64>(t, l, ids);
      case 128:
        return CopyRows<128>(t, l, ids);
      case 256:
        return CopyRows<256>(t, l, ids);
      default:
        return CopyRows<0>(t, l, ids);
    }
  }

  void Barrier() { barrier_.Wait(); }

  const int ranks_;
  RankBarrier barrier_;
  std::vector<const void*> in_;
  std::vector<void*> out_;
  std::vector<const RowLookup*> lookups_;      // each rank's, published for GatherRows
  std::vector<const RowGradientPart*> grads_;  // each rank's, published for ExchangeRows
};

}  // namespace

namespace {

// A rank's ids and float32 row elements over all of `tables` (lookups or
// row gradients): what its part of the defaults' messages holds.
template <typename Table>
std::pair<int64_t, int64_t> MessageSizes(std::span<const Table> tables) {
  int64_t ids = 0, floats = 0;
  for (const Table& t : tables) {
    TILLER_CHECK(t.row_bytes % sizeof(float) == 0, "rows of {} bytes: float32 rows", t.row_bytes);
    ids += t.n;
    floats += t.n * static_cast<int64_t>(t.row_bytes / sizeof(float));
  }
  return {ids, floats};
}

// Those in bytes: the ids as int64, the rows as float32.
template <typename Table>
size_t MessageBytes(std::span<const Table> tables) {
  const auto [ids, floats] = MessageSizes(tables);
  return static_cast<size_t>(ids) * sizeof(int64_t) + static_cast<size_t>(floats) * sizeof(float);
}

// Every table's ids, one table after another, as int64 into `out`.
template <typename Table>
void PackIds(std::span<const Table> tables, int64_t* out) {
  for (const Table& t : tables)
    for (int64_t i = 0; i < t.n; ++i) *out++ = RowId(t.ids, t.ids64, i);
}

}  // namespace

// The default GatherRows moves every lookup in one message each way: the
// ids of all lookups (as int64) in one all-gather, and each rank's rows of
// all lookups as its part of one reduce-scatter. Workspace: this rank's ids,
// every rank's ids, every rank's rows, and this rank's rows.
size_t Collective::GatherRowsWorkspace(std::span<const RowLookup> lookups) const {
  return MessageBytes(lookups) * (static_cast<size_t>(size()) + 1);
}

void Collective::GatherRows(int rank, std::span<const RowLookup> lookups, void* workspace) {
  const int ranks = size();
  const auto [ids_per_rank, floats_per_rank] = MessageSizes(lookups);
  auto* mine = static_cast<int64_t*>(workspace);
  int64_t* all_ids = mine + ids_per_rank;
  auto* rows = reinterpret_cast<float*>(all_ids + ids_per_rank * ranks);
  float* own = rows + floats_per_rank * ranks;
  PackIds(lookups, mine);
  AllGather(rank, mine, all_ids, ids_per_rank * ranks, DType::kI64);
  // Rank r's rows of every lookup, in lookup order, from r's ids: this
  // rank's rows where it holds them, zeros elsewhere.
  float* dst = rows;
  for (int r = 0; r < ranks; ++r) {
    const int64_t* ids = all_ids + ids_per_rank * r;
    for (const RowLookup& l : lookups) {
      const PartRange part = PartOf(l.vocab, ranks, rank);
      const auto width = static_cast<int64_t>(l.row_bytes / sizeof(float));
      for (int64_t i = 0; i < l.n; ++i, dst += width) {
        const int64_t id = ids[i];
        if (id >= part.begin && id < part.end && id != l.padding_row)
          std::memcpy(dst, static_cast<const std::byte*>(l.part) + (id - part.begin) * width * 4,
                      l.row_bytes);
        else
          std::memset(dst, 0, l.row_bytes);
      }
      ids += l.n;
    }
  }
  // One rank holds each row: the sum is that row's bytes.
  ReduceScatterSum(rank, rows, own, floats_per_rank * ranks, DType::kF32);
  for (const RowLookup& l : lookups) {
    std::memcpy(l.out, own, static_cast<size_t>(l.n) * l.row_bytes);
    own += l.n * static_cast<int64_t>(l.row_bytes / sizeof(float));
  }
}

// The default ExchangeRows gathers every table's ids (as int64) in one
// all-gather and every table's rows in another, then keeps its part's
// pairs. Workspace: this rank's ids and rows packed, and every rank's.
size_t Collective::ExchangeRowsWorkspace(std::span<const RowGradientPart> parts) const {
  return MessageBytes(parts) * (static_cast<size_t>(size()) + 1);
}

void Collective::ExchangeRows(int rank, std::span<const RowGradientPart> parts, void* workspace) {
  const int ranks = size();
  const auto [ids_per_rank, words_per_rank] = MessageSizes(parts);  // words: the rows' floats
  auto* mine = static_cast<int64_t*>(workspace);
  int64_t* all_ids = mine + ids_per_rank;
  auto* my_rows = reinterpret_cast<float*>(all_ids + ids_per_rank * ranks);
  float* all_rows = my_rows + words_per_rank;
  PackIds(parts, mine);
  int64_t word = 0;
  for (const RowGradientPart& p : parts) {
    std::memcpy(my_rows + word, p.rows, static_cast<size_t>(p.n) * p.row_bytes);
    word += p.n * static_cast<int64_t>(p.row_bytes / sizeof(float));
  }
  AllGather(rank, mine, all_ids, ids_per_rank * ranks, DType::kI64);
  AllGather(rank, my_rows, all_rows, words_per_rank * ranks, DType::kF32);
  int64_t id_at = 0, word_at = 0;  // table t's place in each rank's message
  for (const RowGradientPart& p : parts) {
    const PartRange own = PartOf(p.vocab, ranks, rank);
    const auto width = static_cast<int64_t>(p.row_bytes / sizeof(float));
    int64_t count = 0;
    for (int r = 0; r < ranks; ++r)
      KeepPairsOf(p, size(), own, all_ids + ids_per_rank * r + id_at,
                  reinterpret_cast<const std::byte*>(all_rows + words_per_rank * r + word_at), p.n,
                  &count);
    PadPairsOf(p, ranks, own, count);
    id_at += p.n;
    word_at += p.n * width;
  }
}

int UsableCpus() {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// A waiting rank first spins for up to kSpin, then sleeps: waking a
// sleeping thread took 70-115 us on the project's VMs (an all-reduce of 256
// floats between two threads cost 150-230 us sleeping, 2 us spinning), and
// a replica's step meets its peers at every collective. Spinning for about
// the cost of one wake-up costs at most twice the best choice made in
// hindsight. Ranks outnumbering the CPUs only sleep: a spinner would hold
// the CPU the rank it waits for needs.
void RankBarrier::Wait() {
  int64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) Fail(ErrorKind::kInternal, "{}", why_);
    generation = generation_.load(std::memory_order_relaxed);
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      // Release: every rank's writes before it arrived (ordered by the
      // mutex) happen before a spinner's acquire load sees the change.
      generation_.store(generation + 1, std::memory_order_release);
      wake_.notify_all();
      return;
    }
  }
  if (spin_ &&
      SpinUntil([&] { return generation_.load(std::memory_order_acquire) != generation; }, kSpin))
    return;
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait(lock,
             [&] { return generation_.load(std::memory_order_relaxed) != generation || aborted_; });
  if (generation_.load(std::memory_order_relaxed) == generation)
    Fail(ErrorKind::kInternal, "{}", why_);
}

void RankBarrier::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return;
  aborted_ = true;
  why_ = why;
  wake_.notify_all();
}

void RankBarrier::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = false;
  arrived_ = 0;
  why_.clear();
}

std::unique_ptr<Collective> MakeInProcessCollective(int ranks) {
  TILLER_CHECK(ranks >= 1, "a group of {} ranks", ranks);
  return std::make_unique<InProcessCollective>(ranks);
}

}  // namespace tiller::backend
