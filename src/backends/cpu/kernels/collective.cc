// Collective ops on CPU devices: the device's replica group does the work
// (backend/collective.h); the kernel hands it the op's buffers.
#include "backend/collective.h"

#include <cstring>
#include <vector>

#include "backends/cpu/kernel.h"
#include "core/error.h"

namespace tiller::cpu {
namespace {

// The device's replica group, checked against what the op asks for.
backend::Collective* Group(const ir::Op& op, const backend::Device& device) {
  backend::Collective* group = device.replica_group();
  if (!group)
    Fail(ErrorKind::kUnimplemented, "{} ({}) on {}: the device belongs to no replica group",
         op.type, op.name, device.name());
  if (!op.GetInts("group").empty())
    Fail(ErrorKind::kUnimplemented, "{} ({}): a sub-group of the replicas", op.type, op.name);
  return group;
}

// Sum or mean (as a scale of the sum).
double ReductionScale(const ir::Op& op, const backend::Collective& group) {
  const std::string& reduction = op.GetStr("reduction");
  if (reduction != "sum" && reduction != "mean")
    Fail(ErrorKind::kUnimplemented, "{} ({}): reduction '{}' (sum or mean)", op.type, op.name,
         reduction);
  return op.GetFloat("scale") / (reduction == "mean" ? group.size() : 1);
}

// reduce_scatter / all_gather between the parts of one-dimensional tensors
// (the sharding pass flattens what it shards): the group splits elements,
// so only then are its parts the op's rows.
void CheckParts(const ir::Op& op, const backend::Device& device, const backend::Collective& group) {
  if (op.inputs[0]->rank() != 1 || op.GetInt("axis") != 0)
    Fail(ErrorKind::kUnimplemented, "{} ({}): parts of a one-dimensional tensor (got {}, axis {})",
         op.type, op.name, op.inputs[0]->type.ToString(), op.GetInt("axis"));
  if (op.GetInt("parts") != group.size() || op.GetInt("rank") != device.replica_rank())
    Fail(ErrorKind::kInternal, "{} ({}): part {} of {} on replica {} of {}", op.type, op.name,
         op.GetInt("rank"), op.GetInt("parts"), device.replica_rank(), group.size());
}

// One input: reduced where it lies. Several (a bucket): packed into the
// workspace, reduced as one message, unpacked; the sums are those of one
// all-reduce per input (elementwise, in rank order, then scaled).
std::unique_ptr<Kernel> MakeAllReduce(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = Group(op, device);
  const double scale = ReductionScale(op, *group);
  const int rank = device.replica_rank();
  const DType dtype = op.inputs[0]->dtype();
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const ir::Value* v : op.inputs) total += counts.emplace_back(NumElements(v->shape()));
  if (counts.size() == 1)
    return std::make_unique<LambdaKernel>(
        [group, rank, total, dtype, scale](const KernelArgs& args) {
          group->AllReduceSum(rank, args.inputs[0], args.outputs[0], total, dtype, scale);
        });
  const size_t item = DTypeSize(dtype);
  return std::make_unique<LambdaKernel>(
      [group, rank, counts, total, dtype, scale, item](const KernelArgs& args) {
        auto* packed = static_cast<std::byte*>(args.workspace);
        size_t at = 0;
        for (size_t i = 0; i < counts.size(); ++i) {
          std::memcpy(packed + at, args.inputs[i], counts[i] * item);
          at += counts[i] * item;
        }
        group->AllReduceSum(rank, packed, packed, total, dtype, scale);
        at = 0;
        for (size_t i = 0; i < counts.size(); ++i) {
          std::memcpy(args.outputs[i], packed + at, counts[i] * item);
          at += counts[i] * item;
        }
      },
      static_cast<size_t>(total) * item);
}

std::unique_ptr<Kernel> MakeReduceScatter(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = Group(op, device);
  const double scale = ReductionScale(op, *group);
  CheckParts(op, device, *group);
  const int rank = device.replica_rank();
  const int64_t count = NumElements(op.inputs[0]->shape());
  const DType dtype = op.inputs[0]->dtype();
  return std::make_unique<LambdaKernel>([group, rank, count, dtype, scale](const KernelArgs& args) {
    group->ReduceScatterSum(rank, args.inputs[0], args.outputs[0], count, dtype, scale);
  });
}

std::unique_ptr<Kernel> MakeAllGather(const ir::Op& op, backend::Device& device) {
  backend::Collective* group = Group(op, device);
  CheckParts(op, device, *group);
  const int rank = device.replica_rank();
  const int64_t count = NumElements(op.outputs[0]->shape());
  const DType dtype = op.inputs[0]->dtype();
  return std::make_unique<LambdaKernel>([group, rank, count, dtype](const KernelArgs& args) {
    group->AllGather(rank, args.inputs[0], args.outputs[0], count, dtype);
  });
}

TILLER_CPU_KERNEL("all_reduce", MakeAllReduce,
                  Signature("T... -> T...").Where("T", {DType::kF32, DType::kF64}));
TILLER_CPU_KERNEL("reduce_scatter", MakeReduceScatter,
                  Signature("T -> T").Where("T", {DType::kF32, DType::kF64}));
TILLER_CPU_KERNEL("all_gather", MakeAllGather,
                  Signature("T -> T").Where("T", {DType::kF32, DType::kF64}));

}  // namespace
}  // namespace tiller::cpu
