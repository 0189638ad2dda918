// Checkpoints: .pdparams / .pdopt (pickles of name -> numpy array).
#include <string_view>

#include "frontend/paddle/pickle.h"
#include "tiller/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiller::paddle::ParseArrayPickle(std::string_view(reinterpret_cast<const char*>(data), size),
                                     "fuzz.pdparams");
  } catch (const tiller::Error&) {
  }
  return 0;
}
