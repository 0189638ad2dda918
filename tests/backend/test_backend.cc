// A second, minimal backend, written the way a new backend is added (see
// docs/ARCHITECTURE.md, "Adding a backend") and built as a library that
// Tiller loads at run time (tiller::LoadBackendLibrary, TILLER_BACKENDS):
// nothing in src/ knows it. It proves the backend interface: its devices
// are not host-accessible (the runtime must copy to and from them), work
// runs on an inline stream, and it has naive kernels for a handful of ops
// whose results are exactly the CPU's (elementwise add/sub/mul, equal, cast,
// transpose), so a graph split between it and the CPU must match a CPU-only
// run bit for bit.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backend/backend.h"
#include "backend/kernel.h"
#include "core/error.h"
#include "passes/pipeline.h"

namespace tiller::test_backend {
namespace {

using backend::Kernel;
using backend::KernelArgs;
using backend::Signature;

// Device memory the host must not touch directly: each buffer is recorded,
// and copies check that they stay inside one. A stray host pointer handed
// to a kernel of this device, or a device pointer used as a host one by the
// runtime, shows up as a failed check rather than as silently right data.
class TestMemory {
 public:
  static TestMemory& Get() {
    static TestMemory m;
    return m;
  }
  void* Allocate(size_t bytes) {
    void* p = std::calloc(1, bytes ? bytes : 1);
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[static_cast<std::byte*>(p)] = bytes;
    return p;
  }
  void Free(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.erase(static_cast<std::byte*>(p));
    std::free(p);
  }
  // Whether [p, p + bytes) lies inside one device buffer.
  bool Owns(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    auto* b = static_cast<const std::byte*>(p);
    auto it = blocks_.upper_bound(const_cast<std::byte*>(b));
    if (it == blocks_.begin()) return false;
    --it;
    return b >= it->first && b + bytes <= it->first + it->second;
  }

 private:
  std::mutex mu_;
  std::map<std::byte*, size_t> blocks_;
};

void CheckDevice(const void* p, size_t bytes, const char* what) {
  if (bytes && !TestMemory::Get().Owns(p, bytes))
    Fail(ErrorKind::kInternal, "test backend: {} {} is not test-device memory", what, p);
}

class TestBuffer : public backend::Buffer {
 public:
  explicit TestBuffer(size_t bytes) : data_(TestMemory::Get().Allocate(bytes)), size_(bytes) {}
  ~TestBuffer() override { TestMemory::Get().Free(data_); }
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_;
  size_t size_;
};

class TestDevice : public backend::Device {
 public:
  using Device::Device;
  size_t capacity_bytes() const override { return size_t{1} << 30; }
  bool host_accessible() const override { return false; }
  std::unique_ptr<backend::Buffer> Allocate(size_t bytes) override {
    return std::make_unique<TestBuffer>(bytes);
  }
  backend::Stream& stream() override { return stream_; }
  std::unique_ptr<backend::Event> CreateEvent() override {
    return std::make_unique<backend::CompletedEvent>();
  }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    CheckDevice(dst, bytes, "copy destination");
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    CheckDevice(src, bytes, "copy source");
    if (bytes) std::memcpy(dst, src, bytes);
  }

 private:
  backend::InlineStream stream_;
};

class TestBackend : public backend::Backend {
 public:
  const std::string& name() const override {
    static const std::string n = "test";
    return n;
  }
  std::unique_ptr<backend::Device> CreateDevice(int ordinal,
                                                const backend::DeviceOptions&) const override {
    return std::make_unique<TestDevice>(*this, ordinal);
  }
  // A rewrite of the backend's own, added the way any backend adds its
  // fusions: transpose(transpose(x, p), q) whose permutations compose to
  // the identity -> x (its transposes are the slowest of its kernels).
  void AddPasses(passes::PassPipeline& pipeline, const std::vector<backend::DeviceCaps>&,
                 const backend::BackendPassSettings& settings) const override {
    if (!settings.optimize) return;
    pipeline.Add(
        std::make_unique<passes::LambdaPass>(
            "test_cancel_transposes", "transpose(transpose(x, p), q), q after p the identity -> x",
            [](ir::Graph& g, const passes::PassContext&, std::string*) {
              return CancelTransposes(g);
            }),
        passes::PassPipeline::After({"half_fallback"}));
  }

