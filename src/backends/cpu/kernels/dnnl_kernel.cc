// One oneDNN primitive as a Kernel (dnnl_kernel.h).
#include "backends/cpu/kernels/dnnl_kernel.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/packed_weights.h"
#include "core/error.h"

namespace tiller::cpu {

using dnnl::memory;

void AppendActivation(dnnl::post_ops& po, const std::string& act, const ir::Op& op) {
  using alg = dnnl::algorithm;
  if (act == "relu") return po.append_eltwise(1.0f, alg::eltwise_relu, 0.f, 0.f);
  if (act == "gelu") return po.append_eltwise(1.0f, alg::eltwise_gelu_erf, 0.f, 0.f);
  if (act == "gelu_tanh") return po.append_eltwise(1.0f, alg::eltwise_gelu_tanh, 0.f, 0.f);
  if (act == "tanh") return po.append_eltwise(1.0f, alg::eltwise_tanh, 0.f, 0.f);
  // x * min(max(x + 3, 0), 6) / 6
  if (act == "hard_swish") return po.append_eltwise(1.0f, alg::eltwise_hardswish, 0.f, 0.f);
  if (act == "relu6") return po.append_eltwise(1.0f, alg::eltwise_clip, 0.f, 6.f);
  if (act == "hard_sigmoid") {  // min(max(x / 6 + 0.5, 0), 1), Paddle's slope 0.1666667
    po.append_eltwise(1.0f, alg::eltwise_linear, 0.1666667f, 0.5f);
    return po.append_eltwise(1.0f, alg::eltwise_clip, 0.f, 1.f);
  }
  Fail(ErrorKind::kUnimplemented, "{} ({}): fused activation '{}' is not supported", op.type,
       op.name, act);
}

memory::data_type AppendRequantize(dnnl::post_ops& po, const ir::Op& op) {
  const auto k = static_cast<float>(op.GetFloat("out_scale"));
  if (k == 0.0f) return memory::data_type::f32;
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, k, 0.f);
  return memory::data_type::s8;
}

DnnlKernel::DnnlKernel(Dnnl& dn, dnnl::primitive prim, std::vector<Slot> inputs,
                       std::vector<Slot> outputs, const memory::desc& scratch_md)
    : stream_(dn.stream),
      prim_(std::move(prim)),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)) {
  for (auto& s : inputs_) args_.emplace(s.arg, s.mem);
  for (auto& s : outputs_) args_.emplace(s.arg, s.mem);
  scratch_bytes_ = scratch_md.get_size();
  if (scratch_bytes_) {
    scratch_ = memory(scratch_md, dn.engine, DNNL_MEMORY_NONE);
    args_.emplace(DNNL_ARG_SCRATCHPAD, scratch_);
  }
}

void DnnlKernel::StageInput(Dnnl& dn, size_t i, const memory::desc& plain) {
  Slot& slot = inputs_[i];
  if (slot.mem.get_desc() == plain) return;
  TILLER_CHECK(!slot.prepacked && stage_bytes_ == 0, "one staged, not prepacked, input");
  stage_input_ = i;
  stage_src_ = memory(plain, dn.engine, DNNL_MEMORY_NONE);
  stage_ = dnnl::reorder(stage_src_, slot.mem);
  stage_bytes_ = (slot.mem.get_desc().get_size() + 63) / 64 * 64;
}

void DnnlKernel::AddHalfTeam(const dnnl::engine& engine, dnnl::primitive half,
                             const memory::desc& scratch_md, int team) {
  half_ = std::move(half);
  team_ = team;
  args_half_ = args_;
  const size_t bytes = scratch_md.get_size();
  args_half_.erase(DNNL_ARG_SCRATCHPAD);
  if (bytes) {
    scratch_half_ = memory(scratch_md, engine, DNNL_MEMORY_NONE);
    args_half_.emplace(DNNL_ARG_SCRATCHPAD, scratch_half_);
    scratch_half_bytes_ = bytes;
  }
}

void DnnlKernel::Run(const KernelArgs& a) {
  auto* ws = static_cast<std::byte*>(a.workspace);
  if (sum_bytes_ && a.outputs[0] != a.inputs[sum_input_])
    std::memcpy(a.outputs[0], a.inputs[sum_input_], sum_bytes_);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].prepacked) continue;
    const void* in = a.inputs[first_input_ + i];
    if (stage_bytes_ && i == stage_input_) {
      stage_src_.set_data_handle(const_cast<void*>(in));
      inputs_[i].mem.set_data_handle(ws);
      stage_.execute(stream_, stage_src_, inputs_[i].mem);
    } else {
      inputs_[i].mem.set_data_handle(const_cast<void*>(in));
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) outputs_[i].mem.set_data_handle(a.outputs[i]);
  if (team_ > 1 && omp_get_max_threads() < team_) {
    if (scratch_half_bytes_) scratch_half_.set_data_handle(ws + stage_bytes_);
    half_.execute(stream_, args_half_);
  } else {
    if (scratch_bytes_) scratch_.set_data_handle(ws + stage_bytes_);
    prim_.execute(stream_, args_);
  }
  stream_.wait();
}

