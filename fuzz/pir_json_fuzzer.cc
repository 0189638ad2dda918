// A Paddle 3 PIR program (.json).
#include "frontend/paddle/program.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tiller::fuzz::ReadAsFile(data, size, "model.json", [](const std::string& path) {
    tiller::paddle::ReadPirProgram(path);
  });
}