 private:
  static int CancelTransposes(ir::Graph& g) {
    int n = 0;
    for (const auto& op : g.ops()) {
      if (op->type != "transpose") continue;
      const ir::Op* inner = op->inputs[0]->producer;
      if (!inner || inner->type != "transpose") continue;
      const std::vector<int64_t> p = inner->GetInts("perm"), q = op->GetInts("perm");
      bool identity = p.size() == q.size();
      for (size_t i = 0; identity && i < q.size(); ++i)
        identity = p[static_cast<size_t>(q[i])] == static_cast<int64_t>(i);
      if (!identity) continue;
      g.ReplaceAllUses(op->outputs[0], inner->inputs[0]);
      ++n;
    }
    if (n) g.RemoveDeadCode();
    return n;
  }
};

// Row-major strides of `shape`, aligned right against `rank` dims, with 0
// for broadcast (size-1 or missing) dims: numpy broadcasting.
std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  int64_t s = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    size_t d = shape.size() - 1 - i, o = out.size() - 1 - i;
    st[o] = shape[d] == 1 ? 0 : s;
    s *= shape[d];
  }
  return st;
}

// Visits every output element with the matching element offsets of (up to
// four) inputs, from strides computed at creation: nothing is allocated
// while running.
template <typename Fn>
void ForEach(const Shape& out, const std::vector<std::vector<int64_t>>& strides, Fn fn) {
  const int rank = static_cast<int>(out.size());
  int64_t n = NumElements(out);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, offs[4] = {0, 0, 0, 0};
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = rest % out[d];
      rest /= out[d];
      for (size_t k = 0; k < strides.size(); ++k) offs[k] += c * strides[k][d];
    }
    fn(i, offs);
  }
}

template <typename T, typename Op>
std::unique_ptr<Kernel> Binary(const ir::Op& op, Op f) {
  Shape out = op.outputs[0]->shape();
  std::vector<std::vector<int64_t>> st = {BroadcastStrides(op.inputs[0]->shape(), out),
                                          BroadcastStrides(op.inputs[1]->shape(), out)};
  using R = decltype(f(T(), T()));
  return std::make_unique<backend::LambdaKernel>([out, st, f](const KernelArgs& a) {
    const T* x = static_cast<const T*>(a.inputs[0]);
    const T* y = static_cast<const T*>(a.inputs[1]);
    R* z = static_cast<R*>(a.outputs[0]);
    ForEach(out, st, [&](int64_t i, const int64_t* o) { z[i] = f(x[o[0]], y[o[1]]); });
  });
}

std::unique_ptr<Kernel> Elementwise(const ir::Op& op) {
  const std::string& t = op.type;
  switch (op.inputs[0]->dtype()) {
    case DType::kF32:
      if (t == "add") return Binary<float>(op, [](float a, float b) { return a + b; });
      if (t == "sub") return Binary<float>(op, [](float a, float b) { return a - b; });
      if (t == "mul") return Binary<float>(op, [](float a, float b) { return a * b; });
      break;
    case DType::kI64:
      if (t == "add") return Binary<int64_t>(op, [](int64_t a, int64_t b) { return a + b; });
      if (t == "sub") return Binary<int64_t>(op, [](int64_t a, int64_t b) { return a - b; });
      if (t == "mul") return Binary<int64_t>(op, [](int64_t a, int64_t b) { return a * b; });
      break;
    default:
      break;
  }
  Fail(ErrorKind::kInternal, "test backend: no {} for {}", t, DTypeName(op.inputs[0]->dtype()));
}

std::unique_ptr<Kernel> Equal(const ir::Op& op) {
  if (op.inputs[0]->dtype() == DType::kF32)
    return Binary<float>(op, [](float a, float b) { return a == b; });
  return Binary<int64_t>(op, [](int64_t a, int64_t b) { return a == b; });
}

