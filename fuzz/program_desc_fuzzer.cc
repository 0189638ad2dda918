// A legacy Paddle program (ProgramDesc protobuf, .pdmodel / __model__).
#include "frontend/paddle/program.h"
#include "fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tiller::fuzz::ReadAsFile(data, size, "model.pdmodel", [](const std::string& path) {
    tiller::paddle::ReadProgramDesc(path);
  });
}
