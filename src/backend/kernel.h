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

namespace tiller::backend {

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

// Each kernel declares the element types it runs, as the dtypes of ONE tensor
// of the op: input `dtype_input` (default 0, the op's data operand), or the
// first output when the op has no inputs (random_normal, random_uniform).
// Ops whose other tensors must have fixed types check those in their factory
// (index operands, the bool condition). Where the declared tensor is not the
// obvious one:
//   cast                 the source (input 0); every listed source casts to
//                        every listed dtype
//   comparisons, logical the operands (input 0); the output is bool
//   where                x (input 1); the condition is bool
//   one_hot              the ids (input 0); the output dtype is an attribute
//   argmax/argmin        the values (input 0); the index dtype is int32|int64
//   top_k/argsort        the values (input 0); indices are int64
//   gather, embedding    the data (input 0); indices are int32|int64
//   embedding_grad       dy (input 1); the ids (input 0) are int32|int64
// The list must be non-empty and name only dtypes the factory really runs:
// tests/cpp/kernel_dtypes_test.cc runs every declared dtype of each kernel
// that declares more than float32 against scalar references (except
// `custom`: it declares the custom-op ABI's dtypes and runs a library's
// code). A factory may still refuse a declared dtype for some attribute
// values (integer interp only for method = nearest), with the reason.
// Registrations written before this list existed (two arguments) add it:
// read the factory's dispatch.
//
//   RegisterKernel("softmax", MakeSoftmax, {DType::kF32});
//   TILLER_CPU_KERNEL("embedding_grad", MakeEmbeddingGrad, {DType::kF32}, 1);
bool RegisterKernel(const std::string& op_type, KernelFactory factory, std::vector<DType> dtypes,
                    int dtype_input = 0);
// Checks the op's declared tensor dtype against the declaration, then calls
// the factory. Fails (kUnimplemented) naming the op, its IR type, the dtype
// and the supported list when no kernel or no declared dtype fits.
std::unique_ptr<Kernel> CreateKernel(const ir::Op& op);
// CreateKernel's checks without the factory (cheap: the predictor checks a
// whole model at load with it): a kernel exists and declares the dtype.
void CheckKernelSupports(const ir::Op& op);
bool HasKernel(const std::string& op_type);
// The dtypes declared for op_type's kernel; nullptr when it has none.
const std::vector<DType>* KernelDTypes(const std::string& op_type);

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
