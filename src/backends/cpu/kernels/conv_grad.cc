// conv2d_grad_input / conv2d_grad_filter on oneDNN's backward primitives
// (float32, NCHW in the IR). As in the forward kernel (matmul.cc creates it,
// a BlockedConvKernel of dnnl_kernel.h), oneDNN picks its preferred
// (blocked) layouts; tensors whose chosen layout is not the plain one are
// reordered through the workspace, before the primitive for inputs and
// after it for outputs. Everything is built at creation; Run() only swaps
// data handles.
#include <unordered_map>

#include "backends/cpu/dnnl_context.h"
#include "backends/cpu/kernels/kernel_utils.h"
#include "ir/ops/op_helpers.h"

namespace tiller::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using tag = memory::format_tag;

class ReorderedPrimitive : public Kernel {
 public:
  struct Arg {
    int dnnl_arg;
    bool output;
    size_t index;  // into KernelArgs inputs or outputs
    memory::desc plain, chosen;
  };

  ReorderedPrimitive(Dnnl& dn, dnnl::primitive prim, const std::vector<Arg>& args,
                     const memory::desc& scratch_md)
      : stream_(dn.stream), prim_(std::move(prim)) {
    auto& eng = dn.engine;
    size_t off = 0;
    auto reserve = [&](size_t bytes) {
      size_t at = off;
      off += (bytes + 63) / 64 * 64;
      return at;
    };
    for (const Arg& a : args) {
      Bound b{a.output, a.index, memory(a.plain, eng, DNNL_MEMORY_NONE), {}, {}, 0, false};
      b.reordered = a.chosen != a.plain;
      if (b.reordered) {
        b.offset = reserve(a.chosen.get_size());
        b.chosen = memory(a.chosen, eng, DNNL_MEMORY_NONE);
        b.reorder = a.output ? dnnl::reorder(b.chosen, b.plain) : dnnl::reorder(b.plain, b.chosen);
      }
      args_.emplace(a.dnnl_arg, b.reordered ? b.chosen : b.plain);
      bound_.push_back(std::move(b));
    }
    scratch_off_ = reserve(scratch_md.get_size());
    scratch_ = memory(scratch_md, eng, DNNL_MEMORY_NONE);
    args_.emplace(DNNL_ARG_SCRATCHPAD, scratch_);
    ws_ = off;
  }
  size_t workspace_bytes() const override { return ws_; }
  void Run(const KernelArgs& a) override {
    auto* ws = static_cast<std::byte*>(a.workspace);
    auto& stream = stream_;
    for (Bound& b : bound_) {
      b.plain.set_data_handle(b.output ? a.outputs[b.index] : const_cast<void*>(a.inputs[b.index]));
      if (b.reordered) b.chosen.set_data_handle(ws + b.offset);
    }
    scratch_.set_data_handle(ws + scratch_off_);
    for (Bound& b : bound_) {
      if (b.reordered && !b.output) b.reorder.execute(stream, b.plain, b.chosen);
    }
    prim_.execute(stream, args_);
    for (Bound& b : bound_) {
      if (b.reordered && b.output) b.reorder.execute(stream, b.chosen, b.plain);
    }
    stream.wait();
  }

 private:
  struct Bound {
    bool output;
    size_t index;
    memory plain, chosen;
    dnnl::reorder reorder;
    size_t offset;
    bool reordered;
  };
  dnnl::stream& stream_;
  dnnl::primitive prim_;
  std::vector<Bound> bound_;
  std::unordered_map<int, memory> args_;
  memory scratch_;
  size_t scratch_off_ = 0, ws_ = 0;
};

// The convolution both gradients belong to, as oneDNN descriptors.
struct ConvGeometry {
  memory::desc x_plain, w_plain, y_plain, x_any, w_any, y_any;
  Dims strides, dilates, pad_l, pad_r;

