// Attribute declarations and normalization shared by op schemas, gradient
// rules and kernels, so they always agree on what an attribute means and
// each default is written once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"
#include "ir/graph.h"
#include "ir/op_schema.h"

namespace tiller::ir {

// conv2d's window, also taken by conv2d_transpose and the conv2d gradients:
//   strides [2] = [1, 1], pads [4] (top, bottom, left, right) = [0, 0, 0, 0],
//   dilations [2] = [1, 1], groups = 1
OpSchema WithConvWindowAttrs(OpSchema s);
struct ConvWindow {
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
  // Empty when the window is well formed; else what is wrong, the attribute
  // and its value named: kernels divide by strides and groups and step by
  // dilations (a stride of 0 was a division by zero), so each must be >= 1,
  // and pads >= 0.
  std::string Problem() const;
};
ConvWindow ReadConvWindow(const Op& op);
// Whether conv2d's algorithm = "winograd" applies: a 3 x 3 filter
// ([O, C, 3, 3]), strides and dilations 1, one group, float32 input and
// result (conv2d's inference refuses the attribute elsewhere; the
// conv_winograd stage chooses among such convolutions).
bool WinogradFits(const Shape& filter, const ConvWindow& window, DType x, DType y);

// A pooling window (pool2d, max_pool2d_with_index): empty when well formed,
// else the attribute and value named. ksize >= 1 always (the output size
// when `adaptive`); otherwise strides >= 1 (the kernels divide by them: a
// stride of 0 was SIGFPE) and pads >= 0.
std::string PoolWindowProblem(const Op& op);

// data_format of conv2d / conv2d_transpose / pool2d / interp: "NCHW" -> false, "NHWC"
// -> true; anything else fails naming the op.
bool ChannelsLast(InferContext& c);
// A 4-D channel-last shape read as N, C, H, W (unchanged when !channels_last).
Shape AsNchw(const Shape& s, bool channels_last);
// An N, C, H, W shape in the op's layout.
Shape FromNchw(const Shape& s, bool channels_last);

// The activation layouts of conv2d and pool2d. kBlocked (data_format
// "NCHW8c", set by the blocked_convs stage) holds channels in blocks of
// kChannelBlock: shape [N, C / 8, H, W, 8], channel c of pixel (h, w) at
// [n][c / 8][h][w][c % 8] (oneDNN's nChw8c), for C a multiple of 8.
enum class ActLayout { kNchw, kNhwc, kBlocked };
inline constexpr int64_t kChannelBlock = 8;
inline constexpr const char* kBlockedFormat = "NCHW8c";
// The op's data_format; "NCHW8c" only where `blocked_ok`, anything else
// fails naming the op.
ActLayout ReadActLayout(InferContext& c, bool blocked_ok);
// The same for a built op (kernels): kBlocked for "NCHW8c".
ActLayout ActLayoutOf(const Op& op);
// A shape in layout `l` read as N, C, H, W, and back (FromNchw: kBlocked
// needs C a multiple of kChannelBlock).
Shape AsNchw(const Shape& s, ActLayout l);
Shape FromNchw(const Shape& s, ActLayout l);
// The op's window as attributes, for the conv ops a gradient rule adds.
AttrMap ConvWindowAttrMap(const Op& op);
// The result shape (in the op's data_format) of conv2d or conv2d_int8 reading
// input 0 through filter input 1 [O, C/groups, KH, KW] with the op's window;
// fails on ranks, channels, groups or an empty result.
Shape ConvOutputShape(InferContext& c);

class GradContext;
// The parts of a convolution's gradient that conv2d and conv2d_transpose
// share: the filter gradient (conv2d_grad_filter over `input` and `dy`, the
// window of `window`) when wanted, and the bias gradient (input 2: the op's
// output gradient `out_grad` summed per channel) when there is a bias.
void SetConvFilterAndBiasGrads(GradContext& c, const AttrMap& window, Value* input, Value* dy,
                               Value* out_grad);

// The window of the pooling ops: ksize [2] (required), strides = [1, 1],
// pads = [0, 0, 0, 0] as conv2d, ceil_mode = false, adaptive = false (ksize
// is the output size).
OpSchema WithPoolWindowAttrs(OpSchema s);
// pool2d's attributes, also taken by pool2d_grad: the window, pooling_type =
// "max" | "avg", exclusive = true (avg ignores padding).
OpSchema WithPool2dAttrs(OpSchema s);

// interp's attributes, also taken by interp_grad: method "nearest" | "linear"
// | "cubic", out_size [spatial dims], ratios [spatial dims] (source step per
// output step; all three required), align_corners = false, align_mode = 1.
OpSchema WithInterpAttrs(OpSchema s);

// pad_nd's pads [2 * rank] (required: before/after per dim) and mode =
// "constant" | "reflect" | "replicate" | "circular", also taken by
// pad_nd_grad.
OpSchema WithPadAttrs(OpSchema s);

// cross_entropy's attributes, also taken by cross_entropy_grad: axis = -1,
// soft_label = false, ignore_index = -100, log_input = false.
OpSchema WithCrossEntropyAttrs(OpSchema s);
// sigmoid_cross_entropy's, also taken by its gradient: normalize = false,
// ignore_index = -100.
OpSchema WithSigmoidCrossEntropyAttrs(OpSchema s);

// A slice resolved against a shape: per dim, first index, step and count.
struct SliceSpec {
  std::vector<int64_t> start, step;
  Shape out;
};
// slice's attributes, also taken by slice_grad: axes, starts, ends (required
// int lists of one length), steps (default []: 1 on every listed axis).
OpSchema WithSliceAttrs(OpSchema s);
// Python slicing semantics per listed axis of `op` (negative indices count
// from the end, out-of-range bounds clamp); returns false on a bad axis or
// zero step.
bool ResolveSlice(const Shape& in, const Op& op, SliceSpec* spec);

// Sorted, non-negative reduction axes; empty `axes` means all.
bool ResolveAxes(const std::vector<int64_t>& axes, int rank, std::vector<int>* out);

// Output shape of a reduction over `axes`.
Shape ReducedShape(const Shape& in, const std::vector<int>& axes, bool keepdim);

// conv2d_transpose's end padding per spatial dim (H, W) that gives its
// output_size: the end pad less the output padding (output_size past the
// smallest size the window arithmetic allows); negative when the output
// padding is the larger. oneDNN's deconvolution takes it as padding_r.
// x_nchw: the input shape in N, C, H, W order.
std::array<int64_t, 2> ConvTransposeEndPads(const Op& op, const Shape& x_nchw, const Shape& w);

// The activations conv2d_1x1_depthwise applies to either convolution's
// result: "" (none), relu, relu6 and hard_swish (Paddle's default
// attributes: offset 3, threshold 6, scale 6).
bool PointwiseDepthwiseActivation(const std::string& a);
// The activations linear_block_sparse applies: "" (none), relu, gelu,
// gelu_tanh and tanh.
bool BlockSparseActivation(const std::string& a);

// Whether the op is a collective: every replica of the group runs it at the
// same point of its step (all_reduce, all_reduce_start, reduce_scatter,
// all_gather, gather_rows, exchange_rows), so passes keep their order and the planner
// prices them as exchanges.
bool IsCollective(const Op& op);

// An embedding table operand (input 0 of embedding and of the row
// optimizers sgd_rows, adagrad_rows, adam_rows) holding `rows` rows:
//   padding_idx = -1 (none; Paddle's other negative values count from the
//     end of the whole table), table_rows = -1 (the operand is the whole
//     table; else the whole table's rows), row_begin = 0 (the whole table's
//     row that the operand's row 0 holds: a table split by rows,
//     passes/shard_embedding_rows.cc)
OpSchema WithTableAttrs(OpSchema s);
struct TablePart {
  int64_t vocab = 0;  // the whole table's rows: ids are valid in [0, vocab)
  int64_t begin = 0;  // the operand holds rows [begin, begin + rows)
  int64_t rows = 0;
  int64_t padding_row = -1;  // in the whole table; -1: none
  // Empty when the rows are a part of the table; else what is wrong.
  std::string Problem() const;
};
TablePart ReadTablePart(const Op& op, int64_t rows);

// Output size of a convolution/pooling window along one dim.
int64_t WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                         int64_t pad_end, int64_t dilation, bool ceil_mode);

}  // namespace tiller::ir
