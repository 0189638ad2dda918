// Neural-network ops (more in nn_ext.cc) and their gradient rules.
// Attributes (defaults after =):
//   softmax(x){axis = -1}, log_softmax(x){axis = -1}: log_softmax clips
//     x - max at -64 first, as Paddle's CPU kernel (log-probabilities >= -64 -
//     log(sum)); softmax does not (Paddle's 1.6e-28 floor is invisible)
//   layer_norm(x, scale?, bias?){axis = -1, epsilon = 1e-5}: normalizes over
//     dims [axis, rank) (translators set axis from Paddle's begin_norm_axis)
//   batch_norm(x, scale, bias, mean, variance){epsilon = 1e-5}: inference
//     form, channel dim 1
//   conv2d(x NCHW, w [O, C/groups, KH, KW], bias? [O], residual? (y's type)){
//     strides = [1, 1], pads = [0, 0, 0, 0] (top, bottom, left, right),
//     dilations = [1, 1], groups = 1, activation = "" (none; fuse_activation
//     sets the one the oneDNN kernel applies while writing), data_format =
//     "NCHW" | "NHWC" (x and y channel-last; the filter stays OIHW; set by
//     the channels_last pass) | "NCHW8c" (x, y and residual [N, C / 8, H,
//     W, 8]: channels in blocks of 8, set by the blocked_convs stage; C and
//     O multiples of 8), algorithm = "direct" | "winograd" (set by
//     the conv_winograd stage: Winograd's F(m x m, 3 x 3) transforms, for a
//     3 x 3 filter, stride and dilation 1, one group and float32 operands;
//     the same function, rounded differently)}: residual (fuse_conv_add;
//     needs a bias) is added to the convolution before the activation
//   conv2d_1x1_depthwise(x NHWC [N, H, W, C], w1 [E, C, 1, 1], b1 [E],
//     w2 [E, 1, KH, KW], b2 [E]){strides = [1, 1], pads = [0, 0, 0, 0]
//     (the depthwise convolution's, as conv2d's), pointwise_activation = "",
//     activation = "" (each "", relu, relu6 or hard_swish)}: NHWC
//     [N, OH, OW, E] = conv2d{groups E, the window}(act1(conv2d(x, w1) + b1),
//     w2) + b2, then act2: a pointwise (1 x 1) convolution and the depthwise
//     convolution reading its result, as MobileNet's inverted residual
//     blocks begin, set by the fuse_pointwise_depthwise inference stage
//     (float32; no gradient rule).
//   conv2d_depthwise_1x1(x NHWC [N, H, W, C], w2 [C, 1, KH, KW], b2 [C],
//     w3 [O, C, 1, 1], b3 [O], residual? [N, OH, OW, O]){strides = [1, 1],
//     pads = [0, 0, 0, 0] (the depthwise convolution's), depthwise_activation
//     = "", activation = "" (as conv2d_1x1_depthwise's)}: NHWC [N, OH, OW, O]
//     = act2(conv2d(act1(conv2d{groups C, the window}(x, w2) + b2), w3) + b3
//     + residual): a depthwise convolution and the pointwise one reading its
//     result (MobileNets' depthwise separable blocks), set by the
//     fuse_depthwise_pointwise inference stage (float32; no gradient rule);
//     the result may take the residual's storage.
//   conv2d_1x1_depthwise_1x1(x NHWC, w1, b1, w2, b2, w3, b3, residual?){
//     strides, pads (the depthwise convolution's), pointwise_activation,
//     depthwise_activation, activation}: the three convolutions of an
//     inverted residual block (expand, filter depthwise, project [+
//     residual]) as the two ops above chained, set by the
//     fuse_pointwise_depthwise inference stage (float32; no gradient rule);
//     the result may take the residual's storage.
//   pool2d(x NCHW){pooling_type = "max" | "avg", ksize [2] (required),
//     strides = [1, 1], pads = [0, 0, 0, 0] as conv2d, ceil_mode = false,
//     exclusive = true (avg ignores padding), adaptive = false (ksize is the
//     output size), data_format = "NCHW" | "NHWC" | "NCHW8c" (as conv2d)}
//   embedding(table [V, D], ids int){padding_idx = -1 (none), sparse: bool =
//     false}: ids.shape + [D]. sparse (Paddle's is_sparse) asks for the
//     table's gradient as rows (ir/row_gradient.h), not a dense table;
//     embedding_grad carries it on. padding_grad: the padding row gets its
//     lookups' gradient like any other (Paddle's SelectedRows gradient of
//     a legacy is_sparse lookup), else it gets none; the output row is zero
//     either way. A part of a table split by rows (passes/
//     shard_embedding_rows.cc) says which: table_rows = V of the whole
//     table (-1: the table is whole) and row_begin = the whole table's row
//     that its row 0 holds; ids and padding_idx count in the whole table,
//     and an id of another part gets a zero row (the parts' outputs add up
//     to the whole table's lookup). No gradient rule for parts: they are
//     made after autodiff.
//   embedding_grad(ids int, dy){rows (required), padding_idx = -1}: [rows, D],
//     row r = sum of dy rows whose id is r; the padding row gets no gradient.
//     row_begin = b (0): the gradient of rows [b, b + rows) of a larger
//     table, row r from the ids b + r (a table split by rows).
//   embedding_grad_add(acc [rows, D], ids int, dy){padding_idx = -1}: acc
//     with embedding_grad(ids, dy) added, dy row by dy row: a gradient
//     accumulator's sum without a table-sized gradient (the compile driver
//     fuses accumulate(acc, embedding_grad) into it, the
//     fuse_embedding_grad_add pass add(x, embedding_grad)). Safe in place;
//     takes acc's storage when nothing reads acc afterwards.
// Gradient rules: those ops, plus batch_norm_train and dropout (training.cc).
//
// Precision: softmax, the norms and embedding_grad (a scatter-add) sum
// exponentials, squares or many rows: float32. conv2d is a GEMM: half
// inputs, float32 accumulation. Pooling and embedding move or compare
// values: they follow their input.
// Layout: softmax names its axis. conv2d and pool2d take data_format (the
// translators emit NCHW, transposing channel-last inputs; the channels_last
// pass switches inference chains to NHWC). The others are channel-first or index
// rows, and layer_norm's [axis, rank) is a range no single axis remap keeps:
// fixed.
#include "ir/grad.h"
#include "ir/op_schema.h"
#include "ir/ops/op_helpers.h"

