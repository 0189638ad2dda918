#include <exception>
#include <map>
#include <new>

#include "backend/kernel.h"
#include "core/error.h"

namespace tiller::backend {
namespace {

struct Entry {
  Signature signature;
  KernelFactory factory;
  KernelPredicate accepts;  // empty: the signature decides
};

using Key = std::pair<std::string, std::string>;  // (backend, op type)

std::map<Key, std::vector<Entry>>& Registry() {
  static std::map<Key, std::vector<Entry>> registry;
  return registry;
}

const std::vector<Entry>* Find(const std::string& backend, const std::string& op_type) {
  auto it = Registry().find({backend, op_type});
  return it == Registry().end() ? nullptr : &it->second;
}

// The first fitting kernel, or the reason none fits.
const Entry* Pick(const Backend& backend, const ir::Op& op, std::string* why) {
  const std::vector<Entry>* entries = Find(backend.name(), op.type);
  if (!entries) {
    *why = fmt::format("no {} kernel for op {} ({})", backend.display_name(), op.type, op.name);
    return nullptr;
  }
  std::optional<std::string> first;
  for (const Entry& e : *entries) {
    std::optional<std::string> m = e.signature.Mismatch(op);
    if (!m && e.accepts) m = e.accepts(op);
    if (!m) return &e;
    if (!first) first = m;
  }
  *why = fmt::format("{} kernel {} ({}): {}", backend.display_name(), op.type, op.name, *first);
  return nullptr;
}

}  // namespace

bool RegisterKernel(const std::string& backend, const std::string& op_type, Signature signature,
                    KernelFactory factory, KernelPredicate accepts) {
  signature.Validate(fmt::format("{} kernel for '{}'", backend, op_type));
  TILLER_CHECK(factory, "{} kernel for '{}' has no factory", backend, op_type);
  Registry()[{backend, op_type}].push_back(
      {std::move(signature), std::move(factory), std::move(accepts)});
  return true;
}

std::optional<std::string> KernelMismatch(const Backend& backend, const ir::Op& op) {
  std::string why;
  if (Pick(backend, op, &why)) return std::nullopt;
  return why;
}

std::unique_ptr<Kernel> CreateKernel(const Backend& backend, const ir::Op& op, Device& device) {
  std::string why;
  const Entry* e = Pick(backend, op, &why);
  if (!e) Fail(ErrorKind::kUnimplemented, "{}", why);
  try {
    return e->factory(op, device);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& ex) {
    // A library the kernel builds on refused the op's attributes (oneDNN
    // cannot describe a convolution with a stride of 2^31 - 1): an error
    // naming the op, not an exception the caller cannot place.
    Fail(ErrorKind::kUnimplemented, "op {} ({}): the {} kernel cannot be made: {}", op.name,
         op.type, backend.name(), ex.what());
  }
}

bool HasKernel(const std::string& backend, const std::string& op_type) {
  return Find(backend, op_type) != nullptr;
}

const std::vector<DType>* KernelDTypes(const std::string& backend, const std::string& op_type) {
  const std::vector<Entry>* entries = Find(backend, op_type);
  if (!entries || entries->front().signature.primary_types().empty()) return nullptr;
  return &entries->front().signature.primary_types();
}

std::vector<const Signature*> KernelSignatures(const std::string& backend,
                                               const std::string& op_type) {
  std::vector<const Signature*> out;
  if (const std::vector<Entry>* entries = Find(backend, op_type)) {
    for (const Entry& e : *entries) out.push_back(&e.signature);
  }
  return out;
}

void FailIndexFault(const ir::Op& op, const IndexFault& fault) {
  const ir::Value* in = op.input(static_cast<size_t>(fault.operand()));
  // What the index selects from (an embedding's table, a gather's data),
  // where that is another input: input 0, or for gather_rows the table
  // part before the ids.
  const ir::Value* indexed = fault.operand() == 0 || op.is(ir::Opcode::exchange_rows) ? nullptr
                             : op.is(ir::Opcode::gather_rows) ? op.input(fault.operand() - 1)
                                                              : op.input(0);
  Fail(ErrorKind::kInvalidArgument,
       "{} ({}): input '{}' holds {}, outside [0, {}){} (an id, index or label beyond what the "
       "op indexes; Paddle rejects it too)",
       op.type, op.name, in ? in->name : "?", fault.value(), fault.bound(),
       indexed ? fmt::format(", the rows of '{}'", indexed->name) : "");
}

}  // namespace tiller::backend
