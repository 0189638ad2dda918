// The exception every Tiller API throws on bad input or an unsupported model.
#pragma once

#include <stdexcept>
#include <string>

namespace tiller {

enum class ErrorKind {
  kInvalidArgument,    // bad feed, bad option, bad attribute value
  kNotFound,           // missing file, unknown tensor name
  kDataLoss,           // truncated or corrupt model/params file
  kUnimplemented,      // unsupported op or attribute value
  kInternal,           // a bug in Tiller
  kNonFinite,          // a NaN or Inf appeared while checking was on (check_nan_inf)
  kResourceExhausted,  // the model needs more memory than the device's cap
};

const char* ErrorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace tiller
