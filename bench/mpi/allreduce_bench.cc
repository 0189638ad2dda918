// All-reduce micro-benchmark under mpirun (bench/bench_mpi.py runs it):
//   tiller_mpi_bench sizes BYTES...        Tiller's collective (one rank per
//                                          process) vs MPI_Allreduce, per size
//   tiller_mpi_bench gradients FILE BUCKET the element counts in FILE (one per
//                                          line: a model's gradients) summed one
//                                          MPI_Allreduce per gradient vs Tiller's
//                                          bucketed path (packed into messages of
//                                          at most BUCKET bytes, as
//                                          bucket_all_reduce and its kernel do)
// Rank 0 prints one JSON object per line: bytes, seconds (median of the
// repetitions, after a warm-up) and the bus bandwidth 2 (P - 1) / P x bytes /
// seconds (the bytes each rank sends and receives in a ring all-reduce).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backend/collective.h"
#include "runtime/distribution.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of `reps` calls of fn after two warm-up calls, every rank
// starting together.
template <typename Fn>
double Time(int reps, Fn fn) {
  fn();
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = Now();
    fn();
    t.push_back(Now() - t0);
  }
  std::sort(t.begin(), t.end());
  // Every rank's median, the slowest reported (the collective ends when the
  // last rank has its result).
  double median = t[t.size() / 2], worst = 0;
  MPI_Allreduce(&median, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

int Reps(size_t bytes) {
  return bytes <= (1 << 20) ? 50 : bytes <= (16 << 20) ? 10 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  tiller::backend::ProcessGroup& job = tiller::runtime::MpiProcessGroup();
  const int rank = job.rank(), size = job.size();
  auto tiller_group = job.MakeCollective(1);
  const double bus = size > 1 ? 2.0 * (size - 1) / size : 1.0;
  const std::string mode = argc > 1 ? argv[1] : "sizes";
  if (mode == "sizes") {
    for (int i = 2; i < argc; ++i) {
      const size_t bytes = std::strtoull(argv[i], nullptr, 10);
      const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
      std::vector<float> buf(n, 1.0f), out(n);
      const int reps = Reps(bytes);
      const double t_tiller = Time(reps, [&] {
        tiller_group->AllReduceSum(rank, buf.data(), out.data(), n, tiller::DType::kF32, 1.0);
      });
      const double t_mpi = Time(reps, [&] {
        MPI_Allreduce(buf.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      });
      if (rank == 0)
        std::printf(
            "{\"bytes\": %zu, \"tiller_s\": %.9g, \"mpi_s\": %.9g, \"tiller_busbw\": %.6g, "
            "\"mpi_busbw\": %.6g}\n",
            bytes, t_tiller, t_mpi, bus * bytes / t_tiller, bus * bytes / t_mpi);
    }
  } else if (mode == "gradients" && argc == 4) {
    std::vector<int64_t> counts;
    std::ifstream in(argv[2]);
    for (int64_t c; in >> c;) counts.push_back(c);
    const size_t bucket = std::strtoull(argv[3], nullptr, 10);
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    std::vector<float> grads(total, 1.0f), out(total), packed;
    // Per gradient: one MPI_Allreduce each.
    const double t_each = Time(5, [&] {
      int64_t at = 0;
      for (int64_t c : counts) {
        MPI_Allreduce(grads.data() + at, out.data() + at, static_cast<int>(c), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        at += c;
      }
    });
    // Tiller's collective, one call per gradient (no packing).
    const double t_tiller_each = Time(5, [&] {
      int64_t at = 0;
      for (int64_t c : counts) {
        tiller_group->AllReduceSum(rank, grads.data() + at, out.data() + at, c, tiller::DType::kF32,
                                   1.0);
        at += c;
      }
    });
    // Bucketed: consecutive gradients packed into messages of at most
    // `bucket` bytes (a larger gradient alone), summed by Tiller's group.
    int messages = 0;
    const double t_bucketed = Time(5, [&] {
      messages = 0;
      size_t first = 0;
      int64_t at = 0;
      while (first < counts.size()) {
        size_t last = first;
        int64_t n = counts[first];
        while (last + 1 < counts.size() &&
               static_cast<size_t>(n + counts[last + 1]) * sizeof(float) <= bucket)
          n += counts[++last];
        packed.resize(n);
        std::memcpy(packed.data(), grads.data() + at, n * sizeof(float));
        tiller_group->AllReduceSum(rank, packed.data(), packed.data(), n, tiller::DType::kF32, 1.0);
        std::memcpy(out.data() + at, packed.data(), n * sizeof(float));
        at += n;
        ++messages;
        first = last + 1;
      }
    });
    if (rank == 0)
      std::printf(
          "{\"gradients\": %zu, \"bytes\": %lld, \"per_gradient_s\": %.9g, "
          "\"tiller_per_gradient_s\": %.9g, \"bucketed_s\": %.9g, \"messages\": %d, "
          "\"bucket_bytes\": %zu}\n",
          counts.size(), static_cast<long long>(total) * 4LL, t_each, t_tiller_each, t_bucketed,
          messages, bucket);
  } else {
    if (rank == 0)
      std::fprintf(stderr, "usage: tiller_mpi_bench sizes BYTES... | gradients FILE BUCKET\n");
    return 2;
  }
  return 0;
}
