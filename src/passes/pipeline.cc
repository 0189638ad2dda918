#include "passes/pass.h"

namespace tiller::passes {

const std::vector<Pass>& InferencePipeline() {
  static const std::vector<Pass> pipeline = {
      {"fuse_linear", FuseLinear},
      {"fold_batch_norm", FoldBatchNorm},
      {"fuse_activation", FuseActivation},
  };
  return pipeline;
}

void RunPipeline(ir::Graph& g, const std::vector<Pass>& pipeline) {
  for (const Pass& p : pipeline) {
    p.run(g);
    ir::Verify(g);
  }
}

}  // namespace tiller::passes
