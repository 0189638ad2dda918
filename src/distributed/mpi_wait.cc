#include "distributed/mpi_wait.h"

#include <fmt/format.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"

namespace tiller::distributed {

void Check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  Fail(ErrorKind::kInternal, "{} failed: {}", call, std::string(text, len));
}

[[noreturn]] void EndJob(const std::string& what) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::fprintf(stderr, "tiller: rank %d of %d%s; ending the job\n", rank, size, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

std::string TimedOut(double waited, const char* what, int64_t call, size_t bytes,
                     double timeout_s) {
  return fmt::format(
      " waited {:.0f} s in {} #{} ({} bytes) for the other ranks (timeout {:.0f} s, "
      "TILLER_COLLECTIVE_TIMEOUT): a rank died or stopped answering",
      waited, what, call, bytes, timeout_s);
}

void Wait(MPI_Request* request, double timeout_s, const char* what, int64_t call, size_t bytes,
          std::chrono::microseconds spin) {
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  do {
    for (int polls = 0; polls < 64; ++polls) {
      Check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
    }
  } while (std::chrono::steady_clock::now() - start < spin);
  for (;;) {
    Check(MPI_Test(request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) EndJob(TimedOut(waited, what, call, bytes, timeout_s));
    std::this_thread::sleep_for(kPollSleep);
  }
}

NodeSurvey SurveyNode(MPI_Comm comm, int local_ranks, double timeout_s) {
#ifdef __linux__
  MPI_Comm node = MPI_COMM_NULL;
  Check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int processes = 1, everyone = 1;
  MPI_Comm_size(node, &processes);
  MPI_Comm_size(comm, &everyone);
  // Each process's rank count, whether it allows shared memory, then its
  // CPU mask, as bytes.
  constexpr size_t kEntry = 2 * sizeof(int64_t) + sizeof(cpu_set_t);
  std::vector<std::byte> mine(kEntry), all(kEntry * static_cast<size_t>(processes));
  const int64_t ranks = local_ranks;
  const char* env = std::getenv("TILLER_MPI_SHARED_MEMORY");
  const int64_t allows = !(env && std::strcmp(env, "0") == 0);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) CPU_SET(0, &cpus);
  std::memcpy(mine.data(), &ranks, sizeof ranks);
  std::memcpy(mine.data() + sizeof ranks, &allows, sizeof allows);
  std::memcpy(mine.data() + 2 * sizeof ranks, &cpus, sizeof cpus);
  MPI_Request request;
  Check(MPI_Iallgather(mine.data(), static_cast<int>(kEntry), MPI_BYTE, all.data(),
                       static_cast<int>(kEntry), MPI_BYTE, node, &request),
        "MPI_Iallgather");
  Wait(&request, timeout_s, "comparing the node's ranks with its CPUs", 0, all.size());
  MPI_Comm_free(&node);
  int64_t total = 0;
  bool all_allow = true;
  cpu_set_t any;
  CPU_ZERO(&any);
  for (int p = 0; p < processes; ++p) {
    const std::byte* entry = all.data() + kEntry * static_cast<size_t>(p);
    int64_t r = 0, allowed = 0;
    std::memcpy(&r, entry, sizeof r);
    std::memcpy(&allowed, entry + sizeof r, sizeof allowed);
    std::memcpy(&cpus, entry + 2 * sizeof r, sizeof cpus);
    total += r;
    all_allow = all_allow && allowed != 0;
    CPU_OR(&any, &any, &cpus);
  }
  return {total <= CPU_COUNT(&any), all_allow && processes == everyone};
#else
  (void)comm, (void)local_ranks, (void)timeout_s;
  return {};
#endif
}

}  // namespace tiller::distributed
