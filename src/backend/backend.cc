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

DeviceCaps Device::caps() const {
  DeviceCaps c;
  c.backend = backend_.name();
  c.name = name();
  c.memory_bytes = capacity_bytes();
  c.host_accessible = host_accessible();
  c.threads = threads();
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (backend_.MultipliesIn(t)) c.gemm_types.push_back(t);
  }
  c.int8_gemm = backend_.MultipliesIn(DType::kI8);
  return c;
}

bool Backend::MultipliesIn(DType type) const {
  ir::Graph g;
  ir::Value* a = g.AddInput("a", {type, {2, 2}});
  if (type == DType::kI8) {
    ir::Value* scale = g.AddInput("s", {DType::kF32, {2}});
    return !Supports(*g.AddOp("linear_int8", {a, a, scale}, {}, "probe"));
  }
  return !Supports(*g.AddOp("matmul", {a, a}, {{"out_dtype", std::string("float32")}}, "probe"));
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
