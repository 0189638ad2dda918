#include "ir/op_schema.h"

#include <map>
#include <mutex>

namespace tiller::ir {

namespace {
std::map<std::string, OpSchema>& Registry() {
  static std::map<std::string, OpSchema> registry;
  return registry;
}
}  // namespace

const TensorType& InferContext::input(size_t i) const {
  const Value* v = op_.input(i);
  if (!v) Fail("input {} is required", i);
  return v->type;
}

bool RegisterOpSchema(OpSchema schema) {
  auto [it, inserted] = Registry().emplace(schema.name, std::move(schema));
  TILLER_CHECK(inserted, "op schema '{}' registered twice", it->first);
  return true;
}

const OpSchema* FindOpSchema(const std::string& name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<std::string> AllOpSchemaNames() {
  std::vector<std::string> names;
  for (const auto& [name, s] : Registry()) names.push_back(name);
  return names;
}

}  // namespace tiller::ir
