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

// matmul(x, W) + add(., b) [+ relu|gelu|tanh] -> linear(x, W, b){activation}
int FuseLinear(ir::Graph& g);

// The inference pipeline, in order. The verifier runs after each pass.
const std::vector<Pass>& InferencePipeline();
void RunPipeline(ir::Graph& g, const std::vector<Pass>& pipeline);

}  // namespace tiller::passes
