// Crash-safe file replacement: the bytes go to a temporary file in the same
// directory, which is fsynced and renamed over the target, and the
// directory is fsynced so the rename itself survives a power loss. A reader
// of the target therefore sees either the old file or the complete new one,
// never a truncated mix (checkpoints are written this way).
#pragma once

#include <cstddef>
#include <string>

namespace tiller {

class AtomicFile {
 public:
  // Creates the temporary file next to `path`; `what` names the file in
  // messages ("checkpoint"). Fails with tiller::Error naming the path and
  // the errno text (kNotFound when the directory does not exist).
  AtomicFile(std::string path, std::string what);
  // Without Commit() the temporary file is removed and the target is left
  // as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends bytes (retrying short writes and EINTR).
  void Write(const void* data, size_t size);
  // fsync, close, rename over the target, fsync the directory.
  void Commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  [[noreturn]] void FailErrno(const char* step, int err);

  std::string path_;
  std::string what_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace tiller
