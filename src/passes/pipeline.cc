#include "passes/pipeline.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
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
  r.detail = pass.detail();
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

std::unique_ptr<PassPipeline> OptimizationPipeline() {
  auto p = std::make_unique<PassPipeline>(
      "optimize", "fusions and folds (each a no-op where its pattern does not occur)");
  p->Add(std::make_unique<Int8Pass>(
      "int8_matmul",
      "matmul(dequantize(quantize(x)), dequantize(W int8)) [+ add(., b)] -> linear_int8",
      QuantizeMatmuls));
  p->Add(std::make_unique<Int8Pass>(
      "int8_conv", "conv2d(dequantize(quantize(x)), dequantize(W int8)) -> conv2d_int8",
      QuantizeConvs));
  // The int8 passes read the dequantized weights before they are folded.
  p->Add(std::make_unique<InferencePass>(
             "fold_deferred",
             "ops whose folding waits for the passes (dequantize_linear of weights) -> constants",
             [](ir::Graph& g) { return g.FoldDeferredOps(); }),
         PassPipeline::After({"int8_matmul", "int8_conv"}));
  p->Add(std::make_unique<FunctionPass>(
      "fuse_linear",
      "matmul(x, W const) [+ add(., b)], matmul(x, W) + add(., b) -> linear(x, W, b)", FuseLinear));
  // fuse_linear leaves matmuls with alpha != 1 alone.
  p->Add(std::make_unique<FunctionPass>(
             "fold_scale",
             "scale(x){power of two} -> matmuls, matmul -> scale{power of two} -> matmul{alpha}",
             FoldScaleIntoMatmul),
         PassPipeline::After({"fuse_linear"}));
  // fold_scale removes a scale between a transpose and its matmul.
  p->Add(std::make_unique<FunctionPass>(
             "fold_transpose",
             "transpose{perm} -> matmuls, matmul -> transpose{perm} -> matmul{perm_a|b, perm_out}",
             FoldTransposeIntoMatmul),
         PassPipeline::After({"fold_scale"}));
  // The attention's matmuls read the heads through strides and carry the
  // scale as alpha.
  p->Add(std::make_unique<InferencePass>(
             "fuse_attention",
             "matmul(q, k){heads} [-> add(., mask)] -> softmax -> matmul(., v){heads} -> "
             "attention",
             FuseAttention),
         PassPipeline::After({"fold_transpose", "fold_scale"}));
  p->Add(std::make_unique<InferencePass>(
             "merge_qkv",
             "linear(x, Wq|Wk|Wv const) x3 -> attention ==> linear(x, [Wq|Wk|Wv]) -> "
             "attention{offsets}",
             MergeQkv),
         PassPipeline::After({"fuse_attention"}));
  // merge_qkv's linears feed the attention, not an add; fuse_activation then
  // sees an activation after the add follow the sum.
  p->Add(std::make_unique<InferencePass>("fuse_linear_residual",
                                         "linear(x, W, b) -> add(., r) -> linear(x, W, b, r)",
                                         FuseLinearResidual),
         PassPipeline::After({"merge_qkv"}));
  p->Add(std::make_unique<FunctionPass>(
      "fuse_conv_bias",
      "conv2d|conv2d_int8|conv2d_transpose(x, W) -> add(., c const per channel) -> the op with "
      "bias c",
      FuseConvBias));
  // fold_batch_norm needs the conv2d next to its batch_norm.
  p->Add(std::make_unique<FunctionPass>("fold_batch_norm",
                                        "conv2d|conv2d_int8 -> batch_norm (constant statistics) -> "
                                        "the op, weights (scales) folded",
                                        FoldBatchNorm),
         PassPipeline::After({"fuse_conv_bias"}));
  // batch_norm reads NCHW; the fusions after it then see the activations
  // and adds the chain moved next to its convs.
  p->Add(std::make_unique<InferencePass>("channels_last",
                                         "conv2d|conv2d_int8|conv2d_transpose|pool2d chains "
                                         "(NCHW) -> NHWC, transposes at the edges",
                                         ChannelsLast),
         PassPipeline::After({"fold_batch_norm"}));
  p->Add(std::make_unique<FunctionPass>(
             "fuse_conv_add",
             "conv2d|conv2d_int8{NHWC} -> add(., r) [-> relu] -> the op with residual "
             "r{activation}",
             FuseConvAdd),
         PassPipeline::After({"channels_last"}));
  p->Add(std::make_unique<FunctionPass>(
             "fuse_activation",
             "conv2d|conv2d_int8|linear|linear_int8 -> relu|tanh|gelu|hard_swish|hard_sigmoid|"
             "relu6 -> the op{activation}",
             FuseActivation),
         PassPipeline::After({"channels_last", "fuse_conv_add", "fuse_linear_residual"}));
  p->Add(std::make_unique<FunctionPass>(
      "fuse_embedding_grad_add",
      "add(x, embedding_grad(ids, dy)) -> embedding_grad_add(x, ids, dy), in x's storage",
      FuseEmbeddingGradAdd));
  // The fusions need the float32 result next to its add or activation.
  p->Add(std::make_unique<FunctionPass>(
             "fuse_requantize",
             "linear_int8|conv2d_int8 -> quantize_linear{int8} -> the op writing int8{out_scale}",
             FuseRequantize),
         PassPipeline::After({"fuse_conv_add", "fuse_activation", "fuse_linear_residual"}));
  // Last: it takes the linears as the fusions left them (bias, residual,
  // activation).
  p->Add(std::make_unique<InferencePass>(
             "block_sparse_linear",
             "linear(x, W const, >= 70% zero blocks of 16x16 or 1x8) -> linear_block_sparse",
             BlockSparseLinear),
         PassPipeline::After({"fuse_activation", "fuse_linear_residual", "fuse_requantize"}));
  return p;
}

