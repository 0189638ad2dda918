// Backends: which kinds of devices Tiller can compile for, and loading more
// from shared libraries (a backend written outside Tiller's source tree
// registers itself the way the built-in CPU backend does; see
// docs/ARCHITECTURE.md, "Adding a backend").
//
//   tiller::LoadBackendLibrary("libmy_backend.so");
//   config.SetDevices({"my", "cpu"});   // tiller/predictor.h
//
// TILLER_BACKENDS=lib1.so:lib2.so loads libraries when Tiller itself loads,
// so any front end (CLI, Python) can use them without an API call.
#pragma once

#include <string>
#include <vector>

#include "tiller/error.h"

namespace tiller {

// dlopens the library, whose static initializers register one or more
// backends and their kernels. Loading the same path again does nothing.
// Throws tiller::Error naming the path when it cannot be loaded or
// registers no backend.
void LoadBackendLibrary(const std::string& path);

// The registered backend names, sorted ("cpu" and any loaded).
std::vector<std::string> BackendNames();

}  // namespace tiller
