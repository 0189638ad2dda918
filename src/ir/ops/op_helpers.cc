#include "ir/ops/op_helpers.h"

#include <algorithm>

#include "ir/grad.h"

namespace tiller::ir {

OpSchema WithConvWindowAttrs(OpSchema s) {
  return std::move(s.Attr("strides", std::vector<int64_t>{1, 1})
                       .Attr("pads", std::vector<int64_t>{0, 0, 0, 0})
                       .Attr("dilations", std::vector<int64_t>{1, 1})
                       .Attr("groups", int64_t{1}));
}

std::string ConvWindow::Problem() const {
  for (const std::string& p : {ValuesAtLeastProblem("strides", strides, 2, 1),
                               ValuesAtLeastProblem("dilations", dilations, 2, 1),
                               ValuesAtLeastProblem("pads", pads, 4, 0)}) {
    if (!p.empty()) return p;
  }
  return groups < 1 ? fmt::format("groups {} must be >= 1", groups) : "";
}

std::string PoolWindowProblem(const Op& op) {
  std::string p = ValuesAtLeastProblem("ksize", op.GetInts("ksize"), 2, 1);
  if (!p.empty() || op.GetBool("adaptive")) return p;
  p = ValuesAtLeastProblem("strides", op.GetInts("strides"), 2, 1);
  return p.empty() ? ValuesAtLeastProblem("pads", op.GetInts("pads"), 4, 0) : p;
}

OpSchema WithTableAttrs(OpSchema s) {
  return std::move(s.Attr("padding_idx", int64_t{-1})
                       .Attr("table_rows", int64_t{-1})
                       .Attr("row_begin", int64_t{0}));
}

TablePart ReadTablePart(const Op& op, int64_t rows) {
  TablePart t;
  const int64_t whole = op.GetInt("table_rows");
  t.vocab = whole >= 0 ? whole : rows;
  t.begin = op.GetInt("row_begin");
  t.rows = rows;
  const int64_t p = op.GetInt("padding_idx");
  t.padding_row = p < -1 ? p + t.vocab : p;
  return t;
}

std::string TablePart::Problem() const {
  if (begin < 0 || begin + rows > vocab)
    return fmt::format("rows [{}, {}) are not a part of a table of {} rows", begin, begin + rows,
                       vocab);
  return "";
}

ConvWindow ReadConvWindow(const Op& op) {
  return {op.GetInts("strides"), op.GetInts("pads"), op.GetInts("dilations"), op.GetInt("groups")};
}

bool WinogradFits(const Shape& filter, const ConvWindow& window, DType x, DType y) {
  const std::vector<int64_t> ones{1, 1};
  return filter.size() == 4 && filter[2] == 3 && filter[3] == 3 && window.groups == 1 &&
         window.strides == ones && window.dilations == ones && x == DType::kF32 && y == DType::kF32;
}

void SetConvFilterAndBiasGrads(GradContext& c, const AttrMap& window, Value* input, Value* dy,
                               Value* out_grad) {
  if (c.needs_grad(1)) {
    AttrMap a = window;
    a.Set("filter_shape", ShapeAttr(c.input(1)->shape()));
    c.SetInputGrad(1, c.Add("conv2d_grad_filter", {input, dy}, a));
  }
  if (c.input(2) && c.needs_grad(2))
    c.SetInputGrad(2, c.SumPerChannel(out_grad, c.input(2)->shape()));
}

Shape ConvOutputShape(InferContext& c) {
  const ActLayout layout = ReadActLayout(c, c.op().is(Opcode::conv2d));
  const Shape& w = c.input(1).shape;
  const Shape& xs = c.input(0).shape;
  if (layout == ActLayout::kBlocked) {
    if (xs.size() != 5 || xs[4] != kChannelBlock || w.size() != 4 || w[0] % kChannelBlock != 0)
      c.Fail(
          "NCHW8c needs a [N, C / 8, H, W, 8] input and a filter of [8 k, C, KH, KW], got {} "
          "and {}",
          ShapeToString(xs), ShapeToString(w));
  } else if (xs.size() != 4 || w.size() != 4) {
    c.Fail("needs 4-D input and filter, got {} and {}", ShapeToString(xs), ShapeToString(w));
  }
  const Shape x = AsNchw(xs, layout);
  const ConvWindow win = ReadConvWindow(c.op());
  if (const std::string problem = win.Problem(); !problem.empty()) c.Fail("{}", problem);
  if (x[1] != w[1] * win.groups || w[0] % win.groups != 0)
    c.Fail("channels {} do not match filter {} with groups {}", x[1], ShapeToString(w), win.groups);
  const auto &s = win.strides, &p = win.pads, &d = win.dilations;
  const int64_t oh = WindowOutputSize(x[2], w[2], s[0], p[0], p[1], d[0], false);
  const int64_t ow = WindowOutputSize(x[3], w[3], s[1], p[2], p[3], d[1], false);
  if (oh <= 0 || ow <= 0) c.Fail("empty output for input {}", ShapeToString(x));
  return FromNchw({x[0], w[0], oh, ow}, layout);
}

std::array<int64_t, 2> ConvTransposeEndPads(const Op& op, const Shape& x_nchw, const Shape& w) {
  const ConvWindow win = ReadConvWindow(op);
  const auto& size = op.GetInts("output_size");
  std::array<int64_t, 2> end{};
  for (size_t d = 0; d < 2; ++d) {
    end[d] = (x_nchw[2 + d] - 1) * win.strides[d] - win.pads[2 * d] +
             (w[2 + d] - 1) * win.dilations[d] + 1 - size[d];
  }
  return end;
}

bool ChannelsLast(InferContext& c) {
  return ReadActLayout(c, false) == ActLayout::kNhwc;
}

ActLayout ReadActLayout(InferContext& c, bool blocked_ok) {
  const std::string& f = c.op().GetStr("data_format");
  if (f == "NCHW") return ActLayout::kNchw;
  if (f == "NHWC") return ActLayout::kNhwc;
  if (blocked_ok && f == kBlockedFormat) return ActLayout::kBlocked;
  c.Fail("data_format '{}' is not NCHW or NHWC{}", f, blocked_ok ? " or NCHW8c" : "");
}

ActLayout ActLayoutOf(const Op& op) {
  const std::string& f = op.GetStr("data_format");
  return f == "NHWC"           ? ActLayout::kNhwc
         : f == kBlockedFormat ? ActLayout::kBlocked
                               : ActLayout::kNchw;
}

Shape AsNchw(const Shape& s, ActLayout l) {
  if (l != ActLayout::kBlocked) return AsNchw(s, l == ActLayout::kNhwc);
  if (s.size() != 5) return s;
  return {s[0], s[1] * s[4], s[2], s[3]};
}

Shape FromNchw(const Shape& s, ActLayout l) {
  if (l != ActLayout::kBlocked) return FromNchw(s, l == ActLayout::kNhwc);
  if (s.size() != 4) return s;
  return {s[0], s[1] / kChannelBlock, s[2], s[3], kChannelBlock};
}

Shape AsNchw(const Shape& s, bool channels_last) {
  if (!channels_last || s.size() != 4) return s;
  return {s[0], s[3], s[1], s[2]};
}

Shape FromNchw(const Shape& s, bool channels_last) {
  if (!channels_last || s.size() != 4) return s;
  return {s[0], s[2], s[3], s[1]};
}

AttrMap ConvWindowAttrMap(const Op& op) {
  ConvWindow w = ReadConvWindow(op);
  return {
      {"strides", w.strides}, {"pads", w.pads}, {"dilations", w.dilations}, {"groups", w.groups}};
}

OpSchema WithPoolWindowAttrs(OpSchema s) {
  return std::move(s.RequiredAttr("ksize", AttrKind::kInts)
                       .Attr("strides", std::vector<int64_t>{1, 1})
                       .Attr("pads", std::vector<int64_t>{0, 0, 0, 0})
                       .Attr("ceil_mode", false)
                       .Attr("adaptive", false));
}

OpSchema WithPool2dAttrs(OpSchema s) {
  return WithPoolWindowAttrs(std::move(s)).Attr("pooling_type", "max").Attr("exclusive", true);
}

OpSchema WithInterpAttrs(OpSchema s) {
  return std::move(s.RequiredAttr("method", AttrKind::kString)
                       .RequiredAttr("out_size", AttrKind::kInts)
                       .RequiredAttr("ratios", AttrKind::kFloats)
                       .Attr("align_corners", false)
                       .Attr("align_mode", int64_t{1}));
}

OpSchema WithPadAttrs(OpSchema s) {
  return std::move(s.RequiredAttr("pads", AttrKind::kInts).Attr("mode", "constant"));
}

OpSchema WithCrossEntropyAttrs(OpSchema s) {
  return std::move(s.Attr("axis", int64_t{-1})
                       .Attr("soft_label", false)
                       .Attr("ignore_index", int64_t{-100})
                       .Attr("log_input", false));
}

OpSchema WithSigmoidCrossEntropyAttrs(OpSchema s) {
  return std::move(s.Attr("normalize", false).Attr("ignore_index", int64_t{-100}));
}

OpSchema WithSliceAttrs(OpSchema s) {
  return std::move(s.RequiredAttr("axes", AttrKind::kInts)
                       .RequiredAttr("starts", AttrKind::kInts)
                       .RequiredAttr("ends", AttrKind::kInts)
                       .Attr("steps", std::vector<int64_t>{}));
}

bool ResolveSlice(const Shape& in, const Op& op, SliceSpec* spec) {
  int rank = static_cast<int>(in.size());
  const std::vector<int64_t>& axes = op.GetInts("axes");
  const std::vector<int64_t>& starts = op.GetInts("starts");
  const std::vector<int64_t>& ends = op.GetInts("ends");
  std::vector<int64_t> steps = op.GetInts("steps");
  if (steps.empty()) steps.assign(axes.size(), 1);
  if (starts.size() != axes.size() || ends.size() != axes.size() || steps.size() != axes.size())
    return false;
  spec->start.assign(rank, 0);
  spec->step.assign(rank, 1);
  spec->out = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    int axis = NormalizeAxis(axes[i], rank);
    if (axis < 0 || steps[i] == 0) return false;
    int64_t dim = in[axis], step = steps[i];
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    spec->start[axis] = count > 0 ? s : 0;
    spec->step[axis] = step;
    spec->out[axis] = count;
  }
  return true;
}

