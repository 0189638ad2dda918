// include/tiller/backends.h: loading backend libraries.
#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "backend/backend.h"
#include "core/error.h"
#include "runtime/env_libraries.h"
#include "tiller/backends.h"

namespace tiller {
namespace {

std::mutex& Mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, void*>& Libraries() {
  static std::map<std::string, void*> libs;
  return libs;
}

}  // namespace

void LoadBackendLibrary(const std::string& path) {
  std::lock_guard<std::mutex> lock(Mutex());
  if (Libraries().count(path)) return;
  size_t before = backend::BackendNames().size();
  // Kept loaded for the process: backends, devices and kernels point into it.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) Fail(ErrorKind::kInvalidArgument, "backend library {}: {}", path, dlerror());
  if (backend::BackendNames().size() == before) {
    dlclose(h);
    Fail(ErrorKind::kInvalidArgument, "backend library {} registered no backend", path);
  }
  Libraries()[path] = h;
}

std::vector<std::string> BackendNames() {
  return backend::BackendNames();
}

namespace {
// TILLER_BACKENDS=lib1.so:lib2.so (env_libraries.h).
const bool kEnvLoaded = runtime::LoadLibrariesFromEnv("TILLER_BACKENDS", LoadBackendLibrary);

}  // namespace
}  // namespace tiller
