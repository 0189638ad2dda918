// Collective ops on CPU devices: the device's replica group does the work
// (backend/collective.h); the kernel hands it the op's buffers.
#include "backend/collective.h"

#include "backends/cpu/kernel.h"
#include "core/error.h"

namespace tiller::cpu {
namespace {

std::unique_ptr<Kernel> MakeAllReduce(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = device.replica_group();
  if (!group)
    Fail(ErrorKind::kUnimplemented, "all_reduce ({}) on {}: the device belongs to no replica group",
         op.name, device.name());
  const std::string& reduction = op.GetStr("reduction");
  if (reduction != "sum" && reduction != "mean")
    Fail(ErrorKind::kUnimplemented, "all_reduce ({}): reduction '{}' (sum or mean)", op.name,
         reduction);
  if (!op.GetInts("group").empty())
    Fail(ErrorKind::kUnimplemented, "all_reduce ({}): a sub-group of the replicas", op.name);
  const int rank = device.replica_rank();
  const int64_t count = NumElements(op.inputs[0]->shape());
  const DType dtype = op.inputs[0]->dtype();
  const double scale = op.GetFloat("scale") / (reduction == "mean" ? group->size() : 1);
  return std::make_unique<LambdaKernel>([group, rank, count, dtype, scale](const KernelArgs& args) {
    group->AllReduceSum(rank, args.inputs[0], args.outputs[0], count, dtype, scale);
  });
}

TILLER_CPU_KERNEL("all_reduce", MakeAllReduce,
                  Signature("T -> T").Where("T", {DType::kF32, DType::kF64}));

}  // namespace
}  // namespace tiller::cpu