template <typename From, typename To>
std::unique_ptr<Kernel> CastAs(int64_t n) {
  return std::make_unique<backend::LambdaKernel>([n](const KernelArgs& a) {
    const From* x = static_cast<const From*>(a.inputs[0]);
    To* y = static_cast<To*>(a.outputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<To>(x[i]);
  });
}

std::unique_ptr<Kernel> Cast(const ir::Op& op) {
  int64_t n = NumElements(op.outputs[0]->shape());
  DType from = op.inputs[0]->dtype(), to = op.outputs[0]->dtype();
  if (from == DType::kBool && to == DType::kF32) return CastAs<bool, float>(n);
  if (from == DType::kI64 && to == DType::kF32) return CastAs<int64_t, float>(n);
  if (from == DType::kF32 && to == DType::kF32) return CastAs<float, float>(n);
  Fail(ErrorKind::kInternal, "test backend: cast {} -> {}", DTypeName(from), DTypeName(to));
}

std::unique_ptr<Kernel> Transpose(const ir::Op& op) {
  const Shape& in = op.inputs[0]->shape();
  const Shape& out = op.outputs[0]->shape();
  const std::vector<int64_t>& perm = op.GetInts("perm");
  int rank = static_cast<int>(in.size());
  std::vector<int64_t> in_st(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_st[d] = in_st[d + 1] * in[d + 1];
  std::vector<std::vector<int64_t>> st(1, std::vector<int64_t>(rank));
  for (int d = 0; d < rank; ++d) st[0][d] = in_st[perm[d] < 0 ? perm[d] + rank : perm[d]];
  size_t elem = DTypeSize(op.inputs[0]->dtype());
  return std::make_unique<backend::LambdaKernel>([out, st, elem](const KernelArgs& a) {
    const auto* x = static_cast<const std::byte*>(a.inputs[0]);
    auto* y = static_cast<std::byte*>(a.outputs[0]);
    ForEach(out, st,
            [&](int64_t i, const int64_t* o) { std::memcpy(y + i * elem, x + o[0] * elem, elem); });
  });
}

// Every kernel checks at run time that it was handed device memory.
backend::KernelFactory OnDevice(std::unique_ptr<Kernel> (*make)(const ir::Op&)) {
  return [make](const ir::Op& op, backend::Device&) -> std::unique_ptr<Kernel> {
    std::shared_ptr<Kernel> inner = make(op);
    std::vector<size_t> in_bytes, out_bytes;
    for (const ir::Value* v : op.inputs) in_bytes.push_back(v ? v->bytes() : 0);
    for (const ir::Value* v : op.outputs) out_bytes.push_back(v->bytes());
    return std::make_unique<backend::LambdaKernel>(
        [inner, in_bytes, out_bytes](const KernelArgs& a) {
          for (size_t i = 0; i < in_bytes.size(); ++i)
            CheckDevice(a.inputs[i], in_bytes[i], "input");
          for (size_t i = 0; i < out_bytes.size(); ++i)
            CheckDevice(a.outputs[i], out_bytes[i], "output");
          inner->Run(a);
        });
  };
}

const bool kRegistered = [] {
  backend::RegisterBackend(std::make_unique<TestBackend>());
  const std::vector<DType> numeric = {DType::kF32, DType::kI64};
  for (const char* op : {"add", "sub", "mul"})
    backend::RegisterKernel("test", op, Signature("T, T -> T").Where("T", numeric),
                            OnDevice(Elementwise));
  backend::RegisterKernel("test", "equal", Signature("T, T -> bool").Where("T", numeric),
                          OnDevice(Equal));
  backend::RegisterKernel("test", "cast",
                          Signature("S -> T")
                              .Where("S", {DType::kBool, DType::kI64, DType::kF32})
                              .Where("T", {DType::kF32}),
                          OnDevice(Cast));
  backend::RegisterKernel("test", "transpose", Signature("T -> T").Where("T", AllDTypes()),
                          OnDevice(Transpose));
  return true;
}();

}  // namespace
}  // namespace tiller::test_backend
