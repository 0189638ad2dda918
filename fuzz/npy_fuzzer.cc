// The .npy reader of the CLI (`tiller run --input name=file.npy`).
#include "fuzz/fuzz_file.h"
#include "tools/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tiller::fuzz::ReadAsFile(data, size, "input.npy",
                                  [](const std::string& path) { tiller::tools::ReadNpy(path); });
}
