// Helpers of the fuzz targets (libFuzzer, `make fuzz`): the readers under
// test take paths, so each input is written to a file in a directory of the
// fuzzing process's own (on /dev/shm when there is one: no disk I/O per
// input). A tiller::Error is the expected end of bad input; anything else
// escaping a reader (another exception, a crash, a sanitizer report, a
// hang, an allocation past -rss_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tiller/error.h"

namespace tiller::fuzz {

inline const std::string& WorkDir() {
  // Never destroyed: the exit handler that removes the directory runs after
  // static destructors would have.
  static const std::string& dir = *[] {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    auto* d = new std::string(std::string(base) + "/tiller-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(*d);
    return d;
  }();
  static const bool cleanup = [] {
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(WorkDir(), ec);
    });
    return true;
  }();
  (void)cleanup;
  return dir;
}

// Writes the input to WorkDir()/name and returns its path.
inline std::string WriteInput(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = WorkDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  return path;
}

// The usual target: the input as file `name`, given to `read`; bad input
// ends in tiller::Error, which is fine.
template <typename Reader>
int ReadAsFile(const uint8_t* data, size_t size, const std::string& name, Reader read) {
  const std::string path = WriteInput(data, size, name);
  try {
    read(path);
  } catch (const tiller::Error&) {
  }
  return 0;
}

}  // namespace tiller::fuzz
