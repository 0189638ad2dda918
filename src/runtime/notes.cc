#include "runtime/notes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string_view>

namespace tiller::runtime {

bool IsMainProcess() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* value = std::getenv(name);
    if (value && *value) return std::string_view(value) == "0";
  }
  return true;
}

void NoteOnce(const std::string& key, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> noted;
  std::lock_guard<std::mutex> lock(mu);
  if (noted.insert(key).second && IsMainProcess())
    std::fprintf(stderr, "tiller: note: %s\n", message.c_str());
}

compile::DeviceSpec IpuDeviceSpec(int threads) {
  compile::DeviceSpec spec;  // the default backend: the CPU
  spec.threads = threads;
  return spec;
}

int ThreadsPerDevice(int threads, int devices, const std::string& setting) {
  if (devices <= 1 || threads >= devices) return std::max(1, threads / std::max(devices, 1));
  NoteOnce(fmt::format("share {} {}", devices, threads),
           fmt::format("{} devices share {} thread{} ({}): each runs on one thread and they take "
                       "turns on the cores, so a step is slower than with a core per device "
                       "(results are the same)",
                       devices, threads, threads == 1 ? "" : "s", setting));
  return 1;
}

}  // namespace tiller::runtime
