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
#include <utility>
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

// The x86-64 instruction-set levels (x86-64, x86-64-v2, avx2, avx512, amx)
// of this CPU and of this build, and the one chosen under TILLER_MAX_ISA
// (like oneDNN's ONEDNN_MAX_CPU_ISA: a level name, or native for no cap).
// This build's own kernels run at `compiled` (its -march); oneDNN takes
// the cap. A cap below `compiled`, or a CPU below it, cannot run: `error`
// says so, and creating a CPU device throws it (kInvalidArgument).
struct CpuIsaInfo {
  std::string cpu;                    // the CPU's name (cpuid's brand string)
  std::string detected;               // this CPU's (and OS's) highest level
  std::vector<std::string> features;  // the features found (cpuid's names)
  std::string compiled;               // the level this build's code needs
  std::string cap;                    // TILLER_MAX_ISA as given ("" unset)
  std::string chosen;                 // min(detected, cap)
  std::string why;                    // how `chosen` was decided, a line
  std::string error;                  // "" when this process can run
  // Libraries' own choices after the cap, e.g. {"oneDNN", "avx2"}.
  std::vector<std::pair<std::string, std::string>> libraries;
};
CpuIsaInfo GetCpuIsaInfo();
// GetCpuIsaInfo as lines of text, `error` left out: what `tiller info`
// (without a model) and tiller.about() print after the version.
std::string DescribeCpuIsa(const CpuIsaInfo& info);

}  // namespace tiller
