// Run under mpirun (tests/python/distributed_test.py): every collective of
// the MPI process group, with `L` ranks per process (argv[1]), gives the
// bytes MakeInProcessCollective gives for the job's P x L ranks, which this
// process computes itself from every rank's input. Prints "ok N" or the
// first mismatch (exit 1).
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

}  // namespace

int main(int argc, char** argv) {
  const int local = argc > 1 ? std::atoi(argv[1]) : 1;
  tiller::backend::ProcessGroup& job = tiller::runtime::MpiProcessGroup();
  auto mpi = job.MakeCollective(local);
  const int first = job.rank() * local;
  // 600001 elements: several of the MPI path's chunks (2^18 elements), the last partial.
  for (int64_t count : {0, 1, 5, 1000, 100003, 600001}) {
    for (double scale : {1.0, 0.25}) {
      CheckAll<float>(*mpi, first, local, count, scale, DType::kF32);
      CheckAll<double>(*mpi, first, local, count, scale, DType::kF64);
    }
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
  std::printf("rank %d: ok %d\n", job.rank(), checks);
  return 0;
}
