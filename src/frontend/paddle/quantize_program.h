// Post-training quantization of a legacy Paddle program, written in the form
// Paddle's own PostTrainingQuantization(onnx_format=True) saves, so Paddle
// Inference and Tiller both load the result: before each quantized
// convolution or matmul, a quantize_linear / dequantize_linear pair on its
// activation (per tensor, scale from calibration, shared by every op that
// reads the activation) and a dequantize_linear of its weight, which the
// parameters file holds as int8 with one scale per output channel.
//
//   QuantPlan plan = PlanQuantization(model);          // what can be quantized
//   std::string calib = CalibrationProgram(model, plan);  // fetches the activations
//   ... run calib on the calibration inputs, take each activation's range ...
//   WriteQuantizedModel(model, plan, ranges, "out/");  // out/model.pdmodel + .pdiparams
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frontend/paddle/program.h"

namespace tiller::paddle {

// One quantized op: its index in block 0 (feed/fetch ops counted, as in
// the file), its activation and weight inputs, and the weight's channel
// axis (conv2d filters [O, I, KH, KW]: 0; matmul_v2 weights [K, N]: 1).
struct QuantTarget {
  int op_index = 0;
  std::string op_type;
  std::string activation, weight;
  int64_t weight_axis = 0;
};

struct QuantPlan {
  std::vector<QuantTarget> targets;
  std::vector<std::string> activations;  // distinct, in program order
  // Ops of a quantizable type left in float32, each "op #i (type): reason".
  std::vector<std::string> skipped;
};

// conv2d / depthwise_conv2d with a float32 4-D filter parameter, and
// matmul_v2 with a float32 2-D weight parameter (no transposes), whose
// weight no other op reads and whose activation is float32. Refuses a
// program that is not a legacy ProgramDesc (model.pdmodel) or is quantized
// already, naming the file.
QuantPlan PlanQuantization(const Model& model);

// The serialized program with one more fetch per planned activation, after
// the model's own fetches (fetch cols continue from theirs).
std::string CalibrationProgram(const Model& model, const QuantPlan& plan);

// Writes `dir`/model.pdmodel and `dir`/model.pdiparams (each atomically):
// the program with the pairs inserted, and the parameters with the planned
// weights as int8 (round half to even of w * 127 / max|w| per channel) and
// the scales and zero points the pairs read. `ranges`: each planned
// activation's calibrated abs-max (> 0).
void WriteQuantizedModel(const Model& model, const QuantPlan& plan,
                         const std::map<std::string, float>& ranges, const std::string& dir);

// A combined .pdiparams of `params`, records in name order (the order
// Paddle's loaders read them in); written atomically.
void WriteCombinedParams(const std::string& path, const ParamMap& params);

}  // namespace tiller::paddle
