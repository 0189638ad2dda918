#include "distributed/node_memory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "backend/rank_barrier.h"
#include "core/error.h"
#include "distributed/mpi_wait.h"

namespace tiller::distributed {
namespace {

std::atomic<uint64_t> next_segment{0};  // names a process's segments apart

constexpr size_t kPage = 4096;
constexpr size_t kName = 64;

}  // namespace

NodeMemory::NodeMemory(MPI_Comm comm, double timeout_s, std::chrono::microseconds spin)
    : timeout_s_(timeout_s), spin_(spin) {
  MPI_Request request;
  Check(MPI_Comm_idup(comm, &comm_, &request), "MPI_Comm_idup");
  Wait(&request, timeout_s_, "creating shared memory", 0, 0);
  MPI_Comm_rank(comm_, &process_);
  MPI_Comm_size(comm_, &processes_);
  mapped_.assign(static_cast<size_t>(processes_), nullptr);
  ok_ = Map(0);
}

NodeMemory::~NodeMemory() {
  Unmap();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

bool NodeMemory::Map(size_t capacity) {
  const size_t bytes = kData + (capacity + kPage - 1) / kPage * kPage;
  // This process's segment: created, its memory taken now (a tmpfs too
  // small fails here, not with SIGBUS at the first write), named to the
  // others.
  char name[kName] = {};
  std::snprintf(name, sizeof name, "/tiller-%d-%llu", static_cast<int>(getpid()),
                static_cast<unsigned long long>(next_segment.fetch_add(1)));
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  bool made = fd >= 0 && posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
  std::vector<char> names(kName * static_cast<size_t>(processes_));
  std::vector<char> entry(name, name + kName);
  entry[kName - 1] = made ? 1 : 0;  // the name is shorter: its last byte says whether it was made
  MPI_Request request;
  Check(MPI_Iallgather(entry.data(), static_cast<int>(kName), MPI_CHAR, names.data(),
                       static_cast<int>(kName), MPI_CHAR, comm_, &request),
        "MPI_Iallgather");
  Wait(&request, timeout_s_, "naming shared memory", 0, names.size());
  bool all_made = true;
  for (int p = 0; p < processes_; ++p) all_made = all_made && names[kName * p + kName - 1] == 1;
  std::vector<std::byte*> mapped(static_cast<size_t>(processes_), nullptr);
  int mapped_all = all_made ? 1 : 0;
  if (all_made) {
    for (int p = 0; p < processes_; ++p) {
      const char* other = names.data() + kName * static_cast<size_t>(p);
      const int f = p == process_ ? fd : shm_open(other, O_RDWR, 0600);
      void* at =
          f >= 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0) : MAP_FAILED;
      if (f >= 0 && p != process_) close(f);
      if (at == MAP_FAILED) {
        mapped_all = 0;
        continue;
      }
      mapped[static_cast<size_t>(p)] = static_cast<std::byte*>(at);
    }
  }
  // Every process has opened every segment (or failed to): the names can
  // go, and the memory lives as long as a mapping does (a process that dies
  // leaves nothing in /dev/shm).
  int everyone = 0;
  Check(MPI_Iallreduce(&mapped_all, &everyone, 1, MPI_INT, MPI_MIN, comm_, &request),
        "MPI_Iallreduce");
  Wait(&request, timeout_s_, "mapping shared memory", 0, sizeof everyone);
  if (fd >= 0) {
    shm_unlink(name);
    close(fd);
  }
  if (!everyone) {
    for (std::byte* m : mapped)
      if (m) munmap(m, bytes);
    return false;
  }
  Unmap();
  mapped_ = std::move(mapped);
  capacity_ = bytes - kData;
  generation_ = 0;  // the new headers' counters start at 0
  return true;
}

void NodeMemory::Unmap() {
  for (std::byte*& m : mapped_)
    if (m) {
      munmap(m, kData + capacity_);
      m = nullptr;
    }
}

bool NodeMemory::Begin(size_t bytes, const char* what) {
  if (!ok_) return false;
  std::atomic_ref<uint64_t>(header(process_)->bytes).store(bytes, std::memory_order_relaxed);
  Barrier(what);
  for (int p = 0; p < processes_; ++p) {
    const uint64_t theirs =
        std::atomic_ref<uint64_t>(header(p)->bytes).load(std::memory_order_relaxed);
    if (theirs != bytes)
      Fail(ErrorKind::kInternal,
           "{}: process {} of the group laid out {} bytes of shared memory, process {} {} (the "
           "processes' tensors differ)",
           what, process_, bytes, p, theirs);
  }
  if (bytes > capacity_) ok_ = Map(bytes);
  return ok_;
}

void NodeMemory::Barrier(const char* what) {
  ++barriers_;
  const uint64_t generation = ++generation_;
  // Release: this process's writes to the segments before the barrier are
  // seen by whoever sees its arrival.
  std::atomic_ref<uint64_t>(header(process_)->arrived).store(generation, std::memory_order_release);
  auto all_arrived = [&] {
    for (int p = 0; p < processes_; ++p)
      if (std::atomic_ref<uint64_t>(header(p)->arrived).load(std::memory_order_acquire) <
          generation)
        return false;
    return true;
  };
  if (backend::SpinUntil(all_arrived, spin_)) return;
  const auto start = std::chrono::steady_clock::now();
  while (!all_arrived()) {
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_) EndJob(TimedOut(waited, what, barriers_, capacity_, timeout_s_));
    std::this_thread::sleep_for(kPollSleep);
  }
}

}  // namespace tiller::distributed
