#include <fmt/format.h>

#include "core/memory_cap.h"
#include "passes/pass.h"

namespace tiller::passes {
namespace {

std::map<std::string, int> Histogram(const ir::Graph& g) {
  std::map<std::string, int> h;
  for (const auto& op : g.ops()) ++h[op->type];
  return h;
}

}  // namespace

PassRecord RunPass(Pass& pass, ir::Graph& g, const PassContext& ctx) {
  PassRecord r;
  r.name = pass.name();
  r.summary = pass.summary();
  std::map<std::string, int> before = Histogram(g);
  r.ops_before = g.ops().size();
  r.rewrites = pass.Run(g, ctx);
  CheckHostMemory(fmt::format("compiling (after pass {}, {} ops)", r.name, g.ops().size()));
  ir::Verify(g);
  r.ops_after = g.ops().size();
  std::map<std::string, int> after = Histogram(g);
  for (const auto& [type, n] : after) {
    int was = before.count(type) ? before.at(type) : 0;
    if (n > was) r.added[type] = n - was;
  }
  for (const auto& [type, n] : before) {
    int now = after.count(type) ? after.at(type) : 0;
    if (n > now) r.removed[type] = n - now;
  }
  return r;
}

std::vector<std::unique_ptr<Pass>> OptimizationPasses() {
  std::vector<std::unique_ptr<Pass>> p;
  // Before fold_deferred, which folds the dequantized weights it reads.
  p.push_back(std::make_unique<Int8Pass>(
      "int8_matmul",
      "matmul(dequantize(quantize(x)), dequantize(W int8)) [+ add(., b)] -> linear_int8",
      QuantizeMatmuls));
  p.push_back(std::make_unique<Int8Pass>(
      "int8_conv", "conv2d(dequantize(quantize(x)), dequantize(W int8)) -> conv2d_int8",
      QuantizeConvs));
  p.push_back(std::make_unique<InferencePass>(
      "fold_deferred",
      "ops whose folding waits for the passes (dequantize_linear of weights) -> constants",
      [](ir::Graph& g) { return g.FoldDeferredOps(); }));
  p.push_back(std::make_unique<FunctionPass>(
      "fuse_linear",
      "matmul(x, W const) [+ add(., b)], matmul(x, W) + add(., b) -> linear(x, W, b)", FuseLinear));
  // After fuse_linear, which leaves matmuls with alpha != 1 alone.
  p.push_back(std::make_unique<FunctionPass>(
      "fold_scale",
      "scale(x){power of two} -> matmuls, matmul -> scale{power of two} -> matmul{alpha}",
      FoldScaleIntoMatmul));
  // After fold_scale, which removes a scale between a transpose and its matmul.
  p.push_back(std::make_unique<FunctionPass>(
      "fold_transpose",
      "transpose{perm} -> matmuls, matmul -> transpose{perm} -> matmul{perm_a|b, perm_out}",
      FoldTransposeIntoMatmul));
  // After fold_transpose and fold_scale: the attention's matmuls read the
  // heads through strides and carry the scale as alpha.
  p.push_back(std::make_unique<InferencePass>(
      "fuse_attention",
      "matmul(q, k){heads} [-> add(., mask)] -> softmax -> matmul(., v){heads} -> attention",
      FuseAttention));
  p.push_back(std::make_unique<InferencePass>(
      "merge_qkv",
      "linear(x, Wq|Wk|Wv const) x3 -> attention ==> linear(x, [Wq|Wk|Wv]) -> attention{offsets}",
      MergeQkv));
  // After merge_qkv (whose linears feed the attention, not an add), before
  // fuse_activation (an activation after the add then follows the sum).
  p.push_back(std::make_unique<InferencePass>("fuse_linear_residual",
                                              "linear(x, W, b) -> add(., r) -> linear(x, W, b, r)",
                                              FuseLinearResidual));
  // Before fold_batch_norm, which needs the conv2d next to its batch_norm.
  p.push_back(std::make_unique<FunctionPass>(
      "fuse_conv_bias",
      "conv2d|conv2d_int8|conv2d_transpose(x, W) -> add(., c const per channel) -> the op with "
      "bias c",
      FuseConvBias));
  p.push_back(std::make_unique<FunctionPass>(
      "fold_batch_norm",
      "conv2d|conv2d_int8 -> batch_norm (constant statistics) -> the op, weights (scales) folded",
      FoldBatchNorm));
  // After fold_batch_norm (batch_norm reads NCHW), before the fusions that
  // then see the activations and adds the chain moved next to its convs.
  p.push_back(std::make_unique<InferencePass>(
      "channels_last",
      "conv2d|conv2d_int8|conv2d_transpose|pool2d chains (NCHW) -> NHWC, transposes at the edges",
      ChannelsLast));
  p.push_back(std::make_unique<FunctionPass>(
      "fuse_conv_add",
      "conv2d|conv2d_int8{NHWC} -> add(., r) [-> relu] -> the op with residual r{activation}",
      FuseConvAdd));
  p.push_back(std::make_unique<FunctionPass>(
      "fuse_activation",
      "conv2d|conv2d_int8|linear|linear_int8 -> relu|tanh|gelu|hard_swish|hard_sigmoid|relu6 -> "
      "the op{activation}",
      FuseActivation));
  p.push_back(std::make_unique<FunctionPass>(
      "fuse_embedding_grad_add",
      "add(x, embedding_grad(ids, dy)) -> embedding_grad_add(x, ids, dy), in x's storage",
      FuseEmbeddingGradAdd));
  // After the fusions, which need the float32 result next to its add or
  // activation.
  p.push_back(std::make_unique<FunctionPass>(
      "fuse_requantize",
      "linear_int8|conv2d_int8 -> quantize_linear{int8} -> the op writing int8{out_scale}",
      FuseRequantize));
  return p;
}

}  // namespace tiller::passes
