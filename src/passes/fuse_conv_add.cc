// conv2d{NHWC}(x, W, b) -> add(., r) [-> relu]   ==>  conv2d(x, W, b, r){activation}
// (and conv2d_int8(x, W, scale, b), with r after b)
// A residual block ends by adding its shortcut to its last convolution's
// result (then relu): the kernel adds the result to r as it writes (a sum
// epilogue, into r's own storage when the memory plan hands it over, see
// OpSchema::inplace_input), so the sum costs no pass of its own over the
// activations. Only channel-last convolutions (after channels_last), whose
// kernel writes the plain layout r is in; r must have the result's type.
#include "passes/pass.h"
#include "passes/pattern_utils.h"

namespace tiller::passes {

int FuseConvAdd(ir::Graph& g) {
  int rewrites = 0;
  std::vector<ir::Op*> convs = OpsOfType(g, ir::Opcode::conv2d);
  for (ir::Op* c : OpsOfType(g, ir::Opcode::conv2d_int8)) convs.push_back(c);
  for (ir::Op* conv : convs) {
    if (conv->GetStr("data_format") != "NHWC" || conv->inputs.size() != ConvBiasIndex(*conv) + 1 ||
        !conv->GetStr("activation").empty())
      continue;
    ir::Op* add = nullptr;
    ir::Value* r = FindResidualAdd(g, conv->outputs[0], &add);
    if (!r) continue;
    ir::Op* relu = SoleUser(g, add->outputs[0]);
    if (relu && !relu->is(ir::Opcode::relu)) relu = nullptr;
    ir::Op* last = relu ? relu : add;
    ir::AttrMap attrs = conv->attrs;
    if (relu) attrs.Set("activation", std::string("relu"));
    std::vector<ir::Value*> ins = conv->inputs;
    ins.push_back(r);
    ReplaceResult(g, last, conv->type, std::move(ins), std::move(attrs), conv->name);
    ++rewrites;
  }
  if (rewrites) g.RemoveDeadCode();
  return rewrites;
}

}  // namespace tiller::passes
