// Graph passes: small named rewrites run from one declared pipeline.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace tiller::passes {

struct Pass {
  const char* name;
  // Returns how many rewrites it made (for logs and tests).
  int (*run)(ir::Graph& g);
};

// matmul(x, W const) [+ add(., b const)] -> linear(x, W, b)
int FuseLinear(ir::Graph& g);
// conv2d -> batch_norm (inference, constant statistics) -> conv2d with folded weights
int FoldBatchNorm(ir::Graph& g);
// conv2d|linear -> relu|tanh|gelu -> conv2d|linear{activation}
int FuseActivation(ir::Graph& g);

// The inference pipeline, in order. The verifier runs after each pass.
const std::vector<Pass>& InferencePipeline();
void RunPipeline(ir::Graph& g, const std::vector<Pass>& pipeline);

}  // namespace tiller::passes