  ConvGeometry(const ir::Op& op, const Shape& x, const Shape& w, const Shape& y) {
    ir::ConvWindow win = ir::ReadConvWindow(op);
    int64_t groups = win.groups;
    const auto &s = win.strides, &p = win.pads, &d = win.dilations;
    auto f32 = memory::data_type::f32;
    x_plain = memory::desc(x, f32, tag::nchw);
    y_plain = memory::desc(y, f32, tag::nchw);
    w_plain = groups == 1
                  ? memory::desc(w, f32, tag::oihw)
                  : memory::desc({groups, w[0] / groups, w[1], w[2], w[3]}, f32, tag::goihw);
    x_any = memory::desc(x_plain.dims(), f32, tag::any);
    y_any = memory::desc(y_plain.dims(), f32, tag::any);
    w_any = memory::desc(w_plain.dims(), f32, tag::any);
    strides = {s[0], s[1]};
    dilates = {d[0] - 1, d[1] - 1};  // oneDNN counts the gaps
    pad_l = {p[0], p[2]};
    pad_r = {p[1], p[3]};
  }

  dnnl::convolution_forward::primitive_desc ForwardHint(const dnnl::engine& engine) const {
    dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, x_any, w_any, y_any,
                                        strides, dilates, pad_l, pad_r);
    return {fwd, engine};
  }
};

dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// conv2d_grad_input(dy, w) -> dx
std::unique_ptr<Kernel> MakeConvGradInput(const ir::Op& op, backend::Device& device) {
  Dnnl& dn = DnnlOf(device);
  const Shape& y = op.inputs[0]->shape();
  ConvGeometry g(op, op.outputs[0]->shape(), op.inputs[1]->shape(), y);
  dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, g.x_any, g.w_any,
                                             g.y_any, g.strides, g.dilates, g.pad_l, g.pad_r);
  dnnl::convolution_backward_data::primitive_desc pd(desc, UserScratchpad(), dn.engine,
                                                     g.ForwardHint(dn.engine));
  std::vector<ReorderedPrimitive::Arg> args{
      {DNNL_ARG_DIFF_DST, false, 0, g.y_plain, pd.diff_dst_desc()},
      {DNNL_ARG_WEIGHTS, false, 1, g.w_plain, pd.weights_desc()},
      {DNNL_ARG_DIFF_SRC, true, 0, g.x_plain, pd.diff_src_desc()}};
  return std::make_unique<ReorderedPrimitive>(dn, dnnl::convolution_backward_data(pd), args,
                                              pd.scratchpad_desc());
}

// conv2d_grad_filter(x, dy) -> dw
std::unique_ptr<Kernel> MakeConvGradFilter(const ir::Op& op, backend::Device& device) {
  Dnnl& dn = DnnlOf(device);
  ConvGeometry g(op, op.inputs[0]->shape(), op.outputs[0]->shape(), op.inputs[1]->shape());
  dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, g.x_any,
                                                g.w_any, g.y_any, g.strides, g.dilates, g.pad_l,
                                                g.pad_r);
  dnnl::convolution_backward_weights::primitive_desc pd(desc, UserScratchpad(), dn.engine,
                                                        g.ForwardHint(dn.engine));
  std::vector<ReorderedPrimitive::Arg> args{
      {DNNL_ARG_SRC, false, 0, g.x_plain, pd.src_desc()},
      {DNNL_ARG_DIFF_DST, false, 1, g.y_plain, pd.diff_dst_desc()},
      {DNNL_ARG_DIFF_WEIGHTS, true, 0, g.w_plain, pd.diff_weights_desc()}};
  return std::make_unique<ReorderedPrimitive>(dn, dnnl::convolution_backward_weights(pd), args,
                                              pd.scratchpad_desc());
}

TILLER_CPU_KERNEL("conv2d_grad_input", MakeConvGradInput,
                  Signature("T, T -> T").Where("T", {DType::kF32}));
TILLER_CPU_KERNEL("conv2d_grad_filter", MakeConvGradFilter,
                  Signature("T, T -> T").Where("T", {DType::kF32}));

}  // namespace
}  // namespace tiller::cpu
