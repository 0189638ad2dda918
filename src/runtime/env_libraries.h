// Libraries named in an environment variable (TILLER_CUSTOM_OPS,
// TILLER_BACKENDS: paths separated by ':') are loaded when Tiller itself
// loads, so every front end (CLI, Python, C++) gets them without an API
// call. A path that fails is reported on stderr and skipped: a bad
// variable must not make the library unloadable.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "core/error.h"

namespace tiller::runtime {

template <typename Load>
bool LoadLibrariesFromEnv(const char* variable, Load load) {
  const char* env = std::getenv(variable);
  if (!env || !*env) return true;
  std::stringstream ss(env);
  for (std::string path; std::getline(ss, path, ':');) {
    if (path.empty()) continue;
    try {
      load(path);
    } catch (const Error& e) {
      fmt::print(stderr, "tiller: {}: {}\n", variable, e.what());
    }
  }
  return true;
}

}  // namespace tiller::runtime
