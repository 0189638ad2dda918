// CPU kernels. A kernel object is created once per op at compile time, when
// shapes and attributes are known, so it can precompute everything (strides,
// oneDNN primitives). Run() then only reads inputs and writes outputs at
// addresses the memory planner chose: it never allocates; scratch memory it
// needs is declared by workspace_bytes() and handed to it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tiller::cpu {

struct KernelArgs {
  std::vector<const void*> inputs;  // nullptr for an absent optional input
  std::vector<void*> outputs;
  void* workspace = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual size_t workspace_bytes() const { return 0; }
  virtual void Run(const KernelArgs& args) = 0;
};

// Creates the kernel for an op, or throws tiller::Error(kUnimplemented) with
// the reason (e.g. "gelu: dtype int32 not supported").
using KernelFactory = std::function<std::unique_ptr<Kernel>(const ir::Op&)>;

bool RegisterKernel(const std::string& op_type, KernelFactory factory);
std::unique_ptr<Kernel> CreateKernel(const ir::Op& op);
bool HasKernel(const std::string& op_type);

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

// Registers from a static initializer next to the kernel's code:
//   TILLER_CPU_KERNEL(softmax, MakeSoftmax);
#define TILLER_CPU_KERNEL_CONCAT2(a, b) a##b
#define TILLER_CPU_KERNEL_CONCAT(a, b) TILLER_CPU_KERNEL_CONCAT2(a, b)
#define TILLER_CPU_KERNEL(op_type, factory)                                     \
  static const bool TILLER_CPU_KERNEL_CONCAT(tiller_cpu_kernel_, __COUNTER__) = \
      ::tiller::cpu::RegisterKernel(op_type, factory)

}  // namespace tiller::cpu