BlockedConvKernel::BlockedConvKernel(Dnnl& dn, dnnl::primitive conv,
                                     const dnnl::primitive_desc_base& pd, const memory::desc& x_md,
                                     const memory::desc& y_md,
                                     std::vector<DnnlKernel::Slot> weights)
    : stream_(dn.stream), conv_(std::move(conv)), weights_(std::move(weights)) {
  auto& eng = dn.engine;
  x_plain_ = memory(x_md, eng, DNNL_MEMORY_NONE);
  y_plain_ = memory(y_md, eng, DNNL_MEMORY_NONE);
  reorder_in_ = pd.src_desc(0) != x_md;
  reorder_out_ = pd.dst_desc(0) != y_md;
  size_t off = 0;
  auto reserve = [&](size_t bytes) {
    size_t at = off;
    off += (bytes + 63) / 64 * 64;
    return at;
  };
  src_off_ = reorder_in_ ? reserve(pd.src_desc(0).get_size()) : 0;
  dst_off_ = reorder_out_ ? reserve(pd.dst_desc(0).get_size()) : 0;
  scratch_off_ = reserve(pd.scratchpad_desc().get_size());
  ws_ = off;
  x_blocked_ = reorder_in_ ? memory(pd.src_desc(0), eng, DNNL_MEMORY_NONE) : x_plain_;
  y_blocked_ = reorder_out_ ? memory(pd.dst_desc(0), eng, DNNL_MEMORY_NONE) : y_plain_;
  scratch_ = memory(pd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
  if (reorder_in_) to_blocked_ = dnnl::reorder(x_plain_, x_blocked_);
  if (reorder_out_) to_plain_ = dnnl::reorder(y_blocked_, y_plain_);
  args_ = {{DNNL_ARG_SRC, x_blocked_}, {DNNL_ARG_DST, y_blocked_}, {DNNL_ARG_SCRATCHPAD, scratch_}};
  for (auto& w : weights_) args_.emplace(w.arg, w.mem);
}

void BlockedConvKernel::AddHalfTeam(dnnl::primitive half, const dnnl::primitive_desc_base& pd,
                                    int team) {
  half_ = std::move(half);
  team_ = team;
  const size_t bytes = pd.scratchpad_desc().get_size();
  if (scratch_off_ + bytes > ws_) ws_ = scratch_off_ + (bytes + 63) / 64 * 64;
  scratch_half_ = memory(pd.scratchpad_desc(), scratch_.get_engine(), DNNL_MEMORY_NONE);
  args_half_ = args_;
  args_half_[DNNL_ARG_SCRATCHPAD] = scratch_half_;
}

void BlockedConvKernel::AddIntoResidual(size_t bytes) {
  residual_bytes_ = bytes;
  if (reorder_out_) {
    r_plain_ = memory(y_plain_.get_desc(), y_plain_.get_engine(), DNNL_MEMORY_NONE);
    residual_to_blocked_ = dnnl::reorder(r_plain_, y_blocked_);
  }
}

void BlockedConvKernel::Run(const KernelArgs& a) {
  const bool halved = team_ > 1 && omp_get_max_threads() < team_;
  if (halved && halved_) return halved_->Run(a);
  if (residual_bytes_ && !reorder_out_ && a.outputs[0] != a.inputs.back())
    std::memcpy(a.outputs[0], a.inputs.back(), residual_bytes_);
  auto* ws = static_cast<std::byte*>(a.workspace);
  x_plain_.set_data_handle(const_cast<void*>(a.inputs[0]));
  y_plain_.set_data_handle(a.outputs[0]);
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (!weights_[i].prepacked) weights_[i].mem.set_data_handle(const_cast<void*>(a.inputs[1 + i]));
  }
  if (reorder_in_) x_blocked_.set_data_handle(ws + src_off_);
  if (reorder_out_) y_blocked_.set_data_handle(ws + dst_off_);
  scratch_.set_data_handle(ws + scratch_off_);
  auto& stream = stream_;
  if (residual_bytes_ && reorder_out_) {
    r_plain_.set_data_handle(const_cast<void*>(a.inputs.back()));
    residual_to_blocked_.execute(stream, r_plain_, y_blocked_);
  }
  if (reorder_in_) to_blocked_.execute(stream, x_plain_, x_blocked_);
  if (halved) {
    scratch_half_.set_data_handle(ws + scratch_off_);
    half_.execute(stream, args_half_);
  } else {
    conv_.execute(stream, args_);
  }
  if (reorder_out_) to_plain_.execute(stream, y_blocked_, y_plain_);
  stream.wait();
}

DnnlKernel::Slot BindInput(Dnnl& dn, int arg, const ir::Value* v, const memory::desc& plain,
                           const memory::desc& chosen) {
  if (IsConstant(v)) {
    auto packed = PackedWeight(dn, *v->data, plain, chosen);
    memory mem(chosen, dn.engine, const_cast<std::byte*>(packed->data()));
    return {arg, mem, true, std::move(packed)};
  }
  return {arg, memory(chosen, dn.engine, DNNL_MEMORY_NONE), false};
}

}  // namespace tiller::cpu
