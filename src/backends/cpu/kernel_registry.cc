#include <map>

#include "backends/cpu/kernel.h"
#include "core/error.h"

namespace tiller::cpu {
namespace {
std::map<std::string, KernelFactory>& Registry() {
  static std::map<std::string, KernelFactory> registry;
  return registry;
}
}  // namespace

bool RegisterKernel(const std::string& op_type, KernelFactory factory) {
  bool inserted = Registry().emplace(op_type, std::move(factory)).second;
  TILLER_CHECK(inserted, "CPU kernel for '{}' registered twice", op_type);
  return true;
}

bool HasKernel(const std::string& op_type) { return Registry().count(op_type) != 0; }

std::unique_ptr<Kernel> CreateKernel(const ir::Op& op) {
  auto it = Registry().find(op.type);
  if (it == Registry().end())
    Fail(ErrorKind::kUnimplemented, "no CPU kernel for op {} ({})", op.type, op.name);
  return it->second(op);
}

}  // namespace tiller::cpu
