#include "core/error.h"

namespace tiller {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kNotFound:
      return "not found";
    case ErrorKind::kDataLoss:
      return "data loss";
    case ErrorKind::kUnimplemented:
      return "unimplemented";
    case ErrorKind::kInternal:
      return "internal error";
    case ErrorKind::kNonFinite:
      return "non-finite value";
    case ErrorKind::kResourceExhausted:
      return "resource exhausted";
  }
  return "error";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(message), kind_(kind) {}

}  // namespace tiller
