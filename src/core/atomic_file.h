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

// `to` becomes another name of `from`'s current bytes (a hard link, or a
// copy where the file system has none), replacing what `to` held at once;
// `from` is left as it is. `what` names the files in messages.
void ReplaceWithLink(const std::string& from, const std::string& to, const std::string& what);
// Removes `path` if it exists (errors other than its absence name it).
void RemoveFile(const std::string& path, const std::string& what);
// Makes the directory holding `path` durable: its renames and removals
// survive a power loss (file systems that cannot fsync a directory pass).
void SyncDirectory(const std::string& path, const std::string& what);

}  // namespace tiller
