// Errors: every failure that a user can cause is reported as a tiller::Error
// with a kind and a message that names the file, op and tensor involved.
#pragma once

#include <fmt/format.h>

#include <string>

#include "tiller/error.h"

namespace tiller {

template <typename... Args>
[[noreturn]] void Fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tiller

// Internal invariant; failing it is a Tiller bug, never a user error.
#define TILLER_CHECK(cond, ...)                                                          \
  do {                                                                                   \
    if (!(cond))                                                                         \
      ::tiller::Fail(::tiller::ErrorKind::kInternal, "{}:{}: check '{}' failed: {}",     \
                     __FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__));             \
  } while (0)
