#include "ir/opcode.h"

#include <array>
#include <string_view>
#include <unordered_map>

namespace tiller::ir {
namespace {

constexpr std::array kNames = {
#define TILLER_OPCODE_NAME(name) std::string_view(#name),
    TILLER_OPCODES(TILLER_OPCODE_NAME)
#undef TILLER_OPCODE_NAME
};

}  // namespace

Opcode OpcodeOf(std::string_view type) {
  static const auto* by_name = [] {
    auto* m = new std::unordered_map<std::string_view, Opcode>();
    for (size_t i = 0; i < kNames.size(); ++i) m->emplace(kNames[i], static_cast<Opcode>(i));
    return m;
  }();
  auto it = by_name->find(type);
  return it == by_name->end() ? Opcode::kUnlisted : it->second;
}

std::string_view OpcodeName(Opcode opcode) {
  const auto i = static_cast<size_t>(opcode);
  return i < kNames.size() ? kNames[i] : std::string_view();
}

}  // namespace tiller::ir
