// The registry of PIR -> legacy op entries. The entries themselves are
// registered beside their translators (translate/<family>.cc). Operand order
// and names come from the op signatures of paddlepaddle 3.3.1
// (Operation.get_input_names() on exported programs); legacy names from
// Paddle's op_compat.yaml and the legacy programs the same version writes.
// docs/PADDLE_FORMATS.md summarizes the table; `tiller ops` lists the PIR
// names of each translated legacy op.
#include "frontend/paddle/pir_compat.h"

#include <map>

#include "core/error.h"

namespace tiller::paddle {
namespace {

using Table = std::map<std::string, PirOpCompat>;

// Filled by RegisterPirOpCompat during static initialization; a
// function-local static so it exists before the first registration,
// whichever translator file initializes first.
Table& Registered() {
  static Table table;
  return table;
}

}  // namespace

bool RegisterPirOpCompat(const std::string& pir_name, PirOpCompat entry) {
  bool inserted = Registered().emplace(pir_name, std::move(entry)).second;
  TILLER_CHECK(inserted, "PIR op '{}' mapped twice", pir_name);
  return true;
}

std::vector<std::pair<std::string, const PirOpCompat*>> AllPirOpCompat() {
  std::vector<std::pair<std::string, const PirOpCompat*>> out;
  for (const auto& [name, entry] : Registered()) out.emplace_back(name, &entry);
  return out;
}

const PirOpCompat* FindPirOpCompat(const std::string& name) {
  const Table& table = Registered();
  auto it = table.find(name);
  if (it == table.end() && name.size() > 1 && name.back() == '_') {
    it = table.find(name.substr(0, name.size() - 1));
  }
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace tiller::paddle
