// The IPU config file of Config::LoadIpuConfig (Paddle Inference's
// load_ipu_config).
#include "fuzz/fuzz_file.h"
#include "tiller/predictor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tiller::fuzz::ReadAsFile(data, size, "ipu.config", [](const std::string& path) {
    tiller::inference::Config config;
    config.LoadIpuConfig(path);
  });
}