namespace tiller::ir {
namespace {

void InferSoftmax(InferContext& c) {
  const TensorType& x = c.input(0);
  int64_t axis = c.op().GetInt("axis");
  if (NormalizeAxis(axis, static_cast<int>(x.shape.size())) < 0)
    c.Fail("axis {} out of range for {}", axis, ShapeToString(x.shape));
  c.AddOutput(x);
}

void InferLayerNorm(InferContext& c) {
  const TensorType& x = c.input(0);
  int rank = static_cast<int>(x.shape.size());
  int axis = NormalizeAxis(c.op().GetInt("axis"), rank);
  if (axis < 0) c.Fail("begin axis out of range for {}", ShapeToString(x.shape));
  int64_t inner = 1;
  for (int i = axis; i < rank; ++i) inner *= x.shape[i];
  for (size_t i = 1; i < 3; ++i) {
    if (c.has_input(i) && NumElements(c.input(i).shape) != inner)
      c.Fail("scale/bias size {} != normalized size {}", NumElements(c.input(i).shape), inner);
  }
  c.AddOutput(x);
}

void InferBatchNorm(InferContext& c) {
  const TensorType& x = c.input(0);
  if (x.shape.size() < 2) c.Fail("input rank must be >= 2, got {}", ShapeToString(x.shape));
  for (size_t i = 1; i < 5; ++i) {
    if (NumElements(c.input(i).shape) != x.shape[1]) c.Fail("input {} size != channels", i);
  }
  c.AddOutput(x);
}

void InferConv2d(InferContext& c) {
  const Shape y_shape = ConvOutputShape(c);
  const DType x_dtype = c.input(0).dtype;
  const TensorType& w = c.input(1);
  if (w.dtype != x_dtype) c.Fail("input and filter dtypes differ");
  const DType out_dtype = HalfSafeOutDType(c, x_dtype);
  if (c.has_input(2) && NumElements(c.input(2).shape) != w.shape[0]) c.Fail("bias size mismatch");
  if (c.has_input(2) && c.input(2).dtype != out_dtype && c.input(2).dtype != DType::kF32)
    c.Fail("bias dtype {} is neither the result's nor float32", DTypeName(c.input(2).dtype));
  TensorType y{out_dtype, y_shape};
  if (const std::string& a = c.op().GetStr("algorithm"); a == "winograd") {
    if (!WinogradFits(w.shape, ReadConvWindow(c.op()), x_dtype, out_dtype))
      c.Fail("algorithm 'winograd' needs a 3x3 float32 filter, strides and dilations 1, groups 1");
  } else if (a != "direct") {
    c.Fail("algorithm '{}' is not direct or winograd", a);
  }
  if (c.has_input(3)) {
    if (!c.has_input(2)) c.Fail("a residual input needs a bias input");
    if (c.input(3).dtype != y.dtype || c.input(3).shape != y.shape)
      c.Fail("residual {} is not the result's type {}", c.input(3).ToString(), y.ToString());
  }
  c.AddOutput(y);
}

// The fused depthwise ops: conv2d_1x1_depthwise (`expand`),
// conv2d_depthwise_1x1 (`project`) and conv2d_1x1_depthwise_1x1 (both).
// Inputs: x, [w1, b1,] w2, b2[, w3, b3[, residual]]; the activations'
// attributes: [pointwise_activation,] the depthwise one (named "activation"
// when it is the last), [activation].
void InferFusedDepthwise(InferContext& c, bool expand, bool project) {
  const size_t dw = expand ? 3 : 1, constants = dw + (project ? 4 : 2);
  for (size_t i = 0; i < constants; ++i) {
    if (c.input(i).dtype != DType::kF32)
      c.Fail("input {} is {}, not float32", i, DTypeName(c.input(i).dtype));
  }
  const Shape& x = c.input(0).shape;
  const Shape& w2 = c.input(dw).shape;
  if (x.size() != 4 || w2.size() != 4) c.Fail("needs a 4-D input and filters");
  int64_t e = x[3];  // the depthwise convolution's channels
  if (expand) {
    const Shape& w1 = c.input(1).shape;
    if (w1.size() != 4 || w1[1] != x[3] || w1[2] != 1 || w1[3] != 1)
      c.Fail("pointwise filter {} does not fit the NHWC input {}", ShapeToString(w1),
             ShapeToString(x));
    e = w1[0];
    if (NumElements(c.input(2).shape) != e)
      c.Fail("bias {} needs {} values", ShapeToString(c.input(2).shape), e);
  }
  if (w2[0] != e || w2[1] != 1 || w2[2] < 1 || w2[3] < 1)
    c.Fail("depthwise filter {} is not [{}, 1, KH, KW]", ShapeToString(w2), e);
  if (NumElements(c.input(dw + 1).shape) != e)
    c.Fail("bias {} needs {} values", ShapeToString(c.input(dw + 1).shape), e);
  int64_t out = e;
  if (project) {
    const Shape& w3 = c.input(dw + 2).shape;
    if (w3.size() != 4 || w3[1] != e || w3[2] != 1 || w3[3] != 1)
      c.Fail("pointwise filter {} is not [O, {}, 1, 1]", ShapeToString(w3), e);
    out = w3[0];
    if (NumElements(c.input(dw + 3).shape) != out)
      c.Fail("bias {} needs {} values", ShapeToString(c.input(dw + 3).shape), out);
  }
  const Op& op = c.op();
  std::vector<const char*> acts;
  if (expand) acts.push_back("pointwise_activation");
  if (project) acts.push_back("depthwise_activation");
  acts.push_back("activation");
  for (const char* a : acts) {
    if (!PointwiseDepthwiseActivation(op.GetStr(a)))
      c.Fail("{} '{}' is not relu, relu6 or hard_swish", a, op.GetStr(a));
  }
  const auto& s = op.GetInts("strides");
  const auto& p = op.GetInts("pads");
  if (s.size() != 2 || p.size() != 4) c.Fail("strides need 2 values and pads 4");
  if (s[0] < 1 || s[1] < 1) c.Fail("strides {} must be >= 1", ShapeToString(s));
  for (int64_t v : p) {
    if (v < 0) c.Fail("pads {} must be >= 0", ShapeToString(p));
  }
  const int64_t oh = WindowOutputSize(x[1], w2[2], s[0], p[0], p[1], 1, false);
  const int64_t ow = WindowOutputSize(x[2], w2[3], s[1], p[2], p[3], 1, false);
  if (oh <= 0 || ow <= 0) c.Fail("empty output for input {}", ShapeToString(x));
  const TensorType y{DType::kF32, {x[0], oh, ow, out}};
  if (c.has_input(constants) &&
      (c.input(constants).dtype != y.dtype || c.input(constants).shape != y.shape))
    c.Fail("residual {} is not the result's type {}", c.input(constants).ToString(), y.ToString());
  c.AddOutput(y);
}

void InferConv1x1Depthwise(InferContext& c) {
  InferFusedDepthwise(c, true, false);
}
void InferConvDepthwise1x1(InferContext& c) {
  InferFusedDepthwise(c, false, true);
}
void InferConv1x1Depthwise1x1(InferContext& c) {
  InferFusedDepthwise(c, true, true);
}

void InferPool2d(InferContext& c) {
  const ActLayout last = ReadActLayout(c, true);
  const Shape& xs = c.input(0).shape;
  if (last == ActLayout::kBlocked ? xs.size() != 5 || xs[4] != kChannelBlock : xs.size() != 4)
    c.Fail("needs a {} input, got {}", last == ActLayout::kBlocked ? "[N, C / 8, H, W, 8]" : "4-D",
           ShapeToString(xs));
  const TensorType x{c.input(0).dtype, AsNchw(xs, last)};
  const Op& op = c.op();
  const std::string& pooling = op.GetStr("pooling_type");
  if (pooling != "max" && pooling != "avg") c.Fail("pooling_type '{}' is not max or avg", pooling);
  if (const std::string p = PoolWindowProblem(op); !p.empty()) c.Fail("{}", p);
  const auto& k = op.GetInts("ksize");
  if (op.GetBool("adaptive")) {
    c.AddOutput({x.dtype, FromNchw({x.shape[0], x.shape[1], k[0], k[1]}, last)});
    return;
  }
  const auto& s = op.GetInts("strides");
  const auto& p = op.GetInts("pads");
  bool ceil = op.GetBool("ceil_mode");
  int64_t oh = WindowOutputSize(x.shape[2], k[0], s[0], p[0], p[1], 1, ceil);
  int64_t ow = WindowOutputSize(x.shape[3], k[1], s[1], p[2], p[3], 1, ceil);
  if (oh <= 0 || ow <= 0) c.Fail("empty output for input {}", ShapeToString(x.shape));
  c.AddOutput({x.dtype, FromNchw({x.shape[0], x.shape[1], oh, ow}, last)});
}

void InferEmbedding(InferContext& c) {
  const TensorType& table = c.input(0);
  const TensorType& ids = c.input(1);
  if (table.shape.size() != 2) c.Fail("table must be 2-D, got {}", ShapeToString(table.shape));
  if (const std::string p = ReadTablePart(c.op(), table.shape[0]).Problem(); !p.empty())
    c.Fail("{}", p);
  if (ids.dtype != DType::kI64 && ids.dtype != DType::kI32)
    c.Fail("ids must be int32 or int64, got {}", DTypeName(ids.dtype));
  Shape out = ids.shape;
  out.push_back(table.shape[1]);
  c.AddOutput({table.dtype, out});
}

void InferEmbeddingGradAdd(InferContext& c) {
  const TensorType& acc = c.input(0);
  const TensorType& ids = c.input(1);
  const TensorType& dy = c.input(2);
  if (!IsInteger(ids.dtype)) c.Fail("ids must be integers");
  if (dy.shape.size() != ids.shape.size() + 1) c.Fail("dy must have rank ids + 1");
  if (acc.shape.size() != 2 || acc.shape[1] != dy.shape.back() || acc.dtype != dy.dtype)
    c.Fail("acc {} is not a [rows, {}] table of dy's dtype", acc.ToString(), dy.shape.back());
  c.AddOutput(acc);
}

void InferEmbeddingGrad(InferContext& c) {
  const TensorType& ids = c.input(0);
  const TensorType& dy = c.input(1);
  if (!IsInteger(ids.dtype)) c.Fail("ids must be integers");
  if (dy.shape.size() != ids.shape.size() + 1) c.Fail("dy must have rank ids + 1");
  int64_t rows = c.op().GetInt("rows");
  if (rows <= 0) c.Fail("rows must be positive");
  c.AddOutput({dy.dtype, {rows, dy.shape.back()}});
}

constexpr auto kF32 = PrecisionRule::kAlwaysF32;
constexpr auto kFollows = PrecisionRule::kFollowsInput;
constexpr auto kFixed = LayoutRule::kFixed;
constexpr int64_t kNoPadding = -1;  // embedding's padding_idx: every row is looked up

const bool kSchemas = [] {
  for (const char* n : {"softmax", "log_softmax"}) {
    RegisterOpSchema(OpSchema{n, 1, 1, InferSoftmax}
                         .Attr("axis", int64_t{-1})
                         .Precision(kF32)
                         .Layout(LayoutRule::kAxisAttrs, {"axis"}));
  }
  RegisterOpSchema(OpSchema{"layer_norm", 1, 3, InferLayerNorm}
                       .Attr("axis", int64_t{-1})
                       .Attr("epsilon", 1e-5)
                       .Precision(kF32)
                       .Layout(kFixed));
  RegisterOpSchema(OpSchema{"batch_norm", 5, 5, InferBatchNorm}
                       .Attr("epsilon", 1e-5)
                       .Precision(kF32)
                       .Layout(kFixed));
  RegisterOpSchema(WithConvWindowAttrs(OpSchema{"conv2d", 2, 4, InferConv2d})
                       .Attr("activation", "")
                       .Attr("out_dtype", "")
                       .Attr("data_format", "NCHW")
                       .Attr("algorithm", "direct")
                       .Precision(PrecisionRule::kHalfSafe)
                       .Layout(LayoutRule::kDataFormat)
                       .InPlaceInput(3));
  // The fused depthwise ops: the depthwise window, float32, NHWC by
  // definition (data_format-free), the result taking the residual's storage
  // where they have one.
  const auto fused_depthwise = [](OpSchema s) {
    return std::move(s.Attr("strides", std::vector<int64_t>{1, 1})
                         .Attr("pads", std::vector<int64_t>{0, 0, 0, 0})
                         .Attr("activation", "")
                         .Precision(kF32)
                         .Layout(kFixed));
  };
  RegisterOpSchema(fused_depthwise(OpSchema{"conv2d_1x1_depthwise", 5, 5, InferConv1x1Depthwise})
                       .Attr("pointwise_activation", ""));
  RegisterOpSchema(fused_depthwise(OpSchema{"conv2d_depthwise_1x1", 5, 6, InferConvDepthwise1x1})
                       .Attr("depthwise_activation", "")
                       .InPlaceInput(5));
  RegisterOpSchema(
      fused_depthwise(OpSchema{"conv2d_1x1_depthwise_1x1", 7, 8, InferConv1x1Depthwise1x1})
          .Attr("pointwise_activation", "")
          .Attr("depthwise_activation", "")
          .InPlaceInput(7));
  RegisterOpSchema(WithPool2dAttrs(OpSchema{"pool2d", 1, 1, InferPool2d})
                       .Attr("data_format", "NCHW")
                       .Precision(kFollows)
                       .Layout(LayoutRule::kDataFormat));
  RegisterOpSchema(WithTableAttrs(OpSchema{"embedding", 2, 2, InferEmbedding})
                       .Attr("sparse", false)
                       .Attr("padding_grad", false)
                       .Precision(kFollows)
                       .Layout(kFixed));
  RegisterOpSchema(OpSchema{"embedding_grad", 2, 2, InferEmbeddingGrad}
                       .RequiredAttr("rows", AttrKind::kInt)
                       .Attr("padding_idx", kNoPadding)
                       .Attr("sparse", false)
                       .Attr("row_begin", int64_t{0})
                       .Precision(kF32)
                       .Layout(kFixed));
  RegisterOpSchema(OpSchema{"embedding_grad_add", 3, 3, InferEmbeddingGradAdd}
                       .Attr("padding_idx", kNoPadding)
                       .Precision(kF32)
                       .Layout(kFixed)
                       .InPlaceSafe()
                       .InPlaceInput(0));
  return true;
}();

// ---- Gradient rules ----------------------------------------------------

// A [C] vector reshaped to broadcast along dim 1 of a rank-`rank` tensor.
Value* AlongChannels(GradContext& c, Value* v, int rank) {
  std::vector<int64_t> shape(rank, 1);
  shape[1] = NumElements(v->shape());
  return c.Add("reshape", {v}, {{"shape", shape}});
}

void Conv2dGrad(GradContext& c) {
  const Op& op = c.op();
  // Fusions, the channel-last layout and Winograd are for inference graphs only.
  if (!op.GetStr("activation").empty() || op.inputs.size() > 3 ||
      op.GetStr("data_format") != "NCHW" || op.GetStr("algorithm") != "direct")
    Fail(ErrorKind::kInternal,
         "{} ({}) with a fused activation, residual, {} layout or {} algorithm reached autodiff",
         op.type, op.name, op.GetStr("data_format"), op.GetStr("algorithm"));
  Value* x = c.input(0);
  Value* w = c.input(1);
  Value* g = c.out_grad();
  AttrMap win = ConvWindowAttrMap(op);
  if (c.needs_grad(0)) {
    AttrMap a = win;
    a.Set("input_shape", ShapeAttr(x->shape()));
    c.SetInputGrad(0, c.Add("conv2d_grad_input", {g, w}, a));
  }
  SetConvFilterAndBiasGrads(c, win, x, g, g);
}

// Inference batch_norm: fixed statistics, so y is affine in x per channel.
void BatchNormGrad(GradContext& c) {
  Value* x = c.input(0);
  Value* scale = c.input(1);
  Value* mean = c.input(3);
  Value* var = c.input(4);
  Value* g = c.out_grad();
  int rank = x->rank();
  double eps = c.op().GetFloat("epsilon");
  Value* inv_std = c.Add("rsqrt", {c.Add("scale", {var}, {{"scale", 1.0}, {"bias", eps}})});
  Value* k = c.Add("mul", {scale, inv_std});  // d y / d x per channel
  if (c.needs_grad(0)) c.SetInputGrad(0, c.Add("mul", {g, AlongChannels(c, k, rank)}));
  Value* centered = c.Add("sub", {x, AlongChannels(c, mean, rank)});
  Value* g_centered = nullptr;  // sum g (x - mean) per channel
  if (c.needs_grad(1) || c.needs_grad(4))
    g_centered = c.SumPerChannel(c.Add("mul", {g, centered}), scale->shape());
  Value* g_sum = nullptr;
  if (c.needs_grad(2) || c.needs_grad(3)) g_sum = c.SumPerChannel(g, scale->shape());
  if (c.needs_grad(1)) c.SetInputGrad(1, c.Add("mul", {g_centered, inv_std}));
  if (c.needs_grad(2)) c.SetInputGrad(2, g_sum);
  if (c.needs_grad(3)) c.SetInputGrad(3, c.Add("neg", {c.Add("mul", {g_sum, k})}));
  if (c.needs_grad(4)) {  // d inv_std / d var = -inv_std^3 / 2
    Value* cube = c.Add("mul", {inv_std, c.Add("square", {inv_std})});
    Value* dv = c.Add("mul", {c.Add("mul", {g_centered, scale}), cube});
    c.SetInputGrad(4, c.Add("scale", {dv}, {{"scale", -0.5}, {"bias", 0.0}}));
  }
}

// batch_norm_train: statistics of the batch itself. The running statistics
// (outputs 1, 2) and the saved ones do not feed back into y: only y's
// gradient flows, and only into x, scale and bias.
void BatchNormTrainGrad(GradContext& c) {
  Value* g = c.out_grad(0);
  if (!g) return;
  Op* op = c.graph().AddOp("batch_norm_grad", {c.input(0), c.input(1), c.output(3), c.output(4), g},
                           {}, c.op().name + ".grad");
  for (size_t i = 0; i < 3; ++i) {
    if (c.needs_grad(i)) c.SetInputGrad(i, op->outputs[i]);
  }
}

void DropoutGrad(GradContext& c) {
  Value* g = c.out_grad(0);
  if (!g || !c.needs_grad(0)) return;
  Value* mask = c.Add("cast", {c.output(1)}, {{"dtype", std::string(DTypeName(g->dtype()))}});
  Value* dx = c.Add("mul", {g, mask});
  double p = c.op().GetFloat("p");
  if (c.op().GetStr("mode") == "upscale_in_train" && p < 1.0)
    dx = c.Add("scale", {dx}, {{"scale", 1.0 / (1.0 - p)}, {"bias", 0.0}});
  c.SetInputGrad(0, dx);
}

// A reduce_sum over `axis` keeping it: softmax rules sum along their axis.
AttrMap SumAlongAxis(const GradContext& c) {
  return {{"axes", std::vector<int64_t>{c.op().GetInt("axis")}}, {"keepdim", true}};
}

void LayerNormGrad(GradContext& c) {
  // One fused op (kernels: backends/cpu/kernels/norm.cc): per row, xhat =
  // (x - mean) * rstd, dxhat = dy * scale, dx = rstd * (dxhat - mean(dxhat)
  // - xhat * mean(dxhat * xhat)); dscale = sum over rows of dy * xhat, dbias
  // = sum of dy. Decomposed into IR ops, the same math took ~17 elementwise
  // passes over the activation (BERT-Base training: ~200 ms a step).
  Value* g = c.out_grad();
  if (!g) return;
  std::vector<Value*> in{c.input(0), g};
  if (Value* scale = c.input(1)) in.push_back(scale);
  Op* op =
      c.graph().AddOp("layer_norm_grad", in,
                      {{"axis", c.op().GetInt("axis")}, {"epsilon", c.op().GetFloat("epsilon")}},
                      c.op().name + ".grad");
  if (c.needs_grad(0)) c.SetInputGrad(0, op->outputs[0]);
  for (size_t i = 1; i < 3; ++i) {
    Value* p = c.input(i);
    if (!p || !c.needs_grad(i)) continue;
    Value* d = op->outputs[i];
    if (p->shape() != d->shape()) d = c.Add("reshape", {d}, {{"shape", ShapeAttr(p->shape())}});
    c.SetInputGrad(i, d);
  }
}

const bool kRules = [] {
  RegisterGrad("softmax", [](GradContext& c) {  // y (g - sum(g y)): one op (grad_ops.cc)
    c.SetInputGrad(
        0, c.Add("softmax_grad", {c.output(), c.out_grad()}, {{"axis", c.op().GetInt("axis")}}));
  });
  RegisterGrad("log_softmax", [](GradContext& c) {  // g - exp(y) sum(g)
    Value* g = c.out_grad();
    Value* total = c.Add("reduce_sum", {g}, SumAlongAxis(c));
    c.SetInputGrad(0, c.Add("sub", {g, c.Add("mul", {c.Add("exp", {c.output()}), total})}));
  });
  RegisterGrad("layer_norm", LayerNormGrad);
  RegisterGrad("embedding", [](GradContext& c) {
    Value* table = c.input(0);
    if (c.op().GetInt("table_rows") >= 0)
      Fail(ErrorKind::kInternal, "embedding {} looks up a part of a table and reached autodiff",
           c.op().name);
    c.SetInputGrad(
        0, c.Add("embedding_grad", {c.input(1), c.out_grad()},
                 {{"rows", table->shape()[0]},
                  {"padding_idx",
                   c.op().GetBool("padding_grad") ? kNoPadding : c.op().GetInt("padding_idx")},
                  {"sparse", c.op().GetBool("sparse")}}));
  });
  RegisterGrad("conv2d", Conv2dGrad);
  RegisterGrad("pool2d", [](GradContext& c) {
    // Only inference graphs are made channel-last (passes/channels_last.cc).
    if (c.op().GetStr("data_format") != "NCHW")
      Fail(ErrorKind::kInternal, "pool2d ({}) in {} reached autodiff", c.op().name,
           c.op().GetStr("data_format"));
    AttrMap a = c.op().attrs;
    a.Erase("data_format");
    c.SetInputGrad(0, c.Add("pool2d_grad", {c.input(0), c.output(), c.out_grad()}, a));
  });
  RegisterGrad("batch_norm", BatchNormGrad);
  RegisterGrad("batch_norm_train", BatchNormTrainGrad);
  RegisterGrad("dropout", DropoutGrad);
  return true;
}();

}  // namespace
}  // namespace tiller::ir
