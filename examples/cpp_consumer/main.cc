// Runs an exported Paddle inference model with Tiller's C++ API and prints
// each output's shape and first values:
//   infer MODEL_DIR            (model.json / model.pdmodel + model.pdiparams)
// Every float input is filled with 0.5 and every integer input with 1; a
// dynamic dimension is taken as 1.
#include <cstdint>
#include <functional>
#include <iostream>
#include <numeric>
#include <vector>

#include "tiller/predictor.h"

namespace {

int64_t Elements(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " MODEL_DIR\n";
    return 2;
  }
  try {
    tiller::inference::Config config(argv[1]);
    auto predictor = tiller::inference::CreatePredictor(config);
    for (const std::string& name : predictor->GetInputNames()) {
      std::vector<int64_t> shape = predictor->GetInputShape(name);
      for (int64_t& d : shape) d = d < 0 ? 1 : d;
      auto input = predictor->GetInputHandle(name);
      input->Reshape(shape);
      const auto type = predictor->GetInputType(name);
      if (type == tiller::DataType::FLOAT32) {
        input->CopyFromCpu(std::vector<float>(Elements(shape), 0.5f).data());
      } else if (type == tiller::DataType::INT64) {
        input->CopyFromCpu(std::vector<int64_t>(Elements(shape), 1).data());
      } else if (type == tiller::DataType::INT32) {
        input->CopyFromCpu(std::vector<int32_t>(Elements(shape), 1).data());
      } else {
        std::cerr << "input " << name << ": type " << tiller::DataTypeName(type)
                  << " is not filled by this example\n";
        return 1;
      }
    }
    predictor->Run();
    for (const std::string& name : predictor->GetOutputNames()) {
      auto output = predictor->GetOutputHandle(name);
      std::vector<int64_t> shape = output->shape();
      std::cout << name << " [";
      for (size_t i = 0; i < shape.size(); ++i) std::cout << (i ? ", " : "") << shape[i];
      std::cout << "]";
      if (output->type() == tiller::DataType::FLOAT32) {
        std::vector<float> values(output->numel());
        output->CopyToCpu(values.data());
        for (size_t i = 0; i < values.size() && i < 4; ++i) std::cout << " " << values[i];
      }
      std::cout << "\n";
    }
  } catch (const tiller::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
