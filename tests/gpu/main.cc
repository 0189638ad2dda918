// tiller_gpu_check: the CUDA backend's checks on a GPU machine
// (scripts/gpu_check.sh carries it there).
//   tiller_gpu_check ops [--device cuda:0]         every CUDA kernel vs the CPU
//   tiller_gpu_check weights --model M --seed S    seeded weights for a program
//   tiller_gpu_check model --model M --shape ...   a whole model, GPU vs CPU
#include <fmt/format.h>

#include <exception>
#include <string>

namespace tiller::gpu_check {
int OpsMain(int argc, char** argv);
int WeightsMain(int argc, char** argv);
int ModelMain(int argc, char** argv);
}  // namespace tiller::gpu_check

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "ops";
  try {
    if (what == "ops") return tiller::gpu_check::OpsMain(argc - 2, argv + 2);
    if (what == "weights") return tiller::gpu_check::WeightsMain(argc - 2, argv + 2);
    if (what == "model") return tiller::gpu_check::ModelMain(argc - 2, argv + 2);
    fmt::print(stderr, "usage: tiller_gpu_check ops|weights|model [flags]\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tiller_gpu_check {}: {}\n", what, e.what());
    return 2;
  }
}
