// Post-training int8 quantization of a float32 Paddle model from calibration
// inputs (`tiller quantize`). The result is a Paddle model in the form
// Paddle's own PostTrainingQuantization(onnx_format=True) saves: Paddle
// Inference and Tiller both load it, and Tiller runs its convolutions and
// matmuls as int8 GEMMs (the int8_conv / int8_matmul passes).
//
//   std::vector<tiller::quantize::Batch> batches = ...;  // input name -> tensor
//   auto r = tiller::quantize::QuantizeModel("fp32/model.pdmodel", "", batches, "int8/");
//   // int8/model.pdmodel + int8/model.pdiparams
//
// What is quantized: conv2d / depthwise_conv2d and matmul_v2 whose weight is
// a float32 parameter that only they read: the weight per output channel
// (abs-max, int8 in the parameters file), the activation per tensor (its
// calibrated range). The rest stays float32.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tiller/data_type.h"
#include "tiller/error.h"

namespace tiller::quantize {

// One calibration batch: every input of the model by name.
using Batch = std::map<std::string, HostTensor>;

struct Options {
  // How an activation's range comes from its per-batch abs-max values:
  // "abs_max" (the largest) or "avg" (their mean, Paddle's "avg").
  std::string algo = "abs_max";
  int threads = 2;  // CPU threads of the calibration runs
  // Called after each calibration batch (done, total).
  std::function<void(size_t, size_t)> progress;
};

struct Result {
  std::string model_file, params_file;   // what was written
  std::map<std::string, int> quantized;  // Paddle op type -> count
  std::vector<std::string> skipped;      // "op #i (type): reason", left float32
  std::map<std::string, float> ranges;   // activation -> calibrated range
};

// Calibrates on `batches` (at least one) and writes `out_dir`/model.pdmodel
// and model.pdiparams atomically. Takes a legacy program (model.pdmodel);
// throws tiller::Error naming the file, input or option on a PIR program, a
// model quantized already, a batch missing an input or of the wrong
// shape/dtype, an unknown algo, or an activation every batch leaves zero.
Result QuantizeModel(const std::string& model_path, const std::string& params_path,
                     const std::vector<Batch>& batches, const std::string& out_dir,
                     const Options& options = {});

}  // namespace tiller::quantize
