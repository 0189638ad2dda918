#include <algorithm>
#include <map>

#include "backend/kernel.h"
#include "core/error.h"

namespace tiller::backend {
namespace {

struct Entry {
  KernelFactory factory;
  std::vector<DType> dtypes;
  int dtype_input;
};

std::map<std::string, Entry>& Registry() {
  static std::map<std::string, Entry> registry;
  return registry;
}

}  // namespace

bool RegisterKernel(const std::string& op_type, KernelFactory factory, std::vector<DType> dtypes,
                    int dtype_input) {
  TILLER_CHECK(!dtypes.empty(), "CPU kernel for '{}' declares no dtypes", op_type);
  TILLER_CHECK(dtype_input >= 0, "CPU kernel for '{}': dtype_input {} < 0", op_type, dtype_input);
  bool inserted =
      Registry().emplace(op_type, Entry{std::move(factory), std::move(dtypes), dtype_input}).second;
  TILLER_CHECK(inserted, "CPU kernel for '{}' registered twice", op_type);
  return true;
}

bool HasKernel(const std::string& op_type) {
  return Registry().count(op_type) != 0;
}

const std::vector<DType>* KernelDTypes(const std::string& op_type) {
  auto it = Registry().find(op_type);
  return it == Registry().end() ? nullptr : &it->second.dtypes;
}

namespace {

const Entry& CheckedEntry(const ir::Op& op) {
  auto it = Registry().find(op.type);
  if (it == Registry().end())
    Fail(ErrorKind::kUnimplemented, "no CPU kernel for op {} ({})", op.type, op.name);
  const Entry& e = it->second;
  // The declared tensor: input dtype_input, or output 0 for ops without inputs.
  const ir::Value* v = nullptr;
  std::string which;
  if (op.inputs.empty()) {
    if (!op.outputs.empty()) v = op.outputs[0];
    which = "output 0";
  } else if (static_cast<size_t>(e.dtype_input) < op.inputs.size()) {
    v = op.inputs[e.dtype_input];
    which = fmt::format("input {}", e.dtype_input);
  }
  if (v && std::find(e.dtypes.begin(), e.dtypes.end(), v->dtype()) == e.dtypes.end())
    Fail(ErrorKind::kUnimplemented,
         "CPU kernel {} ({}): dtype {} of {} '{}' is not supported (supported: {})", op.type,
         op.name, DTypeName(v->dtype()), which, v->name, DTypeList(e.dtypes));
  return e;
}

}  // namespace

void CheckKernelSupports(const ir::Op& op) {
  CheckedEntry(op);
}

std::unique_ptr<Kernel> CreateKernel(const ir::Op& op) {
  return CheckedEntry(op).factory(op);
}

}  // namespace tiller::backend