bool ResolveAxes(const std::vector<int64_t>& axes, int rank, std::vector<int>* out) {
  out->clear();
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) out->push_back(i);
    return true;
  }
  for (int64_t a : axes) {
    int n = NormalizeAxis(a, std::max(rank, 1));
    if (n < 0) return false;
    out->push_back(n);
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return true;
}

Shape ReducedShape(const Shape& in, const std::vector<int>& axes, bool keepdim) {
  Shape out;
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) {
      out.push_back(in[i]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

int64_t WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                         int64_t pad_end, int64_t dilation, bool ceil_mode) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t numer = in + pad_begin + pad_end - span;
  if (numer < 0) return 0;
  return (ceil_mode ? (numer + stride - 1) / stride : numer / stride) + 1;
}

bool IsCollective(const Op& op) {
  switch (op.opcode) {
    case Opcode::all_reduce:
    case Opcode::all_reduce_start:
    case Opcode::reduce_scatter:
    case Opcode::all_gather:
    case Opcode::gather_rows:
    case Opcode::exchange_rows:
      return true;
    default:
      return false;
  }
}

bool BlockSparseActivation(const std::string& a) {
  return a.empty() || a == "relu" || a == "gelu" || a == "gelu_tanh" || a == "tanh";
}

bool PointwiseDepthwiseActivation(const std::string& a) {
  return a.empty() || a == "relu" || a == "relu6" || a == "hard_swish";
}

}  // namespace tiller::ir
