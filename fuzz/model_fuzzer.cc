// The whole path of a model directory: load, translate, compile, run once.
// The input is the program (a PIR .json when it starts with '{', else a
// legacy .pdmodel); the parameters are the seed model's, found through
// TILLER_FUZZ_PARAMS (scripts/fuzz.py sets it), so a mutated program that
// keeps its variables loads them. Inputs are fed zeros, dynamic dims as 1.
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "fuzz/fuzz_file.h"
#include "tiller/data_type.h"
#include "tiller/error.h"
#include "tiller/predictor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* params = std::getenv("TILLER_FUZZ_PARAMS");
  if (!params || size == 0) return 0;
  const std::string program =
      tiller::fuzz::WriteInput(data, size, data[0] == '{' ? "model.json" : "model.pdmodel");
  try {
    tiller::inference::Config config(program, params);
    config.SetCpuMathLibraryNumThreads(1);
    auto predictor = tiller::inference::CreatePredictor(config);
    for (const std::string& name : predictor->GetInputNames()) {
      std::vector<int64_t> shape = predictor->GetInputShape(name);
      // A huge declared input is not the readers' to refuse: skipped, its
      // element count kept under 2^24 as it is multiplied (no overflow).
      constexpr int64_t kMax = int64_t{1} << 24;
      int64_t n = 1;
      for (int64_t& d : shape) {
        if (d < 1) d = 1;
        if (d > kMax / n) return 0;
        n *= d;
      }
      auto input = predictor->GetInputHandle(name);
      input->Reshape(shape);
      const size_t bytes = static_cast<size_t>(n) * tiller::SizeOf(input->type());
      std::vector<std::byte> zeros(bytes);
      input->CopyFromCpuBytes(zeros.data(), input->type(), bytes);
    }
    predictor->Run();
  } catch (const tiller::Error&) {
  }
  return 0;
}
