// More Paddle neural-network ops: group/instance norm, affine_channel,
// data_norm, max_pool2d_with_index, conv2d_transpose, *_interp_v2, pad3d,
// each with the PIR spellings that map onto it.
// Channel-last inputs are transposed to channel-first around the IR op.
#include <algorithm>

#include "frontend/paddle/pir_compat.h"
#include "frontend/paddle/translate.h"
#include "frontend/paddle/translate/helpers.h"

namespace tiller::paddle {
namespace {

// [0, r-1, 1, .., r-2] and its inverse.
std::vector<int64_t> ToFirstPerm(int r) {
  std::vector<int64_t> p{0, r - 1};
  for (int i = 1; i < r - 1; ++i) p.push_back(i);
  return p;
}
std::vector<int64_t> ToLastPerm(int r) {
  std::vector<int64_t> p{0};
  for (int i = 2; i < r; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

// Reads a layout attribute: true for channel-last. Anything else fails.
bool ChannelLast(TranslateContext& ctx, const OpDesc& op, const char* attr, const char* def) {
  std::string f = op.attrs.Str(attr, def);
  if (f == "NHWC" || f == "NDHWC" || f == "NLC" || f == "NWC") return true;
  if (f == "NCHW" || f == "NCDHW" || f == "NCL" || f == "NCW" || f == "AnyLayout" || f == "NC")
    return false;
  ctx.Unsupported(op, "{} = \"{}\"", attr, f);
}

ir::Value* Permute(TranslateContext& ctx, const OpDesc& op, ir::Value* x,
                   std::vector<int64_t> perm) {
  return ctx.Add1(op, "transpose", {x}, {{"perm", std::move(perm)}});
}

void GroupNorm(TranslateContext& ctx, const OpDesc& op, bool instance) {
  ir::Value* x = ctx.In(op, "X");
  int r = x->rank();
  if (r < 2) ctx.Invalid(op, "input must have rank >= 2, got {}", ShapeToString(x->shape()));
  bool last = !instance && ChannelLast(ctx, op, "data_layout", "NCHW");
  if (last) x = Permute(ctx, op, x, ToFirstPerm(r));
  int64_t groups = instance ? x->shape()[1] : op.attrs.Int("groups", 1);
  std::vector<ir::Value*> ins{x, ctx.InOpt(op, "Scale"), ctx.InOpt(op, "Bias")};
  while (!ins.empty() && !ins.back()) ins.pop_back();
  ir::Value* y = ctx.Add1(op, "group_norm", ins,
                          {{"groups", groups}, {"epsilon", op.attrs.Float("epsilon", 1e-5)}});
  ctx.SetOut(op, "Y", last ? Permute(ctx, op, y, ToLastPerm(r)) : y);
}

// y = x * scale[c] + bias[c]; per-channel vectors are reshaped to broadcast.
void AffineChannel(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  int r = x->rank();
  if (r < 2) ctx.Invalid(op, "input must have rank >= 2, got {}", ShapeToString(x->shape()));
  bool last = ChannelLast(ctx, op, "data_layout", "NCHW");
  int64_t c = x->shape()[last ? r - 1 : 1];
  Shape s(last ? 1 : r - 1, 1);
  s[0] = c;
  ir::Value* scale = ctx.Reshape(op, ctx.In(op, "Scale"), s);
  ir::Value* bias = ctx.Reshape(op, ctx.In(op, "Bias"), s);
  ctx.SetOut(op, "Out", ctx.Add1(op, "add", {ctx.Add1(op, "mul", {x, scale}), bias}));
}

// data_norm, as Paddle's CPU kernel (phi DataNormKernel): means = BatchSum
// / BatchSize, scales = sqrt(BatchSize / BatchSquareSum), y = (x - means) *
// scales; with enable_scale_and_shift y = x * (scales * scale_w) + (bias -
// means * scales * scale_w), Paddle's order of operations. The kernel takes
// a 2-D [N, C] input only, whose channels are the last dim in both layouts
// it knows (NCHW and NHWC compute the same). slot_dim > 0: each slot of
// slot_dim columns whose first ("show") value lies within 1e-7 of zero
// gives zeros, and the scale and shift apply per element. epsilon,
// summary_decay_rate and sync_stats only shape Paddle's statistics update
// (data_norm_grad), not this forward.
void DataNorm(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  if (x->rank() != 2)
    ctx.Unsupported(op, "input rank {}: Paddle's data_norm kernel takes a 2-D [N, C] input",
                    x->rank());
  const std::string layout = op.attrs.Str("data_layout", "NCHW");
  if (layout != "NCHW" && layout != "NHWC")
    ctx.Unsupported(op, "data_layout = \"{}\" (Paddle's data_norm takes NCHW or NHWC)", layout);
  const int64_t n = x->shape()[0], c = x->shape()[1];
  const int64_t slot = op.attrs.Int("slot_dim", -1);
  if (slot > 0 && c % slot != 0)
    ctx.Unsupported(op, "slot_dim = {} with {} columns (not a whole number of slots)", slot, c);
  const bool shift = op.attrs.Bool("enable_scale_and_shift", false);
  auto channel_input = [&](const char* slot_name) {
    ir::Value* v = ctx.In(op, slot_name);
    if (v->shape() != Shape{c})
      ctx.Invalid(op, "{} has shape {}, expected [{}]", slot_name, ShapeToString(v->shape()), c);
    return v;
  };
  ir::Value* size = channel_input("BatchSize");
  ir::Value* means = ctx.Add1(op, "div", {channel_input("BatchSum"), size});
  ir::Value* scales =
      ctx.Add1(op, "sqrt", {ctx.Add1(op, "div", {size, channel_input("BatchSquareSum")})});
  ir::Value* y;
  if (shift && slot <= 0) {
    ir::Value* w = channel_input("scale_w");
    ir::Value* new_scale = ctx.Add1(op, "mul", {scales, w});
    ir::Value* shifted = ctx.Add1(op, "mul", {ctx.Add1(op, "mul", {means, scales}), w});
    ir::Value* new_bias = ctx.Add1(op, "sub", {channel_input("bias"), shifted});
    y = ctx.Add1(op, "add", {ctx.Add1(op, "mul", {x, new_scale}), new_bias});
  } else {
    y = ctx.Add1(op, "mul", {ctx.Add1(op, "sub", {x, means}), scales});
    if (shift)
      y = ctx.Add1(op, "add",
                   {ctx.Add1(op, "mul", {y, channel_input("scale_w")}), channel_input("bias")});
  }
  if (slot > 0) {
    // Paddle compares against 1e-7f in x's type.
    const int64_t k = c / slot;
    ir::AttrMap every_slot{{"axes", std::vector<int64_t>{1}},
                           {"starts", std::vector<int64_t>{0}},
                           {"ends", std::vector<int64_t>{c}},
                           {"steps", std::vector<int64_t>{slot}}};
    ir::Value* show = ctx.Add1(op, "abs", {ctx.Add1(op, "slice", {x}, every_slot)});
    ir::Value* unseen =
        ctx.Add1(op, "less", {show, ctx.ConstScalar(static_cast<double>(1e-7f), x->dtype())});
    ir::Value* zeroed =
        ctx.Add1(op, "where",
                 {ctx.Reshape(op, unseen, {n, k, 1}), ctx.ConstScalar(0.0, x->dtype()),
                  ctx.Reshape(op, y, {n, k, slot})});
    y = ctx.Reshape(op, zeroed, {n, c});
  }
  ctx.SetOut(op, "Y", y);
  ctx.SetOut(op, "Means", means);
  ctx.SetOut(op, "Scales", scales);
}

// Whether any op or fetch reads output `slot` of `op`. An IR op output that
// nothing reads is dropped by dead-code removal while the op still points at
// it, so optional outputs are only created when used.
bool OutputUsed(TranslateContext& ctx, const OpDesc& op, const std::string& slot) {
  const auto& names = op.Outputs(slot);
  if (names.empty()) return false;
  const Program& prog = ctx.program();
  if (std::find(prog.fetch_names.begin(), prog.fetch_names.end(), names[0]) !=
      prog.fetch_names.end())
    return true;
  for (const OpDesc& o : prog.ops) {
    for (const auto& in : o.inputs) {
      if (std::find(in.second.begin(), in.second.end(), names[0]) != in.second.end()) return true;
    }
  }
  return false;
}

void MaxPoolWithIndex(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  if (x->rank() != 4) ctx.Invalid(op, "input must be 4-D, got {}", ShapeToString(x->shape()));
  auto k = op.attrs.Ints("ksize");
  if (k.size() != 2) ctx.Unsupported(op, "ksize with {} values", k.size());
  bool with_mask = OutputUsed(ctx, op, "Mask");
  ir::AttrMap a{{"ceil_mode", op.attrs.Bool("ceil_mode", false)}, {"with_mask", with_mask}};
  if (op.attrs.Bool("global_pooling", false)) {
    a.Set("ksize", std::vector<int64_t>{1, 1});
    a.Set("adaptive", true);
  } else {
    auto s = op.attrs.Ints("strides", {1, 1});
    auto p = op.attrs.Ints("paddings", {0, 0});
    if (p.size() == 2) p = {p[0], p[0], p[1], p[1]};
    if (p.size() != 4 || s.size() != 2) ctx.Unsupported(op, "paddings/strides sizes");
    bool adaptive = op.attrs.Bool("adaptive", false);
    a.Set("ksize", k);
    a.Set("adaptive", adaptive);
    a.Set("strides", s);
    a.Set("pads", p);
  }
  ir::Op* o = ctx.AddOp(op, "max_pool2d_with_index", {x}, a);
  ctx.SetOut(op, "Out", o->outputs[0]);
  if (with_mask) ctx.SetOut(op, "Mask", o->outputs[1]);
}

void ConvTranspose(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "Input");
  ir::Value* w = ctx.In(op, "Filter");
  if (x->rank() != 4 || w->rank() != 4)
    ctx.Invalid(op, "input and filter must be 4-D, got {} and {}", ShapeToString(x->shape()),
                ShapeToString(w->shape()));
  bool last = ChannelLast(ctx, op, "data_format", "NCHW");
  if (last) x = Permute(ctx, op, x, ToFirstPerm(4));
  auto strides = op.attrs.Ints("strides", {1, 1});
  auto dil = op.attrs.Ints("dilations", {1, 1});
  Shape k{w->shape()[2], w->shape()[3]};
  std::string algo = op.attrs.Str("padding_algorithm", "EXPLICIT");
  if (algo == "SAME") dil = {1, 1};  // Paddle drops dilation under SAME
  auto pads = WindowPads(ctx, op, x->shape(), k, strides, dil);
  std::vector<int64_t> size = op.attrs.Ints("output_size");
  if (ir::Value* t = ctx.InOpt(op, "OutputSizeTensor")) size = ctx.ConstInts(op, t);
  if (op.HasInput("OutputSizeTensorList")) {
    size.clear();
    for (ir::Value* t : ctx.Ins(op, "OutputSizeTensorList")) size.push_back(ctx.ConstInt(op, t));
  }
  auto opad = op.attrs.Ints("output_padding");
  if (size.empty()) {
    for (int d = 0; d < 2; ++d) {
      size.push_back((x->shape()[2 + d] - 1) * strides[d] - pads[2 * d] - pads[2 * d + 1] +
                     dil[d] * (k[d] - 1) + 1 + (opad.size() == 2 ? opad[d] : 0));
    }
  } else if (size.size() != 2) {
    ctx.Unsupported(op, "output_size with {} values", size.size());
  }
  std::vector<ir::Value*> ins{x, w};
  if (ir::Value* b = ctx.InOpt(op, "Bias")) ins.push_back(b);
  ir::Value* y = ctx.Add1(op, "conv2d_transpose", ins,
                          {{"strides", strides},
                           {"pads", pads},
                           {"dilations", dil},
                           {"groups", op.attrs.Int("groups", 1)},
                           {"output_size", size}});
  ctx.SetOut(op, "Output", last ? Permute(ctx, op, y, ToLastPerm(4)) : y);
}

// *_interp_v2. Output size precedence follows Paddle's kernel: SizeTensor,
// else OutSize, else the scale (Scale input or `scale` attr) times the input,
// else out_d/out_h/out_w. A positive scale also sets the source step to
// 1 / scale (unless align_corners), even when OutSize overrides the size.
void Interp(TranslateContext& ctx, const OpDesc& op, int nd, const char* method) {
  ir::Value* x = ctx.In(op, "X");
  int r = nd + 2;
  if (x->rank() != r) ctx.Invalid(op, "input must be {}-D, got {}", r, ShapeToString(x->shape()));
  std::string m = op.attrs.Str("interp_method", "");
  bool last =
      ChannelLast(ctx, op, op.attrs.Has("data_format") ? "data_format" : "data_layout", "NCHW");
  if (last) x = Permute(ctx, op, x, ToFirstPerm(r));
  std::vector<int64_t> in(x->shape().begin() + 2, x->shape().end());
  std::vector<double> scale;
  if (ir::Value* t = ctx.InOpt(op, "Scale")) {
    scale = ctx.ConstFloats(op, t);
    if (scale.size() == 1) scale.assign(nd, scale[0]);
  } else {
    scale = op.attrs.Floats("scale");
    if (!scale.empty() && static_cast<int>(scale.size()) < nd)
      ctx.Unsupported(op, "scale with {} values for {} spatial dims", scale.size(), nd);
  }
  std::vector<int64_t> out;
  const char* names[3] = {"out_d", "out_h", "out_w"};
  for (int d = 0; d < nd; ++d) out.push_back(op.attrs.Int(names[3 - nd + d], -1));
  std::vector<float> sc(nd, -1.0f);
  if (op.HasInput("SizeTensor")) {
    auto ts = ctx.Ins(op, "SizeTensor");
    if (static_cast<int>(ts.size()) != nd)
      ctx.Unsupported(op, "SizeTensor with {} parts", ts.size());
    for (int d = 0; d < nd; ++d) out[d] = ctx.ConstInt(op, ts[d]);
  } else {
    bool all_pos = !scale.empty();
    for (int d = 0; d < nd && all_pos; ++d) all_pos = scale[d] > 0;
    if (all_pos) {
      for (int d = 0; d < nd; ++d) {
        sc[d] = static_cast<float>(scale[d]);
        out[d] = static_cast<int64_t>(static_cast<float>(in[d]) * sc[d]);
      }
    }
    if (ir::Value* t = ctx.InOpt(op, "OutSize")) {
      auto v = ctx.ConstInts(op, t);
      if (static_cast<int>(v.size()) != nd) ctx.Unsupported(op, "OutSize with {} values", v.size());
      out = v;
    }
  }
  bool align_corners = op.attrs.Bool("align_corners", true);
  int64_t align_mode = op.attrs.Int("align_mode", 1);
  if (align_mode != 0 && align_mode != 1) ctx.Unsupported(op, "align_mode = {}", align_mode);
  if (m != method && !(std::string(method) == "linear" && (m == "bilinear" || m == "trilinear")) &&
      !(std::string(method) == "cubic" && m == "bicubic"))
    ctx.Unsupported(op, "interp_method = \"{}\"", m);
  std::vector<double> ratios;
  for (int d = 0; d < nd; ++d) {
    if (out[d] <= 0) ctx.Invalid(op, "output size {} for dim {}", out[d], d);
    float ratio = 0.0f;
    if (out[d] > 1) {
      if (align_corners) {
        ratio = static_cast<float>(in[d] - 1) / static_cast<float>(out[d] - 1);
      } else {
        ratio = sc[d] > 0 ? static_cast<float>(1.0 / sc[d])
                          : static_cast<float>(in[d]) / static_cast<float>(out[d]);
      }
    }
    ratios.push_back(ratio);
  }
  ir::Value* y = ctx.Add1(op, "interp", {x},
                          {{"method", std::string(method)},
                           {"out_size", out},
                           {"ratios", ratios},
                           {"align_corners", align_corners},
                           {"align_mode", align_mode}});
  ctx.SetOut(op, "Out", last ? Permute(ctx, op, y, ToLastPerm(r)) : y);
}

// pad3d: paddings [left, right, top, bottom, front, back] over (W, H, D).
void Pad3d(TranslateContext& ctx, const OpDesc& op) {
  ir::Value* x = ctx.In(op, "X");
  if (x->rank() != 5) ctx.Invalid(op, "input must be 5-D, got {}", ShapeToString(x->shape()));
  std::vector<int64_t> p = op.attrs.Ints("paddings");
  if (ir::Value* t = ctx.InOpt(op, "Paddings")) p = ctx.ConstInts(op, t);
  if (p.size() != 6) ctx.Unsupported(op, "paddings with {} values", p.size());
  std::string mode = op.attrs.Str("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "replicate" && mode != "circular")
    ctx.Unsupported(op, "mode = \"{}\"", mode);
  bool last = ChannelLast(ctx, op, "data_format", "NCDHW");
  // Spatial dims of the input in its own layout.
  int sd = last ? 1 : 2;
  std::vector<int64_t> pads(10, 0);
  for (int d = 0; d < 3; ++d) {  // d: 0 = D, 1 = H, 2 = W
    pads[2 * (sd + d)] = p[2 * (2 - d)];
    pads[2 * (sd + d) + 1] = p[2 * (2 - d) + 1];
  }
  ctx.SetOut(op, "Out",
             ctx.Add1(op, "pad_nd", {x},
                      {{"pads", pads}, {"mode", mode}, {"value", op.attrs.Float("value", 0.0)}}));
}

const bool kRegistered = [] {
  using pir::IntArray;
  using pir::T;
  // Each translator with the PIR spellings that map onto it.
  RegisterTranslator("group_norm",
                     [](TranslateContext& c, const OpDesc& op) { GroupNorm(c, op, false); },
                     {"group_norm", "transpose"});
  RegisterPirOpCompat("group_norm", {"group_norm",
                                     {T("X"), T("Scale"), T("Bias")},
                                     {"Y", "Mean", "Variance"},
                                     {{"data_format", "data_layout"}},
                                     {}});
  RegisterTranslator("instance_norm",
                     [](TranslateContext& c, const OpDesc& op) { GroupNorm(c, op, true); },
                     {"group_norm"});
  RegisterPirOpCompat("instance_norm", {"instance_norm",
                                        {T("X"), T("Scale"), T("Bias")},
                                        {"Y", "SavedMean", "SavedVariance"},
                                        {},
                                        {}});
  RegisterTranslator("affine_channel", AffineChannel, {"mul", "add", "reshape"});
  RegisterPirOpCompat("affine_channel",
                      {"affine_channel", {T("X"), T("Scale"), T("Bias")}, {"Out"}, {}, {}});
  RegisterTranslator(
      "data_norm", DataNorm,
      {"div", "sqrt", "sub", "mul", "add", "slice", "abs", "less", "where", "reshape"});
  RegisterTranslator("max_pool2d_with_index", MaxPoolWithIndex, {"max_pool2d_with_index"});
  RegisterPirOpCompat(
      "max_pool2d_with_index",
      {"max_pool2d_with_index", {T("X")}, {"Out", "Mask"}, {{"kernel_size", "ksize"}}, {}});
  auto conv_transpose = [](const char* legacy) -> PirOpCompat {
    return {legacy,
            {T("Input"), T("Filter"),
             IntArray("output_size", "OutputSizeTensor", "OutputSizeTensorList")},
            {"Output"},
            {},
            {}};
  };
  RegisterTranslator("conv2d_transpose", ConvTranspose, {"conv2d_transpose", "transpose"});
  RegisterPirOpCompat("conv2d_transpose", conv_transpose("conv2d_transpose"));
  RegisterTranslator("depthwise_conv2d_transpose", ConvTranspose,
                     {"conv2d_transpose", "transpose"});
  RegisterPirOpCompat("depthwise_conv2d_transpose", conv_transpose("depthwise_conv2d_transpose"));
  const std::vector<std::string> interp_ops = {"interp", "transpose"};
  auto interp = [](const char* legacy) -> PirOpCompat {
    return {legacy, {T("X"), T("OutSize"), T("SizeTensor"), T("Scale")}, {"Out"}, {}, {}};
  };
  RegisterTranslator(
      "nearest_interp_v2",
      [](TranslateContext& c, const OpDesc& op) { Interp(c, op, 2, "nearest"); }, interp_ops);
  RegisterPirOpCompat("nearest_interp", interp("nearest_interp_v2"));
  RegisterTranslator(
      "bilinear_interp_v2",
      [](TranslateContext& c, const OpDesc& op) { Interp(c, op, 2, "linear"); }, interp_ops);
  RegisterPirOpCompat("bilinear_interp", interp("bilinear_interp_v2"));
  RegisterTranslator(
      "bicubic_interp_v2", [](TranslateContext& c, const OpDesc& op) { Interp(c, op, 2, "cubic"); },
      interp_ops);
  RegisterPirOpCompat("bicubic_interp", interp("bicubic_interp_v2"));
  RegisterTranslator(
      "linear_interp_v2", [](TranslateContext& c, const OpDesc& op) { Interp(c, op, 1, "linear"); },
      interp_ops);
  RegisterPirOpCompat("linear_interp", interp("linear_interp_v2"));
  RegisterTranslator(
      "trilinear_interp_v2",
      [](TranslateContext& c, const OpDesc& op) { Interp(c, op, 3, "linear"); }, interp_ops);
  RegisterPirOpCompat("trilinear_interp", interp("trilinear_interp_v2"));
  RegisterTranslator("pad3d", Pad3d, {"pad_nd"});
  RegisterPirOpCompat("pad3d", {"pad3d",
                                {T("X"), IntArray("paddings", "Paddings", "PaddingsList")},
                                {"Out"},
                                {{"pad_value", "value"}},
                                {}});
  return true;
}();

}  // namespace
}  // namespace tiller::paddle
