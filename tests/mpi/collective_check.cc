// Run under mpirun (tests/python/distributed_test.py): every collective of
// the MPI process group, with `L` ranks per process (argv[1]), gives the
// bytes MakeInProcessCollective gives for the job's P x L ranks, which this
// process computes itself from every rank's input. Prints "ok N" or the
// first mismatch (exit 1).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/collective.h"
#include "core/shape.h"
#include "runtime/distribution.h"

namespace {

using tiller::DType;
using tiller::backend::Collective;

// Global rank g's input element i: values whose sums round differently in
// other orders (mixed magnitudes), so an order change would show.
double Input(int g, int64_t i) {
  const uint64_t h = (static_cast<uint64_t>(g) * 0x9E3779B97F4A7C15ULL) ^
                     (static_cast<uint64_t>(i) * 0xC2B2AE3D27D4EB4FULL);
  const double u = static_cast<double>(h >> 11) / static_cast<double>(1ULL << 53);
  return (u - 0.5) * ((i + g) % 3 == 0 ? 1e6 : 1.0);
}

template <typename T>
std::vector<std::vector<T>> Inputs(int ranks, int64_t count) {
  std::vector<std::vector<T>> in(ranks, std::vector<T>(count));
  for (int g = 0; g < ranks; ++g)
    for (int64_t i = 0; i < count; ++i) in[g][i] = static_cast<T>(Input(g, i));
  return in;
}

// Runs fn(rank) on one thread per rank of `ranks`.
template <typename Fn>
void OnThreads(const std::vector<int>& ranks, Fn fn) {
  std::vector<std::thread> threads;
  for (int r : ranks) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

int failures = 0, checks = 0;

void Expect(bool same, const std::string& what) {
  ++checks;
  if (!same && failures++ == 0) std::fprintf(stderr, "mismatch: %s\n", what.c_str());
}

template <typename T>
void CheckAll(Collective& mpi, int first, int local, int64_t count, double scale, DType dtype) {
  const int ranks = mpi.size();
  const auto in = Inputs<T>(ranks, count);
  std::vector<int> all(ranks), mine(local);
  for (int g = 0; g < ranks; ++g) all[g] = g;
  for (int l = 0; l < local; ++l) mine[l] = first + l;
  auto ref = tiller::backend::MakeInProcessCollective(ranks);
  const std::string tag = " count " + std::to_string(count) + " scale " + std::to_string(scale) +
                          (dtype == DType::kF32 ? " f32" : " f64");

  // All-reduce, in place on odd ranks.
  std::vector<std::vector<T>> want(ranks, std::vector<T>(count)), got = in;
  OnThreads(
      all, [&](int g) { ref->AllReduceSum(g, in[g].data(), want[g].data(), count, dtype, scale); });
  std::vector<std::vector<T>> out(ranks, std::vector<T>(count));
  OnThreads(mine, [&](int g) {
    T* dst = g % 2 ? got[g].data() : out[g].data();
    mpi.AllReduceSum(g, got[g].data(), dst, count, dtype, scale);
    if (g % 2 == 0) got[g] = out[g];
  });
  for (int g : mine) Expect(got[g] == want[g], "all-reduce rank " + std::to_string(g) + tag);

  // Reduce-scatter: each rank's part.
  std::vector<std::vector<T>> rs_want(ranks), rs_got(ranks);
  for (int g = 0; g < ranks; ++g) {
    rs_want[g].resize(tiller::PartOf(count, ranks, g).size());
    rs_got[g].resize(rs_want[g].size());
  }
  OnThreads(all, [&](int g) {
    ref->ReduceScatterSum(g, in[g].data(), rs_want[g].data(), count, dtype, scale);
  });
  OnThreads(mine, [&](int g) {
    mpi.ReduceScatterSum(g, in[g].data(), rs_got[g].data(), count, dtype, scale);
  });
  for (int g : mine)
    Expect(rs_got[g] == rs_want[g], "reduce-scatter rank " + std::to_string(g) + tag);

  // All-gather of each rank's part of its input.
  std::vector<std::vector<T>> ag_got(ranks, std::vector<T>(count));
  std::vector<T> ag_want(count);
  for (int g = 0; g < ranks; ++g) {
    const tiller::PartRange p = tiller::PartOf(count, ranks, g);
    for (int64_t i = p.begin; i < p.end; ++i) ag_want[i] = in[g][i];
  }
  OnThreads(mine, [&](int g) {
    const tiller::PartRange p = tiller::PartOf(count, ranks, g);
    mpi.AllGather(g, in[g].data() + p.begin, ag_got[g].data(), count, dtype);
  });
  for (int g : mine) Expect(ag_got[g] == ag_want, "all-gather rank " + std::to_string(g) + tag);

  // Broadcast from the last rank.
  std::vector<std::vector<T>> bc = in;
  OnThreads(mine, [&](int g) { mpi.Broadcast(g, ranks - 1, bc[g].data(), count * sizeof(T)); });
  for (int g : mine) Expect(bc[g] == in[ranks - 1], "broadcast rank " + std::to_string(g) + tag);
}

// Sparse-table rows (GatherRows, ExchangeRows) over tables split by rows:
// the bytes the in-process collective gives the job's ranks. Ids of every
// part, repeated, the padding row, and outside the table; int64 and int32
// ids; rows of 64 bytes (the inline copy) and of 20; a table of 5000 rows
// with 3000 ids per rank (several prefetch windows).
void CheckRows(Collective& mpi, int first, int local, float scale) {
  const int ranks = mpi.size();
  struct Table {
    int64_t vocab, width, padding, n;
    bool ids64;
  };
  const std::vector<Table> tables = {
      {10, 16, 4, 7, true}, {7, 5, -1, 4, false}, {5000, 16, 0, 3000, true}};
  std::vector<std::vector<float>> whole(tables.size());
  for (size_t t = 0; t < tables.size(); ++t)
    for (int64_t i = 0; i < tables[t].vocab * tables[t].width; ++i)
      whole[t].push_back(static_cast<float>(Input(static_cast<int>(t), i)));
  // ids[g][t] (as int64; int32 copies below) and rank g's row gradients.
  std::vector<std::vector<std::vector<int64_t>>> ids(ranks);
  std::vector<std::vector<std::vector<int32_t>>> ids32(ranks);
  std::vector<std::vector<std::vector<float>>> grads(ranks);
  for (int g = 0; g < ranks; ++g)
    for (size_t t = 0; t < tables.size(); ++t) {
      const Table& tb = tables[t];
      std::vector<int64_t> v;
      for (int64_t i = 0; i < tb.n; ++i) {
        const uint64_t h =
            static_cast<uint64_t>(Input(g + 11, i * 3 + static_cast<int64_t>(t)) * 1e6) ^
            static_cast<uint64_t>(i * 7919);
        // Mostly in range, a few at -1 and at vocab (dropped / zero rows).
        v.push_back(static_cast<int64_t>(h % static_cast<uint64_t>(tb.vocab + 2)) - 1);
      }
      ids[g].push_back(v);
      ids32[g].emplace_back(v.begin(), v.end());
      std::vector<float> rows(static_cast<size_t>(tb.n * tb.width));
      for (size_t i = 0; i < rows.size(); ++i)
        rows[i] = static_cast<float>(Input(g + 5, static_cast<int64_t>(i + t * 100000)));
      grads[g].push_back(rows);
    }
  auto ref = tiller::backend::MakeInProcessCollective(ranks);
  const std::string tag = " scale " + std::to_string(scale);
  // Lookups (into out[g][t]) and row-gradient parts for rank g.
  using Out = std::vector<std::vector<std::vector<float>>>;
  auto lookups_of = [&](int g, Out& out) {
    std::vector<tiller::backend::RowLookup> ls;
    for (size_t t = 0; t < tables.size(); ++t) {
      const Table& tb = tables[t];
      tiller::backend::RowLookup l;
      l.part = whole[t].data() + tiller::PartOf(tb.vocab, ranks, g).begin * tb.width;
      l.ids64 = tb.ids64;
      l.ids = tb.ids64 ? static_cast<const void*>(ids[g][t].data()) : ids32[g][t].data();
      l.n = tb.n;
      l.vocab = tb.vocab;
      l.padding_row = tb.padding;
      l.row_bytes = static_cast<size_t>(tb.width) * sizeof(float);
      l.out = out[g][t].data();
      ls.push_back(l);
    }
    return ls;
  };
  struct PairsOut {
    std::vector<std::vector<int64_t>> ids64;
    std::vector<std::vector<int32_t>> ids32;
    std::vector<std::vector<float>> rows;
  };
  auto parts_of = [&](int g, PairsOut& out) {
    std::vector<tiller::backend::RowGradientPart> ps;
    for (size_t t = 0; t < tables.size(); ++t) {
      const Table& tb = tables[t];
      tiller::backend::RowGradientPart p;
      p.ids64 = tb.ids64;
      p.ids = tb.ids64 ? static_cast<const void*>(ids[g][t].data()) : ids32[g][t].data();
      p.rows = grads[g][t].data();
      p.n = tb.n;
      p.vocab = tb.vocab;
      p.row_bytes = static_cast<size_t>(tb.width) * sizeof(float);
      p.scale = scale;
      p.out_ids = tb.ids64 ? static_cast<void*>(out.ids64[t].data()) : out.ids32[t].data();
      p.out_rows = out.rows[t].data();
      ps.push_back(p);
    }
    return ps;
  };
  auto make_out = [&]() {
    Out out(ranks);
    for (int g = 0; g < ranks; ++g)
      for (const Table& tb : tables)
        out[g].emplace_back(static_cast<size_t>(tb.n * tb.width), -7.f);
    return out;
  };
  auto make_pairs = [&]() {
    std::vector<PairsOut> out(ranks);
    for (PairsOut& o : out)
      for (const Table& tb : tables) {
        o.ids64.emplace_back(static_cast<size_t>(tb.n * ranks), -5);
        o.ids32.emplace_back(static_cast<size_t>(tb.n * ranks), -5);
        o.rows.emplace_back(static_cast<size_t>(tb.n * ranks * tb.width), -9.f);
      }
    return out;
  };
  std::vector<int> all(ranks), mine(local);
  for (int g = 0; g < ranks; ++g) all[g] = g;
  for (int l = 0; l < local; ++l) mine[l] = first + l;
  // Twice each: buffers kept from the first call must not show.
  Out want = make_out(), got = make_out();
  std::vector<PairsOut> pairs_want = make_pairs(), pairs_got = make_pairs();
  OnThreads(all, [&](int g) {
    const auto ls = lookups_of(g, want);
    const auto ps = parts_of(g, pairs_want[static_cast<size_t>(g)]);
    std::vector<std::byte> ws(
        std::max(ref->GatherRowsWorkspace(ls), ref->ExchangeRowsWorkspace(ps)));
    for (int repeat = 0; repeat < 2; ++repeat) {
      ref->GatherRows(g, ls, ws.data());
      ref->ExchangeRows(g, ps, ws.data());
    }
  });
  OnThreads(mine, [&](int g) {
    const auto ls = lookups_of(g, got);
    const auto ps = parts_of(g, pairs_got[static_cast<size_t>(g)]);
    std::vector<std::byte> ws(std::max(mpi.GatherRowsWorkspace(ls), mpi.ExchangeRowsWorkspace(ps)));
    for (int repeat = 0; repeat < 2; ++repeat) {
      mpi.GatherRows(g, ls, ws.data());
      mpi.ExchangeRows(g, ps, ws.data());
    }
  });
  for (int g : mine) {
    const std::string r = " rank " + std::to_string(g) + tag;
    Expect(got[g] == want[g], "gather rows" + r);
    const PairsOut &a = pairs_got[static_cast<size_t>(g)], &b = pairs_want[static_cast<size_t>(g)];
    Expect(a.ids64 == b.ids64 && a.ids32 == b.ids32, "exchange rows ids" + r);
    Expect(a.rows == b.rows, "exchange rows rows" + r);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int local = argc > 1 ? std::atoi(argv[1]) : 1;
  tiller::backend::ProcessGroup& job = tiller::runtime::MpiProcessGroup();
  auto mpi = job.MakeCollective(local);
  const int first = job.rank() * local;
  if (argc > 2 && std::strcmp(argv[2], "hang-rows") == 0) {
    // Rank 0 meets the others at a row exchange that only it reaches: the
    // wait must end the job after TILLER_COLLECTIVE_TIMEOUT.
    if (job.rank() != 0)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    CheckRows(*mpi, first, local, 1.0f);
    return 0;
  }
  // 600001 elements: several of the MPI path's chunks (2^18 elements), the last partial.
  for (int64_t count : {0, 1, 5, 1000, 100003, 600001}) {
    for (double scale : {1.0, 0.25}) {
      CheckAll<float>(*mpi, first, local, count, scale, DType::kF32);
      CheckAll<double>(*mpi, first, local, count, scale, DType::kF64);
    }
  }
  for (float scale : {1.0f, 0.5f}) CheckRows(*mpi, first, local, scale);
  // The row exchanges' shared memory (distributed/node_memory.h): every
  // process's segment mapped here, or none where the group sends messages.
  int segments = 0;
  if (FILE* maps = std::fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, maps))
      segments += std::strstr(line, "/dev/shm/tiller-") != nullptr;
    std::fclose(maps);
  }
  // A sharded tensor's parts gathered: this process's ranks' parts in place.
  for (int64_t count : {0, 3, 100003}) {
    const int ranks = job.size() * local;
    std::vector<double> whole(count, -1.0), want(count);
    for (int64_t i = 0; i < count; ++i) want[i] = Input(7, i);
    for (int g = first; g < first + local; ++g) {
      const tiller::PartRange p = tiller::PartOf(count, ranks, g);
      for (int64_t i = p.begin; i < p.end; ++i) whole[i] = want[i];
    }
    job.GatherParts(whole.data(), count, sizeof(double), local);
    Expect(whole == want, "gather parts count " + std::to_string(count));
  }
  // The process-level broadcast and agreement.
  std::vector<int64_t> values(4097, job.rank() + 1);
  job.Broadcast(job.size() - 1, values.data(), values.size() * sizeof(int64_t));
  Expect(values == std::vector<int64_t>(4097, job.size()), "process broadcast");
  Expect(job.Min(job.size() - job.rank()) == 1, "Min");
  if (failures) {
    std::fprintf(stderr, "rank %d: %d of %d checks failed\n", job.rank(), failures, checks);
    return 1;
  }
  std::printf("rank %d: ok %d, shared memory segments %d\n", job.rank(), checks, segments);
  return 0;
}
