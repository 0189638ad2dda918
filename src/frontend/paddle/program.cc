// Program/OpDesc accessors and the helpers shared by the readers.
#include "frontend/paddle/program.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.h"
#include "core/memory_cap.h"
#include "frontend/paddle/reader_util.h"

namespace tiller::paddle {
namespace {

const std::vector<std::string>& FindSlot(const std::vector<Slot>& slots, const std::string& name) {
  static const std::vector<std::string> kEmpty;
  for (const auto& [slot, args] : slots) {
    if (slot == name) return args;
  }
  return kEmpty;
}

}  // namespace

const std::vector<std::string>& OpDesc::Inputs(const std::string& slot) const {
  return FindSlot(inputs, slot);
}

const std::vector<std::string>& OpDesc::Outputs(const std::string& slot) const {
  return FindSlot(outputs, slot);
}

std::string OpDesc::Describe() const {
  // The first output names the op the way Paddle's own messages and the
  // exported variable names do.
  for (const auto& [slot, args] : outputs) {
    if (!args.empty()) return fmt::format("{} #{} (out: {})", type, index, args[0]);
  }
  return fmt::format("{} #{}", type, index);
}

const VarInfo* Program::FindVar(const std::string& name) const {
  auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

std::string ReadFileBytes(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    Fail(ErrorKind::kInvalidArgument, "{} '{}' is a directory, expected a file", what, path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(ErrorKind::kNotFound, "{} '{}' not found or not readable", what, path);
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) CheckHostMemory(fmt::format("reading the {} file", what), size);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) Fail(ErrorKind::kDataLoss, "{} '{}': read error", what, path);
  return bytes;
}

}  // namespace tiller::paddle
