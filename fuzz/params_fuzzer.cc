// Parameter files: a combined .pdiparams (records one after another) and
// the directory form (a file per parameter). The first byte of the input
// says how many records the reader expects (1-8), the rest is the file.
#include <string>
#include <vector>

#include "frontend/paddle/program.h"
#include "fuzz/fuzz_file.h"
#include "tiller/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<std::string> names;
  for (int i = 0; i <= data[0] % 8; ++i) names.push_back("p" + std::to_string(i));
  const std::string path = tiller::fuzz::WriteInput(data + 1, size - 1, "model.pdiparams");
  try {
    tiller::paddle::ReadCombinedParams(path, names);
  } catch (const tiller::Error&) {
  }
  // The same bytes as one parameter of the directory form.
  tiller::fuzz::WriteInput(data + 1, size - 1, "p0");
  try {
    tiller::paddle::ReadSeparateParams(tiller::fuzz::WorkDir(), {"p0"});
  } catch (const tiller::Error&) {
  }
  return 0;
}
