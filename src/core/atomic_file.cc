#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace tiller {
namespace {

std::string ErrnoText(int err) {
  return std::error_code(err, std::generic_category()).message();
}

std::string DirectoryOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? std::string(".") : dir;
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)) {
  // O_EXCL: two writers of the same target (two processes, or a leftover
  // from a killed one with a recycled pid) never share a temporary file.
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  int err = errno;
  temp_.clear();
  Fail(err == ENOENT || err == ENOTDIR ? ErrorKind::kNotFound : ErrorKind::kInvalidArgument,
       "cannot write {} '{}': creating a temporary file in '{}' failed: {}", what_, path_,
       DirectoryOf(path_), ErrnoText(err));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::FailErrno(const char* step, int err) {
  // ENOSPC, EIO, EDQUOT: the bytes did not reach the disk.
  Fail(ErrorKind::kDataLoss, "cannot write {} '{}': {} failed: {}", what_, path_, step,
       ErrnoText(err));
}

void AtomicFile::Write(const void* data, size_t size) {
  TILLER_CHECK(fd_ >= 0 && !committed_, "write to a closed AtomicFile '{}'", path_);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      FailErrno("write", errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void ReplaceWithLink(const std::string& from, const std::string& to, const std::string& what) {
  const std::string temp = to + ".tmp-link-" + std::to_string(::getpid());
  ::unlink(temp.c_str());
  if (::link(from.c_str(), temp.c_str()) != 0) {
    // No hard links here (some network and FUSE file systems): a copy.
    std::error_code ec;
    std::filesystem::copy_file(from, temp, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec)
      Fail(ErrorKind::kDataLoss, "cannot keep {} '{}' as '{}': {}", what, from, to, ec.message());
  }
  if (::rename(temp.c_str(), to.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    Fail(ErrorKind::kDataLoss, "cannot keep {} '{}' as '{}': rename failed: {}", what, from, to,
         ErrnoText(err));
  }
}

void RemoveFile(const std::string& path, const std::string& what) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    Fail(ErrorKind::kDataLoss, "cannot remove {} '{}': {}", what, path, ErrnoText(errno));
}

void SyncDirectory(const std::string& path, const std::string& what) {
  int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    Fail(ErrorKind::kDataLoss, "cannot write {} '{}': opening its directory for fsync failed: {}",
         what, path, ErrnoText(errno));
  int rc = ::fsync(dir);
  int err = errno;
  ::close(dir);
  // Some file systems cannot fsync a directory (EINVAL).
  if (rc != 0 && err != EINVAL && err != EROFS)
    Fail(ErrorKind::kDataLoss, "cannot write {} '{}': fsync of its directory failed: {}", what,
         path, ErrnoText(err));
}

void AtomicFile::Commit() {
  TILLER_CHECK(fd_ >= 0 && !committed_, "commit of a closed AtomicFile '{}'", path_);
  if (::fsync(fd_) != 0) FailErrno("fsync", errno);
  int fd = fd_;
  fd_ = -1;
  // close() can report a deferred write error (NFS); the rename must not
  // happen then.
  if (::close(fd) != 0) FailErrno("close", errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) FailErrno("rename", errno);
  committed_ = true;
  // The rename is durable only once the directory entry is on disk.
  SyncDirectory(path_, what_);
}

}  // namespace tiller
