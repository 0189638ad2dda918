// Device names as users write them (Config::SetDevices, the CLI's
// --devices): a backend's name, optionally with the unit of its hardware
// after a colon: "cpu", "test", "cuda", "cuda:1", "cuda:0.1".
#pragma once

#include <string>

#include "compile/options.h"

namespace tiller::runtime {

struct DeviceName {
  std::string backend;  // "cuda"
  std::string unit;     // "1"; "" when none was given
};

// Splits at the first colon; throws tiller::Error (kInvalidArgument) for an
// empty backend or unit ("cuda:").
DeviceName ParseDeviceName(const std::string& name);

// Makes sure `backend` is registered. The CUDA backend is a library of its
// own (libtiller_cuda.so next to libtiller.so; TILLER_CUDA_LIBRARY names
// another path), loaded here on first use; a Tiller built without it, or a
// machine without the CUDA runtime it links, fails with a message saying
// which. Other names are left to the compiler's check (an unknown backend
// is refused there, listing the registered ones).
void EnsureBackend(const std::string& backend);

// The directory libtiller.so was loaded from, with a trailing '/' (""
// when unknown): the backend libraries (libtiller_cuda.so,
// libtiller_mpi.so) are built and installed next to it.
std::string LibraryDir();

// The compile's spec of device `name`, its backend loaded.
compile::DeviceSpec DeviceSpecOf(const std::string& name, int threads, bool adapt_to_contention);

}  // namespace tiller::runtime
