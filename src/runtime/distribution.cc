#include "runtime/distribution.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.h"
#include "runtime/device_names.h"

namespace tiller::runtime {

backend::ProcessGroup& MpiProcessGroup() {
  static std::mutex mu;
  static backend::ProcessGroup* group = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (group) return *group;
  const char* env = std::getenv("TILLER_MPI_LIBRARY");
  const std::string path = env && *env ? env : LibraryDir() + "libtiller_mpi.so";
  // RTLD_GLOBAL: Open MPI's components, loaded by MPI_Init, resolve MPI's
  // own symbols through the global scope.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    Fail(ErrorKind::kUnimplemented,
         "distribution (enable_distribution) needs Tiller's MPI library, which could not be "
         "loaded: {} (is this Tiller built with Open MPI? apt install libopenmpi-dev, then "
         "rebuild; TILLER_MPI_LIBRARY names another path)",
         dlerror());
  using Entry = backend::ProcessGroup* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(lib, "TillerMpiProcessGroup"));
  if (!entry)
    Fail(ErrorKind::kUnimplemented, "{}: no TillerMpiProcessGroup in it: not Tiller's MPI library",
         path);
  group = entry();
  return *group;
}

}  // namespace tiller::runtime
