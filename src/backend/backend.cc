#include "backend/backend.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backend/kernel.h"
#include "core/aligned_buffer.h"
#include "core/error.h"

namespace tiller::backend {
namespace {

std::map<std::string, std::unique_ptr<Backend>>& Registry() {
  static std::map<std::string, std::unique_ptr<Backend>> registry;
  return registry;
}

}  // namespace

std::string Device::name() const {
  return fmt::format("{}:{}", backend_.name(), ordinal_);
}

void Device::CopyFrom(Device& from, const void* src, void* dst, size_t bytes) {
  if (bytes == 0) return;
  if (from.host_accessible() && host_accessible()) {
    std::memcpy(dst, src, bytes);
  } else if (from.host_accessible()) {
    CopyFromHost(dst, src, bytes);
  } else if (host_accessible()) {
    from.CopyToHost(dst, src, bytes);
  } else {
    AlignedBuffer staging(bytes);
    from.CopyToHost(staging.data(), src, bytes);
    CopyFromHost(dst, staging.data(), bytes);
  }
}

std::optional<std::string> Backend::Supports(const ir::Op& op) const {
  return KernelMismatch(*this, op);
}

std::unique_ptr<Kernel> Backend::CreateKernel(const ir::Op& op, Device& device) const {
  return backend::CreateKernel(*this, op, device);
}

bool RegisterBackend(std::unique_ptr<Backend> backend) {
  TILLER_CHECK(backend, "null backend");
  std::string name = backend->name();
  bool inserted = Registry().emplace(name, std::move(backend)).second;
  TILLER_CHECK(inserted, "backend '{}' registered twice", name);
  return true;
}

Backend* FindBackend(const std::string& name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : it->second.get();
}

std::vector<std::string> BackendNames() {
  std::vector<std::string> out;
  for (const auto& [name, b] : Registry()) out.push_back(name);
  return out;
}

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  if (bytes) {
    data_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!data_) Fail(ErrorKind::kResourceExhausted, "out of memory allocating {} bytes", bytes);
  }
}

HostBuffer::~HostBuffer() {
  std::free(data_);
}

void InlineStream::Submit(std::function<void()> work) {
  if (error_) return;
  try {
    work();
  } catch (...) {
    error_ = std::current_exception();
  }
}

void InlineStream::Synchronize() {
  if (!error_) return;
  std::exception_ptr e = error_;
  error_ = nullptr;
  std::rethrow_exception(e);
}

}  // namespace tiller::backend
