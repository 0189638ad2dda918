// Facts about Paddle models and about what Tiller supports, for tools
// (`tiller info`, `tiller ops`) and tests. Nothing here compiles a model.
//
//   tiller::ModelInfo m = tiller::InspectModel("model.json");
//   for (const auto& in : m.inputs) std::cout << in.name << "\n";
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tiller/data_type.h"
#include "tiller/error.h"

namespace tiller {

struct VariableInfo {
  std::string name;
  DataType dtype = DataType::FLOAT32;
  std::vector<int64_t> dims;  // -1 marks a dynamic dim
};

struct ModelInfo {
  std::string path;    // the program file
  std::string format;  // "pir" (Paddle 3 JSON) or "pdmodel" (legacy ProgramDesc)
  std::vector<VariableInfo> inputs;
  std::vector<std::string> outputs;
  size_t num_ops = 0;
  std::map<std::string, int> op_histogram;   // Paddle op type -> count
  std::vector<std::string> unsupported_ops;  // op types without a translator
  size_t num_params = 0;
  size_t param_bytes = 0;
};

// Reads a model (program + parameters, as Config takes them); throws
// tiller::Error on missing or corrupt files. Unsupported ops are listed,
// not refused.
ModelInfo InspectModel(const std::string& model_path, const std::string& params_path = "");

// One op of a Paddle program as Tiller's readers normalize it (legacy op
// types and slot names; PIR programs mapped through the op table).
struct ProgramOp {
  using Slots = std::vector<std::pair<std::string, std::vector<std::string>>>;
  std::string type;
  Slots inputs, outputs;
  bool translatable = false;  // Tiller has a translator for the type
};
// Reads any program (.json or .pdmodel), including training programs with
// Paddle's backward ops, which Tiller cannot compile whole.
std::vector<ProgramOp> ReadProgramOps(const std::string& program_path);

// One row of `tiller ops`: a Paddle op type Tiller translates.
struct OpSupport {
  std::string paddle_op;               // legacy spelling
  std::vector<std::string> pir_names;  // pd_op names mapping onto it (without "pd_op.")
  std::vector<std::string> ir_ops;     // IR ops its translator can emit (sorted)
  bool ir_ops_declared = false;        // false: the translator did not declare them
  // The dtypes its translation runs with on the CPU: those every emitted IR
  // op has a kernel for ("all", "none", "-" when undeclared, or a list).
  std::string dtypes;
  // How it runs in half precision (--precision, enable_fp16, models saved in
  // half): "bfloat16 GEMM, float16 rounded" (an IR op multiplies half
  // operands with float32 accumulation; float16 operands are rounded and
  // multiplied in float32, oneDNN 2.6 having no CPU float16 GEMM),
  // "bfloat16, float16" (its kernels take half values as they are), "via
  // float32" (half inputs are widened for its float32 kernels and the
  // results narrowed), "-" (no float path).
  std::string half;
  std::string notes;
};
// Sorted by Paddle op type; includes loaded custom ops.
std::vector<OpSupport> SupportedOps();

// One IR op a backend has kernels for (`tiller ops --backend cuda`).
struct BackendKernel {
  std::string ir_op;
  // Each registered kernel's signature with its dtypes spelled out:
  // "T, T -> T (T: float32, float16, bfloat16, int64)".
  std::vector<std::string> signatures;
};
// Sorted by IR op. Loads the CUDA backend's library for "cuda"; throws
// tiller::Error for a backend that is not registered (listing those that are).
std::vector<BackendKernel> BackendKernels(const std::string& backend);
std::vector<std::string> SupportedPaddleOps();

// The passes a compile runs on a step's graph after autodiff, in order, as
// the pass objects describe themselves: each with its one-line summary and,
// in brackets, when it runs (an entry runs only where its options and
// devices call for it). `devices`: backend names of the compile's devices
// (each backend adds its own passes). `tiller passes` prints it; docs/
// ARCHITECTURE.md's pass list is generated from it.
std::string DescribeCompilePipeline(const std::vector<std::string>& devices = {"cpu"});

}  // namespace tiller