std::vector<std::unique_ptr<Pass>> OptimizationPasses() {
  return std::move(*OptimizationPipeline()).TakePasses();
}

PassPipeline& PassPipeline::Add(std::unique_ptr<Pass> pass, Options options) {
  TILLER_CHECK(pass, "pipeline {}: a null pass", name_);
  std::vector<std::string> names = {pass->name()};
  if (auto* nested = dynamic_cast<const PassPipeline*>(pass.get())) names = nested->PassNames();
  const std::vector<std::string> here = PassNames();
  for (const std::string& n : names) {
    TILLER_CHECK(std::find(here.begin(), here.end(), n) == here.end(),
                 "pipeline {}: pass {} is added twice", name_, n);
    for (const auto& [awaited, by] : awaited_)
      TILLER_CHECK(awaited != n, "pipeline {}: {} must run before {}, but is added after it", name_,
                   n, by);
  }
  for (const std::string& a : options.after) {
    if (std::find(here.begin(), here.end(), a) == here.end())
      awaited_.emplace_back(a, pass->name());
  }
  entries_.push_back({std::move(pass), std::move(options)});
  return *this;
}

int PassPipeline::Run(ir::Graph& g, const PassContext& ctx) {
  int rewrites = 0;
  for (Entry& e : entries_) {
    if (Enabled(e, ctx)) rewrites += e.pass->Run(g, ctx);
  }
  return rewrites;
}

std::vector<PassRecord> PassPipeline::RunRecorded(ir::Graph& g, const PassContext& ctx) {
  std::vector<PassRecord> out;
  for (Entry& e : entries_) {
    if (!Enabled(e, ctx)) continue;
    if (auto* nested = dynamic_cast<PassPipeline*>(e.pass.get())) {
      for (PassRecord& r : nested->RunRecorded(g, ctx)) out.push_back(std::move(r));
      continue;
    }
    PassRecord r = RunPass(*e.pass, g, ctx);
    if (r.rewrites || e.options.record_idle) out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::unique_ptr<Pass>> PassPipeline::TakePasses() && {
  std::vector<std::unique_ptr<Pass>> out;
  for (Entry& e : entries_) out.push_back(std::move(e.pass));
  entries_.clear();
  return out;
}

std::vector<std::string> PassPipeline::PassNames() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) {
    if (const auto* nested = dynamic_cast<const PassPipeline*>(e.pass.get())) {
      for (std::string& n : nested->PassNames()) names.push_back(std::move(n));
    } else {
      names.push_back(e.pass->name());
    }
  }
  return names;
}

std::string PassPipeline::Describe(const PassContext& ctx, int indent, bool show_skipped) const {
  std::string out;
  for (const Entry& e : entries_) {
    const bool on = Enabled(e, ctx);
    if (!on && !show_skipped) continue;
    out += fmt::format("{:{}}{}{}\n", "", indent, e.pass->name(), on ? "" : "  (skipped)");
    if (const auto* nested = dynamic_cast<const PassPipeline*>(e.pass.get()); nested && on)
      out += nested->Describe(ctx, indent + 2, show_skipped);
  }
  return out;
}

std::string PassPipeline::Document(int indent) const {
  std::string out;
  for (const Entry& e : entries_) {
    const auto* nested = dynamic_cast<const PassPipeline*>(e.pass.get());
    std::string line = fmt::format("{:{}}{:<{}} {}", "", indent, e.pass->name(),
                                   std::max(0, 26 - indent), e.pass->summary());
    std::string when = e.options.when;
    // Passes whose Run checks the context themselves.
    if (when.empty() && dynamic_cast<const Int8Pass*>(e.pass.get()))
      when = "inference, every device multiplies int8";
    else if (when.empty() && dynamic_cast<const InferencePass*>(e.pass.get()))
      when = "inference";
    if (!when.empty()) line += fmt::format(" [{}]", when);
    out += line + "\n";
    if (nested) out += nested->Document(indent + 2);
  }
  return out;
}

}  // namespace tiller::passes
