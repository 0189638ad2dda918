#include "cli_args.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

namespace tiller::tools {
namespace {

template <typename... Args>
[[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ErrorKind::kInvalidArgument, fmt::format(format, std::forward<Args>(args)...));
}

// std::stoll takes "12abc" as 12 and " 12" as 12: the whole token must be
// the number, so a typo is refused rather than read as something else.
enum class Parsed { kOk, kNotANumber, kTooLarge };
Parsed ParseInt(const std::string& s, int64_t* value) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *value);
  if (ec == std::errc::result_out_of_range) return Parsed::kTooLarge;
  if (ec != std::errc() || ptr != end || s.empty()) return Parsed::kNotANumber;
  return Parsed::kOk;
}

std::string Join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "(none)" : s;
}

}  // namespace

ShapeMap ParseShapeArgs(const std::vector<std::string>& args) {
  ShapeMap shapes;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos)
      Fail("--shape '{}' is not NAME=DxDx... (e.g. image=16x3x64x64)", arg);
    const std::string name = arg.substr(0, eq), rest = arg.substr(eq + 1);
    if (name.empty()) Fail("--shape '{}' names no input before '='", arg);
    if (rest.empty()) Fail("--shape '{}' gives no dimensions after '='", arg);
    std::vector<int64_t> dims;
    for (size_t pos = 0;;) {
      const size_t x = rest.find('x', pos);
      const std::string tok = rest.substr(pos, x == std::string::npos ? x : x - pos);
      int64_t d = 0;
      switch (ParseInt(tok, &d)) {
        case Parsed::kNotANumber:
          if (tok.empty())
            Fail("--shape '{}': dimension {} of '{}' is empty", arg, dims.size(), name);
          Fail("--shape '{}': dimension {} of '{}' is '{}', not a whole number", arg, dims.size(),
               name, tok);
        case Parsed::kTooLarge:
          Fail("--shape '{}': dimension {} of '{}' ({}) is too large", arg, dims.size(), name, tok);
        case Parsed::kOk:
          break;
      }
      dims.push_back(d);
      if (x == std::string::npos) break;
      pos = x + 1;
    }
    // A -1 means "dynamic" in a model's declared shape, but the command line
    // gives the shape that runs: every size must be known, and an empty
    // input is refused as Paddle refuses it.
    std::string concrete;  // the example in the message: the shape with 1 for -1
    for (int64_t d : dims)
      concrete += fmt::format("{}{}", concrete.empty() ? "" : "x", d < 1 ? 1 : d);
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0)
        Fail(
            "--shape '{}': dimension {} of '{}' is {}; a shape given on the command line must be "
            "concrete, a size >= 1 for every dimension (e.g. {}={})",
            arg, i, name, dims[i], name, concrete);
      if (dims[i] == 0)
        Fail("--shape '{}': dimension {} of '{}' is 0; every size must be at least 1", arg, i,
             name);
    }
    if (!shapes.emplace(name, std::move(dims)).second)
      Fail("--shape is given twice for '{}'", name);
  }
  return shapes;
}

void CheckShapeNames(const ShapeMap& shapes, const std::vector<std::string>& inputs,
                     const std::string& what) {
  for (const auto& [name, dims] : shapes) {
    if (std::find(inputs.begin(), inputs.end(), name) == inputs.end())
      Fail("--shape names '{}', which is not one of {}: {}", name, what, Join(inputs));
  }
}

CLI::Validator WholeNumber(int64_t min, int64_t max) {
  const std::string desc =
      min == 1 ? "POSITIVE" : (min == 0 ? "NONNEGATIVE" : fmt::format(">={}", min));
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        int64_t v = 0;
        const Parsed p = ParseInt(s, &v);
        if (p == Parsed::kNotANumber) return fmt::format("'{}' is not a whole number", s);
        if (p == Parsed::kTooLarge || v > max)
          return fmt::format("must be at most {}, got {}", max, s);
        if (v < min) return fmt::format("must be at least {}, got {}", min, s);
        return "";
      },
      desc);
}

CLI::Validator NonNegativeReal() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        const char* end = s.data() + s.size();
        auto [ptr, ec] = std::from_chars(s.data(), end, v);
        if (ec != std::errc() || ptr != end || s.empty())
          return fmt::format("'{}' is not a number", s);
        if (!std::isfinite(v) || v < 0) return fmt::format("must be a number >= 0, got {}", s);
        return "";
      },
      "NONNEGATIVE");
}

}  // namespace tiller::tools
