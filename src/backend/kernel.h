// Kernels. A kernel object is created once per op at compile time, for one
// device, when shapes and attributes are known, so it can precompute
// everything (strides, oneDNN primitives, prepacked weights). Run() then
// only reads inputs and writes outputs at addresses the memory planner
// chose: it never allocates; scratch memory it needs is declared by
// workspace_bytes() and handed to it.
//
// The registry is keyed by (backend, op type) and holds, per key, kernels
// with dtype signatures over all of the op's tensors (signature.h); the
// first whose signature fits the op is used. Kernels register next to their
// code (the CPU's with TILLER_CPU_KERNEL, backends/cpu/kernel.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/signature.h"
#include "ir/graph.h"

namespace tiller::backend {

// An index operand outside its range (an embedding id, a gather index, a
// one_hot id, a class label). A kernel cannot throw from its worker threads
// and must never read outside a tensor: it writes a zero (or NaN) row and
// records the value here; whoever ran the kernel then fails, naming the op
// (compile::Executable after each step), as Paddle raises for such input.
class IndexFault {
 public:
  // Thread-safe; the first value recorded is kept. `operand`: the op input
  // holding the index.
  void Record(int64_t value, int64_t bound, int operand) {
    bool expected = false;
    if (hit_.compare_exchange_strong(expected, true, std::memory_order_relaxed)) {
      value_ = value;
      bound_ = bound;
      operand_ = operand;
    }
  }
  // Read after the kernel returned (its threads joined).
  bool hit() const { return hit_.load(std::memory_order_relaxed); }
  int64_t value() const { return value_; }
  int64_t bound() const { return bound_; }  // valid: [0, bound)
  int operand() const { return operand_; }
  void Clear() { hit_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> hit_{false};
  int64_t value_ = 0, bound_ = 0;
  int operand_ = 0;
};

struct KernelArgs {
  std::vector<const void*> inputs;  // nullptr for an absent optional input
  std::vector<void*> outputs;
  void* workspace = nullptr;
  Stream* stream = nullptr;           // the stream the kernel runs on
  IndexFault* index_fault = nullptr;  // where index kernels report bad indices
};

// For index kernels: records an out-of-range index, if anyone listens.
inline void RecordIndexFault(const KernelArgs& args, int64_t value, int64_t bound, int operand) {
  if (args.index_fault) args.index_fault->Record(value, bound, operand);
}

// The error for a recorded fault: "<op> (<name>): <input> holds <value>,
// outside [0, <bound>)"; throws tiller::Error (kInvalidArgument).
[[noreturn]] void FailIndexFault(const ir::Op& op, const IndexFault& fault);

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual size_t workspace_bytes() const { return 0; }
  virtual void Run(const KernelArgs& args) = 0;

  // Whether Run() reads the op's input `i` (the default), or the kernel
  // copied that constant when it was created (oneDNN's prepacked weights, a
  // scale read once) and never touches it again: then the executable lets
  // go of the constant's bytes, so a model's weights are not held twice.
  bool ReadsInput(size_t i) const { return i >= copied_.size() || !copied_[i]; }
  void MarkInputCopied(size_t i) {
    if (copied_.size() <= i) copied_.resize(i + 1);
    copied_[i] = true;
  }

 private:
  std::vector<bool> copied_;
};

// Creates the kernel of an op for a device, or throws
// tiller::Error(kUnimplemented) with the reason (an attribute value the
// kernel does not handle: "interp: integer input needs method = nearest").
using KernelFactory = std::function<std::unique_ptr<Kernel>(const ir::Op&, Device&)>;
// Most kernels need nothing from the device at creation.
using OpKernelFactory = std::function<std::unique_ptr<Kernel>(const ir::Op&)>;

// What a kernel takes beyond its dtypes (attributes, ranks, broadcasting):
// nullopt when it runs the op, else why not ("matmul: perm_a is not
// supported"). Placement asks it through Backend::Supports, so an op the
// kernel refuses goes to another device (the CPU) instead of failing when
// the kernel is made.
using KernelPredicate = std::function<std::optional<std::string>(const ir::Op&)>;

// Registers a kernel of `backend` for `op_type`. The signature must give
// dtypes for every type variable and name only dtypes the factory really
// runs: tests/cpp/kernel_dtypes_test.cc runs every declared dtype of the
// CPU kernels that declare more than float32 against scalar references.
// `accepts`, when given, must pass too for the kernel to be picked.
bool RegisterKernel(const std::string& backend, const std::string& op_type, Signature signature,
                    KernelFactory factory, KernelPredicate accepts = {});

// Why `backend` cannot run the op (no kernel for its type, or no signature
// fits: the message of the first kernel's mismatch); nullopt when it can.
std::optional<std::string> KernelMismatch(const Backend& backend, const ir::Op& op);
// Checks the signatures, then calls the first fitting kernel's factory.
// Fails (kUnimplemented) naming the backend, the op, its IR type and, for a
// dtype, the tensor and the supported list.
std::unique_ptr<Kernel> CreateKernel(const Backend& backend, const ir::Op& op, Device& device);
bool HasKernel(const std::string& backend, const std::string& op_type);
// The primary dtypes of backend's first kernel for op_type (what `tiller
// ops` lists); nullptr when it has none.
const std::vector<DType>* KernelDTypes(const std::string& backend, const std::string& op_type);
// Every signature registered for (backend, op_type), in registration order.
std::vector<const Signature*> KernelSignatures(const std::string& backend,
                                               const std::string& op_type);

// A kernel from a lambda that captures what it precomputed.
class LambdaKernel : public Kernel {
 public:
  using Fn = std::function<void(const KernelArgs&)>;
  explicit LambdaKernel(Fn fn, size_t workspace = 0) : fn_(std::move(fn)), ws_(workspace) {}
  size_t workspace_bytes() const override { return ws_; }
  void Run(const KernelArgs& args) override { fn_(args); }

 private:
  Fn fn_;
  size_t ws_;
};

}  // namespace tiller::backend
