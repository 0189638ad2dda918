// Device names and loading the CUDA backend on first use (device_names.h).
#include "runtime/device_names.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "backend/backend.h"
#include "core/error.h"
#include "tiller/backends.h"

namespace tiller::runtime {

std::string LibraryDir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&EnsureBackend), &info) || !info.dli_fname) return "";
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash + 1);
}

DeviceName ParseDeviceName(const std::string& name) {
  const size_t colon = name.find(':');
  DeviceName d{name.substr(0, colon), colon == std::string::npos ? "" : name.substr(colon + 1)};
  if (d.backend.empty() || (colon != std::string::npos && d.unit.empty()))
    Fail(ErrorKind::kInvalidArgument,
         "device '{}': expected a backend name, optionally with its unit (cpu, cuda, cuda:1)",
         name);
  return d;
}

void EnsureBackend(const std::string& backend) {
  if (backend != "cuda" || backend::FindBackend(backend)) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (backend::FindBackend(backend)) return;
  const char* env = std::getenv("TILLER_CUDA_LIBRARY");
  const std::string path = env && *env ? env : LibraryDir() + "libtiller_cuda.so";
  if (access(path.c_str(), F_OK) != 0)
    Fail(ErrorKind::kUnimplemented,
         "device cuda: this Tiller was built without the CUDA backend ({} is missing; rebuild "
         "where the CUDA toolkit's nvcc is installed, CMake TILLER_CUDA=auto or ON)",
         path);
  try {
    LoadBackendLibrary(path);
  } catch (const Error& e) {
    // dlopen's message names what the library lacked.
    Fail(ErrorKind::kUnimplemented,
         "device cuda: the CUDA backend could not be loaded: {} (the CUDA runtime libraries it "
         "links, libcudart and libcublasLt, must be installed)",
         e.what());
  }
}

compile::DeviceSpec DeviceSpecOf(const std::string& name, int threads, bool adapt_to_contention) {
  const DeviceName d = ParseDeviceName(name);
  EnsureBackend(d.backend);
  compile::DeviceSpec spec;
  spec.backend = d.backend;
  spec.threads = threads;
  spec.adapt_to_contention = adapt_to_contention;
  spec.unit = d.unit;
  return spec;
}

}  // namespace tiller::runtime
