#include "compile/fold.h"

#include "backend/kernel.h"
#include "compile/device_profile.h"
#include "core/error.h"
#include "core/memory_cap.h"
#include "ir/op_schema.h"

namespace tiller::compile {

ir::Graph::Folder MakeFolder(backend::Device& device) {
  TILLER_CHECK(device.host_accessible(), "folding needs a host-accessible device, not {}",
               device.name());
  return [&device](ir::Graph&, ir::Op& op) {
    if (op.schema->is_view) {
      ir::Value* out = op.outputs[0];
      out->data = op.inputs[0]->data;
      out->kind = ir::ValueKind::kConstant;
      return;
    }
    if (device.backend().Supports(op)) return;  // no kernel: computed at run time
    // A constant larger than the device's memory cap is refused by name
    // before its buffer is allocated (a fill of 10^12 elements, say).
    size_t bytes = 0;
    for (const ir::Value* out : op.outputs) bytes += out->bytes();
    const size_t cap = device.capacity_bytes();
    if (bytes > cap) {
      Fail(ErrorKind::kResourceExhausted,
           "op {} ({}) makes a constant {} of {}: more than the memory cap of {} ({})", op.name,
           op.type, op.outputs[0]->type.ToString(), FormatBytes(static_cast<double>(bytes)),
           FormatBytes(static_cast<double>(cap)), MemoryCapOrigin(cap));
    }
    std::vector<std::shared_ptr<AlignedBuffer>> results;
    for (const ir::Value* out : op.outputs)
      results.push_back(std::make_shared<AlignedBuffer>(out->bytes()));
    // Created and run on the device's stream, with its threads. A constant
    // index out of range fails the compile, naming the op.
    backend::IndexFault fault;
    device.stream().Submit([&] {
      auto kernel = device.backend().CreateKernel(op, device);
      auto scratch = device.Allocate(kernel->workspace_bytes());
      backend::KernelArgs args;
      for (const ir::Value* in : op.inputs) args.inputs.push_back(in ? in->data->data() : nullptr);
      for (const auto& r : results) args.outputs.push_back(r->data());
      args.workspace = scratch->data();
      args.stream = &device.stream();
      args.index_fault = &fault;
      kernel->Run(args);
    });
    device.stream().Synchronize();
    if (fault.hit()) backend::FailIndexFault(op, fault);
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      op.outputs[i]->data = std::move(results[i]);
      op.outputs[i]->kind = ir::ValueKind::kConstant;
    }
  };
}

}  // namespace tiller::compile
